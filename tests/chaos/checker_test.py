#!/usr/bin/env python3
"""Self-test of the chaos checker (tests/chaos/chaoslib/checker.py) on synthetic data: clean
data passes, and every kind of fault the chaos run must catch is caught (a duplicate across
processes and within one, IDs out of order, a node's next owner starting below the previous one,
an ID ahead of the clock, a bad refusal, a 200 with a bad body, a drop nobody explained), while
the drops the harness caused itself are counted as "node down" and excused only as documented.

Usage: checker_test.py   (standard library only; exit 0 when every case passes)
"""

import os
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from chaoslib import checker, layout, load  # noqa: E402

LAY = layout.Layout.flurry_default()
WALL0 = 1_800_000_000.0  # wall clock (s) at monotonic 0 in these tests
MAX_LEAD = 1000


class FakeNode:
    """What the checker reads from a nodes.NodeProc: its fault windows and faketime offsets."""

    def __init__(self, windows=(), offsets=()):
        self.windows = [list(w) for w in windows]
        self.offsets = list(offsets)


def owner(node):
    return node << 12


def ids_at(t, node, first_seq, n, lead_ms=0):
    """n consecutive IDs of `node` with the time of monotonic t (+ lead_ms)."""
    ms = int((WALL0 + t) * 1000) + lead_ms
    return [LAY.compose(ms, owner(node), first_seq + i) for i in range(n)]


def stream(label, node=None, batches=()):
    """batches: (t_recv, ids); sent 10 ms before."""
    st = load.Stream(label, 0, node)
    for t, ids in batches:
        st.add_batch(ids, t - 0.01, t, WALL0 + t)
    return st


WINDOWS = [("one", 0.0, 10.0), ("two", 10.0, 20.0)]


def check(streams, windows=WINDOWS, notes=(), extra=()):
    return checker.Checker(LAY, MAX_LEAD).check(streams, windows, notes, extra)


def steady(label, node, t0=0.0, t1=20.0, step=0.5, per=5, lead_ms=0, fake=None):
    """A stream receiving `per` IDs of `node` every `step` s from t0 to t1."""
    bs, seq, t = [], 0, t0
    while t < t1:
        bs.append((t, ids_at(t, node, seq % 4000, per, lead_ms)))
        seq += per
        t += step
    return stream(label, fake or FakeNode(), bs)


def texts(res):
    return "\n".join(t for _, t in res.violations)


class CleanData(unittest.TestCase):
    def test_passes(self):
        res = check([steady("a.1", 1), steady("b.1", 2), steady("c.1", 3)])
        self.assertTrue(res.ok, texts(res))
        self.assertEqual(res.duplicates, 0)
        self.assertEqual(res.total_ids, 3 * 40 * 5)
        self.assertEqual([sc.ids for sc in res.scenarios], [300, 300])
        self.assertAlmostEqual(res.scenarios[0].unavailable, 0.5, places=6)

    def test_handoff_above_is_fine(self):
        # node 4: a.1 until t=5, then b.1 from t=8, above (later times).
        a = stream("a.1", FakeNode(), [(t, ids_at(t, 4, 0, 3)) for t in (1.0, 2.0, 5.0)])
        b = stream("b.1", FakeNode(), [(t, ids_at(t, 4, 0, 3)) for t in (8.0, 9.0)])
        res = check([a, b])
        self.assertTrue(res.ok, texts(res))

    def test_reclaim_to_another_node_starts_a_new_sequence(self):
        # a process on node 5 that re-claimed node 6 with lower IDs (its old node ran ahead):
        # legal, the order is per node ID.
        a = stream("a.1", FakeNode(), [(1.0, ids_at(1.0, 5, 0, 3, lead_ms=900)),
                                       (2.0, ids_at(1.5, 6, 0, 3))])
        res = check([a])
        self.assertTrue(res.ok, texts(res))


class Duplicates(unittest.TestCase):
    def test_duplicate_across_processes_is_found_and_attributed(self):
        a = steady("a.1", 1)
        b = steady("b.1", 2)
        # b.1 receives, at t=15, one ID a.1 got at t=1 (a node-1 ID in b's stream: also a
        # mixed batch and an overlap).
        dup = a.ids[10]
        b2 = stream("b.2", FakeNode(), [(15.0, [dup])])
        res = check([a, b, b2])
        self.assertFalse(res.ok)
        self.assertEqual(res.duplicates, 1)
        self.assertEqual(res.scenarios[1].dups, 1)
        self.assertEqual(res.scenarios[0].dups, 0)
        self.assertIn(f"duplicate ID {dup}", texts(res))

    def test_duplicate_of_the_same_owner_in_another_process(self):
        # Two processes both issue node 7, seq 0..2 at the same ms: duplicates and an overlap.
        a = stream("a.1", FakeNode(), [(3.0, ids_at(3.0, 7, 0, 3))])
        b = stream("b.1", FakeNode(), [(3.0, ids_at(3.0, 7, 0, 3))])
        res = check([a, b])
        self.assertEqual(res.duplicates, 3)
        self.assertIn("overlap", texts(res))

    def test_duplicate_within_one_stream(self):
        x = ids_at(2.0, 1, 0, 3)
        a = stream("a.1", FakeNode(), [(2.0, x), (3.0, x)])
        res = check([a])
        self.assertEqual(res.duplicates, 3)
        self.assertIn("not above the previous ID", texts(res))

    def test_many_duplicates_are_counted(self):
        a = steady("a.1", 1)
        b = stream("b.1", FakeNode(), [(19.0, list(a.ids))])
        res = check([a, b])
        self.assertEqual(res.duplicates, len(a.ids))


