#!/usr/bin/env python3
"""Clients that never read cannot keep the response budget from a client that does.

The server runs on its default response_budget (64 MiB) with a layout of 18 sequence bits. 4
connections with a 4 KiB receive buffer each ask for 1,000,000 IDs (about 22 MB of JSON, far
more than the kernel's socket buffers take) and never read: the first few hold the budget. After
1.5 s another client asks for 1,000,000 IDs five times on one connection and reads them. Every one of its answers must be 200 with its IDs: a
response stalled for a second or more is dropped (its connection closed, counted in
flurry_http_response_budget_evictions_total) when the budget cannot hold a new one. Then the
never-reading connections are read: each has ended (closed, without or with a cut response) or
holds a whole answer; the server holds no response bytes afterwards and is still ready.

Before the change the stalled responses held the budget until the request deadline (10 s) and
every large answer of the other client was 503 RESPONSE_BUDGET.

Usage: response_fair_share.py FLURRY
"""
import http.client
import json
import os
import socket
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

STALLED = 4
COUNT = 1_000_000
ROUNDS = 5
LAYOUT = "time:39@1ms,node:6,seq:18;epoch=2025-01-01Z"


def slow_reader(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    return s


def read_all(s):
    """(status, body) of the one response on `s`, or (None, None) when the server closed the
    connection before the whole response came."""
    s.settimeout(30)
    buf = b""
    try:
        while True:
            if b"\r\n\r\n" in buf:
                head, body = buf.split(b"\r\n\r\n", 1)
                length = None
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    k, _, v = line.partition(":")
                    if k.strip().lower() == "content-length":
                        length = int(v)
                if length is not None and len(body) >= length:
                    return int(head.split()[1]), body[:length]
            chunk = s.recv(1 << 20)
            if not chunk:
                return None, None
            buf += chunk
    except ConnectionResetError:
        return None, None


def main():
    h.init()
    srv = h.Server("fair", os.path.join(h.WORK, "data"),
                   ["--layout", LAYOUT, "--max-batch", str(COUNT)]).start()
    port = srv.port
    socks = [slow_reader(port) for _ in range(STALLED)]
    for s in socks:
        s.sendall(f"GET /v1/ids?count={COUNT} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    time.sleep(1.5)
    held = h.metric(h.request(port, "/metrics").text, "flurry_http_response_bytes")
    h.log(f"{STALLED} never-reading connections hold {held / 2**20:.1f} MiB of the response budget")
    h.check(held > (32 << 20), f"the stalled responses hold only {held} bytes: the test does not fill the budget")

    # Another client, reading its answers.
    got = []
    statuses = []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    t0 = time.monotonic()
    for _ in range(ROUNDS):
        conn.request("GET", f"/v1/ids?count={COUNT}")
        r = conn.getresponse()
        body = r.read()
        statuses.append(r.status)
        if r.status == 200:
            got.extend(json.loads(body)["ids"])
    conn.close()
    h.log(f"the reading client: {statuses.count(200)} of {ROUNDS} answers 200 ({statuses}) in "
          f"{time.monotonic() - t0:.2f} s")
    h.check(statuses == [200] * ROUNDS, f"the reading client got {statuses}")
    h.check(len(got) == ROUNDS * COUNT and len(set(got)) == len(got), "IDs missing or repeated")
    text = h.request(port, "/metrics").text
    evictions = h.metric(text, "flurry_http_response_budget_evictions_total")
    h.log(f"flurry_http_response_budget_evictions_total {evictions}")
    h.check(evictions is not None and evictions >= 1, "no stalled response was dropped")

    # The never-reading connections: closed by the server (with nothing or a cut response), or
    # holding a whole answer.
    closed = whole = 0
    seen = set(got)
    for s in socks:
        status, body = read_all(s)
        if status is None:
            closed += 1
        else:
            whole += 1
            if status == 200:
                ids = json.loads(body)["ids"]
                h.check(not seen.intersection(ids), "a stalled connection's IDs repeat the reader's")
                seen.update(ids)
        s.close()
    h.log(f"never-reading connections: {closed} closed by the server, {whole} answered whole")
    h.check(closed >= evictions, f"{closed} connections closed, {evictions} evicted")
    h.wait_for(lambda: h.metric(h.request(port, "/metrics").text, "flurry_http_response_bytes") == 0,
               "the response budget to be free again", timeout=15)
    r = h.request(port, "/readyz")
    h.check(r.status == 200, f"/readyz {r.status} afterwards")
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc} after SIGTERM")


if __name__ == "__main__":
    h.run_main(main)
