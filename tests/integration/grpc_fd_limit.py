#!/usr/bin/python3
"""Idle gRPC connections against the descriptor limit.

The server runs with gRPC under `prlimit --nofile=1024:1024` and --lease-ttl-ms 2000. 1,100 idle
TCP connections are opened to its gRPC port and held for three lease TTLs, while /readyz is asked
every 100 ms. gRPC's connections count against the same descriptor budget as HTTP's: none may
take a descriptor among the top ones the server keeps for its registry, lease keeper and files,
so the server must refuse (close at once) those beyond it (flurry_grpc_connections_rejected_total),
keep answering /readyz 200 in well under a second, and keep its lease (no lease_suspended,
lease_lost or renewal failures in its log). Once they are closed, gRPC serves again.

Before the change gRPC took every descriptor: the lease renewal was suspended and /readyz timed
out while the connections were held.

Usage: grpc_fd_limit.py FLURRY PYTHON_STUBS
"""
import os
import re
import resource
import shutil
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpclib as g  # noqa: E402

h = g.init()
pb = g.pb

LIMIT = 1024
CONNECTIONS = 1100
TTL_MS = 2000


def main():
    prlimit = shutil.which("prlimit")
    h.check(prlimit is not None, "prlimit (util-linux) is not installed")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = CONNECTIONS + 256
    if soft != resource.RLIM_INFINITY and soft < want:
        h.check(hard == resource.RLIM_INFINITY or hard >= want,
                f"the test needs {want} descriptors, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    srv, gport = g.start("fd", os.path.join(h.WORK, "data"), ["--lease-ttl-ms", str(TTL_MS)],
                         wrapper=[prlimit, f"--nofile={LIMIT}:{LIMIT}", "--"])
    stub = g.ids(gport)
    h.check(stub.Layout(pb.LayoutRequest(), timeout=10).layout, "no layout over gRPC")

    # /readyz every 100 ms on fresh connections while the flood is held.
    slow = []
    failures = []
    stop = threading.Event()

    def prober():
        while not stop.is_set():
            try:
                r, took = h.timed_request(srv.port, "/readyz", timeout=5)
                if r.status != 200:
                    failures.append(r.status)
                slow.append(took)
            except OSError as e:
                failures.append(repr(e))
            time.sleep(0.1)

    probe = threading.Thread(target=prober, daemon=True)
    probe.start()
    socks = []
    for _ in range(CONNECTIONS):
        socks.append(socket.create_connection(("127.0.0.1", gport), timeout=5))
    h.log(f"{len(socks)} idle gRPC connections open; holding them for {3 * TTL_MS} ms")
    time.sleep(3 * TTL_MS / 1000 + 0.5)
    stop.set()
    probe.join()

    closed = 0
    for s in socks:
        s.setblocking(False)
        try:
            if not s.recv(65536):
                closed += 1
        except BlockingIOError:
            pass
        except ConnectionResetError:
            closed += 1
    try:
        rejected = h.metric(h.request(srv.port, "/metrics", timeout=5).text,
                            "flurry_grpc_connections_rejected_total")
    except OSError as e:
        rejected = None
        failures.append(f"/metrics: {e!r}")
    worst = max(slow) if slow else None
    h.log(f"closed by the server: {closed}; flurry_grpc_connections_rejected_total {rejected}; "
          f"/readyz {len(slow)} answers, slowest {worst * 1000 if worst else 0:.1f} ms, "
          f"{len(failures)} failures")
    h.check(srv.alive(), f"the server exited ({srv.proc.returncode})")
    h.check(not failures, f"/readyz failed while the connections were held: {failures[:5]}")
    h.check(worst is not None and worst < 1.0, f"/readyz took {worst} s while the connections were held")
    bad = re.findall(r".*event=(?:lease_suspended|lease_lost|lease_renewal_failed|lease_reclaiming|"
                     r"horizon_save_failed|accept_failed|grpc_accept_failed).*", srv.log_text())
    h.check(not bad, "while the connections were held: " + " | ".join(bad[:5]))
    h.check(rejected is not None and rejected >= CONNECTIONS - LIMIT,
            f"flurry_grpc_connections_rejected_total {rejected}, expected at least {CONNECTIONS - LIMIT}")
    h.check(closed >= CONNECTIONS - LIMIT, f"only {closed} of {CONNECTIONS} connections were closed")

    for s in socks:
        s.close()
    socks.clear()
    got = h.wait_for(lambda: _layout(gport), "gRPC to serve again after the connections closed",
                     timeout=15, period=0.2)
    h.check(got, "no layout")
    ids = h.get_ids(srv.port, 1000)
    h.check_increasing(ids, "after the connections closed")
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc} after SIGTERM")
    h.check("event=lease_released" in srv.log_text(), "the lease was not released at the stop")


def _layout(port):
    ch = g.grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
    try:
        return g.rpc.IdsStub(ch).Layout(pb.LayoutRequest(), timeout=2).layout
    except g.grpc.RpcError:
        return None
    finally:
        ch.close()


if __name__ == "__main__":
    h.run_main(main)
