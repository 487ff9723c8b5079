#!/usr/bin/env python3
"""Segment mode on a real PostgreSQL, end to end: one database (initdb in the work directory, on
127.0.0.1 and a free port), two `flurry serve` processes whose segment_stores point at it, each
with a data directory of its own as on separate hosts, so only the database keeps them apart.

1. The tag is created once, with `flurry segment create --store postgresql://...`; the table is
   Leaf's: leaf_alloc's columns and types as Leaf creates them (psql), the residues in a side table.
2. Clients pull from both servers in parallel, /v1/segments/{tag}/ids?count=1000 and
   /v1/segments/{tag}/range?size=1000, until they hold at least 2,000,000 IDs: all distinct; each
   answer increasing (a range consecutive); each server's IDs increasing: any answer that began
   after another answer of the same server ended holds only greater IDs. The row's max_id lies
   above every ID handed out.
   `flurry segment next --store postgresql://...` beside them takes a range of its own: above the
   table's max_id, never a server's ID.
3. A tag created over HTTP on one server (POST with the admin token) is visible on the other, in
   the table and to `flurry segment list --store`: one database, one truth.

Usage: segments_postgres_load.py FLURRY
"""
import http.client
import json
import os
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
from pglib import Postgres  # noqa: E402

TAG = "orders"
TARGET = 2_000_000
BATCH = 1000
TOKEN = "segments-postgres-test-token-3c9e1f7a"


def main():
    h.init()
    pg = Postgres(h.WORK)
    try:
        run(pg)
    finally:
        pg.stop()  # before run_main removes the work directory


def segment_cli(expect, *args):
    cmd = [h.FLURRY, "segment"] + list(args)
    p = subprocess.run(cmd, capture_output=True, timeout=60)
    h.check(p.returncode == expect, f"{' '.join(cmd)} exited {p.returncode}, not {expect}: "
                                    f"{p.stdout.decode()[:500]} {p.stderr.decode()[:500]}")
    return p.stdout.decode()


