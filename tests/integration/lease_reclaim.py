#!/usr/bin/env python3
"""Re-claiming a node ID after a lost lease when no node ID is free (a layout with two nodes):

1. A (node 0) and C (node 1) run; A is frozen (SIGSTOP) past its lease TTL, B claims node 0 and
   A is resumed. A cannot claim a node ID again (none is free): it stays alive and not ready,
   /readyz 503 reason RECLAIMING_NODE, /v1/ids 503 UNAVAILABLE / RECLAIMING_NODE with Retry-After,
   and it logs the failed claim once, not on every retry.
2. C stops cleanly (releasing node 1): A becomes ready by itself on node 1, within its backoff
   (at most the lease TTL) and a little; its IDs decode to node 1 and are unique with B's; its
   events (GET /v1/events) tell the story: claimed, lost, one failed re-claim, re-claimed.
3. B is frozen past its TTL, D claims node 0, B is resumed: B cannot re-claim either, and a
   SIGTERM during its re-claim still makes it exit 0 promptly, without releasing D's lease.

Usage: lease_reclaim.py FLURRY
"""
import os
import re
import signal
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

TTL_MS = 1500
LAYOUT = "time:50,node:1,seq:12;epoch=2025-01-01Z"  # two node IDs
# The reason while a node ID is claimed again.
RECLAIMING = ("RECLAIMING_NODE",)


def node_of(id_):
    return h.node_of(id_, node_bits=1)


def freeze_after_renewal(s):
    """SIGSTOPs s right after a lease renewal (not inside a registry transaction)."""
    renewals = h.metric(h.request(s.port, "/metrics").text, "flurry_lease_renewals_total")
    deadline = time.monotonic() + 5
    while h.metric(h.request(s.port, "/metrics").text, "flurry_lease_renewals_total") == renewals:
        h.check(time.monotonic() < deadline, f"{s.name}: no lease renewal within 5 s")
        time.sleep(0.002)
    os.kill(s.pid, signal.SIGSTOP)


def wait_reclaiming(s, what):
    """After SIGCONT: s must turn not ready with RECLAIMING_NODE and answer 503 + Retry-After."""
    deadline = time.monotonic() + 3.0
    last = None
    while time.monotonic() < deadline:
        h.check(s.alive(), f"{what}: {s.name} exited ({s.proc.returncode}) after losing its lease")
        last = h.request(s.port, "/readyz")
        if last.status == 503 and last.json().get("reason") in RECLAIMING:
            break
        # Right after SIGCONT it may still answer ready as `node` until its keeper has run (the
        # fenced horizon keeps its IDs unique meanwhile; see lease_lost.py).
        time.sleep(0.02)
    else:
        h.fail(f"{what}: {s.name} not 503 {RECLAIMING[0]} within 3 s of SIGCONT: {last}")
    r = h.request(s.port, "/v1/ids?count=10")
    err = h.check_error_body(r, 503, f"{what}: /v1/ids on {s.name} while re-claiming", code="UNAVAILABLE")
    h.check(err.get("reason") in RECLAIMING, f"{what}: /v1/ids reason {err.get('reason')}, not {RECLAIMING[0]}")
    h.check(r.headers.get("retry-after", "").strip().isdigit(),
            f"{what}: /v1/ids 503 without Retry-After while re-claiming: {r.headers}")


def as_host(name):
    """The environment of a process that plays a host of its own: this test is about the registry
    fencing a process whose lease another host took over; on one host the host guard would keep
    the node ID from being taken while its holder lives (host_guard.h)."""
    return dict(os.environ, FLURRY_HOST_GUARD_SCOPE=os.path.join(h.WORK, "host-" + name))


