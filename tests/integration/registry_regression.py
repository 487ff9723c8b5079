#!/usr/bin/env python3
"""A registry that goes backwards under a running server must not make it issue an ID again.

Three keep-alive clients loop on /v1/ids?count=100000&format=text, so the server runs up to
max_lead ahead of the clock. After a few seconds the registry goes backwards, in one of three ways
an operator (or a bad restore) can do it:
  * delete:  DELETE FROM nodes;
  * empty:   the file replaced by an empty registry with the same schema (and its write-ahead
             log removed, which SQLite would otherwise replay into the new file);
  * restore: the file restored (through SQLite's backup API) from a copy taken a second in.
The server must notice (an error log event=registry_regressed naming the node,
flurry_registry_regressions_total == 1, REGISTRY_REGRESSED as a /readyz reason or a logged reason
while it recovers), claim
a node ID again and issue only IDs it never issued before: every response is a strictly
increasing run, and no two runs of the same node overlap (so no ID repeats). Before the fix about
3M of 40M IDs came back a second time in each variant.

Usage: registry_regression.py FLURRY
"""
import http.client
import os
import shutil
import sqlite3
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

TTL_MS = 3000  # renewals every second: the regression is noticed within about a second
RUN_S = 9.0
MUTATE_AT_S = 3.0


class Collector:
    """Keeps one (node, first, last) run per 200 response; checks each run increases."""

    def __init__(self):
        self.lock = threading.Lock()
        self.runs = []
        self.ids = 0
        self.statuses = {}
        self.errors = []

    def add(self, ids):
        if not all(a < b for a, b in zip(ids, ids[1:])):
            self.errors.append("a response's IDs are not strictly increasing")
            return
        nodes = {h.node_of(x) for x in (ids[0], ids[-1])}
        if len(nodes) != 1:
            self.errors.append(f"one response spans nodes {nodes}")
            return
        with self.lock:
            self.runs.append((nodes.pop(), ids[0], ids[-1]))
            self.ids += len(ids)

    def overlaps(self):
        """Pairs of runs of one node whose ranges overlap: IDs issued twice."""
        bad = []
        by_node = {}
        for node, lo, hi in self.runs:
            by_node.setdefault(node, []).append((lo, hi))
        for node, runs in by_node.items():
            runs.sort()
            for (lo1, hi1), (lo2, hi2) in zip(runs, runs[1:]):
                if lo2 <= hi1:
                    bad.append((node, (lo1, hi1), (lo2, hi2)))
        return bad


def client(port, stop, col):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while not stop.is_set():
        try:
            r = h.request(port, "/v1/ids?count=100000&format=text", conn=conn)
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            continue
        with col.lock:
            col.statuses[r.status] = col.statuses.get(r.status, 0) + 1
        if r.status == 200:
            col.add([int(x) for x in r.body.split()])
        elif r.status == 503:
            if "retry-after" not in r.headers:
                col.errors.append(f"503 without Retry-After: {r}")
            time.sleep(0.05)
        else:
            col.errors.append(f"unexpected answer {r}")
            time.sleep(0.05)
    conn.close()


def readiness_watch(port, stop, reasons):
    while not stop.is_set():
        try:
            r = h.request(port, "/readyz", timeout=5)
            if r.status != 200:
                reasons.add(r.json().get("reason"))
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.01)


def start_load(port):
    """Three looping ID clients and a readiness watcher on `port`, started: (collector, stop event,
    readiness reasons seen, threads)."""
    col, stop, reasons = Collector(), threading.Event(), set()
    threads = [threading.Thread(target=client, args=(port, stop, col)) for _ in range(3)]
    threads.append(threading.Thread(target=readiness_watch, args=(port, stop, reasons)))
    for t in threads:
        t.start()
    return col, stop, reasons, threads


def mutate(kind, db, snapshot):
    if kind == "delete":
        with sqlite3.connect(db, timeout=10) as c:
            c.execute("DELETE FROM nodes")
    elif kind == "empty":
        fresh = db + ".empty"
        with sqlite3.connect(fresh) as c:
            c.execute("CREATE TABLE nodes(node INTEGER PRIMARY KEY, owner TEXT, token INTEGER NOT NULL, "
                      "expires_ms INTEGER NOT NULL, horizon TEXT)")
        os.replace(fresh, db)
        # The old write-ahead log would otherwise be replayed into the new file.
        for suffix in ("-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.unlink(db + suffix)
    elif kind == "restore":
        src = sqlite3.connect(snapshot)
        dst = sqlite3.connect(db, timeout=10)
        src.backup(dst)
        dst.close()
        src.close()
    else:
        h.fail(f"unknown mutation {kind}")


def take_snapshot(db, snapshot):
    src = sqlite3.connect(db, timeout=10)
    dst = sqlite3.connect(snapshot)
    src.backup(dst)
    dst.close()
    src.close()


def scenario(kind):
    data = os.path.join(h.WORK, kind)
    db = os.path.join(data, "registry.db")
    snapshot = os.path.join(h.WORK, f"{kind}-snapshot.db")
    s = h.Server(kind, data, ["--lease-ttl-ms", str(TTL_MS)]).start()
    col, stop, reasons, threads = start_load(s.port)
    t0 = time.monotonic()
    time.sleep(1.0)
    take_snapshot(db, snapshot)
    time.sleep(MUTATE_AT_S - (time.monotonic() - t0))
    mutate(kind, db, snapshot)
    h.log(f"{kind}: registry mutated after {time.monotonic() - t0:.1f} s, {col.ids} IDs so far")
    time.sleep(max(0.0, RUN_S - (time.monotonic() - t0)))
    stop.set()
    for t in threads:
        t.join(60)
    h.check(s.alive(), f"{kind}: the server exited")
    h.check(not col.errors, f"{kind}: {col.errors[:5]}")
    bad = col.overlaps()
    h.check(not bad, f"{kind}: {len(bad)} overlapping runs (IDs issued twice), e.g. {bad[:3]}")
    log = s.log_text()
    h.check("event=registry_regressed" in log, f"{kind}: no event=registry_regressed in the log")
    h.check(" error event=registry_regressed" in log,
            f"{kind}: the regression is not logged as an error")
    metrics = h.request(s.port, "/metrics").text
    regressions = h.metric(metrics, "flurry_registry_regressions_total")
    h.check(regressions == 1,  # one event, counted once
            f"{kind}: flurry_registry_regressions_total is {regressions}")
    h.check("REGISTRY_REGRESSED" in reasons or "reason=REGISTRY_REGRESSED" in log,
            f"{kind}: readiness never said REGISTRY_REGRESSED (/readyz reasons seen: {reasons})")
    ready = s.wait_ready(20)
    after = h.get_ids(s.port, 1000)
    h.check(all(x > hi for node, lo, hi in col.runs if node == h.node_of(after[0]) for x in after[:1]),
            f"{kind}: IDs after recovery are not above every earlier one of node {h.node_of(after[0])}")
    h.log(f"{kind}: {col.ids} IDs in {len(col.runs)} runs, statuses {col.statuses}, "
          f"readiness reasons {sorted(r for r in reasons if r)}, node now {ready['node']}: no duplicate")
    rc, _ = s.stop()
    h.check(rc == 0, f"{kind}: exit code {rc} after SIGTERM")
    shutil.rmtree(data, ignore_errors=True)


def main():
    h.init()
    for kind in ("delete", "empty", "restore"):
        scenario(kind)


if __name__ == "__main__":
    h.run_main(main)
