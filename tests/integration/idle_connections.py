#!/usr/bin/env python3
"""Idle keep-alive connections hold a few KiB each, whatever they were answered before.

3,000 keep-alive connections are each answered once with GET /v1/ids?count=40000 (about 880 KB
of JSON; a few requests at a time, each response read whole and checked), then left idle. While
they are idle the server's RSS must stay within its baseline + 128 MiB (under ASan too: its
quarantine is kept small here), checked after every 100 answers and twice while idle, and all
3,000 stay open. The layout has 18 sequence bits so the 120 million IDs take well under a second
of ID time. The test raises its own descriptor limit; the server raises its soft limit itself.
Before the fix each connection kept its response buffer (up to 1 MiB): 1,000 idle connections
held 751 MiB, 3,000 would hold about 2.6 GiB.

Usage: idle_connections.py FLURRY
"""
import os
import resource
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import memlib  # noqa: E402

CONNECTIONS = 3000
COUNT = 40000
BOUND_MIB = 128
CLIENT_THREADS = 4
LAYOUT = "time:39@1ms,node:6,seq:18;epoch=2025-01-01Z"
REQUEST = f"GET /v1/ids?count={COUNT} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()


def read_response(sock):
    """Reads one response with Content-Length; returns (status, body)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        h.check(data, "the server closed a connection before its response")
        buf += data
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    length = None
    for line in lines[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == "content-length":
            length = int(v)
    h.check(length is not None, f"no Content-Length: {head!r}")
    body = bytearray(length)
    view = memoryview(body)
    n = min(len(rest), length)
    view[:n] = rest[:n]
    while n < length:
        got = sock.recv_into(view[n:], length - n)
        h.check(got > 0, "the server closed a connection in the middle of a response")
        n += got
    return status, bytes(body)


def main():
    h.init()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = CONNECTIONS + 256
    if soft != resource.RLIM_INFINITY and soft < want:
        h.check(hard == resource.RLIM_INFINITY or hard >= want,
                f"the test needs {want} descriptors, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    srv = h.Server("idle", os.path.join(h.WORK, "data"), ["--layout", LAYOUT], env=memlib.lean_env()).start()
    port = srv.port
    m = h.wait_log(srv, r"event=fd_limit soft=\d+ hard=\d+ max_connections=(\d+)")
    h.check(int(m.group(1)) >= CONNECTIONS + 10,
            f"the server allows only {m.group(1)} connections (descriptor limit); the test needs {CONNECTIONS}")
    h.get_ids(port, COUNT)  # warm up: the scratch buffers of a batch this size
    time.sleep(0.3)
    baseline = memlib.rss_mib(srv.pid)
    h.log(f"baseline RSS {baseline:.1f} MiB; bound {baseline + BOUND_MIB:.1f} MiB")

    socks = []
    for _ in range(CONNECTIONS):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        socks.append(s)
    h.log(f"{CONNECTIONS} connections open")

    answered = [0]
    errors = []
    lock = threading.Lock()
    stop = threading.Event()

    def worker(mine):
        try:
            for s in mine:
                if stop.is_set():
                    return
                s.sendall(REQUEST)
                status, body = read_response(s)
                h.check(status == 200, f"count={COUNT}: status {status}: {body[:300]!r}")
                h.check(body.startswith(b'{"ids":["') and body.endswith(b'"]}\n') and body.count(b",") == COUNT - 1,
                        f"count={COUNT}: not {COUNT} IDs: {body[:100]!r}...{body[-100:]!r}")
                with lock:
                    answered[0] += 1
        except Exception as e:  # reported by the main thread
            errors.append(e)
            stop.set()

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker, args=(socks[i::CLIENT_THREADS],)) for i in range(CLIENT_THREADS)]
    for t in threads:
        t.start()
    peak = baseline
    checked = 0
    while any(t.is_alive() for t in threads):
        time.sleep(0.02)
        if answered[0] >= checked + 100 or not any(t.is_alive() for t in threads):
            checked = answered[0]
            h.check(srv.alive(), f"the server exited ({srv.proc.returncode})")
            rss = memlib.rss_mib(srv.pid)
            peak = max(peak, rss)
            if rss > baseline + BOUND_MIB:
                stop.set()
                for t in threads:
                    t.join()
                h.fail(f"after {answered[0]} answers the server's RSS is {rss:.1f} MiB, over the baseline "
                       f"{baseline:.1f} + {BOUND_MIB} MiB")
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    h.check(answered[0] == CONNECTIONS, f"{answered[0]} of {CONNECTIONS} answered")
    h.log(f"{CONNECTIONS} responses of {COUNT} IDs in {time.monotonic() - t0:.1f} s; peak RSS {peak:.1f} MiB")

    # Idle now: every connection still open, the server's memory back within the bound.
    for wait in (1.0, 2.0):
        time.sleep(wait)
        rss = memlib.rss_mib(srv.pid)
        open_now = h.metric(h.request(port, "/metrics").text, "flurry_http_connections")
        h.log(f"idle: RSS {rss:.1f} MiB, {open_now:.0f} connections open")
        h.check(open_now is not None and open_now >= CONNECTIONS,
                f"only {open_now} connections open; the server closed idle ones")
        h.check(rss <= baseline + BOUND_MIB,
                f"{CONNECTIONS} idle connections: RSS {rss:.1f} MiB, over the baseline {baseline:.1f} + {BOUND_MIB} MiB")
    # They still work.
    for s in socks[:10]:
        s.sendall(b"GET /v1/ids?count=3 HTTP/1.1\r\nHost: localhost\r\n\r\n")
        status, _ = read_response(s)
        h.check(status == 200, f"an idle connection's next request: {status}")
    for s in socks:
        s.close()
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc} after SIGTERM")


h.run_main(main)