def main():
    h.init()
    data = os.path.join(h.WORK, "data")
    args = ["--lease-ttl-ms", str(TTL_MS), "--layout", LAYOUT]
    a = h.Server("a", data, args, env=as_host("a")).start()
    c = h.Server("c", data, args, env=as_host("c")).start()
    h.check((a.node, c.node) == (0, 1), f"a and c got nodes {a.node} and {c.node}, not 0 and 1")
    ids_a = h.get_ids(a.port, 10_000)

    # 1. A loses node 0 to B and finds no free node ID.
    freeze_after_renewal(a)
    time.sleep(TTL_MS / 1000 + 0.6)
    b = h.Server("b", data, args, env=as_host("b")).start()
    h.check(b.node == 0, f"b got node {b.node}, not a's expired node 0")
    ids_b = h.get_ids(b.port, 10_000)
    os.kill(a.pid, signal.SIGCONT)
    wait_reclaiming(a, "a")
    time.sleep(2 * TTL_MS / 1000)  # several failed attempts
    r = h.request(a.port, "/readyz")
    h.check(r.status == 503 and r.json().get("reason") in RECLAIMING,
            f"a is not 503 {RECLAIMING[0]} while no node ID is free: {r}")
    fails = re.findall(r"event=lease_reclaim_failed.*", a.log_text())
    h.check(len(fails) == 1, f"a logged {len(fails)} warnings for failed re-claims of one kind: {fails[:3]}")
    h.check("NO_FREE_NODE" in fails[0] or "RESOURCE_EXHAUSTED" in fails[0], f"unexpected failure: {fails[0]}")

    # 2. C frees node 1: A takes it by itself.
    rc, _ = c.stop()
    h.check(rc == 0, f"c exited {rc} after SIGTERM")
    t_free = time.monotonic()
    j = a.wait_ready(timeout=TTL_MS / 1000 + 2.5)
    h.log(f"a ready on node {j['node']} {time.monotonic() - t_free:.2f} s after c released it")
    h.check(j["node"] == 1, f"a is ready on node {j['node']}, not the freed node 1")
    new_a = h.get_ids(a.port, 100_000)
    h.check(all(node_of(i) == 1 for i in new_a), "a's new IDs are not all of node 1")
    more_b = h.get_ids(b.port, 100_000)
    h.check(all(node_of(i) == 0 for i in ids_b + more_b), "b's IDs are not all of node 0")
    everything = ids_a + ids_b + new_a + more_b
    h.check(len(set(everything)) == len(everything), f"{len(everything) - len(set(everything))} duplicate IDs")
    # A's story as its events tell it (GET /v1/events, the console's Events), in order.
    events = h.request(a.port, "/v1/events").json()["events"]
    story = [e["kind"] for e in events if e["kind"].startswith("lease_")]
    h.check(story[0] == "lease_claimed" and "lease_lost" in story
            and story.index("lease_lost") < story.index("lease_reclaim_failed") < story.index("lease_reclaimed")
            and story.count("lease_reclaim_failed") == 1, f"a's lease events: {story}")
    reclaimed = next(e for e in events if e["kind"] == "lease_reclaimed")
    h.check(reclaimed["details"]["old_node"] == 0 and reclaimed["details"]["new_node"] == 1
            and reclaimed["node"] == 1, f"a's lease_reclaimed event: {reclaimed}")

    # 3. B loses node 0 to D; a SIGTERM during B's re-claim still stops it promptly.
    freeze_after_renewal(b)
    time.sleep(TTL_MS / 1000 + 0.6)
    d = h.Server("d", data, args, env=as_host("d")).start()
    h.check(d.node == 0, f"d got node {d.node}, not b's expired node 0")
    os.kill(b.pid, signal.SIGCONT)
    wait_reclaiming(b, "b")
    time.sleep(0.3)
    rc, took = b.stop()
    h.check(rc == 0, f"b exited {rc} after SIGTERM during its re-claim")
    h.check(took < 3.0, f"b took {took:.2f} s to exit after SIGTERM during its re-claim")
    h.check("event=lease_released" not in b.log_text(), "b released a lease when it stopped while re-claiming")
    h.check(h.request(d.port, "/readyz").status == 200, "d is not ready after b stopped")
    h.check(h.request(a.port, "/readyz").status == 200, "a is not ready after b stopped")
    for s in (a, d):
        rc, _ = s.stop()
        h.check(rc == 0, f"{s.name} exited {rc} after SIGTERM")


h.run_main(main)
