#!/usr/bin/env python3
"""SIGTERM (and SIGINT): the server drains, persists its horizon, releases its lease and exits 0
within a few seconds, also with idle keep-alive connections open and requests in flight. A new
process on the same data directory then gets the same node ID at once (no waiting for the lease
TTL, default 10 s) and issues IDs above the old ones.

Usage: sigterm.py FLURRY
"""
import http.client
import os
import signal
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

EXIT_WITHIN_S = 5.0


def main():
    h.init()
    data = os.path.join(h.WORK, "data")
    prev_node, prev_max = None, 0
    for round_, sig in enumerate((signal.SIGTERM, signal.SIGINT, signal.SIGTERM)):
        s = h.Server(f"s{round_}", data).start()
        if prev_node is not None:
            # Started right after a clean stop: the same node ID, at once (the default TTL is 10 s).
            h.check(s.node == prev_node, f"after a clean stop the new process got node {s.node}, not {prev_node}: "
                    "the lease was not released")
        ids = h.get_ids(s.port, 100_000) + h.get_ids(s.port, 10)
        h.check_increasing(ids, f"{s.name}'s IDs", above=prev_max)
        h.check(all(h.node_of(i) == s.node for i in ids), f"{s.name}: IDs of another node")

        # Idle keep-alive connections (one that made a request, one that never did) must not hold
        # the shutdown.
        keep = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
        h.get_ids(s.port, 1, conn=keep)
        silent = socket.create_connection(("127.0.0.1", s.port))

        # Requests in flight: every response that arrives is complete and correct.
        errors, got, stop = [], [], threading.Event()

        def load():
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
            while not stop.is_set():
                try:
                    r = h.request(s.port, "/v1/ids?count=10000", conn=conn)
                except http.client.IncompleteRead as e:
                    errors.append(f"a response cut short: {e!r}")
                    return
                except (OSError, http.client.HTTPException):
                    return  # refused or closed before an answer: fine while stopping
                if r.status == 200:
                    got.extend(int(x) for x in r.json()["ids"])
                elif r.status != 503:
                    errors.append(f"status {r.status} while stopping: {r.body[:200]!r}")
                    return

        threads = [threading.Thread(target=load) for _ in range(2)]
        for t in threads:
            t.start()
        time.sleep(0.3)
        rc, secs = s.stop(sig, timeout=30)
        stop.set()
        for t in threads:
            t.join(20)
        keep.close()
        silent.close()
        h.log(f"{s.name}: node {s.node}, signal {sig.name}: exit {rc} in {secs * 1000:.0f} ms")
        h.check(rc == 0, f"{s.name} exited {rc} after {sig.name}")
        h.check(secs < EXIT_WITHIN_S, f"{s.name} took {secs:.2f} s to exit after {sig.name}")
        h.check(not errors, f"{s.name}: {errors[:3]}")
        h.check(len(set(got)) == len(got), f"{s.name}: duplicates under load")
        if got:
            h.check(min(got) > ids[-1], f"{s.name}: IDs under load not above earlier ones")
        prev_node, prev_max = s.node, max(got + ids)

    # One more start, fetching at once: above everything.
    s = h.Server("last", data).start()
    h.check(s.node == prev_node, f"the last process got node {s.node}, not {prev_node}")
    h.check_increasing(h.get_ids(s.port, 1000), "the last process's IDs", above=prev_max)
    rc, _ = s.stop()
    h.check(rc == 0, f"the last process exited {rc}")


h.run_main(main)
