#!/usr/bin/env python3
"""A registry held locked by another process: probes answer at once, requests fail fast, the
lease is given up in time, and everything recovers by itself.

Another process (this script, through SQLite) holds registry.db's write lock for 8 s while a
client loops on /v1/ids?count=100000 (so the server needs to extend its horizon soon) and probes
poll /healthz, /readyz and /metrics. Before the fix /healthz waited behind a /v1/ids blocked on
the registry on the same I/O thread (seconds), /v1/ids itself was held up for 4 s, and the lease
was given up only at the TTL. Now:
  * /healthz, /readyz and /metrics always answer within 500 ms;
  * every /v1/ids answers within 2.5 s, with IDs or a 503 carrying Retry-After and a reason;
  * /readyz turns 503 no later than the lease keeper's deadline (TTL - TTL/3 after the last
    renewal, plus one renewal attempt), not at the TTL;
  * after the lock is released the server is ready again by itself on the same node, and its IDs
    are above every earlier one.

Usage: registry_locked.py FLURRY
"""
import http.client
import os
import sqlite3
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

TTL_MS = 3000
LOCK_S = 8.0


def main():
    h.init()
    data = os.path.join(h.WORK, "data")
    s = h.Server("a", data, ["--lease-ttl-ms", str(TTL_MS)]).start()
    node = s.node
    before = h.get_ids(s.port, 1000)
    stop = threading.Event()
    slow_probes, id_answers, problems = [], [], []

    def probe():
        conns = {p: http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
                 for p in ("/healthz", "/readyz", "/metrics")}
        while not stop.is_set():
            for path, conn in conns.items():
                t0 = time.monotonic()
                try:
                    r = h.request(s.port, path, conn=conn)
                except (OSError, http.client.HTTPException) as e:
                    problems.append(f"{path}: {e!r}")
                    conns[path] = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
                    continue
                took = time.monotonic() - t0
                if took > 0.5:
                    slow_probes.append((path, round(took, 2)))
                if path == "/readyz" and r.status != 200 and not_ready_at[0] is None:
                    not_ready_at[0] = time.monotonic()
            time.sleep(0.05)

    def load():
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        while not stop.is_set():
            t0 = time.monotonic()
            r = h.request(s.port, "/v1/ids?count=100000&format=text", conn=conn)
            took = time.monotonic() - t0
            id_answers.append((r.status, took))
            if r.status == 503:
                if "retry-after" not in r.headers or "reason" not in r.json().get("error", {}):
                    problems.append(f"503 without Retry-After or reason: {r}")
                time.sleep(0.05)
            elif r.status != 200:
                problems.append(f"unexpected {r}")

    not_ready_at = [None]
    threads = [threading.Thread(target=probe), threading.Thread(target=load)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    locker = sqlite3.connect(os.path.join(data, "registry.db"), timeout=10, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    locked_at = time.monotonic()
    h.log("registry.db locked")
    time.sleep(LOCK_S)
    locker.execute("ROLLBACK")
    locker.close()
    unlocked_at = time.monotonic()
    h.log("registry.db unlocked")
    ready = s.wait_ready(15)
    recovered = time.monotonic() - unlocked_at
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join(60)

    slowest = max(took for _, took in id_answers)
    h.log(f"{len(id_answers)} /v1/ids answers (slowest {slowest:.2f} s, "
          f"{sum(1 for st, _ in id_answers if st == 503)} refused), /readyz 503 after "
          f"{(not_ready_at[0] or 0) - locked_at:.2f} s, ready again {recovered:.2f} s after the "
          f"unlock; slow probes {slow_probes[:5]}")
    h.check(not problems, f"problems: {problems[:5]}")
    h.check(not slow_probes, f"probes that took more than 500 ms: {slow_probes[:10]}")
    h.check(slowest <= 2.5, f"a /v1/ids answer took {slowest:.2f} s")
    h.check(any(st == 503 for st, _ in id_answers), "no /v1/ids was refused while the registry was locked")
    h.check(not_ready_at[0] is not None, "/readyz never turned 503 while the registry was locked")
    # The last renewal was at most TTL/3 before the lock; suspension comes TTL/3 before expiry.
    deadline = 2 * TTL_MS / 3000 + 1.0
    h.check(not_ready_at[0] - locked_at <= deadline,
            f"/readyz turned 503 {not_ready_at[0] - locked_at:.2f} s into the lock, later than {deadline} s")
    h.check(ready["node"] == node, f"recovered on node {ready['node']}, not {node}")
    after = h.get_ids(s.port, 1000)
    h.check(after[0] > before[-1], "IDs after the recovery are not above the earlier ones")
    rc, _ = s.stop()
    h.check(rc == 0, f"exit code {rc}")


if __name__ == "__main__":
    h.run_main(main)
