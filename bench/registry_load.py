#!/usr/bin/env python3
"""What a running flurry node costs its registry, per backend: one `flurry serve` under a steady
light load (a client asking for 100 IDs every 10 ms) on each leasing registry for SECONDS, then
per minute: the node's registry operations from its own metrics (lease renewals, horizon saves),
and what the registry server saw in the same window from its own counters (etcd: the gRPC calls
the gateway made, from every member's /metrics; PostgreSQL: the database's committed
transactions, from pg_stat_database). The servers are real and started here on loopback (the
chaos harness's launchers, tests/chaos/chaoslib). A benchmark, not a test.

Usage: registry_load.py FLURRY [SECONDS]   (default 60)
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "chaos"))
from chaoslib import procs, registries  # noqa: E402

TTL_MS = 10000


def get(url, timeout=5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def metric(text, name):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def etcd_calls(reg):
    total = 0.0
    for m in reg.cluster.members:
        if m.alive():
            total += metric(get(m.client_url + "/metrics"), "grpc_server_handled_total")
    return total


def pg_commits(reg):
    out = reg.pg.psql(f"SELECT xact_commit FROM pg_stat_database WHERE datname = '{reg.database}'",
                      database="postgres")
    return float(out.strip())


def server_side(kind, reg):
    if kind == "etcd":
        return etcd_calls(reg), "etcd gRPC calls (all members)"
    if kind == "postgres":
        return pg_commits(reg), "PostgreSQL transactions"
    return None, "-"


def measure(flurry, kind, seconds, work):
    reg = registries.make(kind, os.path.join(work, kind))
    os.makedirs(os.path.join(work, kind, "logs"), exist_ok=True)
    reg.start()
    port = procs.free_port()
    data = reg.data_dir("n0")
    os.makedirs(data, exist_ok=True)
    node = procs.Proc("flurry", [flurry, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", data,
                                 "--lease-ttl-ms", str(TTL_MS), "--log-level", "warn"] + reg.flurry_args("n0"),
                      os.path.join(work, kind, "flurry.log")).start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if json.loads(get(base + "/readyz")).get("ready"):
                break
        except Exception:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"{kind}: flurry not ready: {node.log_tail()}")
        time.sleep(0.1)
    time.sleep(2)  # past the first horizon writes of a fresh node
    stop = threading.Event()
    ids = [0]

    def load():
        while not stop.is_set():
            try:
                ids[0] += len(json.loads(get(base + "/v1/ids?count=100"))["ids"])
            except Exception:
                pass
            time.sleep(0.01)

    m0 = get(base + "/metrics")
    s0, what = server_side(kind, reg)
    t0 = time.monotonic()
    th = threading.Thread(target=load, daemon=True)
    th.start()
    time.sleep(seconds)
    stop.set()
    th.join()
    m1 = get(base + "/metrics")
    s1, _ = server_side(kind, reg)
    minutes = (time.monotonic() - t0) / 60
    node.stop()
    reg.stop()
    per_min = lambda name: (metric(m1, name) - metric(m0, name)) / minutes  # noqa: E731
    return {
        "kind": kind,
        "renewals": per_min("flurry_lease_renewals_total"),
        "renewal_failures": per_min("flurry_lease_renewal_failures_total"),
        "saves": per_min("flurry_horizon_saves_total"),
        "save_failures": per_min("flurry_horizon_save_failures_total"),
        "server": None if s0 is None else (s1 - s0) / minutes,
        "server_what": what,
        "ids": ids[0] / minutes,
    }


def main():
    flurry = os.path.abspath(sys.argv[1])
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    procs.install_cleanup()
    work = tempfile.mkdtemp(prefix="flurry-registry-load-")
    rows = []
    try:
        for kind in ("sqlite", "etcd", "postgres"):
            rows.append(measure(flurry, kind, seconds, work))
    finally:
        procs.cleanup()
        procs.remove_tree(work)
    print(f"\nRegistry load of one node at steady state (lease_ttl_ms={TTL_MS}, horizon_window_ms=2000, "
          f"{seconds:.0f} s under load), per minute:")
    print(f"{'registry':<10}{'renewals':>10}{'h.saves':>10}{'failures':>10}{'server requests':>17}  counted as")
    for r in rows:
        server = "-" if r["server"] is None else f"{r['server']:.0f}"
        print(f"{r['kind']:<10}{r['renewals']:>10.1f}{r['saves']:>10.1f}"
              f"{r['renewal_failures'] + r['save_failures']:>10.1f}{server:>17}  {r['server_what']}")


if __name__ == "__main__":
    main()
