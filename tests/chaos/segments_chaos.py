#!/usr/bin/env python3
"""The segment chaos run: two `flurry serve` processes on one PostgreSQL segment tag (each with a
data directory of its own, as on two hosts), a client per server keeping every number, and the
store restored from a backup while they serve (tests/chaos/README.md, "Segment mode").

1. 5 s of load; `pg_dump` of the segment tables (what a nightly backup holds).
2. 8 s more load: both servers fetch many ranges past the backup (steps of at most 2,000).
3. The backup restored while they serve (`psql --single-transaction` of the dump with --clean:
   the tables dropped and written back as they were, in one transaction).
4. Both servers must refuse (503, reason STORE_REGRESSED, Retry-After) once their buffers are
   used up, and never hand out a number again from the restored counter; 3 s of refusals.
5. The operator's repair: max_id set to the highest floor the 503s named. Both serve again.

Checked over everything collected: no number handed out twice; every answer other than 200 is a
503 with a JSON error.reason; each server refused with STORE_REGRESSED and served again after the
repair (recovery time printed). About 30 s. Needs root (PostgreSQL runs as `postgres`).

Usage: segments_chaos.py FLURRY [--keep]
Exit code 0 when every check passed, 1 otherwise, 2 for a missing prerequisite.
"""

import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from chaoslib import postgres, procs  # noqa: E402

TAG = "orders"
BATCH = 200
FLOOR_RE = re.compile(r"set max_id to at least (\d+)")


class Client(threading.Thread):
    """One keep-alive connection to one server; keeps every number and every refusal."""

    def __init__(self, name, port):
        super().__init__(daemon=True)
        self.name = name
        self.port = port
        self.ids = []
        self.refusals = []  # (monotonic time, status, reason, retry-after, message)
        self.served_at = []  # monotonic times of 200s
        self.bad = []  # answers that are neither 200 nor a 503 with a reason
        self.stop = False
        self.lock = threading.Lock()

    def run(self):
        conn = None
        while not self.stop:
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                conn.request("GET", f"/v1/segments/{TAG}/ids?count={BATCH}")
                r = conn.getresponse()
                body = r.read()
            except (OSError, http.client.HTTPException) as e:
                with self.lock:
                    self.bad.append(f"transport error: {e!r}")
                conn = None
                time.sleep(0.05)
                continue
            now = time.monotonic()
            if r.status == 200:
                ids = [int(x) for x in json.loads(body)["ids"]]
                with self.lock:
                    self.ids.extend(ids)
                    self.served_at.append(now)
                continue
            try:
                err = json.loads(body)["error"]
                reason, message = err.get("reason"), err.get("message", "")
            except (ValueError, KeyError, TypeError):
                reason, message = None, body[:200]
            with self.lock:
                if r.status != 503 or not reason:
                    self.bad.append(f"{r.status} {body[:300]!r}")
                self.refusals.append((now, r.status, reason, r.getheader("Retry-After"), message))
            time.sleep(0.02)

    def served_since(self, t):
        with self.lock:
            return any(s > t for s in self.served_at)

    def regressed_since(self, t):
        with self.lock:
            return [x for x in self.refusals if x[0] > t and x[2] == "STORE_REGRESSED"]


