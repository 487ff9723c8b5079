#!/usr/bin/env python3
"""A flood of unknown segment tags neither starves a served tag nor hammers the store.

One `flurry serve` on its SQLite store with tag `t`. One client floods it with 20,000 requests
for 2,000 random unknown tags (10 each, in bursts, on 4 keep-alive connections; half
/v1/segments/{tag}/ids, half the tag page /v1/segments/{tag}), while another takes IDs from `t`
one request at a time and times every answer.

Bounds (hold in the release and the ASan build on a loaded 2-core machine):
- every flood answer is 404; every answer for `t` is 200, none slower than MAX_S and the 99th
  percentile under P99_S;
- the store is read at most twice per distinct unknown tag (flurry_segment_tag_lookup_reads_total:
  one read per tag per unknown_tag_ttl of 1 s, and a burst lasts far less), where every request
  used to read it (and the tag page read every tag of the store); the rest are answered from
  memory (flurry_segment_unknown_tag_hits_total).

Usage: segments_flood.py FLURRY
"""
import http.client
import json
import os
import random
import string
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

TOKEN = "segments-flood-test-token-0123456789ab"
DISTINCT = 2000
REPEATS = 10
THREADS = 4
MAX_S = 1.0
P99_S = 0.2


def run():
    data = os.path.join(h.WORK, "data")
    token_file = os.path.join(h.WORK, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    srv = h.Server("a", data, ["--admin-token-file", token_file]).start()
    r = h.request(srv.port, "/v1/segments", method="POST",
                  headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
                  body=json.dumps({"tag": "t", "start": 1, "step": 1000}))
    h.check(r.status == 201, f"POST /v1/segments: {r}")
    h.check(h.request(srv.port, "/v1/segments/t/ids?count=10").status == 200, "tag t")

    rng = random.Random(17)
    tags = sorted({"x" + "".join(rng.choices(string.ascii_lowercase + string.digits, k=20))
                   for _ in range(DISTINCT)})
    h.check(len(tags) == DISTINCT, "random tags collide")
    done = threading.Event()
    errors = []
    flood_answers = [0]
    lock = threading.Lock()

    def flood(part):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
            for tag in part:
                for i in range(REPEATS):
                    path = f"/v1/segments/{tag}/ids?count=1" if i % 2 == 0 else f"/v1/segments/{tag}"
                    r = h.request(srv.port, path, conn=conn)
                    if r.status != 404:
                        raise AssertionError(f"{path}: {r}")
                    with lock:
                        flood_answers[0] += 1
            conn.close()
        except Exception as e:
            errors.append(e)

    latencies = []

    def served():
        try:
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
            ids = []
            while not done.is_set():
                t0 = time.monotonic()
                r = h.request(srv.port, "/v1/segments/t/ids?count=100", conn=conn)
                latencies.append(time.monotonic() - t0)
                if r.status != 200:
                    raise AssertionError(f"tag t during the flood: {r}")
                ids.extend(int(x) for x in r.json()["ids"])
            conn.close()
            if len(set(ids)) != len(ids):
                raise AssertionError("tag t issued an ID twice")
        except Exception as e:
            errors.append(e)

    before = h.request(srv.port, "/metrics").text
    reads_before = h.metric(before, "flurry_segment_tag_lookup_reads_total") or 0
    t0 = time.monotonic()
    taker = threading.Thread(target=served)
    taker.start()
    flooders = [threading.Thread(target=flood, args=(tags[k::THREADS],)) for k in range(THREADS)]
    for f in flooders:
        f.start()
    for f in flooders:
        f.join(300)
    done.set()
    taker.join(60)
    elapsed = time.monotonic() - t0
    if errors:
        raise errors[0]
    h.check(flood_answers[0] == DISTINCT * REPEATS, f"only {flood_answers[0]} flood answers")
    metrics = h.request(srv.port, "/metrics").text
    reads = h.metric(metrics, "flurry_segment_tag_lookup_reads_total")
    hits = h.metric(metrics, "flurry_segment_unknown_tag_hits_total")
    h.check(reads is not None and hits is not None, "no lookup metrics in /metrics")
    reads -= reads_before
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99)]
    h.log(f"{DISTINCT * REPEATS} flood requests in {elapsed:.1f} s: {int(reads)} store reads, "
          f"{int(hits)} answered from memory; tag t: {len(latencies)} answers, "
          f"p50 {latencies[len(latencies) // 2] * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
          f"max {latencies[-1] * 1000:.1f} ms")
    h.check(reads <= 2 * DISTINCT, f"{int(reads)} store reads for {DISTINCT} unknown tags")
    h.check(hits >= DISTINCT * REPEATS - 2 * DISTINCT, f"only {int(hits)} lookups answered from memory")
    h.check(len(latencies) >= 20, f"tag t answered only {len(latencies)} times during the flood")
    h.check(latencies[-1] < MAX_S, f"tag t: an answer took {latencies[-1]:.3f} s (bound {MAX_S} s)")
    h.check(p99 < P99_S, f"tag t: p99 {p99:.3f} s (bound {P99_S} s)")
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit {rc} after SIGTERM")


def main():
    h.init()
    run()


h.run_main(main)
