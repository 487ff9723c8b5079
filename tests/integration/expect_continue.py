#!/usr/bin/env python3
"""Expect: 100-continue (RFC 9110 section 10.1.1) without the client's stall.

1. curl with -H 'Expect: 100-continue' and a body (4 KiB, under body_limit): the answer comes
   well under the 1 s curl waits for a 100 by default, and curl saw "100 Continue" (POST /v1/ids:
   405; GET with a body: 200 with IDs). Before the fix the server said nothing until the body
   came, so curl waited its full second.
2. A body over body_limit: 413 at once, without a 100 (the final status is known from the header).
3. Raw socket: the header alone gets "HTTP/1.1 100 Continue" at once; then the body (fixed length
   or chunked) gets the final response, and the connection keeps working.
4. A request that is complete without a body gets its final response directly, no 100.
5. An expectation other than 100-continue: 417 with a JSON error, at once, and the connection is
   closed. HTTP/1.0 requests ignore Expect (section 10.1.1).

Usage: expect_continue.py FLURRY
"""
import os
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

FAST_S = 0.5  # well under curl's --expect100-timeout default of 1 s


def curl_expect(port, path, body_file, method=None):
    """curl with Expect: 100-continue and the file as the body; returns (status, body, seconds,
    whether curl saw 100 Continue)."""
    cmd = ["curl", "-sS", "-v", "--max-time", "10", "-H", "Expect: 100-continue", "--data-binary",
           f"@{body_file}", "-o", os.path.join(h.WORK, "expect-body"), "-w", "%{http_code} %{time_total}"]
    if method:
        cmd += ["-X", method]
    cmd.append(f"http://127.0.0.1:{port}{path}")
    p = subprocess.run(cmd, capture_output=True)
    h.check(p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.decode()[-500:]}")
    code, seconds = p.stdout.decode().split()
    with open(os.path.join(h.WORK, "expect-body"), "rb") as f:
        body = f.read()
    saw_100 = re.search(rb"< HTTP/1\.1 100 Continue", p.stderr) is not None
    return int(code), body, float(seconds), saw_100


