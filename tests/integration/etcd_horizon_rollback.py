#!/usr/bin/env python3
"""An etcd horizon key put back under its holder's token must be noticed, not trusted.

A server on `--registry etcd` serves three keep-alive clients that loop on
/v1/ids?count=100000, so it runs up to max_lead ahead of the clock. One second in, the value of
its horizon key is read (as an operator's `etcdctl get` or a snapshot would); two seconds later
that old value is put back (`etcdctl put`) while the server keeps its lease and token.

Before the fix the server wrote over it at its next save and never said a word: /readyz stayed
200 and, had it died before that save, the next owner of the node ID (on a host whose clock lags)
would have inherited the old horizon and repeated its IDs. Now its next horizon save is a
compare-and-set on the revision it wrote last, so it finds the key below its last save: an error
log event=registry_regressed, flurry_registry_regressions_total == 1, readiness says why while it
claims a node ID again above what it remembers, and no ID is ever issued twice. The horizon key
then holds a value above every ID issued before (repaired).

Usage: etcd_horizon_rollback.py FLURRY
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

CLUSTER = "rollback"
TTL_MS = 3000
RUN_S = 8.0
READ_AT_S = 1.0
PUT_BACK_AT_S = 3.0


def put(etcd, key, value):
    etcd.post("/v3/kv/put", {"key": base64.b64encode(key.encode()).decode(),
                             "value": base64.b64encode(value.encode()).decode()})


def horizon_ticks(text):
    """The horizon ticks of a horizon record's text (its `horizons` line)."""
    for line in text.splitlines():
        if line.startswith("horizons "):
            return [int(x) for x in line.split()[1:]]
    h.fail(f"no horizons line in the horizon record {text!r}")


def main():
    h.init()
    etcd = Etcd().start()
    args = ["--registry", "etcd", "--etcd-endpoints", etcd.endpoint, "--cluster", CLUSTER,
            "--lease-ttl-ms", str(TTL_MS)]
    s = h.Server("holder", os.path.join(h.WORK, "holder"), args).start()
    node = s.node
    key = f"/flurry/{CLUSTER}/horizon/{node}"
    col, stop, reasons, threads = start_load(s.port)
    t0 = time.monotonic()
    time.sleep(READ_AT_S)
    old = etcd.range(key)
    h.check(old is not None, f"no horizon key {key} after {READ_AT_S} s")
    time.sleep(PUT_BACK_AT_S - (time.monotonic() - t0))
    now = etcd.range(key)
    h.check(horizon_ticks(now[0]) > horizon_ticks(old[0]),
            f"the horizon did not move in {PUT_BACK_AT_S - READ_AT_S} s: {now[0]!r}")
    put(etcd, key, old[0])
    h.log(f"horizon of node {node} put back from {horizon_ticks(now[0])} to {horizon_ticks(old[0])} "
          f"after {time.monotonic() - t0:.1f} s, {col.ids} IDs so far")
    time.sleep(max(0.0, RUN_S - (time.monotonic() - t0)))
    stop.set()
    for t in threads:
        t.join(60)
    h.check(s.alive(), "the server exited")
    h.check(not col.errors, f"{col.errors[:5]}")
    bad = col.overlaps()
    h.check(not bad, f"{len(bad)} overlapping runs (IDs issued twice), e.g. {bad[:3]}")
    log = s.log_text()
    h.check(" error event=registry_regressed" in log, "no error event=registry_regressed in the log")
    regressions = h.metric(h.request(s.port, "/metrics").text, "flurry_registry_regressions_total")
    h.check(regressions == 1, f"flurry_registry_regressions_total is {regressions}")
    h.check(reasons & {"REGISTRY_REGRESSED", "RECLAIMING_NODE"} or "reason=REGISTRY_REGRESSED" in log,
            f"readiness never said why it was not ready (/readyz reasons seen: {reasons})")
    ready = s.wait_ready(20)
    # Repaired: the node's horizon key is above every ID the node issued before.
    last_tick = max(hi for n, _, hi in col.runs if n == node) >> h.SEQ_BITS + h.NODE_BITS
    deadline = time.monotonic() + 5
    while True:
        stored = etcd.range(key)
        if stored and horizon_ticks(stored[0])[0] >= last_tick:
            break
        h.check(time.monotonic() < deadline,
                f"the horizon key of node {node} was not repaired above tick {last_tick}: {stored}")
        time.sleep(0.1)
    after = h.get_ids(s.port, 1000)
    n = h.node_of(after[0])
    h.check(all(after[0] > hi for m, _, hi in col.runs if m == n),
            f"IDs after recovery are not above every earlier one of node {n}")
    h.log(f"{col.ids} IDs in {len(col.runs)} runs, statuses {col.statuses}, readiness reasons "
          f"{sorted(r for r in reasons if r)}, node now {ready['node']}: no duplicate, horizon repaired")
    rc, _ = s.stop()
    h.check(rc == 0, f"exit code {rc} after SIGTERM")


if __name__ == "__main__":
    h.run_main(main)
