#!/usr/bin/env python3
"""Chunked-body floods cannot grow the server's memory.

One request with Transfer-Encoding: chunked whose framing never ends, sent as fast as the
server takes it, for about 5 s per kind (a new connection whenever the server has answered or
closed one):
1. a chunk-size line that never ends: "1;" then extension bytes without CRLF;
2. a trailer that never ends: the last chunk "0", then trailer fields without the empty line.
The chunk-size lines, chunk extensions and trailer count against header_limit with the header:
each connection must be answered 431 (RESOURCE_EXHAUSTED, HEADER_TOO_LARGE) or 400 and closed,
and the server's RSS must stay within its baseline + 64 MiB throughout (sampled every 50 ms; the
same bound under ASan, whose quarantine is kept small here). Then the flood connections are gone
and the server issues IDs.
3. A slow sender: a chunk-size line that grows by a byte every 100 ms stays under header_limit,
   so the request deadline ends it: with idle_timeout_ms 3000 the request must be complete
   within 3 s, and the connection is closed by then (plus the 250 ms sweep), never answered. Before the fix Beast kept the unfinished line in the input buffer:
RSS grew by about 230 MiB a second (16 -> 2,070 MiB in 9 s), no answer, body_limit no help.

Usage: http_floods.py FLURRY
"""
import os
import select
import socket
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import memlib  # noqa: E402

BOUND_MIB = 64
IDLE_MS = 3000  # the request deadline is min(10 s, idle_timeout_ms)
SECONDS = 5.0
HEAD = b"POST /v1/segments HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
FLOODS = [
    ("chunk-size line", HEAD + b"1;", b"x" * 8192),
    ("trailer", HEAD + b"0\r\n", b"X-Trailer: " + b"t" * 53 + b"\r\n"),
]


def flood_connection(port, start, filler, check_rss):
    """One connection: `start`, then `filler` over and over until the server answers or closes.
    Returns (status or None, bytes sent)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(start)
        s.setblocking(False)
        chunk = filler * max(1, 8192 // len(filler))  # small sends: little piles up unread
        sent, got = len(start), b""
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            readable, writable, _ = select.select([s], [s], [], 0.05)
            check_rss()
            try:
                if readable:
                    data = s.recv(65536)
                    if not data:
                        break
                    got += data
                    if b"\r\n\r\n" in got:
                        break
                if writable:
                    sent += s.send(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
            except BlockingIOError:
                pass
        else:
            h.fail(f"the server neither answered nor closed the connection after {sent} bytes")
        status = int(got.split(b" ", 2)[1]) if got.startswith(b"HTTP/1.1 ") else None
        return status, sent, got
    finally:
        s.close()


def slow_sender(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(HEAD + b"1;")
        t0 = time.monotonic()
        closed_after = None
        while time.monotonic() - t0 < IDLE_MS / 1000 + 5:
            try:
                s.sendall(b"x")
                s.settimeout(0.1)
                data = s.recv(4096)
                h.check(not data, f"the slow sender was answered: {data[:200]!r}")
                closed_after = time.monotonic() - t0
                break
            except socket.timeout:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed_after = time.monotonic() - t0
                break
        h.check(closed_after is not None, f"a slow sender still connected {IDLE_MS / 1000 + 5:.0f} s after it began")
        h.log(f"slow sender: closed after {closed_after:.2f} s (request deadline {IDLE_MS / 1000:.0f} s)")
        h.check(closed_after >= IDLE_MS / 1000 - 0.5,
                f"the slow sender was closed after {closed_after:.2f} s, before the request deadline")
    finally:
        s.close()


def main():
    h.init()
    srv = h.Server("floods", os.path.join(h.WORK, "data"), ["--idle-timeout-ms", str(IDLE_MS)],
                   env=memlib.lean_env()).start()
    port = srv.port
    before = h.get_ids(port, 1000)
    for _ in range(20):  # warm up the paths the floods take
        h.request(port, "/healthz")
    time.sleep(0.3)
    baseline = memlib.rss_mib(srv.pid)
    h.log(f"baseline RSS {baseline:.1f} MiB; bound {baseline + BOUND_MIB:.1f} MiB")
    peak = [baseline]
    last = [0.0]

    def check_rss():
        now = time.monotonic()
        if now - last[0] < 0.05:
            return
        last[0] = now
        h.check(srv.alive(), f"the server exited ({srv.proc.returncode})")
        rss = memlib.rss_mib(srv.pid)
        peak[0] = max(peak[0], rss)
        h.check(rss <= baseline + BOUND_MIB,
                f"server RSS {rss:.1f} MiB passed the baseline {baseline:.1f} + {BOUND_MIB} MiB")

    for name, start, filler in FLOODS:
        t0 = time.monotonic()
        connections, sent_total, statuses = 0, 0, {}
        while time.monotonic() - t0 < SECONDS:
            status, sent, got = flood_connection(port, start, filler, check_rss)
            connections += 1
            sent_total += sent
            statuses[status] = statuses.get(status, 0) + 1
            h.check(status in (431, 400, None), f"{name}: unexpected answer {got[:300]!r}")
            if status == 431 and connections == 1:
                r = h.Response(431, {}, got.split(b"\r\n\r\n", 1)[1])
                err = h.check_error_body(r, 431, name, code="RESOURCE_EXHAUSTED", reason="HEADER_TOO_LARGE")
                h.check("header_limit" in err["message"], f"{name}: the message does not name header_limit: {err}")
        h.log(f"{name}: {connections} connections, {sent_total / 2**20:.1f} MiB sent in "
              f"{time.monotonic() - t0:.1f} s, answers {statuses}, peak RSS {peak[0]:.1f} MiB")
        h.check(statuses.get(431, 0) + statuses.get(400, 0) > 0, f"{name}: never answered 431 or 400: {statuses}")

    slow_sender(port)

    # The flood connections are gone (lingering ends within 2 s) and the server still serves.
    deadline = time.monotonic() + 10
    while True:
        open_now = h.metric(h.request(port, "/metrics").text, "flurry_http_connections")
        if open_now is not None and open_now <= 1:
            break
        h.check(time.monotonic() < deadline, f"{open_now} connections still open 10 s after the floods")
        time.sleep(0.1)
    rss = memlib.rss_mib(srv.pid)
    h.log(f"after the floods: RSS {rss:.1f} MiB (baseline {baseline:.1f}, peak {peak[0]:.1f})")
    h.check(rss <= baseline + BOUND_MIB, f"RSS {rss:.1f} MiB after the floods")
    h.check_increasing(h.get_ids(port, 1000), "after the floods", above=before[-1])
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc} after SIGTERM")


h.run_main(main)
