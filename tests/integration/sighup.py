#!/usr/bin/env python3
"""SIGHUP is logged and ignored: the server keeps serving, keeps its lease and node ID, and a
later SIGTERM still stops it gracefully (exit 0, lease released, a restart gets the same node at
once). Before the fix SIGHUP's default action killed the process without draining, leaving its
lease held until the TTL ran out.

Usage: sighup.py FLURRY
"""
import http.client
import os
import signal
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def main():
    h.init()
    data = os.path.join(h.WORK, "data")
    srv = h.Server("hup", data).start()
    port, node = srv.port, srv.node
    keep = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    ids = h.get_ids(port, 100, conn=keep)

    for i in range(3):
        os.kill(srv.pid, signal.SIGHUP)
        time.sleep(0.3)
        h.check(srv.alive(), f"the server exited ({srv.proc.returncode}) after SIGHUP #{i + 1}")
        more = h.get_ids(port, 100, conn=keep if i % 2 == 0 else None)
        h.check_increasing(ids + more, f"IDs after SIGHUP #{i + 1}")
        ids += more
        r = h.request(port, "/readyz")
        h.check(r.status == 200 and r.json().get("node") == node, f"/readyz after SIGHUP #{i + 1}: {r}")
    n = srv.log_text().count("event=sighup action=ignored")
    h.check(n == 3, f"the log shows {n} lines event=sighup action=ignored, expected 3")
    h.check("event=shutdown" not in srv.log_text(), "SIGHUP started a shutdown")
    keep.close()
    h.log("SIGHUP x3: logged, ignored, still serving on the same node")

    rc, took = srv.stop(signal.SIGTERM)
    h.check(rc == 0, f"exit code {rc} after SIGTERM (following SIGHUPs)")
    log = srv.log_text()
    h.check("event=lease_released" in log, "SIGTERM after SIGHUP: the lease was not released")
    h.log(f"SIGTERM after the SIGHUPs: exit 0 in {took:.2f} s, lease released")

    # The lease was released: a new process gets the same node at once (the TTL is 10 s).
    again = h.Server("hup2", data).start(timeout=5)
    h.check(again.node == node, f"restart got node {again.node}, not {node}: the lease was still held")
    h.check_increasing(ids + h.get_ids(again.port, 10), "IDs after the restart")
    rc, _ = again.stop()
    h.check(rc == 0, f"the restarted server exited {rc}")


h.run_main(main)
