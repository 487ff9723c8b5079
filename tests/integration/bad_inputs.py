#!/usr/bin/env python3
"""Bad inputs to `flurry serve`: bad parameters (400 with a JSON error naming the parameter),
unknown routes (404), wrong methods (405), a 64 KiB header (431), a big body (413), a non-HTTP
byte stream (400 or close), clients that connect and send nothing or half a request (the server
keeps serving everyone else), pipelined requests. After all of them the server is alive and still
answers correctly, above every ID it issued before.

Usage: bad_inputs.py FLURRY HTTP_CLIENT
"""
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def connect(port, timeout=10.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


_leftover = {}  # socket -> bytes read past the previous response (pipelining)


def read_response(sock, timeout=10.0):
    """Reads one HTTP response; returns (status, headers, body), or None when the server closed
    (or reset) the connection without answering. Fails on a timeout."""
    sock.settimeout(timeout)
    buf = _leftover.pop(sock, b"")
    try:
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                h.check(not buf, f"connection closed in the middle of a response head: {buf[:200]!r}")
                return None
            buf += chunk
        head, body = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        m = re.match(r"HTTP/1\.[01] (\d{3})", lines[0])
        h.check(m is not None, f"bad status line {lines[0]!r}")
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        while len(body) < n:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        h.check(len(body) >= n, f"response body cut short: {len(body)} of {n} bytes")
        _leftover[sock] = body[n:]
        return int(m.group(1)), headers, body[:n]
    except ConnectionResetError:
        h.check(not buf, f"connection reset in the middle of a response: {buf[:200]!r}")
        return None
    except socket.timeout:
        h.fail(f"no response within {timeout} s (got {buf[:200]!r})")


def closed_by_peer(sock, timeout):
    """True if the server closes the (idle) connection within timeout seconds."""
    sock.settimeout(timeout)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def idle_flag():
    """The serve option for the idle timeout, if there is one, and a short value for it."""
    p = subprocess.run([h.FLURRY, "serve", "--help"], capture_output=True)
    m = re.search(r"(--idle[-a-z]*)", p.stdout.decode() + p.stderr.decode())
    if not m:
        return None
    flag = m.group(1)
    return flag, ("2000" if flag.endswith("-ms") else "2" if flag.endswith(("-s", "-sec", "-seconds")) else "2s")


def main():
    h.init(need_client=True)
    idle = idle_flag()
    args = list(idle) if idle else []
    h.log(f"idle timeout option: {idle}")
    srv = h.Server("bad", os.path.join(h.WORK, "data"), args).start()
    port, node = srv.port, srv.node
    before = h.get_ids(port, 1000)
    last = before[-1]
    n400 = 0

    # Clients that connect and send nothing, and one that sends half a request, opened first and
    # held through the whole test: they must not hold the server.
    idlers = [connect(port) for _ in range(20)]
    half = connect(port)
    half.sendall(b"GET /v1/ids?count=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: ")
    half_body = connect(port)
    half_body.sendall(b"POST /v1/ids?count=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nabc")
    t_idle = time.monotonic()
    ids = h.get_ids(port, 5)
    h.check_increasing(ids, "with idle clients", above=last)
    last = ids[-1]

    # Bad parameters: 400 with {"error":{"code","message"}} naming the parameter.
    bad = [
        ("count=0", "count"), ("count=-1", "count"), ("count=1000000000", "count"),
        ("count=abc", "count"), ("count=", "count"), ("count", "count"), ("count=1.5", "count"),
        ("count=100001", "count"), ("count=99999999999999999999999", "count"), ("count=1e3", "count"),
        ("count=1&count=2", "count"), ("count=1&count=1", "count"),
        ("count=1&foo=1", "foo"), ("foo=bar&count=1", "foo"),
        ("count=1&encoding=b64", "encoding"), ("count=1&encoding=", "encoding"),
        ("count=1&format=xml", "format"), ("count=1&format=", "format"),
        ("count=1&format=json&format=text", "format"), ("count=1&encoding=hex&encoding=dec", "encoding"),
    ]
    for query, param in bad:
        path = f"/v1/ids?{query}"
        r = h.request(port, path)
        err = h.check_error_body(r, 400, f"GET {path}", code="INVALID_ARGUMENT", reason="")
        h.check(param in err["message"], f"GET {path}: the message does not name {param!r}: {err}")
        h.check(b'"ids"' not in r.body, f"GET {path}: IDs in an error: {r.body[:200]!r}")
        n400 += 1
    h.log("bad parameters: 400 each")
    # The same through curl and the C++ client.
    for path in ("/v1/ids?count=0", "/v1/ids?count=abc", "/v1/ids?count=1&foo=1", "/v1/ids?count=1&encoding=b64"):
        h.check_error_body(h.curl(port, path), 400, f"curl {path}", code="INVALID_ARGUMENT")
        n400 += 1
    rs = h.cpp_client(port, ["/v1/ids?count=-1", "/v1/ids?count=1000000000", "/v1/ids?count=1&count=2",
                             "/v1/ids?count=1&format=xml", "/v1/ids/abc"])
    for r, path in zip(rs, ["count=-1", "10^9", "repeated", "format=xml", "/v1/ids/abc"]):
        h.check_error_body(r, 400, f"C++ client {path}", code="INVALID_ARGUMENT")
        n400 += 1

    # Undecodable IDs.
    for path in ("/v1/ids/abc", "/v1/ids/-1", "/v1/ids/12x4", "/v1/ids/9223372036854775808",
                 "/v1/ids/18446744073709551616", "/v1/ids/99999999999999999999999",
                 "/decodeSnowflakeId?snowflakeId=abc", "/decodeSnowflakeId?snowflakeId=",
                 "/decodeSnowflakeId", "/decodeSnowflakeId?snowflakeId=18446744073709551616"):
        h.check_error_body(h.request(port, path), 400, f"GET {path}", code="INVALID_ARGUMENT", reason="")
        n400 += 1
    h.log("undecodable IDs: 400 each")

    # 404 and 405.
    for path in ("/nope", "/v1", "/v1/nope", "/v1/idsx?count=1", "/V1/IDS?count=1", "/api/snowflake",
                 "/v1/ids/1/2", "/readyz/x"):
        h.check_error_body(h.request(port, path), 404, f"GET {path}", code="NOT_FOUND", reason="")
    h.check_error_body(h.curl(port, "/nope"), 404, "curl /nope", code="NOT_FOUND")
    h.check_error_body(h.cpp_client(port, ["/nope"])[0], 404, "C++ client /nope", code="NOT_FOUND")
    # 405 as grpc-gateway maps it: UNIMPLEMENTED, with the HTTP reason beside it.
    not_allowed = {"code": "UNIMPLEMENTED", "reason": "METHOD_NOT_ALLOWED"}
    for method, path in (("POST", "/v1/ids?count=1"), ("PUT", "/v1/layout"), ("DELETE", "/healthz"),
                         ("POST", "/api/snowflake/get/x"), ("PATCH", "/v1/ids/1"), ("DELETE", "/metrics")):
        r = h.request(port, path, method=method, body=b"" if method != "DELETE" else None)
        h.check_error_body(r, 405, f"{method} {path}", **not_allowed)
        h.check(r.headers.get("allow") == "GET, HEAD", f"{method} {path}: Allow {r.headers.get('allow')!r}")
        h.check(b'"ids"' not in r.body, f"{method} {path}: IDs in an error")
    h.check_error_body(h.curl(port, "/v1/ids?count=1", method="POST"), 405, "curl -X POST /v1/ids", **not_allowed)
    h.check_error_body(h.cpp_client(port, ["/v1/ids?count=1"], method="POST")[0], 405, "C++ client POST /v1/ids",
                       **not_allowed)
    h.log("404 and 405 ok")

    # A 64 KiB header: 431.
    s = connect(port)
    s.sendall(b"GET /v1/ids?count=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 65536 + b"\r\n\r\n")
    res = read_response(s)
    h.check(res is not None and res[0] == 431, f"a 64 KiB header: expected 431, got {res}")
    h.check_error_body(h.Response(*res), 431, "a 64 KiB header", code="RESOURCE_EXHAUSTED", reason="HEADER_TOO_LARGE")
    s.close()
    # Many small headers adding up to more than 64 KiB: 431.
    s = connect(port)
    s.sendall(b"GET /v1/ids?count=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
              + b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 60) for i in range(1100)) + b"\r\n")
    res = read_response(s)
    h.check(res is not None and res[0] == 431, f"1100 headers of 64 bytes: expected 431, got {res}")
    s.close()
    # A 64 KiB request target: 414 or 431.
    s = connect(port)
    s.sendall(b"GET /v1/ids?count=1&x=" + b"a" * 65536 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    res = read_response(s)
    h.check(res is not None and res[0] in (414, 431), f"a 64 KiB URL: expected 414 or 431, got {res}")
    s.close()
    h.check_error_body(h.curl(port, "/v1/ids?count=1", extra=["-H", "X-Big: " + "b" * 65536]), 431, "curl 64 KiB header",
                       code="RESOURCE_EXHAUSTED", reason="HEADER_TOO_LARGE")
    h.log("oversized headers: 431")

    # A big body (declared 64 MiB): 413, without reading it all.
    for method in ("POST", "GET"):
        s = connect(port)
        s.sendall(f"{method} /v1/ids?count=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 67108864\r\n\r\n".encode()
                  + b"x" * 1024)
        res = read_response(s)
        h.check(res is not None and res[0] == 413, f"{method} with a 64 MiB body: expected 413, got {res}")
        h.check_error_body(h.Response(*res), 413, f"{method} with a 64 MiB body", code="RESOURCE_EXHAUSTED",
                           reason="BODY_TOO_LARGE")
        s.close()
    # Chunked, 16 MiB in 1 MiB chunks: refused (413, or 405 for the method) or the connection
    # closed, without reading it all.
    s = connect(port, timeout=5.0)
    s.sendall(b"POST /v1/ids?count=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n" % (1 << 20) + b"y" * (1 << 20) + b"\r\n"
    try:
        for _ in range(16):
            s.sendall(chunk)
        s.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        pass  # the server stopped reading
    try:
        res = read_response(s)
        h.check(res is None or res[0] in (405, 413), f"a 16 MiB chunked body: expected 413/405 or close, got {res}")
    except (BrokenPipeError, ConnectionResetError):
        pass
    s.close()
    h.log("big bodies: 413")

    # Non-HTTP byte streams: 400 or the connection closed, never anything else.
    rnd = random.Random(42)
    streams = [
        bytes(rnd.randrange(256) for _ in range(4096)) + b"\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(rnd.randrange(256) for _ in range(500)),  # TLS hello
        b"SSH-2.0-OpenSSH_9.2\r\n\r\n",
        b"\x00" * 1000 + b"\r\n\r\n",
        b"GET\r\n\r\n",
        b"GET / HTTP/1.1 extra\r\n\r\n",
        b"GET /v1/ids?count=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -5\r\n\r\n",
        b"GET /v1/ids?count=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header\r\n\r\n",
        b"*1\r\n$4\r\nPING\r\n",  # RESP
    ]
    for data in streams:
        s = connect(port)
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)  # the end of the stream: no waiting for more bytes
            res = read_response(s)
        except (BrokenPipeError, ConnectionResetError):
            res = None
        h.check(res is None or res[0] == 400, f"non-HTTP bytes {data[:40]!r}: expected 400 or close, got {res}")
        if res is not None:
            h.check(b'"ids"' not in res[2], f"non-HTTP bytes {data[:40]!r}: IDs in the answer")
        s.close()
    h.log("non-HTTP streams: 400 or close")

    # Pipelined requests: answered in order on the same connection.
    s = connect(port)
    s.sendall(b"GET /v1/ids?count=2 HTTP/1.1\r\nHost: localhost\r\n\r\nGET /nope HTTP/1.1\r\nHost: localhost\r\n\r\n"
              b"GET /v1/ids?count=3 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    got = [read_response(s) for _ in range(3)]
    h.check([g[0] if g else None for g in got] == [200, 404, 200], f"pipelined: {[g[0] if g else None for g in got]}")
    import json as _json
    ids = [int(x) for x in _json.loads(got[0][2])["ids"]] + [int(x) for x in _json.loads(got[2][2])["ids"]]
    h.check_increasing(ids, "pipelined", above=last)
    last = ids[-1]
    s.close()

    # While all of that went on, other clients are served, concurrently too.
    errors = []

    def worker():
        try:
            for _ in range(50):
                h.get_ids(port, 100)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=worker) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    h.check(not errors, f"concurrent clients failed next to the bad ones: {errors[:3]}")

    # The idle and half-open clients: with an idle timeout they are closed; either way the server
    # answered everyone else meanwhile.
    if idle:
        wait = max(0.0, t_idle + 2.0 + 5.0 - time.monotonic())
        for i, s in enumerate(idlers + [half, half_body]):
            h.check(closed_by_peer(s, wait + 0.5), f"idle/half-open client {i} not closed within 7 s by {idle}")
        h.log("idle and half-open clients closed by the idle timeout")
    else:
        h.log("no idle-timeout option: only checked that others were served meanwhile")
    for s in idlers + [half, half_body]:
        s.close()

    # After all of it: alive, healthy, ready, the same node, IDs above everything before.
    h.check(srv.alive(), f"the server exited ({srv.proc.returncode})")
    h.check(h.request(port, "/healthz").status == 200, "/healthz after the bad inputs")
    r = h.request(port, "/readyz")
    h.check(r.status == 200 and r.json().get("node") == node, f"/readyz after the bad inputs: {r}")
    ids = h.get_ids(port, 1000)
    h.check_increasing(ids, "after the bad inputs", above=last)
    h.check(all(h.node_of(i) == node for i in ids), "after the bad inputs: IDs of another node")
    r = h.request(port, "/metrics")
    n = h.metric(r.text, "flurry_http_requests_total", {"code": "400"})
    h.check(n is not None and n >= n400, f"/metrics counts {n} requests with code 400, sent at least {n400}")
    h.check(srv.alive(), "the server exited")


h.run_main(main)
