#!/usr/bin/env python3
"""A registry damaged while the server is stopped: the restart never goes below earlier IDs.

Each variant runs a server, takes IDs, stops it (SIGTERM, or kill -9), damages the registry in
one way and restarts on the same data directory:
  * zero:  registry.db truncated to zero length (and its write-ahead log removed);
  * row:   the node's row deleted;
  * table: the nodes table dropped;
  * file:  registry.db and its -wal/-shm files removed.
The host-local horizon copy (DATA_DIR/local-horizons) must make the restart start above every
earlier ID and say why: an error log event=registry_regressed naming the node, and the
flurry_registry_regressions_total counter.

Last, the case that was seen in the field: a server that ran with its clock an hour ahead
(libfaketime), then a zero-length registry and a restart with the right clock. Before the fix it
started fresh and issued IDs an hour below its earlier ones; now it must refuse to start (exit
code != 0) with a message about the clock, after logging the regression, and issue nothing.

Usage: registry_stopped.py FLURRY
"""
import os
import signal
import sqlite3
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402



def remove_wal(db):
    for suffix in ("-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.unlink(db + suffix)


def damage(kind, db):
    if kind == "zero":
        remove_wal(db)
        with open(db, "wb"):
            pass
    elif kind == "row":
        with sqlite3.connect(db) as c:
            c.execute("DELETE FROM nodes WHERE node = 0")
    elif kind == "table":
        with sqlite3.connect(db) as c:
            c.execute("DROP TABLE nodes")
    elif kind == "file":
        os.unlink(db)
        remove_wal(db)
    else:
        h.fail(f"unknown damage {kind}")


def variant(kind, sig):
    data = os.path.join(h.WORK, kind)
    db = os.path.join(data, "registry.db")
    a = h.Server(f"{kind}-1", data).start()
    h.check(a.node == 0, f"{kind}: first server on node {a.node}")
    before = h.get_ids(a.port, 100_000)
    # IDs up to max_lead ahead of the clock: the horizon written to the registry is ahead too.
    for _ in range(20):
        before += h.get_ids(a.port, 100_000)
    if sig == signal.SIGKILL:
        a.kill()
    else:
        rc, _ = a.stop(sig)
        h.check(rc == 0, f"{kind}: exit code {rc}")
    damage(kind, db)
    b = h.Server(f"{kind}-2", data).start(timeout=20)
    after = h.get_ids(b.port, 10_000)
    h.check(b.node == 0, f"{kind}: restart on node {b.node}")
    h.check(after[0] > max(before),
            f"{kind}: after the restart {after[0]} is not above the earlier {max(before)}")
    log = b.log_text()
    h.check(" error event=registry_regressed node=0" in log,
            f"{kind}: the restart did not log the regression as an error")
    n = h.metric(h.request(b.port, "/metrics").text, "flurry_registry_regressions_total")
    h.check(n == 1, f"{kind}: flurry_registry_regressions_total is {n}")
    rc, _ = b.stop()
    h.check(rc == 0, f"{kind}: exit code {rc} of the restarted server")
    h.log(f"{kind} ({signal.Signals(sig).name}): restart above every earlier ID, regression logged")


def clock_jump():
    data = os.path.join(h.WORK, "jump")
    env = h.fixed_offset_env("+1h")
    a = h.Server("jump-1", data, env=env).start()
    before = h.get_ids(a.port, 10_000)
    rc, _ = a.stop()
    h.check(rc == 0, f"jump: exit code {rc}")
    damage("zero", os.path.join(data, "registry.db"))
    b = h.Server("jump-2", data).launch()
    try:
        rc = b.proc.wait(30)
    except subprocess.TimeoutExpired:
        h.fail("jump: the restart with the clock an hour behind its earlier IDs did not exit")
    log = b.log_text()
    h.check(rc != 0, f"jump: the restart exited {rc}, expected a refusal")
    h.check(" error event=registry_regressed node=0" in log, "jump: the regression was not logged")
    h.check("refusing to start" in log and "ahead of the clock" in log,
            f"jump: the refusal does not say the clock is behind: {log[-600:]}")
    h.check('"/v1/ids' not in log, "jump: requests were served")
    h.log(f"jump: refused to start an hour below {len(before)} earlier IDs, and said why")


def main():
    h.init()
    variant("zero", signal.SIGTERM)
    variant("row", signal.SIGKILL)
    variant("table", signal.SIGTERM)
    variant("file", signal.SIGKILL)
    clock_jump()


if __name__ == "__main__":
    h.run_main(main)
