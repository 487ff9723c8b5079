"""The invariants over everything the load clients collected (pure functions over Streams;
tests/chaos/checker_test.py feeds them synthetic data and injected faults).

1. No duplicates: every ID of the whole run, sorted; two equal neighbours are a duplicate,
   wherever and whenever they came from.
2. Order: within one Stream (one client thread of one process, requests in sequence) the IDs of
   one owner key (node ID) are strictly increasing in the order received, across batches and
   across reconnects; a process that re-claims another node ID starts a new sequence.
   Every batch carries one owner key only.
3. Hand-off: for one owner key, the ID ranges [first, last] of two different processes never
   overlap: a node ID's next owner starts above everything the previous one could issue (the
   durable horizon), even when the previous one still answers after losing its lease.
4. Time: no ID's time field lies more than max_lead (+ slack for the coarse clock) ahead of the
   wall clock when it was received; for a process under libfaketime, not ahead of its own
   (faked) clock either, with the largest offset in force while the request ran.
5. Refusals: every answer other than 200 is a 503 whose JSON body has error.code and
   error.reason. A 200 whose body is not {"ids":[count decimal strings]} is a violation.
6. Transport errors: an error (refused, eof, truncated, timeout, other) is excused only while
   the harness was taking that very process down, and only as that fault explains it (EXCUSES):
   a SIGKILLed or exited process may fail any request; a SIGSTOPped one too, until STOP_GRACE
   after SIGCONT; a process told to stop with SIGTERM must still answer what it accepted, so
   only a refused connect or a connection closed before any byte of the response is excused
   (never a truncated response or a timeout). Everything else is a violation: registry faults
   (etcd members, PostgreSQL, the SQLite lock) never excuse a drop. Excused errors are counted
   per scenario as "node down".

Every event is attributed to the scenario whose time window holds it (the receipt time of a
batch or refusal, the failure time of a transport error).
"""

import bisect
import operator
from itertools import islice

EXCUSES = {
    "kill": {"refused", "eof", "truncated", "timeout", "other"},
    "exit": {"refused", "eof", "truncated", "timeout", "other"},
    "stop": {"refused", "eof", "truncated", "timeout", "other"},
    "term": {"refused", "eof"},
}


def offset_at(offsets, t):
    """The libfaketime offset (seconds) in force at monotonic time t: offsets is [(since, s)]."""
    cur = None
    for t0, off in offsets:
        if t0 <= t:
            cur = off
    return cur


class ScenarioStats:
    def __init__(self, name, t0, t1):
        self.name, self.t0, self.t1 = name, t0, t1
        self.ids = 0
        self.batches = 0
        self.dups = 0
        self.refusals = 0
        self.reasons = {}
        self.node_down = 0
        self.violations = 0
        self.unavailable = 0.0
        self.recovery = None  # seconds, set by the runner
        self.note = ""

    @property
    def seconds(self):
        return self.t1 - self.t0


class Result:
    def __init__(self, scenarios):
        self.scenarios = scenarios
        self.violations = []  # (scenario name, text)
        self.total_ids = 0
        self.duplicates = 0
        self.max_lead_seen_ms = None

    @property
    def ok(self):
        return not self.violations and self.duplicates == 0