def main():
    h.init()
    srv = h.Server("expect", os.path.join(h.WORK, "data")).start()
    port = srv.port
    small = os.path.join(h.WORK, "small.bin")
    with open(small, "wb") as f:
        f.write(b"x" * 4096)
    big = os.path.join(h.WORK, "big.bin")
    with open(big, "wb") as f:
        f.write(b"y" * 100_000)

    # 1. curl: the 100 comes at once, so does the final answer.
    code, body, seconds, saw_100 = curl_expect(port, "/v1/ids?count=1", small)
    h.log(f"curl POST with Expect and 4 KiB: {code} in {seconds * 1000:.0f} ms, 100 Continue seen: {saw_100}")
    h.check(code == 405, f"curl POST /v1/ids with a body: expected 405, got {code} {body[:200]!r}")
    h.check(saw_100, "curl POST with Expect: 100-continue: no 100 Continue before the final answer")
    h.check(seconds < FAST_S, f"curl POST with Expect: 100-continue took {seconds:.3f} s (the client waited for a 100)")
    code, body, seconds, saw_100 = curl_expect(port, "/v1/ids?count=3", small, method="GET")
    h.log(f"curl GET with Expect and 4 KiB: {code} in {seconds * 1000:.0f} ms, 100 Continue seen: {saw_100}")
    h.check(code == 200, f"curl GET /v1/ids with a body: expected 200, got {code} {body[:200]!r}")
    h.check(saw_100 and seconds < FAST_S, f"curl GET with Expect: {seconds:.3f} s, 100 seen: {saw_100}")
    ids = [int(x) for x in h.Response(code, {}, body).json()["ids"]]
    h.check(len(ids) == 3, f"curl GET with Expect: {body!r}")

    # 2. Over body_limit: 413 straight away, no 100.
    code, body, seconds, saw_100 = curl_expect(port, "/v1/ids?count=1", big)
    h.log(f"curl POST with Expect and 100 KB: {code} in {seconds * 1000:.0f} ms, 100 Continue seen: {saw_100}")
    h.check(code == 413, f"curl with a body over body_limit: expected 413, got {code}")
    h.check(not saw_100, "a 100 Continue for a body the server refuses")
    h.check(seconds < FAST_S, f"curl with a body over body_limit took {seconds:.3f} s")

    # 3. Raw: the interim response at once, then the final one; the connection goes on.
    s = h.raw_connect(port)
    t0 = time.monotonic()
    s.sendall(b"GET /v1/ids?count=2 HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n")
    r = h.raw_read_response(s, timeout=3.0)
    took = time.monotonic() - t0
    h.check(r is not None and r.status == 100 and r.raw_head == b"HTTP/1.1 100 Continue",
            f"raw: expected exactly 'HTTP/1.1 100 Continue', got {r and r.raw_head!r}")
    h.check(took < FAST_S, f"raw: the 100 Continue took {took:.3f} s")
    s.sendall(b"0123456789")
    r = h.raw_read_response(s)
    h.check(r is not None and r.status == 200 and len(r.json()["ids"]) == 2, f"raw: after the body: {r}")
    last = int(r.json()["ids"][-1])
    h.check(last > ids[-1], "raw: IDs not above the earlier ones")
    # Chunked, with the expectation in another case, on the same connection.
    s.sendall(b"GET /v1/ids?count=1 HTTP/1.1\r\nHost: localhost\r\nExpect: 100-Continue\r\nTransfer-Encoding: chunked\r\n\r\n")
    r = h.raw_read_response(s, timeout=3.0)
    h.check(r is not None and r.status == 100, f"raw chunked: expected 100, got {r}")
    s.sendall(b"4\r\nabcd\r\n0\r\n\r\n")
    r = h.raw_read_response(s)
    h.check(r is not None and r.status == 200 and len(r.json()["ids"]) == 1, f"raw chunked: after the body: {r}")
    # 4. Complete without a body: the final answer directly.
    s.sendall(b"GET /v1/ids?count=4 HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\n\r\n")
    r = h.raw_read_response(s)
    h.check(r is not None and r.status == 200 and len(r.json()["ids"]) == 4,
            f"raw: a request without a body: expected 200 directly, got {r}")
    # The body sent along with the header: no 100 needed, none that would confuse.
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc")
    r = h.raw_read_response(s)
    h.check(r is not None and r.status in (100, 200), f"raw: header and body together: {r}")
    if r.status == 100:
        r = h.raw_read_response(s)
        h.check(r is not None and r.status == 200, f"raw: header and body together, after the 100: {r}")
    s.close()
    h.log("raw: 100 Continue at once, then the final response; none for a request without a body")

    # 5. Other expectations: 417 at once, and close.
    for value in (b"200-ok", b"100-continue, foo", b"100-continue;x=1"):
        s = h.raw_connect(port)
        t0 = time.monotonic()
        s.sendall(b"POST /v1/ids?count=1 HTTP/1.1\r\nHost: localhost\r\nExpect: " + value + b"\r\nContent-Length: 10\r\n\r\n")
        r = h.raw_read_response(s, timeout=3.0)
        took = time.monotonic() - t0
        h.check(r is not None, f"Expect: {value!r}: closed without an answer")
        err = h.check_error_body(r, 417, f"Expect: {value!r}", code="UNIMPLEMENTED", reason="EXPECTATION_FAILED")
        h.check("expect" in err["message"].lower(), f"Expect: {value!r}: the message does not say Expect: {err}")
        h.check(took < FAST_S, f"Expect: {value!r}: the 417 took {took:.3f} s")
        h.check(h.raw_closed_by_peer(s, 5.0), f"Expect: {value!r}: the connection stayed open after the 417")
        s.close()
    s = h.raw_connect(port)
    s.sendall(b"GET /v1/ids?count=1 HTTP/1.0\r\nExpect: 200-ok\r\nContent-Length: 2\r\n\r\nab")
    r = h.raw_read_response(s)
    h.check(r is not None and r.status == 200, f"HTTP/1.0 with Expect: 200-ok: the expectation must be ignored: {r}")
    s.close()
    h.log("other expectations: 417 and close; ignored in HTTP/1.0")

    h.check(srv.alive(), "the server died")
    more = h.get_ids(port, 5)
    h.check_increasing(more, "after the Expect requests", above=last)


h.run_main(main)
