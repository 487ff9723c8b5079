#!/usr/bin/env python3
"""max_connections against the descriptor limit.

The server runs under `prlimit --nofile=1024:1024` (util-linux) with --lease-ttl-ms 2000 and the
default max_connections (10000). At start it must raise its soft RLIMIT_NOFILE as far as the hard
limit allows (here it cannot: 1024:1024), cap max_connections at the limit minus its reserve of
descriptors, and log both (event=fd_limit ... max_connections=N, and a warning that it lowered the
configured value). Then 1,100 idle keep-alive connections are opened and held for three lease
TTLs: the server must keep its registry usable (no lease_suspended / lease_lost / renewal
failures in its log, no accept failures for want of descriptors), and count the connections it
refused in flurry_http_connections_rejected_total. Once they are closed it is ready and issues IDs.
Before the fix the connections took every descriptor, the registry could not be opened and the
lease was suspended (IDs answered 503).

Usage: fd_limit.py FLURRY
"""
import os
import re
import resource
import shutil
import socket
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

LIMIT = 1024
CONNECTIONS = 1100
TTL_MS = 2000


def main():
    h.init()
    prlimit = shutil.which("prlimit")
    h.check(prlimit is not None, "prlimit (util-linux) is not installed")
    # The test itself holds 1,100 sockets and more.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = CONNECTIONS + 256
    if soft != resource.RLIM_INFINITY and soft < want:
        h.check(hard == resource.RLIM_INFINITY or hard >= want,
                f"the test needs {want} descriptors, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    srv = h.Server("fd", os.path.join(h.WORK, "data"), ["--lease-ttl-ms", str(TTL_MS)],
                   wrapper=[prlimit, f"--nofile={LIMIT}:{LIMIT}", "--"]).start()
    port = srv.port
    before = h.get_ids(srv.port, 100)
    m = h.wait_log(srv, r"event=fd_limit soft=(\d+) hard=(\d+) max_connections=(\d+) configured=(\d+)")
    soft_s, hard_s, effective, configured = (int(x) for x in m.groups())
    h.log(f"server log: soft={soft_s} hard={hard_s} max_connections={effective} configured={configured}")
    h.check(soft_s == LIMIT and hard_s == LIMIT, f"the server reports limits {soft_s}:{hard_s}, expected {LIMIT}:{LIMIT}")
    h.check(configured == 10000, f"configured max_connections {configured}, expected the default 10000")
    h.check(effective < LIMIT - 64, f"effective max_connections {effective} leaves too few descriptors under {LIMIT}")
    h.check(effective >= LIMIT // 2, f"effective max_connections {effective} is needlessly low for {LIMIT} descriptors")
    h.check(re.search(r" warn\w* event=max_connections_lowered max_connections=%d configured=10000" % effective, srv.log_text()),
            "no warning that max_connections was lowered")

    # 1,100 idle keep-alive connections, a request on some of them.
    socks = []
    for i in range(CONNECTIONS):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        socks.append(s)
    for s in socks[:50]:
        try:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        except OSError:
            pass
    h.log(f"{len(socks)} connections open; holding them for {3 * TTL_MS} ms")
    time.sleep(3 * TTL_MS / 1000 + 0.5)

    # The server refused those beyond its limit (closed at once): count what the client sees.
    closed = 0
    for s in socks:
        s.setblocking(False)
        try:
            data = s.recv(65536)
            if not data:
                closed += 1
        except BlockingIOError:
            pass
        except ConnectionResetError:
            closed += 1
    h.log(f"connections closed by the server: {closed}")
    h.check(srv.alive(), f"the server exited ({srv.proc.returncode})")
    log = srv.log_text()
    bad = re.findall(r".*event=(?:lease_suspended|lease_lost|lease_renewal_failed|lease_reclaiming|"
                     r"horizon_save_failed|accept_failed).*", log)
    h.check(not bad, "while the connections were held: " + " | ".join(bad[:5]))
    h.check(closed >= CONNECTIONS - effective,
            f"only {closed} of {CONNECTIONS} connections were closed, max_connections is {effective}")

    for s in socks:
        s.close()
    socks.clear()
    deadline = time.monotonic() + 10
    while True:
        try:
            r = h.request(port, "/readyz", timeout=2)
            if r.status == 200:
                break
        except OSError:
            pass
        h.check(time.monotonic() < deadline, "/readyz not 200 within 10 s of closing the connections")
        time.sleep(0.05)
    ids = h.get_ids(port, 1000)
    h.check_increasing(ids, "after the connections closed", above=before[-1])
    r = h.request(port, "/metrics")
    rejected = h.metric(r.text, "flurry_http_connections_rejected_total")
    h.log(f"flurry_http_connections_rejected_total {rejected}")
    h.check(rejected is not None and rejected >= CONNECTIONS - effective,
            f"flurry_http_connections_rejected_total {rejected}, expected at least {CONNECTIONS - effective}")
    log = srv.log_text()
    bad = re.findall(r".*event=(?:lease_suspended|lease_lost|lease_renewal_failed|accept_failed).*", log)
    h.check(not bad, "after the connections: " + " | ".join(bad[:5]))
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc} after SIGTERM")
    h.check("event=lease_released" in srv.log_text(), "the lease was not released at the stop")


h.run_main(main)