class Order(unittest.TestCase):
    def test_decrease_inside_a_batch(self):
        x = ids_at(1.0, 1, 0, 4)
        x[1], x[2] = x[2], x[1]
        res = check([stream("a.1", FakeNode(), [(1.0, x)])])
        self.assertIn("not strictly increasing", texts(res))
        self.assertEqual(res.duplicates, 0)

    def test_decrease_across_batches_of_one_node(self):
        a = stream("a.1", FakeNode(), [(2.0, ids_at(2.0, 1, 0, 3)), (3.0, ids_at(1.5, 1, 0, 3))])
        res = check([a])
        self.assertIn("not above the previous ID", texts(res))

    def test_back_on_an_old_node_below_its_earlier_ids(self):
        # node 1, then node 2, then node 1 again below its first stretch.
        a = stream("a.1", FakeNode(), [(2.0, ids_at(2.0, 1, 0, 3)), (3.0, ids_at(3.0, 2, 0, 3)),
                                       (4.0, ids_at(1.0, 1, 0, 3))])
        res = check([a])
        self.assertIn("not above the previous ID", texts(res))

    def test_mixed_batch(self):
        res = check([stream("a.1", FakeNode(), [(1.0, ids_at(1.0, 1, 0, 2) + ids_at(1.0, 2, 0, 2))])])
        self.assertIn("mixes node IDs", texts(res))

    def test_next_owner_below_previous_is_caught_without_duplicates(self):
        a = stream("a.1", FakeNode(), [(t, ids_at(t, 4, 0, 3)) for t in (1.0, 5.0)])
        # b takes node 4 later, but starts at the time of t=3 (below a's last at t=5).
        b = stream("b.1", FakeNode(), [(t, ids_at(t - 4.0, 4, 100, 3)) for t in (7.0, 12.0)])
        res = check([a, b])
        self.assertEqual(res.duplicates, 0)
        self.assertIn("overlap", texts(res))


class Time(unittest.TestCase):
    def test_lead_within_max_lead_is_fine(self):
        res = check([steady("a.1", 1, lead_ms=MAX_LEAD - 100)])
        self.assertTrue(res.ok, texts(res))

    def test_lead_beyond_max_lead(self):
        a = stream("a.1", FakeNode(), [(1.0, ids_at(1.0, 1, 0, 3)), (2.0, ids_at(2.0, 1, 0, 3, lead_ms=1500))])
        res = check([a])
        self.assertIn("ahead of the wall clock", texts(res))
        self.assertEqual(res.scenarios[0].violations, 1)

    def test_ahead_of_a_faked_clock(self):
        # The process's clock is 2 s behind from t=0: IDs at the real time are 2 s ahead of it.
        fake = FakeNode(offsets=[(0.0, -2)])
        res = check([steady("a.1", 1, fake=fake)])
        self.assertIn("faked clock", texts(res))

    def test_behind_a_faked_clock_is_fine_and_a_step_back_is_allowed_for_in_flight(self):
        fake = FakeNode(offsets=[(0.0, -2)])
        ok = check([steady("a.1", 1, lead_ms=-2000, fake=fake)])
        self.assertTrue(ok.ok, texts(ok))
        # Step from 0 to -2 s at t=5.0; a batch sent before it, received at 5.1, carries real time.
        step = FakeNode(offsets=[(0.0, 0), (5.0, -2)])
        a = stream("a.1", step, [(4.0, ids_at(4.0, 1, 0, 3)), (5.1, ids_at(4.99, 1, 10, 3))])
        self.assertTrue(check([a]).ok)
        late = stream("a.1", step, [(4.0, ids_at(4.0, 1, 0, 3)), (7.0, ids_at(6.5, 1, 10, 3))])
        self.assertIn("faked clock", texts(check([late])))


