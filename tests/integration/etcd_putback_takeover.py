#!/usr/bin/env python3
"""A horizon put back by hand whose holder dies before repairing it must not lead the next owner
below IDs already issued (the one rollback the etcd registry could not see before it read the
horizon key's history).

A holder on `--registry etcd` serves three keep-alive clients that loop on
/v1/ids?count=100000, so it runs up to max_lead ahead of its clock. One second in, the value of its
horizon key is read (as `etcdctl get` or a snapshot would); two seconds later that old value is
put back (`etcdctl put`) and the holder is killed with SIGKILL right after, before it can repair
the key. A second server on another host (its own data directory and host-wide directory: no
host-local copy of the node's horizon to fall back on), whose clock is 6 s behind (libfaketime),
waits for the holder's lease to expire and takes its node ID over under load.

Without the history, it inherits the put-back horizon and its lagging clock makes it issue again
IDs the holder issued: about 10M duplicates of 50M in a run before the fix. With it, the claim
takes the highest horizon among every version of the key etcd retains: every ID of the new owner
is above every ID of the holder, and no run of IDs overlaps another.

Usage: etcd_putback_takeover.py FLURRY
"""
import base64
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
from etcd_registry import Etcd  # noqa: E402
from registry_regression import start_load  # noqa: E402

CLUSTER = "putback"
TTL_MS = 3000
READ_AT_S = 1.0
PUT_BACK_AT_S = 3.0
LAG = "-6s"
TAKEOVER_RUN_S = 6.0


def put(etcd, key, value):
    etcd.post("/v3/kv/put", {"key": base64.b64encode(key.encode()).decode(),
                             "value": base64.b64encode(value.encode()).decode()})


def stop_load(stop, threads):
    stop.set()
    for t in threads:
        t.join(60)


def main():
    h.init()
    h.check_libfaketime()
    etcd = Etcd().start()
    args = ["--registry", "etcd", "--etcd-endpoints", etcd.endpoint, "--cluster", CLUSTER,
            "--lease-ttl-ms", str(TTL_MS)]
    holder = h.Server("holder", os.path.join(h.WORK, "holder"), args).start()
    node = holder.node
    key = f"/flurry/{CLUSTER}/horizon/{node}"
    col, stop, _, threads = start_load(holder.port)
    t0 = time.monotonic()
    time.sleep(READ_AT_S)
    old = etcd.range(key)
    h.check(old is not None, f"no horizon key {key} after {READ_AT_S} s")
    time.sleep(PUT_BACK_AT_S - (time.monotonic() - t0))
    put(etcd, key, old[0])
    holder.kill()  # SIGKILL: no repair, no release; its lease runs out in etcd
    stop_load(stop, threads)
    h.check(not col.errors, f"holder: {col.errors[:5]}")
    h.check(col.ids > 0, "the holder issued no ID")
    holder_max = max(hi for n, _, hi in col.runs if n == node)
    h.log(f"holder (node {node}) issued {col.ids} IDs; horizon put back, holder killed "
          f"{time.monotonic() - t0:.2f} s in")

    # The holder's lease runs out in etcd (TTL, plus up to about a second for the leader's check).
    deadline = time.monotonic() + TTL_MS / 1000 + 10
    while etcd.range(f"/flurry/{CLUSTER}/nodes/{node}") is not None:
        h.check(time.monotonic() < deadline, f"node {node}'s key outlived the holder's lease")
        time.sleep(0.05)
    # Another host: its own host-wide directory and host-guard scope (no host-wide record of the
    # node to fall back on), and a clock 6 s behind.
    env = h.fixed_offset_env(LAG)
    other_host = os.path.join(h.WORK, "other-host")
    os.makedirs(other_host, exist_ok=True)
    os.chmod(other_host, 0o1777)
    env["FLURRY_HOST_DIR"] = other_host
    env["FLURRY_HOST_GUARD_SCOPE"] = other_host
    lagging = h.Server("lagging", os.path.join(h.WORK, "lagging"), args, env=env).start(timeout=30)
    h.check(lagging.node == node, f"the lagging server took node {lagging.node}, not the holder's {node}")
    col2, stop2, _, threads2 = start_load(lagging.port)
    time.sleep(TAKEOVER_RUN_S)
    stop_load(stop2, threads2)
    h.check(not col2.errors, f"lagging: {col2.errors[:5]}")
    h.check(col2.ids > 0, "the new owner issued no ID")
    mine = [(lo, hi) for n, lo, hi in col2.runs if n == node]
    below = [r for r in mine if r[0] <= holder_max]
    h.check(not below, f"{len(below)} runs of the new owner start at or below the holder's last ID "
                       f"{holder_max}, e.g. {below[:3]}")
    col.runs.extend(col2.runs)
    bad = col.overlaps()
    h.check(not bad, f"{len(bad)} overlapping runs (IDs issued twice), e.g. {bad[:3]}")
    h.log(f"new owner (clock {LAG}) issued {col2.ids} IDs, all above the holder's {col.ids - col2.ids}: "
          f"0 duplicates")
    rc, _ = lagging.stop()
    h.check(rc == 0, f"exit code {rc} after SIGTERM")


if __name__ == "__main__":
    h.run_main(main)
