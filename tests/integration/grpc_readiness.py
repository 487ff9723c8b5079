#!/usr/bin/python3
"""grpc.health.v1 of the real `flurry serve` follows readiness, and a graceful stop:

  * the registry held locked by another process (as registry_locked.py does): /readyz turns 503,
    and the health of "" and "flurry.v1.Ids" turns NOT_SERVING within a second of it (Watch and
    Check), Ids.Next answers UNAVAILABLE with a reason and retry-after-ms; once unlocked, SERVING
    again;
  * SIGTERM: a Watch stream hears NOT_SERVING before the gRPC port closes, and the process exits 0.

Usage: grpc_readiness.py FLURRY PYTHON_STUBS
"""
import os
import socket
import sqlite3
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpclib as g  # noqa: E402

h = g.init()
pb = g.pb
HPB = g.health_pb
SERVING = HPB.HealthCheckResponse.SERVING
NOT_SERVING = HPB.HealthCheckResponse.NOT_SERVING
TTL_MS = 1500


class Watcher:
    """A Watch stream in a thread; records (monotonic time, status) of every update."""

    def __init__(self, port, service):
        self.events = []
        self.ended_at = None
        self.call = g.health(port).Watch(HPB.HealthCheckRequest(service=service))
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        try:
            for r in self.call:
                self.events.append((time.monotonic(), r.status))
        except g.grpc.RpcError:
            pass
        self.ended_at = time.monotonic()

    def first(self, status, after=0.0):
        for t, s in self.events:
            if s == status and t >= after:
                return t
        return None


def port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def readiness(srv, port):
    data = srv.data_dir
    watchers = {s: Watcher(port, s) for s in ("", "flurry.v1.Ids")}
    h.wait_for(lambda: all(w.first(SERVING) for w in watchers.values()), "Watch to say SERVING", 10)
    locker = sqlite3.connect(os.path.join(data, "registry.db"), timeout=10, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    locked_at = time.monotonic()
    h.log("registry.db locked")

    def readyz_503():
        try:
            return h.request(srv.port, "/readyz", timeout=2).status == 503 and time.monotonic()
        except OSError:
            return False
    not_ready_at = h.wait_for(readyz_503, "/readyz to turn 503 with the registry locked", 20, period=0.01)
    h.log(f"/readyz 503 {not_ready_at - locked_at:.2f} s after the lock")
    for service, w in watchers.items():
        t = h.wait_for(lambda: w.first(NOT_SERVING), f"Watch({service!r}) to say NOT_SERVING", 5)
        h.check(t - not_ready_at <= 1.0,
                f"Watch({service!r}) said NOT_SERVING {t - not_ready_at:.2f} s after /readyz turned 503")
        st = g.health(port).Check(HPB.HealthCheckRequest(service=service)).status
        h.check(st == NOT_SERVING, f"Check({service!r}) says {st} while /readyz is 503")
    g.expect_error("Next while not ready", lambda: g.ids(port).Next(pb.NextRequest(count=1)),
                   g.grpc.StatusCode.UNAVAILABLE, h.request(srv.port, "/readyz").json()["reason"], retry=True)
    locker.execute("ROLLBACK")
    locker.close()
    unlocked_at = time.monotonic()
    h.log("registry.db unlocked")
    for service, w in watchers.items():
        t = h.wait_for(lambda: w.first(SERVING, after=unlocked_at), f"Watch({service!r}) to say SERVING again", 20)
        h.log(f"Watch({service!r}) SERVING again {t - unlocked_at:.2f} s after the unlock")
    h.check(h.request(srv.port, "/readyz").status == 200, "/readyz not 200 while health says SERVING")
    h.check(len(g.ids(port).Next(pb.NextRequest(count=10)).ids) == 10, "Next after the recovery")
    for w in watchers.values():
        w.call.cancel()


def sigterm(srv, port):
    w = Watcher(port, "")
    h.wait_for(lambda: w.first(SERVING), "Watch to say SERVING", 10)
    # An open Stream keeps the drain going for a while: the port stays open after NOT_SERVING.
    stream_requests = threading.Event()

    def requests():
        yield pb.NextRequest(count=1)
        stream_requests.wait(10)
    stream = g.ids(port).Stream(requests())
    h.check(len(next(stream).ids) == 1, "the open Stream's first answer")
    sent_at = time.monotonic()
    os.kill(srv.pid, 15)
    closed_at = h.wait_for(lambda: (not port_open(port)) and time.monotonic(), "the gRPC port to close", 15,
                           period=0.005)
    stream_requests.set()
    rc = srv.proc.wait(15)
    h.check(rc == 0, f"exit code {rc} after SIGTERM")
    t = w.first(NOT_SERVING)
    h.check(t is not None, f"Watch heard no NOT_SERVING before the stream ended: {w.events}")
    h.log(f"SIGTERM: NOT_SERVING after {t - sent_at:.3f} s, port closed after {closed_at - sent_at:.3f} s")
    h.check(t <= closed_at, "the gRPC port closed before health said NOT_SERVING")


def main():
    srv, port = g.start("health", os.path.join(h.WORK, "data"), ["--lease-ttl-ms", str(TTL_MS)])
    readiness(srv, port)
    sigterm(srv, port)


h.run_main(main)