class Refusals(unittest.TestCase):
    def _with(self, status, code, reason):
        st = steady("a.1", 1)
        st.refusals.append(load.Refusal(3.0, 3.01, status, code, reason, "1", b"{}"))
        return check([st])

    def test_503_with_reason_is_counted_not_failed(self):
        res = self._with(503, "UNAVAILABLE", "LEASE_EXPIRING")
        self.assertTrue(res.ok, texts(res))
        self.assertEqual(res.scenarios[0].refusals, 1)
        self.assertEqual(res.scenarios[0].reasons, {"503 LEASE_EXPIRING": 1})

    def test_503_without_reason(self):
        self.assertIn("without a JSON error code and reason", texts(self._with(503, "UNAVAILABLE", None)))

    def test_other_status(self):
        self.assertIn("not 503", texts(self._with(500, "INTERNAL", None)))

    def test_bad_200(self):
        st = steady("a.1", 1)
        st.bad.append(load.BadResponse(4.0, 200, "not JSON"))
        self.assertIn("bad body", texts(check([st])))

    def test_parse_ids(self):
        self.assertEqual(load.parse_ids(b'{"ids":["1","22"]}', 2), [1, 22])
        for body in (b'{"ids":["1"]}', b'{"ids":["1","x"]}', b'{"ids":["01","2"]}', b'{"ids":[1,2]}',
                     b'{"id":["1","2"]}', b"1\n2", b'{"ids":["1","-2"]}', b'{"ids":["1","\xd9\xa3"]}'):
            with self.assertRaises(ValueError, msg=body):
                load.parse_ids(body, 2)
        self.assertEqual(load.parse_refusal(b'{"error":{"code":"UNAVAILABLE","reason":"X","message":"m"}}'),
                         ("UNAVAILABLE", "X"))
        self.assertEqual(load.parse_refusal(b'{"error":{"code":"UNAVAILABLE","message":"m"}}'), ("UNAVAILABLE", None))


class TransportErrors(unittest.TestCase):
    def _err(self, windows, kind, t_send, t_err):
        node = FakeNode(windows=windows)
        st = steady("a.1", 1, t1=4.0, fake=node)
        st.errors.append(load.TransportError(t_send, t_err, kind, "synthetic"))
        return check([st])

    def test_drop_without_a_fault_fails(self):
        res = self._err([], "eof", 3.0, 3.01)
        self.assertIn("while the process was not being taken down", texts(res))
        self.assertEqual(res.scenarios[0].node_down, 0)

    def test_drop_after_kill_is_node_down(self):
        for kind in ("refused", "eof", "truncated", "timeout"):
            res = self._err([["kill", 5.0, float("inf")]], kind, 5.0, 5.01)
            self.assertTrue(res.ok, f"{kind}: {texts(res)}")
            self.assertEqual(res.scenarios[0].node_down, 1)

    def test_drop_before_the_kill_fails(self):
        self.assertFalse(self._err([["kill", 5.0, float("inf")]], "eof", 4.0, 4.5).ok)

    def test_sigstop_window_excuses_until_grace(self):
        w = [["stop", 5.0, 9.0]]
        self.assertTrue(self._err(w, "timeout", 4.9, 14.9).ok)  # started before, failed after
        self.assertFalse(self._err(w, "eof", 9.5, 9.6).ok)  # after the window

    def test_sigterm_excuses_refused_and_eof_only(self):
        w = [["term", 5.0, float("inf")]]
        self.assertTrue(self._err(w, "refused", 5.1, 5.1).ok)
        self.assertTrue(self._err(w, "eof", 5.0, 5.2).ok)
        self.assertFalse(self._err(w, "truncated", 5.0, 5.2).ok)
        self.assertFalse(self._err(w, "timeout", 5.0, 15.0).ok)

    def test_unexpected_exit_note_fails(self):
        res = check([steady("a.1", 1)], notes=[(12.0, "a.1 exited by itself with 1")])
        self.assertFalse(res.ok)
        self.assertEqual(res.scenarios[1].violations, 1)

    def test_runner_violation_fails(self):
        res = check([steady("a.1", 1)], extra=[("two", "did not recover")])
        self.assertFalse(res.ok)
        self.assertEqual(res.scenarios[1].violations, 1)


class Unavailability(unittest.TestCase):
    def test_longest_gap_per_scenario(self):
        a = stream("a.1", FakeNode(), [(t, ids_at(t, 1, 0, 2)) for t in (1.0, 2.0, 6.5, 9.0, 11.0, 19.5)])
        b = stream("b.1", FakeNode(), [(t, ids_at(t, 2, 0, 2)) for t in (3.0, 12.0)])
        res = check([a, b])
        self.assertAlmostEqual(res.scenarios[0].unavailable, 3.5)  # 3.0 .. 6.5
        self.assertAlmostEqual(res.scenarios[1].unavailable, 7.5)  # 12.0 .. 19.5


if __name__ == "__main__":
    unittest.main(verbosity=1)
