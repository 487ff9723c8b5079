#!/usr/bin/env python3
"""Self-test of the timestamp-oracle linearizability checker (tests/chaos/chaoslib/linear.py) on
synthetic histories: linearizable ones pass (also with heavily overlapping calls answered out of
order), and each way a history can break the contract is caught (a value twice, in one grant or
across grants; a call sent after another was answered that got a value not above it; a grant
overlapping an earlier one). Random histories are checked against the definition itself
(every pair of calls compared, O(n^2)) so the O(n log n) sweep misses nothing.

Usage: tso_checker_test.py   (standard library only; exit 0 when every case passes)
"""

import os
import random
import sys
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from chaoslib import linear  # noqa: E402
from chaoslib.linear import Call  # noqa: E402


def check(*calls):
    return linear.check(calls)


def brute_force(calls):
    """The contract spelt out pair by pair: (repeated values, calls with an order violation)."""
    seen, repeats = set(), 0
    for c in calls:
        for v in range(c.first, c.first + c.count):
            if v in seen:
                repeats += 1
            seen.add(v)
    bad = 0
    for b in calls:
        if any(a.answered < b.sent and a.first + a.count - 1 >= b.first for a in calls):
            bad += 1
    return repeats, bad


def linearizable_history(rng, n, clients, max_count=4, start=1000):
    """A history an ideal oracle could produce: each client sends a call after its previous one
    was answered; the oracle serves each call at one instant inside its interval and hands out
    values in the order of those instants."""
    calls, t = [], [0] * clients
    for _ in range(n):
        k = rng.randrange(clients)
        sent = t[k] + rng.randrange(0, 50)
        point = sent + rng.randrange(1, 100)
        answered = point + rng.randrange(1, 100)
        t[k] = answered + 1
        calls.append([point, sent, answered, rng.randrange(1, max_count + 1), f"c{k}"])
    nxt, out = start, []
    for point, sent, answered, count, who in sorted(calls):
        nxt += rng.randrange(0, 3)  # gaps are allowed
        out.append(Call(sent, answered, nxt, count, who))
        nxt += count
    rng.shuffle(out)
    return out


class Passing(unittest.TestCase):
    def test_empty(self):
        res = check()
        self.assertTrue(res.ok)
        self.assertEqual((res.calls, res.values), (0, 0))

    def test_sequential_increasing(self):
        res = check(Call(0, 10, 5, 1), Call(11, 20, 6, 1), Call(21, 30, 100, 3), Call(31, 40, 103, 1))
        self.assertTrue(res.ok, res.examples)
        self.assertEqual((res.calls, res.values), (4, 6))

    def test_overlapping_calls_in_any_order(self):
        # B was sent before A was answered: B may get the smaller value although it was
        # answered later, and C overlaps both.
        res = check(Call(0, 10, 50, 1, "A"), Call(5, 20, 40, 1, "B"), Call(8, 30, 45, 1, "C"))
        self.assertTrue(res.ok, res.examples)

    def test_chained_overlaps(self):
        # A [0,10] and B [5,15] overlap, C [12,20] comes after A only: C must be above A (7),
        # not above B (which is still open when C is sent).
        res = check(Call(0, 10, 7, 1, "A"), Call(5, 15, 9, 1, "B"), Call(12, 20, 8, 1, "C"))
        self.assertTrue(res.ok, res.examples)

    def test_answered_at_the_same_instant_is_not_before(self):
        # "Answered before sent" is strict: equal times are concurrent.
        res = check(Call(0, 10, 7, 1), Call(10, 20, 3, 1))
        self.assertTrue(res.ok, res.examples)

    def test_adjacent_grants(self):
        res = check(Call(0, 10, 100, 10), Call(11, 20, 110, 10), Call(5, 25, 90, 10))
        self.assertTrue(res.ok, res.examples)
        self.assertEqual(res.values, 30)

    def test_random_linearizable_histories(self):
        rng = random.Random(35)
        for trial in range(200):
            calls = linearizable_history(rng, rng.randrange(1, 60), rng.randrange(1, 8))
            res = linear.check(calls)
            self.assertTrue(res.ok, f"trial {trial}: {res.examples}")
            self.assertEqual(brute_force(calls), (0, 0))


