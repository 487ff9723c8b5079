#!/usr/bin/env python3
"""Request framing (RFC 9112) on raw sockets: no request smuggling.

1. A Transfer-Encoding other than exactly "chunked" (gzip, identity, "chunked, foo" where chunked
   is not the final coding, "gzip, chunked", "chunked, chunked", empty) gets 400 with a JSON
   error naming Transfer-Encoding, and the connection is closed: the body, which here is another
   request, is never answered as one (section 6.3). Before the fix the unknown coding was ignored
   and the body answered as a second request.
2. A Transfer-Encoding in an HTTP/1.0 request: 400 and close (section 6.1).
3. What Beast already refuses, with a message naming the problem: Content-Length beside
   Transfer-Encoding (both orders), Transfer-Encoding repeated after chunked.
4. "chunked" in any case and with whitespace is accepted: the chunked body is read and the
   connection keeps working (a pipelined request after it is answered).
5. Host (section 3.2): an HTTP/1.1 request without Host, or with two, gets 400 naming Host and
   is closed; HTTP/1.0 without Host is answered.

Usage: http_framing.py FLURRY
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

SMUGGLED = b"GET /v1/ids?count=7 HTTP/1.1\r\nHost: localhost\r\n\r\n"


def refused(port, request, what, needles, status=400):
    """Sends `request` (followed by a smuggled request), expects `status` with a JSON error whose
    message contains every needle (case-insensitive), Connection: close, then the connection
    closed without a second response."""
    s = h.raw_connect(port)
    try:
        s.sendall(request + SMUGGLED)
        r = h.raw_read_response(s)
        h.check(r is not None, f"{what}: the connection was closed without a response")
        err = h.check_error_body(r, status, what, code="INVALID_ARGUMENT", reason="")
        for n in needles:
            h.check(n.lower() in err["message"].lower(), f"{what}: the message does not say {n!r}: {err}")
        h.check(r.headers.get("connection", "").lower() == "close", f"{what}: no Connection: close: {r.headers}")
        h.check(h.raw_closed_by_peer(s, 5.0), f"{what}: the connection stayed open after the 400")
    finally:
        s.close()
    return err


def main():
    h.init()
    srv = h.Server("framing", os.path.join(h.WORK, "data")).start()
    port = srv.port
    before = h.get_ids(port, 10)

    # 1. Unknown or misplaced transfer codings; the body is a request of its own.
    for te in (b"gzip", b"identity", b"chunked, foo", b"Chunked ,gzip", b"gzip, chunked",
               b"chunked, chunked", b"chunked;ext=1", b"", b"  , "):
        for method in (b"GET /healthz", b"POST /v1/ids?count=1"):
            req = method + b" HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: " + te + b"\r\n\r\n"
            if te.strip().lower().endswith(b"chunked"):
                req += b"0\r\n\r\n"  # what chunked framing would need; the 400 comes first anyway
            refused(port, req, f"{method.decode()} with Transfer-Encoding: {te.decode()!r}",
                    ["Transfer-Encoding"])
    # Two fields making "gzip, chunked".
    refused(port, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
            "Transfer-Encoding: gzip + Transfer-Encoding: chunked", ["Transfer-Encoding"])
    h.log("unknown transfer codings: 400 and close, the body never answered as a request")

    # 2. HTTP/1.0 with Transfer-Encoding (even chunked, even with a Host).
    for te in (b"chunked", b"gzip"):
        refused(port, b"GET /healthz HTTP/1.0\r\nHost: localhost\r\nTransfer-Encoding: " + te + b"\r\n\r\n0\r\n\r\n",
                f"HTTP/1.0 with Transfer-Encoding: {te.decode()}", ["Transfer-Encoding", "HTTP/1.0"])
    h.log("HTTP/1.0 with Transfer-Encoding: 400 and close")

    # 3. What Beast refuses by itself, with a message that says what is wrong.
    refused(port, b"POST /v1/ids HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "Content-Length then Transfer-Encoding", ["Content-Length", "Transfer-Encoding"])
    refused(port, b"POST /v1/ids HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
            "Transfer-Encoding then Content-Length", ["Content-Length", "Transfer-Encoding"])
    refused(port, b"POST /v1/ids HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\nhello",
            "Transfer-Encoding: gzip then Content-Length", ["Transfer-Encoding"])
    refused(port, b"POST /v1/ids HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nTransfer-Encoding: gzip\r\n\r\nhello",
            "Content-Length then Transfer-Encoding: gzip", ["Content-Length", "Transfer-Encoding"])
    refused(port, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "Transfer-Encoding: chunked twice", ["Transfer-Encoding"])
    refused(port, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n0\r\n\r\n",
            "Transfer-Encoding: chunked then gzip", ["Transfer-Encoding"])
    refused(port, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
            "two different Content-Lengths", ["Content-Length"])
    h.log("Content-Length beside Transfer-Encoding, repeated codings: 400 and close")

    # 4. chunked, in any case and with whitespace, is read as the body; the stream stays in step.
    for te in (b"chunked", b"CHUNKED", b" Chunked\t", b"chunked,", b", chunked"):
        s = h.raw_connect(port)
        s.sendall(b"GET /v1/ids?count=3 HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding:" + te + b"\r\n\r\n"
                  b"5\r\nGET /\r\n3;ext=1\r\nabc\r\n0\r\n\r\n" + SMUGGLED)
        r1 = h.raw_read_response(s)
        h.check(r1 is not None and r1.status == 200, f"Transfer-Encoding:{te!r}: expected 200, got {r1}")
        ids = [int(x) for x in r1.json()["ids"]]
        h.check(len(ids) == 3, f"Transfer-Encoding:{te!r}: {r1}")
        r2 = h.raw_read_response(s)
        h.check(r2 is not None and r2.status == 200 and len(r2.json()["ids"]) == 7,
                f"Transfer-Encoding:{te!r}: the pipelined request after the chunked body: {r2}")
        h.check_increasing(ids + [int(x) for x in r2.json()["ids"]], "after a chunked body", above=before[-1])
        s.close()
    h.log("chunked bodies: read, the connection stays in step")

    # 5. Host.
    refused(port, b"GET /v1/ids?count=1 HTTP/1.1\r\n\r\n", "HTTP/1.1 without Host", ["Host"])
    refused(port, b"GET /v1/ids?count=1 HTTP/1.1\r\nX-Host: localhost\r\n\r\n", "HTTP/1.1 with X-Host only", ["Host"])
    refused(port, b"GET /v1/ids?count=1 HTTP/1.1\r\nHost: localhost\r\nHost: localhost\r\n\r\n", "two Host headers", ["Host"])
    refused(port, b"GET /v1/ids?count=1 HTTP/1.1\r\nHost: localhost\r\nhost: localhost\r\n\r\n", "Host twice (same value)", ["Host"])
    refused(port, b"GET /v1/ids?count=1 HTTP/1.0\r\nHost: localhost\r\nHost: localhost\r\n\r\n", "HTTP/1.0 with two Hosts", ["Host"])
    s = h.raw_connect(port)
    s.sendall(b"GET /v1/ids?count=2 HTTP/1.0\r\n\r\n")
    r = h.raw_read_response(s)
    h.check(r is not None and r.status == 200 and len(r.json()["ids"]) == 2, f"HTTP/1.0 without Host: {r}")
    s.close()
    s = h.raw_connect(port)
    s.sendall(b"GET /v1/ids?count=2 HTTP/1.1\r\nHost: \r\n\r\nGET /healthz HTTP/1.1\r\nhOsT: LocalHost:1\r\n\r\n")
    for what in ("an empty Host", "a Host in odd case"):
        r = h.raw_read_response(s)
        h.check(r is not None and r.status == 200, f"HTTP/1.1 with {what}: {r}")
    s.close()
    h.log("Host: missing or repeated in HTTP/1.1 gets 400, HTTP/1.0 without Host is answered")

    # None of the smuggled requests was answered: only the IDs asked for here were issued.
    r = h.request(port, "/metrics")
    issued = h.metric(r.text, "flurry_ids_issued_total")
    expected = 10 + 5 * (3 + 7) + 2 + 2
    h.check(issued == expected, f"flurry_ids_issued_total is {issued}, expected {expected}: a smuggled request was served")
    h.check(srv.alive(), "the server died")
    h.check(h.request(port, "/readyz").status == 200, "/readyz after the bad requests")


h.run_main(main)
