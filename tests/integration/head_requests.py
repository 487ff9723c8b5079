#!/usr/bin/env python3
"""HEAD on the routes that issue IDs issues nothing (RFC 9110 section 9.3.2).

1. HEAD /v1/ids?count=100000 (many times, keep-alive and fresh connections) and HEAD
   /api/snowflake/get/{key}: 200, GET's Content-Type, no body, and flurry_ids_issued_total does
   not move. Before the fix each HEAD issued (and burned) the whole batch.
2. Bad parameters: HEAD answers the same status as GET (400, 404), without a body.
3. A GET afterwards issues exactly what it asks for (the metric grows by that much), above the
   IDs issued before the HEADs.
4. curl -I and a HEAD pipelined before a GET on one raw connection: no body bytes, the GET after
   it is read correctly.

Usage: head_requests.py FLURRY
"""
import http.client
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

ROUNDS = 30


def issued(port):
    r = h.request(port, "/metrics")
    h.check(r.status == 200, f"/metrics: {r}")
    n = h.metric(r.text, "flurry_ids_issued_total")
    h.check(n is not None, "/metrics lacks flurry_ids_issued_total")
    return int(n)


def main():
    h.init()
    srv = h.Server("head", os.path.join(h.WORK, "data")).start()
    port = srv.port
    first = h.get_ids(port, 10)
    n0 = issued(port)
    h.check(n0 == 10, f"flurry_ids_issued_total is {n0} after issuing 10")

    # 1. HEAD issues nothing.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for i in range(ROUNDS):
        for path, ctype in (("/v1/ids?count=100000", "application/json"),
                            ("/v1/ids?count=100000&format=text&encoding=base62", "text/plain"),
                            ("/v1/ids", "application/json"),
                            ("/api/snowflake/get/orders", "text/plain")):
            r = h.request(port, path, method="HEAD", conn=conn if i % 2 else None)
            h.check(r.status == 200, f"HEAD {path}: expected 200, got {r}")
            h.check(r.headers.get("content-type", "").split(";")[0] == ctype,
                    f"HEAD {path}: Content-Type {r.headers.get('content-type')!r}, expected {ctype}")
            h.check(r.body == b"", f"HEAD {path}: a body: {r.body[:100]!r}")
            cl = r.headers.get("content-length")
            h.check(cl is None, f"HEAD {path}: Content-Length {cl} for a body that was never made")
            h.check(r.headers.get("cache-control") == "no-store", f"HEAD {path}: headers {r.headers}")
    conn.close()
    n1 = issued(port)
    h.log(f"{ROUNDS * 4} HEADs (counts up to 100000): flurry_ids_issued_total {n0} -> {n1}")
    h.check(n1 == n0, f"HEAD issued IDs: flurry_ids_issued_total went from {n0} to {n1}")

    # 2. Bad parameters: the same status as GET.
    for path in ("/v1/ids?count=0", "/v1/ids?count=100001", "/v1/ids?count=abc", "/v1/ids?count=1&count=2",
                 "/v1/ids?format=xml", "/v1/ids?encoding=b64", "/v1/ids?format=number&encoding=hex",
                 "/v1/ids?foo=1", "/api/snowflake/get/", "/api/snowflake/get/k?x=1", "/api/snowflake/get/%zz",
                 "/v1/idsx", "/api/snowflake/get/a/b"):
        g = h.request(port, path)
        r = h.request(port, path, method="HEAD")
        h.check(g.status in (400, 404), f"GET {path}: expected 400 or 404, got {g}")
        h.check(r.status == g.status, f"HEAD {path}: {r.status}, GET: {g.status}")
        h.check(r.body == b"", f"HEAD {path}: a body")
        h.check(r.headers.get("content-type", "").startswith("application/json"), f"HEAD {path}: {r.headers}")
    h.check(issued(port) == n0, "rejected requests issued IDs")
    h.log("HEAD with bad parameters: the same 4xx as GET")

    # 4. curl -I, and HEAD pipelined before GET on one connection.
    p = subprocess.run(["curl", "-sS", "-I", "--max-time", "5", f"http://127.0.0.1:{port}/v1/ids?count=100000"],
                       capture_output=True)
    h.check(p.returncode == 0 and p.stdout.startswith(b"HTTP/1.1 200"), f"curl -I: {p.returncode} {p.stdout[:200]!r} "
            f"{p.stderr[-200:]!r}")
    s = h.raw_connect(port)
    s.sendall(b"HEAD /v1/ids?count=100000 HTTP/1.1\r\nHost: localhost\r\n\r\n"
              b"HEAD /api/snowflake/get/k HTTP/1.1\r\nHost: localhost\r\n\r\n"
              b"GET /v1/ids?count=2 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    for what in ("HEAD /v1/ids", "HEAD /api/snowflake/get/k"):
        r = h.raw_read_response(s, head=True)
        h.check(r is not None and r.status == 200, f"pipelined {what}: {r}")
    r = h.raw_read_response(s)
    h.check(r is not None and r.status == 200 and len(r.json()["ids"]) == 2,
            f"the GET pipelined after the HEADs (body bytes after a HEAD would break it): {r}")
    s.close()
    h.check(issued(port) == n0 + 2, "the pipelined HEADs issued IDs")

    # 3. GET issues exactly what it asks for, above the IDs before.
    ids = h.get_ids(port, 5)
    h.check_increasing(first + [int(x) for x in r.json()["ids"]] + ids, "GET after the HEADs")
    n2 = issued(port)
    h.check(n2 == n0 + 2 + 5, f"flurry_ids_issued_total is {n2}, expected {n0 + 7}")
    h.check(srv.alive(), "the server died")


h.run_main(main)