class Failing(unittest.TestCase):
    def test_stale_value_after_answer(self):
        # A answered at 10 with 100; B sent at 11 gets 99: an old value after a newer one.
        res = check(Call(0, 10, 100, 1, "A"), Call(11, 20, 99, 1, "B"))
        self.assertFalse(res.ok)
        self.assertEqual((res.order_violations, res.repeats), (1, 0))
        self.assertIn("B", res.examples[0])

    def test_same_value_twice_sequential(self):
        res = check(Call(0, 10, 100, 1), Call(11, 20, 100, 1))
        self.assertEqual((res.order_violations, res.repeats), (1, 1))

    def test_same_value_twice_concurrent(self):
        # Overlapping calls may come in any order, but never with the same value.
        res = check(Call(0, 10, 100, 1), Call(5, 20, 100, 1))
        self.assertEqual((res.order_violations, res.repeats), (0, 1))

    def test_grant_overlapping_an_earlier_grant(self):
        # A: 100..109 answered at 10; B sent at 11: 105..114 shares 5 values and starts below.
        res = check(Call(0, 10, 100, 10, "A"), Call(11, 20, 105, 10, "B"))
        self.assertEqual((res.order_violations, res.repeats), (1, 5))
        self.assertEqual(res.values, 20)

    def test_grant_inside_a_grant_counts_each_copy(self):
        res = check(Call(0, 10, 1, 10), Call(0, 10, 1, 10), Call(0, 10, 4, 2))
        self.assertEqual(res.repeats, 12)

    def test_violation_against_a_call_answered_long_before(self):
        # The highest value came from a call answered long before; many calls in between were
        # smaller and concurrent with each other. D must be above A.
        res = check(Call(0, 1, 1000, 1, "A"), Call(2, 50, 1001, 1, "B"), Call(3, 40, 1002, 1, "C"),
                    Call(60, 70, 999, 1, "D"))
        self.assertEqual(res.order_violations, 1)
        self.assertIn("D", res.examples[0])

    def test_only_the_violating_calls_count(self):
        # A stopped leader's stale window: after the new leader answered 500, the old one
        # answers 200, 201, 202 to calls sent later; a call overlapping everything is fine.
        calls = [Call(0, 10, 500, 1, "new"), Call(0, 100, 1, 1, "overlapping")]
        calls += [Call(20 + i * 10, 25 + i * 10, 200 + i, 1, f"old{i}") for i in range(3)]
        res = linear.check(calls)
        self.assertEqual((res.order_violations, res.repeats), (3, 0))

    def test_malformed_calls(self):
        res = check(Call(0, 10, 1, 0), Call(10, 5, 2, 1), Call(0, 1, -1, 1))
        self.assertEqual(res.bad_calls, 3)
        self.assertFalse(res.ok)

    def test_random_broken_histories_match_the_definition(self):
        # A linearizable history with one call's value moved: the sweep finds exactly what the
        # pairwise definition finds, and it finds something whenever the definition does.
        rng = random.Random(3535)
        caught = 0
        for trial in range(300):
            calls = linearizable_history(rng, rng.randrange(2, 50), rng.randrange(1, 6), max_count=3)
            victim = rng.choice(calls)
            victim.first = max(0, victim.first + rng.choice((-1, 1)) * rng.randrange(1, 20))
            res = linear.check(calls)
            repeats, bad = brute_force(calls)
            self.assertEqual((res.repeats, res.order_violations), (repeats, bad), f"trial {trial}")
            caught += not res.ok
        self.assertGreater(caught, 150)  # most moves break the history; all of those are found


class Scale(unittest.TestCase):
    def test_large_history_is_fast(self):
        # 200,000 calls from 64 clients: O(n log n) checks them in seconds, not hours.
        rng = random.Random(7)
        calls = linearizable_history(rng, 200_000, 64, max_count=100)
        t0 = time.monotonic()
        res = linear.check(calls)
        took = time.monotonic() - t0
        self.assertTrue(res.ok, res.examples)
        self.assertEqual(res.calls, 200_000)
        self.assertLess(took, 30.0)
        calls[rng.randrange(len(calls))].first = 0  # one value far below everything: caught
        self.assertFalse(linear.check(calls).ok)


if __name__ == "__main__":
    unittest.main(verbosity=1)
