#!/usr/bin/env python3
"""Two `flurry serve` processes started at the same moment on one data directory (the SQLite
registry): disjoint node IDs, and no duplicate across 1M IDs fetched from each, concurrently, in
batches of 100000. Every ID carries its process's node; each process's IDs increase.

Usage: two_processes.py FLURRY
"""
import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

PER_PROCESS = 1_000_000
BATCH = 100_000


def main():
    h.init()
    data = os.path.join(h.WORK, "data")
    a = h.Server("a", data)
    b = h.Server("b", data)
    # Launch both before waiting for either, so their claims race.
    for s in (a, b):
        s.launch()
    for s in (a, b):
        h.check(s.wait_http(), f"{s.name} exited with {s.proc.returncode} at start")
    for s in (a, b):
        s.ready = s.wait_ready()
    h.log(f"nodes: a={a.node} b={b.node}")
    h.check(a.node != b.node, f"both processes run as node {a.node}")

    results = {a.name: [], b.name: []}
    errors = []

    def fetch(s):
        try:
            import http.client
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
            for _ in range(PER_PROCESS // BATCH):
                results[s.name].append(h.get_ids(s.port, BATCH, conn=conn, timeout=60))
            conn.close()
        except Exception as e:  # noqa: BLE001
            errors.append(f"{s.name}: {e!r}")

    t0 = time.monotonic()
    threads = [threading.Thread(target=fetch, args=(s,)) for s in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    h.log(f"fetched 2 x {PER_PROCESS} IDs in {time.monotonic() - t0:.2f} s")
    h.check(not errors, f"fetching failed: {errors}")

    everything = set()
    for s in (a, b):
        flat = [i for batch in results[s.name] for i in batch]
        h.check(len(flat) == PER_PROCESS, f"{s.name}: {len(flat)} IDs")
        h.check_increasing(flat, f"{s.name}'s IDs")
        wrong = [i for i in flat if h.node_of(i) != s.node]
        h.check(not wrong, f"{s.name} (node {s.node}) issued IDs of node {h.node_of(wrong[0]) if wrong else None}")
        everything.update(flat)
    h.check(len(everything) == 2 * PER_PROCESS, f"{2 * PER_PROCESS - len(everything)} duplicate IDs across the two processes")

    # Both still ready, as the nodes they started with, and counting what they issued.
    for s in (a, b):
        r = h.request(s.port, "/readyz")
        h.check(r.status == 200 and r.json().get("node") == s.node, f"{s.name} /readyz after the load: {r}")
        n = h.metric(h.request(s.port, "/metrics").text, "flurry_ids_issued_total")
        h.check(n is not None and n >= PER_PROCESS, f"{s.name}: flurry_ids_issued_total {n}")
    # A clean stop of both.
    for s in (a, b):
        rc, secs = s.stop()
        h.check(rc == 0, f"{s.name} exited {rc} after SIGTERM")


h.run_main(main)
