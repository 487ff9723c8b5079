"""Linearizability check of timestamp-oracle histories (issue 35, item 4).

A history is a list of completed calls, each recorded by a client on this machine: when the
request was sent and when its answer was read (time.monotonic_ns, one clock for every client
thread and process of the run), and the grant it got: `count` consecutive values from `first`
(a grant of N is N values, all with the call's interval). Calls that failed (an error, a
redirect, a dropped connection) are not in the history: their values, if any were taken, were
never seen by anyone, so they constrain nothing.

What a linearizable oracle owes (docs/design.md):
  1. no value twice, in one grant or across grants;
  2. real-time order: when call A was answered before call B was sent (A.answered < B.sent),
     every value of A is smaller than every value of B (max(A) < min(B)).
Calls whose intervals overlap may be answered in either order.

The check is O(n log n) in the number of calls (not of values): the grants sorted by first value
find any overlap; the calls sorted by sent time are swept against the calls sorted by answered
time, keeping the largest value among the calls answered before the current one was sent.
Standard library only.
"""

import bisect


class Call:
    __slots__ = ("sent", "answered", "first", "count", "who")

    def __init__(self, sent, answered, first, count, who=""):
        self.sent, self.answered = sent, answered  # monotonic ns
        self.first, self.count = first, count
        self.who = who  # a label for the report (client, server, transport)

    @property
    def last(self):
        return self.first + self.count - 1

    def __repr__(self):
        return (f"<{self.who} sent {self.sent} answered {self.answered} "
                f"values {self.first}..{self.last}>")


class Result:
    def __init__(self):
        self.calls = 0
        self.values = 0
        self.repeats = 0  # values handed out more than once (each extra copy counts)
        self.order_violations = 0  # calls with a value not above an earlier-answered call's
        self.bad_calls = 0  # malformed records (count < 1, answered before sent)
        self.examples = []  # human-readable descriptions of the first few problems

    @property
    def violations(self):
        return self.repeats + self.order_violations + self.bad_calls

    @property
    def ok(self):
        return self.violations == 0

    def note(self, text, limit=10):
        if len(self.examples) < limit:
            self.examples.append(text)

    def summary(self):
        return (f"{self.calls} calls, {self.values} values, {self.repeats} repeated values, "
                f"{self.order_violations} order violations, {self.bad_calls} malformed calls")


def check(calls):
    """Checks a history (an iterable of Call); returns a Result."""
    res = Result()
    good = []
    for c in calls:
        res.calls += 1
        if c.count < 1 or c.answered < c.sent or c.first < 0:
            res.bad_calls += 1
            res.note(f"malformed call {c!r}")
            continue
        res.values += c.count
        good.append(c)

    # 1. Repeats: grants sorted by first value; a grant starting at or below the highest value
    # seen so far shares (min(last, high) - first + 1) values with earlier grants. `high` only
    # grows, so a value covered by several earlier grants is counted once per extra copy.
    by_value = sorted(good, key=lambda c: (c.first, c.last))
    high, high_call = -1, None
    for c in by_value:
        if c.first <= high:
            res.repeats += min(c.last, high) - c.first + 1
            res.note(f"repeat: {c!r} shares values with {high_call!r}")
        if c.last > high:
            high, high_call = c.last, c

    # 2. Real-time order: sweep the calls by sent time; `best` is the largest value among the
    # calls answered strictly before the current call was sent.
    by_answer = sorted(good, key=lambda c: c.answered)
    answered_at = [c.answered for c in by_answer]
    best, best_call, taken = -1, None, 0
    for c in sorted(good, key=lambda c: c.sent):
        upto = bisect.bisect_left(answered_at, c.sent, taken)  # answered < c.sent
        for a in by_answer[taken:upto]:
            if a.last > best:
                best, best_call = a.last, a
        taken = max(taken, upto)
        if c.first <= best:
            res.order_violations += 1
            res.note(f"order: {c!r} was sent after {best_call!r} was answered, "
                     f"yet its first value is not above {best}")
    return res