def check_leaf_table(pg):
    cols = pg.psql("ids", "SELECT column_name, data_type, coalesce(character_maximum_length, 0), is_nullable "
                          "FROM information_schema.columns WHERE table_name = 'leaf_alloc' "
                          "ORDER BY ordinal_position")
    got = [tuple(line.split("|")) for line in cols.splitlines()]
    want = [("biz_tag", "character varying", "128", "NO"), ("max_id", "bigint", "0", "NO"),
            ("step", "integer", "0", "NO"), ("description", "character varying", "256", "YES"),
            ("update_time", "timestamp without time zone", "0", "NO")]
    h.check(got == want, f"leaf_alloc is not Leaf's table: {got}")
    key = pg.psql("ids", "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                         "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'leaf_alloc'::regclass AND i.indisprimary")
    h.check(key == "biz_tag", f"leaf_alloc's primary key: {key!r}")
    side = pg.psql("ids", "SELECT string_agg(column_name, ',' ORDER BY ordinal_position) "
                          "FROM information_schema.columns WHERE table_name = 'flurry_segment_residues'")
    h.check(side == "biz_tag,delta,remainder", f"the residues' side table: {side!r}")


class Puller(threading.Thread):
    """Pulls from one server on one keep-alive connection until the shared total reaches TARGET.
    Keeps (start, end, ids) per answer, the times on the monotonic clock."""

    total = 0
    lock = threading.Lock()

    def __init__(self, server, route):
        super().__init__(daemon=True)
        self.server = server
        self.route = route
        self.answers = []
        self.error = None

    def run(self):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
            path = (f"/v1/segments/{TAG}/ids?count={BATCH}" if self.route == "ids"
                    else f"/v1/segments/{TAG}/range?size={BATCH}")
            while True:
                with Puller.lock:
                    if Puller.total >= TARGET:
                        break
                t0 = time.monotonic()
                r = h.request(self.server.port, path, conn=conn)
                t1 = time.monotonic()
                h.check(r.status == 200, f"{self.server.name} {path}: {r}")
                j = r.json()
                if self.route == "ids":
                    h.check(all(isinstance(x, str) and x.isdigit() for x in j["ids"]), f"IDs: {r.body[:200]!r}")
                    ids = [int(x) for x in j["ids"]]
                else:
                    h.check(isinstance(j["start"], str) and isinstance(j["end"], str)
                            and j.get("delta") == 1, f"range: {j}")
                    ids = list(range(int(j["start"]), int(j["end"]), j["delta"]))
                h.check(len(ids) == BATCH, f"{self.server.name} {path}: {len(ids)} IDs")
                h.check(all(a < b for a, b in zip(ids, ids[1:])), f"{self.server.name} {path}: not increasing")
                self.answers.append((t0, t1, ids))
                with Puller.lock:
                    Puller.total += len(ids)
            conn.close()
        except Exception as e:  # reported by the main thread
            self.error = e


def check_server_order(name, answers):
    """Any answer that began after another ended holds only greater IDs."""
    by_end = sorted(answers, key=lambda a: a[1])
    i, highest = 0, -1
    for start, _, ids in sorted(answers, key=lambda a: a[0]):
        while i < len(by_end) and by_end[i][1] < start:
            highest = max(highest, by_end[i][2][-1])
            i += 1
        h.check(ids[0] > highest, f"{name}: an answer starting at {ids[0]} came after one that ended "
                                  f"with {highest}: the server's IDs are not increasing")


def run(pg):
    pg.start()
    pg.psql("postgres", "CREATE DATABASE ids")
    url = pg.url("ids")
    h.log(f"PostgreSQL on port {pg.port}")

    # 1. The tag, once, straight into the database; the table as Leaf's.
    out = segment_cli(0, "create", TAG, "--store", url, "--start", "1", "--step", "10000",
                      "--description", "order lines")
    h.check("max_id:" in out and "postgres" in out, f"create printed: {out}")
    segment_cli(1, "create", TAG, "--store", url)  # once only
    check_leaf_table(pg)
    row = pg.psql("ids", f"SELECT max_id, step, description FROM leaf_alloc WHERE biz_tag = '{TAG}'")
    h.check(row == "1|10000|order lines", f"the row as created: {row!r}")

    token_file = os.path.join(h.WORK, "admin-token")
    with open(os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(TOKEN + "\n")
    servers = []
    for name in ("a", "b"):
        data = os.path.join(h.WORK, f"data-{name}")  # one per process, as on separate hosts
        servers.append(h.Server(name, data, ["--segment-stores", url, "--admin-token-file", token_file]))
    for s in servers:
        s.launch()
    for s in servers:
        h.check(s.wait_http(), f"{s.name} exited with {s.proc.returncode} at start")
        s.ready = s.wait_ready()

    # 2. Both servers, both routes, in parallel.
    t0 = time.monotonic()
    pullers = [Puller(s, route) for s in servers for route in ("ids", "range")]
    for p in pullers:
        p.start()
    for p in pullers:
        p.join(120)
        h.check(not p.is_alive(), "a client did not finish within 120 s")
        if p.error is not None:
            raise p.error
    elapsed = time.monotonic() - t0
    everything = [i for p in pullers for (_, _, ids) in p.answers for i in ids]
    h.log(f"{len(everything)} IDs in {elapsed:.1f} s from 2 servers "
          f"({', '.join(f'{p.server.name}/{p.route}: {sum(len(a[2]) for a in p.answers)}' for p in pullers)})")
    h.check(len(everything) >= TARGET, f"only {len(everything)} IDs")
    h.check(len(set(everything)) == len(everything),
            f"{len(everything) - len(set(everything))} duplicate IDs across the two servers")
    for s in servers:
        answers = [a for p in pullers if p.server is s for a in p.answers]
        h.check(answers, f"{s.name} served nothing")
        check_server_order(s.name, answers)
    max_id = int(pg.psql("ids", f"SELECT max_id FROM leaf_alloc WHERE biz_tag = '{TAG}'"))
    h.check(max_id > max(everything), f"leaf_alloc.max_id {max_id} is not above the last ID {max(everything)}")
    for s in servers:
        r = h.request(s.port, f"/v1/segments/{TAG}")
        h.check(r.status == 200, f"{s.name} GET /v1/segments/{TAG}: {r}")
        j = r.json()
        h.check(j["served"] is True and j["ids_issued"] > 0 and j["ranges_fetched"] >= 1, f"{s.name}: {j}")
        # Read after the table: a prefetch may have moved it on since, never back.
        h.check(int(j["stored"]["max_id"]) >= max_id, f"{s.name}: stored row {j['stored']}, table {max_id}")

    # The CLI on the database directly, beside the servers: a range of its own, above the table's
    # max_id when it started, never an ID a server issued.
    cli_ids = [int(x) for x in segment_cli(0, "next", TAG, "--store", url, "-n", "5000").split()]
    h.check(len(cli_ids) == 5000 and min(cli_ids) >= max_id, f"CLI IDs from {min(cli_ids)}, table max_id {max_id}")
    h.check_increasing(cli_ids, "flurry segment next --store postgresql://...")
    h.check(not set(cli_ids) & set(everything), "the CLI issued an ID a server had issued")

    # 3. A tag created over HTTP on a is seen by b and by the table.
    r = h.request(servers[0].port, "/v1/segments", method="POST",
                  headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
                  body=json.dumps({"tag": "invoices", "start": 500, "step": 100}))
    h.check(r.status == 201, f"POST /v1/segments on a: {r}")
    h.check(pg.psql("ids", "SELECT max_id, step FROM leaf_alloc WHERE biz_tag = 'invoices'") == "500|100",
            "the tag created over HTTP is not in leaf_alloc")
    r = h.request(servers[1].port, "/v1/segments/invoices/ids?count=3")
    h.check(r.status == 200 and r.json()["ids"] == ["500", "501", "502"], f"b's first invoices: {r}")
    r = h.request(servers[1].port, "/v1/segments")
    h.check(r.status == 200 and [t["tag"] for t in r.json()["tags"]] == ["invoices", "orders"],
            f"b's GET /v1/segments: {r}")
    listed = json.loads(segment_cli(0, "list", "--store", url, "--json"))
    h.check([(t["tag"], t["step"]) for t in listed["tags"]] == [("invoices", 100), ("orders", 10000)],
            f"flurry segment list --store postgresql://...: {listed}")
    for s in servers:
        rc, _ = s.stop()
        h.check(rc == 0, f"{s.name} exited {rc} after SIGTERM")


h.run_main(main)
