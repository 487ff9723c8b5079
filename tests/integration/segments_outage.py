#!/usr/bin/env python3
"""Segment mode through a PostgreSQL outage and a crash, end to end: a real PostgreSQL (initdb in
the work directory, on 127.0.0.1 and a free port) and one `flurry serve` whose segment_stores
points at it.

1. IDs are taken until the server holds its next range too (the double buffer is full).
2. PostgreSQL is stopped (pg_ctl stop -m fast). The server keeps serving what its buffers hold,
   then answers 503 UNAVAILABLE with Retry-After, each answer within segment_max_wait_ms and a
   margin: it never hangs. The tag's state shows the store's errors, /v1/events a
   segment_fetch_failed event; snowflake IDs (another registry) are still served.
3. PostgreSQL is started again on the same port: the server serves the tag again by itself, every
   ID above every ID before the outage.
4. The server is killed with SIGKILL (its buffered ranges are lost: gaps, never repeats) and
   started again: every later ID is above every earlier one, and no ID is ever repeated.

Usage: segments_outage.py FLURRY
"""
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
from pglib import Postgres  # noqa: E402

TAG = "tickets"
MAX_WAIT_MS = 300
# The longest an answer may take during the outage: the wait, and a margin for a loaded machine.
BOUND_S = MAX_WAIT_MS / 1000 + 2.0


def main():
    h.init()
    pg = Postgres(h.WORK)
    try:
        run(pg)
    finally:
        pg.stop()  # before run_main removes the work directory


def take(port, count):
    """(Response, seconds): one /ids request, a fresh connection each."""
    return h.timed_request(port, f"/v1/segments/{TAG}/ids?count={count}", timeout=BOUND_S + 10)


def ids_of(r):
    j = r.json()
    h.check(all(isinstance(x, str) and x.isdigit() for x in j["ids"]), f"IDs: {r.body[:200]!r}")
    return [int(x) for x in j["ids"]]


def state(port):
    r = h.request(port, f"/v1/segments/{TAG}")
    h.check(r.status == 200, f"GET /v1/segments/{TAG}: {r}")
    return r.json()


def check_unavailable(r, elapsed, what):
    h.check(elapsed < BOUND_S, f"{what}: answered after {elapsed:.2f} s, more than {BOUND_S} s")
    h.check_error_body(r, 503, what, code="UNAVAILABLE")
    ra = r.headers.get("retry-after", "")
    h.check(ra.isdigit() and int(ra) >= 1, f"{what}: Retry-After {ra!r}")


