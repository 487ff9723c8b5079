#!/usr/bin/env python3
"""Segment mode on a shared PostgreSQL store: a real PostgreSQL server (initdb in the work
directory, as in postgres_registry.py) and two `flurry serve` processes with
--segment-stores postgresql://...: a tag created through one is 409 through the other, both hand
out its IDs at once without a duplicate and each in increasing order, and the table is Leaf's
leaf_alloc. PostgreSQL stopped: once the buffers are used up a request gets 503 with Retry-After
within about segment_max_wait_ms, never a hang, while snowflake IDs keep coming; PostgreSQL
started again: the tag serves again, above every ID issued before.

Usage: segments_postgres.py FLURRY
"""
import os
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
from pglib import Postgres  # noqa: E402

TOKEN = "pg-segment-token-1-5f0c7a2e9d4b8c13e6a7"
MAX_WAIT_MS = 400


def restart(pg):
    """Starts the stopped cluster again on its port."""
    log = open(pg.log, "ab")
    pg.proc = subprocess.Popen(
        [os.path.join(pg.bindir, "postgres"), "-D", pg.data, "-k", pg.dir, "-h", "127.0.0.1",
         "-p", str(pg.port), "-c", "fsync=off", "-c", "full_page_writes=off"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=pg.dir, preexec_fn=pg._preexec)
    log.close()
    deadline = time.monotonic() + 60
    while pg.psql("postgres", "SELECT 1", check=False) != "1":
        h.check(time.monotonic() < deadline and pg.proc.poll() is None,
                f"PostgreSQL did not come back: {pg.log_text()[-2000:]}")
        time.sleep(0.05)


def take(port, tag, count, conn=None):
    r = h.request(port, f"/v1/segments/{tag}/ids?count={count}", conn=conn, timeout=15)
    h.check(r.status == 200, f"ids of {tag} on port {port}: {r}")
    return [int(x) for x in r.json()["ids"]]


def run(pg):
    pg.psql("postgres", "CREATE DATABASE ids")
    token_file = os.path.join(h.WORK, "token")
    with open(os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(TOKEN + "\n")
    args = ["--segment-stores", pg.url("ids"), "--admin-token-file", token_file,
            "--segment-max-wait-ms", str(MAX_WAIT_MS)]
    a = h.Server("a", os.path.join(h.WORK, "a"), args=args).start()
    b = h.Server("b", os.path.join(h.WORK, "b"), args=args).start()
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    body = '{"tag":"orders","start":1000,"step":50,"description":"shared"}'
    r = h.request(a.port, "/v1/segments", method="POST", headers=auth, body=body)
    h.check(r.status == 201 and r.json()["max_id"] == "1000", f"create through a: {r}")
    r = h.request(b.port, "/v1/segments", method="POST", headers=auth, body=body)
    h.check_error_body(r, 409, "create through b", code="ALREADY_EXISTS")
    h.check(pg.psql("ids", "SELECT biz_tag || ':' || step FROM leaf_alloc") == "orders:50",
            "the tag is not a row of leaf_alloc")

    got = {a.port: [], b.port: []}
    errors = []

    def load(port):
        try:
            for _ in range(400):
                got[port] += take(port, "orders", 5)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=load, args=(s.port,)) for s in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    h.check(not errors, f"load failed: {errors[:2]}")
    for port, ids in got.items():
        h.check_increasing(ids, f"server on port {port}")
    everything = got[a.port] + got[b.port]
    h.check(len(set(everything)) == len(everything) == 4000, "two servers issued the same ID")
    h.check(min(everything) >= 1000, "an ID below the tag's start")
    last_a = max(got[a.port])

    pg.stop()
    try:
        t_end = time.monotonic() + 60
        refused = None
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            r = h.request(a.port, "/v1/segments/orders/ids?count=5", timeout=20)
            took = time.monotonic() - t0
            h.check(took < MAX_WAIT_MS / 1000 + 5, f"a request took {took:.1f} s while PostgreSQL was down")
            if r.status != 200:
                refused = r
                break
            last_a = max(last_a, *[int(x) for x in r.json()["ids"]])
        h.check(refused is not None, "no refusal while PostgreSQL was down")
        h.check_error_body(refused, 503, "ids while PostgreSQL is down", code="UNAVAILABLE")
        h.check(refused.headers.get("retry-after") == "1", f"503 without Retry-After: {refused.headers}")
        h.check_error_body(h.request(a.port, "/v1/segments", timeout=20), 503, "the list while PostgreSQL is down")
        h.get_ids(a.port, 3)  # snowflake IDs do not need the segment store
        state = h.request(a.port, "/v1/segments/orders", timeout=20)
        h.check(state.status == 200 and state.json()["store_errors"] >= 1 and state.json()["stored"] is None,
                f"the tag's state while PostgreSQL is down: {state}")
    finally:
        restart(pg)
    deadline = time.monotonic() + 20
    while True:
        r = h.request(a.port, "/v1/segments/orders/ids?count=5", timeout=20)
        if r.status == 200:
            after = [int(x) for x in r.json()["ids"]]
            break
        h.check(time.monotonic() < deadline, f"a does not serve again after PostgreSQL came back: {r}")
        time.sleep(0.1)
    h.check(min(after) > last_a, f"IDs after the outage ({after}) not above those before ({last_a})")
    h.check(not set(after) & set(got[b.port]), "an ID after the outage was issued before")
    for s in (a, b):
        rc, _ = s.stop()
        h.check(rc == 0, f"{s.name} exited {rc} after SIGTERM")


def main():
    h.init()
    pg = Postgres(h.WORK)
    pg.start()
    try:
        run(pg)
    finally:
        pg.stop()  # before run_main removes the work directory


if __name__ == "__main__":
    h.run_main(main)
