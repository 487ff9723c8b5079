#!/usr/bin/env python3
"""kill -9 and restart on the same data directory.

SQLite registry, --lease-ttl-ms 2000:
  1. A runs under load and is killed with SIGKILL in the middle of it.
  2. B, started at once, cannot have A's node ID (A's lease is still valid): it gets another.
  3. After the TTL, C claims A's node ID (the lowest free one again) and every ID it issues is
     above every ID A issued. No duplicates anywhere.
Static registry (--registry static --node 7): killed under load, restarted at once as the same
node: every ID after the restart is above every ID before (the horizon), the start may be
delayed but never below.

Usage: kill_restart.py FLURRY
"""
import http.client
import os
import signal
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

TTL_MS = 2000


def load_until_killed(s, batch, out, stop):
    """Fetches batches from s until the connection fails (the process was killed) or stop is set.
    Only complete responses count."""
    conn = None
    while not stop.is_set():
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
            r = h.request(s.port, f"/v1/ids?count={batch}", conn=conn)
            if r.status == 200:
                out.append([int(x) for x in r.json()["ids"]])
        except (OSError, http.client.HTTPException):
            if not s.alive():
                return
            conn = None
            time.sleep(0.005)


def kill_under_load(s, batch, seconds, after_kill=None):
    """Loads s from 3 threads for `seconds`, kills it with SIGKILL, runs after_kill() at once (before
    collecting the threads), and returns (the IDs of every complete response, kill time)."""
    out, stop = [], threading.Event()
    threads = [threading.Thread(target=load_until_killed, args=(s, batch, out, stop)) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    os.kill(s.pid, signal.SIGKILL)
    t_kill = time.monotonic()
    s.proc.wait(10)
    if after_kill:
        after_kill()
    stop.set()
    for t in threads:
        t.join(20)
    ids = [i for b in out for i in b]
    h.check(len(ids) > 0, f"{s.name} issued nothing before it was killed")
    return ids, t_kill


def main():
    h.init()
    data = os.path.join(h.WORK, "data")
    args = ["--lease-ttl-ms", str(TTL_MS)]

    a = h.Server("a", data, args).start()
    h.log(f"a: node {a.node}")
    before = h.get_ids(a.port, 100_000)
    # B at once: A's lease has not expired, so B must not get A's node ID.
    b = h.Server("b", data, args)
    ids_a, t_kill = kill_under_load(a, 10_000, 0.7, after_kill=b.start)
    b_ready_after = b.ready_at - t_kill
    ids_a += before
    max_a = max(ids_a)
    h.check(all(h.node_of(i) == a.node for i in ids_a), "a issued IDs of another node")
    h.log(f"a: killed after {len(ids_a)} IDs")
    h.log(f"b: node {b.node}, ready {b_ready_after * 1000:.0f} ms after the kill")
    if b_ready_after < (TTL_MS / 1000) * 2 / 3 - 0.2:
        h.check(b.node != a.node, f"b claimed node {a.node} {b_ready_after:.2f} s after a was killed, "
                f"inside a's lease ({TTL_MS} ms, renewed every {TTL_MS // 3} ms)")
    else:
        h.log(f"b started too late ({b_ready_after:.2f} s) to check that a's lease was still held")
    ids_b = h.get_ids(b.port, 100_000)
    h.check(all(h.node_of(i) == b.node for i in ids_b), "b issued IDs of another node")
    if b.node == a.node:
        h.check(min(ids_b) > max_a, f"b reuses node {a.node}: first ID {min(ids_b)} not above a's last {max_a}")

    # After the TTL, A's node ID is free again: C claims it and starts above A's horizon.
    time.sleep(max(0.0, t_kill + TTL_MS / 1000 + 0.5 - time.monotonic()))
    c = h.Server("c", data, args).start()
    h.log(f"c: node {c.node}")
    h.check(c.node == a.node, f"c got node {c.node}: a's node {a.node} was not free {TTL_MS} ms after a was killed "
            f"(b holds {b.node})")
    ids_c = []
    for _ in range(5):
        ids_c += h.get_ids(c.port, 100_000)
    h.check_increasing(ids_c, "c's IDs")
    h.check(min(ids_c) > max_a, f"c (node {c.node}, a's successor): first ID {min(ids_c)} not above a's last {max_a}")
    allids = ids_a + ids_b + ids_c
    h.check(len(set(allids)) == len(allids), f"{len(allids) - len(set(allids))} duplicate IDs across a, b and c")
    for s in (b, c):
        rc, _ = s.stop()
        h.check(rc == 0, f"{s.name} exited {rc} after SIGTERM")

    # Static registry: the same node restarted at once after kill -9; it inherits its horizon.
    sdata = os.path.join(h.WORK, "static")
    sargs = ["--registry", "static", "--node", "7"]
    s1 = h.Server("static1", sdata, sargs).start()
    h.check(s1.node == 7, f"static --node 7: /readyz says node {s1.node}")
    ids_1, _ = kill_under_load(s1, 50_000, 0.7)
    ids_1.sort()
    h.log(f"static1: killed after {len(ids_1)} IDs")
    s2 = h.Server("static2", sdata, sargs).start(timeout=15)
    h.check(s2.node == 7, f"static restart: node {s2.node}")
    h.check_nodes_route(s2, static=True)
    ids_2 = h.get_ids(s2.port, 100_000)
    h.check(all(h.node_of(i) == 7 for i in ids_1 + ids_2), "static: IDs of another node")
    h.check(min(ids_2) > ids_1[-1], f"static restart: first ID {min(ids_2)} not above the last before the kill {ids_1[-1]}")
    h.check(len(set(ids_1)) == len(ids_1), "static: duplicates before the kill")
    rc, _ = s2.stop()
    h.check(rc == 0, f"static2 exited {rc} after SIGTERM")


h.run_main(main)