def run(pg):
    pg.start()
    pg.psql("postgres", "CREATE DATABASE ids")
    url = pg.url("ids")
    h.log(f"PostgreSQL on port {pg.port}")
    p = subprocess.run([h.FLURRY, "segment", "create", TAG, "--store", url, "--step", "100"],
                       capture_output=True, timeout=60)
    h.check(p.returncode == 0, f"segment create: {p.stderr.decode()[:500]}")

    data = os.path.join(h.WORK, "data")
    args = ["--segment-stores", url, "--segment-max-wait-ms", str(MAX_WAIT_MS),
            # Small ranges: the buffers drain in a few requests.
            "--segment-max-step", "400"]
    srv = h.Server("a", data, args).start()
    issued = []

    # 1. Fill both buffers.
    deadline = time.monotonic() + 10
    while True:
        r, _ = take(srv.port, 20)
        h.check(r.status == 200, f"before the outage: {r}")
        issued += ids_of(r)
        s = state(srv.port)
        if s["next"] is not None and not s["fetching"]:
            break
        h.check(time.monotonic() < deadline, f"the next range was not prefetched within 10 s: {s}")
        time.sleep(0.05)
    before_outage = max(issued)
    remaining = s["remaining"]
    h.check(remaining > 0, f"nothing buffered: {s}")

    # 2. The outage: what is buffered is served, then 503s, never a hang.
    pg.stop_fast()
    h.log(f"PostgreSQL stopped with {remaining} IDs buffered")
    served = []
    for _ in range(remaining // 10 + 5):
        r, elapsed = take(srv.port, 10)
        if r.status != 200:
            check_unavailable(r, elapsed, "the first refusal of the outage")
            break
        h.check(elapsed < BOUND_S, f"an answer from the buffers took {elapsed:.2f} s")
        served += ids_of(r)
    else:
        h.fail(f"still serving {len(served)} IDs into the outage, with {remaining} buffered")
    h.log(f"served {len(served)} buffered IDs during the outage, then 503")
    h.check(len(served) >= remaining - 9, f"only {len(served)} of the {remaining} buffered IDs were served")
    issued += served
    for path in (f"/v1/segments/{TAG}/ids?count=1", f"/v1/segments/{TAG}/range?size=10",
                 f"/v1/segments/{TAG}/ids?count=5"):
        r, elapsed = h.timed_request(srv.port, path, timeout=BOUND_S + 10)
        check_unavailable(r, elapsed, f"{path} during the outage")
    r, elapsed = h.timed_request(srv.port, f"/api/segment/get/{TAG}", timeout=BOUND_S + 10)
    h.check(r.status == 503 and elapsed < BOUND_S, f"Leaf's route during the outage: {r} after {elapsed:.2f} s")
    deadline = time.monotonic() + 5
    while True:
        s = state(srv.port)
        if s["store_errors"] > 0 and s["last_error"]:
            break
        h.check(time.monotonic() < deadline, f"the tag's state does not show the store's errors: {s}")
        time.sleep(0.1)
    h.check(s["unavailable"] >= 1 and s["waits"] >= 1, f"the refusals are not counted: {s}")
    # The failed fetches are an event (GET /v1/events, the console's Events) naming tag and store.
    events = h.request(srv.port, "/v1/events").json()["events"]
    failed = [e for e in events if e["kind"] == "segment_fetch_failed"]
    h.check(failed and failed[0]["details"]["tag"] == TAG and failed[0]["level"] == "warning"
            and "postgres" in failed[0]["details"]["store"] and failed[0]["details"]["failures"] >= 1,
            f"no segment_fetch_failed event for {TAG}: {events}")
    h.get_ids(srv.port, 10)  # snowflake IDs come from another registry

    # 3. PostgreSQL again (same port): the server serves again by itself, above everything before.
    pg.restart()
    t0 = time.monotonic()
    while True:
        r, elapsed = take(srv.port, 10)
        h.check(elapsed < BOUND_S, f"an answer after the restart took {elapsed:.2f} s")
        if r.status == 200:
            break
        h.check_error_body(r, 503, "after PostgreSQL's restart", code="UNAVAILABLE")
        h.check(time.monotonic() - t0 < 15, "not serving 15 s after PostgreSQL came back")
        time.sleep(0.1)
    h.log(f"serving again {time.monotonic() - t0:.2f} s after PostgreSQL came back")
    after = ids_of(r)
    for _ in range(20):
        r, _ = take(srv.port, 250)
        h.check(r.status == 200, f"after the outage: {r}")
        after += ids_of(r)
    h.check(min(after) > max(issued), f"after the outage {min(after)}, not above {max(issued)}")
    h.check(max(issued) >= before_outage, "bookkeeping")
    issued += after
    h.check_increasing(issued, "one server's IDs through the outage")

    # 4. kill -9 and a restart: above everything, never repeated.
    srv.kill()
    srv = h.Server("a2", data, args).start()
    later = []
    for _ in range(10):
        r, _ = take(srv.port, 500)
        h.check(r.status == 200, f"after the restart: {r}")
        later += ids_of(r)
    h.check(min(later) > max(issued), f"after kill -9 and a restart {min(later)}, not above {max(issued)}")
    issued += later
    h.check(len(set(issued)) == len(issued), f"{len(issued) - len(set(issued))} repeated IDs")
    max_id = int(pg.psql("ids", f"SELECT max_id FROM leaf_alloc WHERE biz_tag = '{TAG}'"))
    h.check(max_id > max(issued), f"leaf_alloc.max_id {max_id} is not above the last ID {max(issued)}")
    h.log(f"{len(issued)} IDs, none repeated")
    rc, _ = srv.stop()
    h.check(rc == 0, f"the server exited {rc} after SIGTERM")


h.run_main(main)