class Checker:
    def __init__(self, layout, max_lead_ms, slack_ms=25.0, max_listed=20):
        self.layout = layout
        self.max_lead_ms = max_lead_ms
        self.slack_ms = slack_ms
        self.max_listed = max_listed

    # --- attribution ----------------------------------------------------------------------------

    def _index(self, windows):
        self._starts = [w[1] for w in windows]

    def _scenario(self, res, t):
        i = bisect.bisect_right(self._starts, t) - 1
        return res.scenarios[max(0, min(i, len(res.scenarios) - 1))]

    def _violation(self, res, t, text):
        sc = self._scenario(res, t) if t is not None else None
        if sc is not None:
            sc.violations += 1
        res.violations.append((sc.name if sc else "-", text))

    # --- the checks -----------------------------------------------------------------------------

    def check(self, streams, windows, notes=(), extra=()):
        """streams: load.Stream list; windows: [(name, t0, t1)] in order; notes: (t, text) of
        unexpected process exits and the like (violations); extra: (scenario name, text)
        violations found by the runner (a scenario that did not recover, ...)."""
        res = Result([ScenarioStats(n, t0, t1) for n, t0, t1 in windows])
        self._index(windows)
        for t, text in notes:
            self._violation(res, t, text)
        for name, text in extra:
            for sc in res.scenarios:
                if sc.name == name:
                    sc.violations += 1
            res.violations.append((name, text))
        intervals = {}  # owner -> [(first, last, proc_label, stream label)]
        for st in streams:
            self._check_stream(res, st, intervals)
            self._check_refusals(res, st)
            self._check_errors(res, st)
        self._check_handoff(res, intervals, streams)
        self._check_duplicates(res, streams)
        self._unavailability(res, streams)
        return res

    def _check_stream(self, res, st, intervals):
        lay = self.layout
        ids = st.ids
        last_by_owner = {}  # owner -> last ID seen in this stream
        run = None  # [owner, first, last]
        limit_ms = self.max_lead_ms + self.slack_ms
        for b, (a, e) in enumerate(st.batches()):
            if e <= a:
                continue
            sc = self._scenario(res, st.t_recv[b])
            sc.ids += e - a
            sc.batches += 1
            first, last = ids[a], ids[e - 1]
            owner = lay.owner(first)
            batch = ids[a:e]
            # 2. order inside the batch, one owner per batch, and after the previous batch of
            #    the same owner in this stream.
            if e - a > 1 and not all(map(operator.lt, batch, islice(batch, 1, None))):
                i = next(k for k in range(len(batch) - 1) if batch[k] >= batch[k + 1])
                self._violation(res, st.t_recv[b], f"{st.label}: batch {b} not strictly increasing at "
                                f"{i}: {batch[i]} then {batch[i + 1]}")
            om = lay.owner_mask
            if any((x & om) != owner for x in batch):
                self._violation(res, st.t_recv[b], f"{st.label}: batch {b} mixes node IDs "
                                f"{sorted({lay.owner_text(x & om) for x in batch})[:5]}")
            prev = last_by_owner.get(owner)
            if prev is not None and first <= prev:
                self._violation(res, st.t_recv[b], f"{st.label}: node {lay.owner_text(owner)}: batch {b} starts at "
                                f"{first}, not above the previous ID {prev} received on this client")
            last_by_owner[owner] = max(last, prev or 0)
            # 3. collect the runs of one owner for the hand-off check.
            if run is not None and run[0] == owner:
                run[1] = min(run[1], first)
                run[2] = max(run[2], last)
            else:
                if run is not None:
                    intervals.setdefault(run[0], []).append((run[1], run[2], st.proc_label, st.label))
                run = [owner, first, last]
            # 4. time: the batch's largest ID (it is the last one if the batch is in order).
            top = max(first, last)
            lead = lay.unix_ms(top) - st.wall_recv[b] * 1000.0
            if res.max_lead_seen_ms is None or lead > res.max_lead_seen_ms:
                res.max_lead_seen_ms = lead
            if lead > limit_ms:
                self._violation(res, st.t_recv[b], f"{st.label}: ID {top} is {lead:.0f} ms ahead of the wall clock "
                                f"at receipt (max_lead {self.max_lead_ms} ms)")
            node = st.node
            if node is not None and node.offsets:
                # the largest offset in force while the request ran (a step back may land
                # between the ID's issue and its receipt)
                t_a, t_b = st.t_send[b] - 0.2, st.t_recv[b]
                cands = [o for t, o in node.offsets if t_a <= t <= t_b]
                o = offset_at(node.offsets, t_a)
                if o is not None:
                    cands.append(o)
                if cands:
                    off = max(cands)
                    flead = lead - off * 1000.0
                    if flead > limit_ms:
                        self._violation(res, st.t_recv[b], f"{st.label}: ID {top} is {flead:.0f} ms ahead of the "
                                        f"process's faked clock (offset {off:+g} s) at receipt")
        if run is not None:
            intervals.setdefault(run[0], []).append((run[1], run[2], st.proc_label, st.label))
        for bad in st.bad:
            self._violation(res, bad.t_recv, f"{st.label}: {bad.status} with a bad body: {bad.detail}")

    def _check_refusals(self, res, st):
        for r in st.refusals:
            sc = self._scenario(res, r.t_recv)
            sc.refusals += 1
            key = f"{r.status} {r.reason or r.code or '?'}"
            sc.reasons[key] = sc.reasons.get(key, 0) + 1
            if r.status != 503:
                self._violation(res, r.t_recv, f"{st.label}: refused with {r.status}, not 503: {r.body!r}")
            elif not r.code or not r.reason:
                self._violation(res, r.t_recv, f"{st.label}: 503 without a JSON error code and reason: {r.body!r}")

    def excused(self, node, err):
        if node is None:
            return None
        for kind, t0, t1 in node.windows:
            if err.t_err >= t0 and err.t_send <= t1 and err.kind in EXCUSES[kind]:
                return kind
        return None

    def _check_errors(self, res, st):
        for err in st.errors:
            sc = self._scenario(res, err.t_err)
            if self.excused(st.node, err):
                sc.node_down += 1
            else:
                self._violation(res, err.t_err, f"{st.label}: {err.kind} while the process was not being taken "
                                f"down ({err.t_err - err.t_send:.2f} s after the request): {err.detail}")

    def _check_handoff(self, res, intervals, streams):
        by_label = {st.label: st for st in streams}
        for owner, ivs in intervals.items():
            ivs.sort()
            for i, (lo, hi, proc, lab) in enumerate(ivs):
                for lo2, hi2, proc2, lab2 in ivs[i + 1:]:
                    if lo2 > hi:
                        break
                    if proc2 != proc:
                        st = by_label.get(lab2)
                        t = st.t_recv[0] if st is not None and len(st.t_recv) else None
                        self._violation(res, t, f"node {self.layout.owner_text(owner)}: {lab2}'s IDs [{lo2}, {hi2}] "
                                        f"overlap {lab}'s [{lo}, {hi}]: the next owner did not start above the "
                                        f"previous one")

    def _check_duplicates(self, res, streams):
        total = sum(len(st.ids) for st in streams)
        res.total_ids = total
        everything = []
        for st in streams:
            everything.extend(st.ids)
        everything.sort()  # mostly increasing runs: timsort merges them quickly
        dups = sum(map(operator.eq, everything, islice(everything, 1, None)))
        res.duplicates = dups
        if not dups:
            return
        values = set()
        for a, b in zip(everything, islice(everything, 1, None)):
            if a == b:
                values.add(a)
                if len(values) >= 10000:
                    break
        del everything
        where = {}  # value -> [(t_recv, stream label)]
        for st in streams:
            for b, (a, e) in enumerate(st.batches()):
                for x in st.ids[a:e]:
                    if x in values:
                        where.setdefault(x, []).append((st.t_recv[b], st.label))
        for x, seen in where.items():
            seen.sort()
            # the first receipt is the original; every later one is a duplicate in its scenario
            for t, _ in seen[1:]:
                self._scenario(res, t).dups += 1
        listed = sorted(where.items(), key=lambda kv: kv[1][1][0] if len(kv[1]) > 1 else 0)
        for x, seen in listed[:5]:
            res.violations.append((self._scenario(res, seen[-1][0]).name,
                                   f"duplicate ID {x} (node {self.layout.owner_text(self.layout.owner(x))}) received "
                                   f"{len(seen)} times: " + ", ".join(lab for _, lab in seen)))
        res.violations.append(("-", f"{dups} duplicate IDs in {total} ({len(values)} distinct values)"))

    def _unavailability(self, res, streams):
        times = []
        for st in streams:
            times.extend(st.t_recv)
        times.sort()
        for sc in res.scenarios:
            lo = bisect.bisect_left(times, sc.t0)
            hi = bisect.bisect_right(times, sc.t1)
            pts = [sc.t0] + times[lo:hi] + [sc.t1]
            sc.unavailable = max((b - a for a, b in zip(pts, pts[1:])), default=0.0)