def wait_for(cond, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    return None


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    flurry = os.path.abspath(sys.argv[1])
    keep = "--keep" in sys.argv[2:] or os.environ.get("CHAOS_KEEP") == "1"
    if os.geteuid() != 0 or not os.path.exists(os.path.join(postgres.PG_BIN, "postgres")):
        print("segments_chaos.py: needs root and PostgreSQL 15 (CHAOS_PG_BIN)", file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="flurry-segchaos-")
    procs.install_cleanup()
    ok = False
    if not keep:
        procs.at_cleanup(lambda: procs.remove_tree(work) if ok else None)
    os.makedirs(os.path.join(work, "logs"), exist_ok=True)
    procs.log(f"work directory {work}")

    pg = postgres.Postgres(work).init()
    pg.start()
    pg.psql("CREATE DATABASE ids")
    url = pg.url("ids")
    p = subprocess.run([flurry, "segment", "create", TAG, "--store", url, "--start", "1", "--step", "500",
                        "--data-dir", os.path.join(work, "cli")], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"segment create failed: {p.stdout} {p.stderr}", file=sys.stderr)
        return 1

    servers, clients = [], []
    for name in ("a", "b"):
        port = procs.free_port()
        cmd = [flurry, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", os.path.join(work, f"data-{name}"),
               "--segment-stores", url, "--segment-max-step", "2000",
               # gRPC on a port of each server's choosing: two servers cannot share 7610.
               "--grpc-listen", "127.0.0.1:0"]
        srv = procs.Proc(name, cmd, os.path.join(work, "logs", f"{name}.log")).start()
        servers.append((srv, port))
    for srv, port in servers:
        if not wait_for(lambda: _ready(port), 20):
            print(f"{srv.name} not ready:\n{srv.log_tail()}", file=sys.stderr)
            return 1
    for srv, port in servers:
        c = Client(srv.name, port)
        c.start()
        clients.append(c)

    violations = []
    time.sleep(5)
    dump = os.path.join(pg.dir, "segments.sql")
    d = subprocess.run(postgres._as_postgres([os.path.join(postgres.PG_BIN, "pg_dump"), "-h", "127.0.0.1",
                                              "-p", str(pg.port), "-U", postgres.PG_USER, "--clean",
                                              "--if-exists", "-t", "leaf_alloc", "-t", "flurry_segment_residues",
                                              "-f", dump, "ids"]), capture_output=True, text=True, cwd=pg.dir)
    if d.returncode != 0:
        print(f"pg_dump: {d.stderr}", file=sys.stderr)
        return 1
    saved = int(pg.psql(f"SELECT max_id FROM leaf_alloc WHERE biz_tag = '{TAG}'", database="ids").strip())
    procs.log(f"backup taken at max_id {saved}")
    time.sleep(8)
    before = int(pg.psql(f"SELECT max_id FROM leaf_alloc WHERE biz_tag = '{TAG}'", database="ids").strip())

    restored_at = time.monotonic()
    r = subprocess.run(postgres._as_postgres([os.path.join(postgres.PG_BIN, "psql"), "-X", "-q",
                                              "--single-transaction", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                                              "-p", str(pg.port), "-U", postgres.PG_USER, "-d", "ids", "-f", dump]),
                       capture_output=True, text=True, cwd=pg.dir)
    if r.returncode != 0:
        print(f"restore: {r.stderr}", file=sys.stderr)
        return 1
    # What the backup held (read back: the dump was taken a moment before `saved` was read).
    saved = int(pg.psql(f"SELECT max_id FROM leaf_alloc WHERE biz_tag = '{TAG}'", database="ids").strip())
    procs.log(f"backup restored while serving: max_id {before} -> {saved}")

    floors = {}
    for c in clients:
        got = wait_for(lambda: c.regressed_since(restored_at), 20)
        if not got:
            violations.append(f"{c.name}: no 503 STORE_REGRESSED within 20 s of the restore")
            continue
        _, status, _, retry_after, message = got[0]
        if retry_after is None:
            violations.append(f"{c.name}: a STORE_REGRESSED 503 without Retry-After")
        m = FLOOR_RE.search(message)
        if m is None:
            violations.append(f"{c.name}: the 503 names no floor: {message[:300]}")
        else:
            floors[c.name] = int(m.group(1))
    time.sleep(3)
    now_max = int(pg.psql(f"SELECT max_id FROM leaf_alloc WHERE biz_tag = '{TAG}'", database="ids").strip())
    if now_max != saved:
        violations.append(f"the restored store moved from {saved} to {now_max} while both servers refused")

    repair = max(floors.values()) if floors else before
    repaired_at = time.monotonic()
    pg.psql(f"UPDATE leaf_alloc SET max_id = {repair} WHERE biz_tag = '{TAG}'", database="ids")
    procs.log(f"repaired: max_id {repair} (the highest floor the 503s named: {floors})")
    recovery = {}
    for c in clients:
        if wait_for(lambda: c.served_since(repaired_at), 20):
            recovery[c.name] = round(time.monotonic() - repaired_at, 2)
        else:
            violations.append(f"{c.name}: not serving within 20 s of the repair")
    time.sleep(2)

    for c in clients:
        c.stop = True
    for c in clients:
        c.join(15)
    for srv, _ in servers:
        srv.stop()
    everything = [i for c in clients for i in c.ids]
    dups = len(everything) - len(set(everything))
    if dups:
        violations.append(f"{dups} numbers handed out twice")
    for c in clients:
        violations.extend(f"{c.name}: {b}" for b in c.bad[:5])
    print(f"{'server':<8}{'numbers':>10}{'refusals':>10}{'regressed':>11}{'recovery_s':>12}")
    for c in clients:
        reg = sum(1 for x in c.refusals if x[2] == "STORE_REGRESSED")
        print(f"{c.name:<8}{len(c.ids):>10}{len(c.refusals):>10}{reg:>11}{str(recovery.get(c.name)):>12}")
    print(f"total {len(everything)} numbers, {dups} duplicates; store max_id {before} before the restore, "
          f"{saved} restored, {repair} after the repair")
    for v in violations:
        print(f"VIOLATION: {v}")
    ok = not violations
    if not ok:
        for srv, _ in servers:
            print(f"--- {srv.name} log ---\n{srv.log_tail(15)}")
        print(f"work directory kept: {work}")
    pg.stop()
    print("ok" if ok else "FAIL")
    return 0 if ok else 1


def _ready(port):
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", "/readyz")
        ok = conn.getresponse().status == 200
        conn.close()
        return ok
    except (OSError, http.client.HTTPException):
        return False


if __name__ == "__main__":
    sys.exit(main())
