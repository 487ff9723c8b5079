#!/usr/bin/env python3
"""Benchmark of the Python client (not a test): IDs per second from the prefetch buffer with 1 and
8 threads, beside one `GET /v1/ids?count=1` per ID on a keep-alive connection per thread.

    FLURRY_BENCH_SERVER=http://127.0.0.1:7609 python3 bench.py [--duration S]

Prints one JSON object per line: buffer/1, buffer/8, per_request/1, per_request/8. `requests` is
the growth of the server's flurry_http_requests_total{route="/v1/ids"} (all codes) over the run.
Standard library only; run with clients/python/src on PYTHONPATH or the package installed.
"""

import argparse
import http.client
import json
import os
import re
import sys
import threading
import time
import urllib.parse
import urllib.request

sys.dont_write_bytecode = True  # nothing written beside the sources
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))
from flurry_client import Client  # noqa: E402


def id_requests(server):
    with urllib.request.urlopen(server + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(int(m) for m in re.findall(r'^flurry_http_requests_total\{route="/v1/ids",[^}]*\} (\d+)',
                                          text, re.M))


def run(callers, duration, caller):
    """Runs caller(stop_at) in `callers` threads; returns (IDs taken, seconds)."""
    counts = [0] * callers
    start = threading.Barrier(callers + 1)

    def body(k):
        start.wait()
        counts[k] = caller(time.monotonic() + duration)

    threads = [threading.Thread(target=body, args=(k,)) for k in range(callers)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.monotonic()
    for t in threads:
        t.join()
    return sum(counts), time.monotonic() - t0


def buffer_bench(server, callers, duration):
    with Client(server) as c:
        take = c.next

        def caller(stop_at):
            n = 0
            while time.monotonic() < stop_at:
                for _ in range(1000):
                    take()
                n += 1000
            return n
        return run(callers, duration, caller)


def per_request_bench(server, callers, duration):
    u = urllib.parse.urlsplit(server)

    def caller(stop_at):
        conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=10)
        n = 0
        try:
            while time.monotonic() < stop_at:
                conn.request("GET", "/v1/ids?count=1")
                r = conn.getresponse()
                body = r.read()
                if r.status != 200:
                    raise RuntimeError(f"HTTP {r.status}: {body[:200]!r}")
                n += len(json.loads(body)["ids"])
        finally:
            conn.close()
        return n
    return run(callers, duration, caller)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per run (default 3)")
    a = ap.parse_args()
    server = os.environ.get("FLURRY_BENCH_SERVER", "").split(",")[0]
    if not server:
        ap.error("set FLURRY_BENCH_SERVER to the server's base URL")
    for bench, fn in (("buffer", buffer_bench), ("per_request", per_request_bench)):
        for callers in (1, 8):
            before = id_requests(server)
            ids, seconds = fn(server, callers, a.duration)
            requests = id_requests(server) - before
            print(json.dumps({"client": "python", "bench": bench, "callers": callers, "ids": ids,
                              "seconds": round(seconds, 3), "ids_per_s": round(ids / seconds),
                              "requests": requests,
                              "requests_per_million": round(requests * 1e6 / ids, 1) if ids else None},
                             separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
