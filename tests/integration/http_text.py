#!/usr/bin/env python3
"""Text and headers of HTTP responses, and the max_batch bound.

1. A segment tag created over HTTP with a non-ASCII description ("Bestellzeilen – 注文 📦") comes
   back exactly as sent, as UTF-8 JSON, from the 201, GET /v1/segments/{tag} and the tag list
   (before the fix each byte was written as \\u00XX: mojibake on the API and the /segments page).
2. Every response carries X-Content-Type-Options: nosniff: 200s, 201, the console, the /segments
   redirect, 400, 404, 405, 413, 431 and a framing error (before the fix none did).
3. A field in the trailer of a chunked body is ignored: the admin token sent only there gets 401
   (before the fix it authorised the request).
4. max_batch above 1,000,000 is refused at start with a message naming the setting and the
   bound; 1,000,000 is accepted (before the fix up to 10,000,000 started).

Usage: http_text.py FLURRY
"""
import http.client
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

TOKEN = "it-utf8-token-0123456789abcdef-0123456789"
DESCRIPTION = "Bestellzeilen \u2013 \u6ce8\u6587 \U0001f4e6 \u00e4\u00f6\u00fc"


def post(port, body, token=TOKEN):
    return h.request(port, "/v1/segments", method="POST",
                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
                     body=body.encode())


def check_nosniff(r, what):
    h.check(r.headers.get("x-content-type-options") == "nosniff",
            f"{what}: no X-Content-Type-Options: nosniff in {r.headers}")


def utf8_round_trip(port):
    body = json.dumps({"tag": "lines", "start": 1, "step": 100, "description": DESCRIPTION}, ensure_ascii=False)
    r = post(port, body)
    h.check(r.status == 201, f"POST /v1/segments: {r}")
    check_nosniff(r, "201")
    raw = DESCRIPTION.encode()
    h.check(raw in r.body, f"the 201 body does not hold the description as UTF-8: {r.body!r}")
    h.check(r.json().get("description") == DESCRIPTION, f"201 description {r.json().get('description')!r}")
    r = h.request(port, "/v1/segments/lines")
    h.check(r.status == 200, f"GET /v1/segments/lines: {r}")
    h.check(raw in r.body and b"\\u00" not in r.body, f"the tag's state is not plain UTF-8: {r.body!r}")
    h.check(json.dumps(r.json()).find("description") >= 0, f"no description in {r.body!r}")
    stored = r.json().get("stored") or r.json()
    h.check(stored.get("description") == DESCRIPTION, f"GET description {stored.get('description')!r}")
    r = h.request(port, "/v1/segments")
    h.check(r.status == 200 and raw in r.body and b"\\u00" not in r.body, f"the tag list: {r.body!r}")
    h.log(f"description round trip: {DESCRIPTION!r} came back as sent")


def trailer_is_ignored(port):
    s = h.raw_connect(port)
    try:
        chunk = b'{"tag":"trl"}'
        s.sendall(b"POST /v1/segments HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
                  + b"%x\r\n" % len(chunk) + chunk + b"\r\n0\r\nAuthorization: Bearer " + TOKEN.encode()
                  + b"\r\n\r\n")
        r = h.raw_read_response(s)
    finally:
        s.close()
    h.check(r is not None, "a chunked POST with a trailer: no response")
    h.check_error_body(r, 401, "the admin token sent in a trailer", code="UNAUTHENTICATED")
    h.check(h.request(port, "/v1/segments/trl").status == 404, "the tag of the trailer request exists")


def nosniff_everywhere(port):
    cases = [
        ("/v1/ids?count=2", "GET", None, 200),
        ("/v1/layout", "GET", None, 200),
        ("/healthz", "GET", None, 200),
        ("/readyz", "GET", None, 200),
        ("/metrics", "GET", None, 200),
        ("/segments", "GET", None, 302),
        ("/console", "GET", None, 200),
        ("/v1/ids?count=2", "HEAD", None, 200),
        ("/v1/ids?count=0", "GET", None, 400),
        ("/no/such/route", "GET", None, 404),
        ("/v1/ids", "DELETE", None, 405),
        ("/v1/segments", "POST", "x" * 9000, 413),
    ]
    for path, method, body, status in cases:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.request(method, path, body=body, headers={"Authorization": f"Bearer {TOKEN}"} if body else {})
            resp = conn.getresponse()
            resp.read()
            headers = {k.lower(): v for k, v in resp.getheaders()}
        finally:
            conn.close()
        what = f"{method} {path}"
        h.check(resp.status == status, f"{what}: expected {status}, got {resp.status}")
        check_nosniff(h.Response(resp.status, headers, b""), what)
    # The transport's own errors: a header over header_limit (431), bad framing (400).
    for request, status in [
        (b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"b" * 9000 + b"\r\n\r\n", 431),
        (b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
    ]:
        s = h.raw_connect(port)
        try:
            s.sendall(request)
            r = h.raw_read_response(s)
        finally:
            s.close()
        h.check(r is not None and r.status == status, f"expected {status}, got {r}")
        check_nosniff(r, f"the transport's {status}")


def max_batch_bound(work):
    def config(value):
        return subprocess.run([h.FLURRY, "serve", "--data-dir", os.path.join(work, "mb"), "--max-batch", value,
                               "--print-config"], capture_output=True, timeout=30)
    p = config("1000001")
    err = p.stderr.decode(errors="replace")
    h.check(p.returncode != 0, f"max_batch 1000001 accepted: {p.stdout[:300]!r}")
    h.check("max_batch" in err and "1000000" in err and "1000001" in err,
            f"the refusal of max_batch 1000001 does not name the setting and the bound: {err!r}")
    h.log(f"max_batch 1000001: {err.strip()}")
    p = config("1000000")
    h.check(p.returncode == 0 and b"max_batch = 1000000" in p.stdout,
            f"max_batch 1000000 refused: {p.returncode} {p.stderr!r}")


def main():
    h.init()
    token = os.path.join(h.WORK, "token")
    with open(token, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(token, 0o600)
    srv = h.Server("text", os.path.join(h.WORK, "data"), ["--admin-token-file", token]).start()
    utf8_round_trip(srv.port)
    trailer_is_ignored(srv.port)
    nosniff_everywhere(srv.port)
    max_batch_bound(h.WORK)
    h.check(srv.alive(), "the server exited")
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc} after SIGTERM")


h.run_main(main)
