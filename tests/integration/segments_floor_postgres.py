#!/usr/bin/env python3
"""A PostgreSQL segment store that went backwards is refused whatever spelling of its location.

A real PostgreSQL (initdb in the work directory, pglib.py). `flurry segment next` takes 1,000
numbers of tag t through postgresql://postgres@127.0.0.1:PORT/ids with data directory a; the
tag's row is then put back to its value before (a restore). Each of these, with a data directory
of its own, must be refused (STORE_REGRESSED), print no number and leave the row as it was:

1. the same URL with ?sslmode=disable added;
2. libpq's key=value form with host=localhost (another spelling of the host);
3. the URL with data directory a deleted (the host-wide floors remain);
4. the database dropped and created again, the tag created again from 1 (a new store ID: the
   cluster's system identifier, the database and the schema still find the floor).

Usage: segments_floor_postgres.py FLURRY
"""
import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
from pglib import Postgres  # noqa: E402

TAG = "t"


def segment(*args):
    p = subprocess.run([h.FLURRY, "segment", *args], capture_output=True, timeout=120, cwd=h.WORK)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def refused(store, data_dir, case, issued):
    rc, out, err = segment("next", TAG, "-n", "3", "--store", store, "--data-dir", data_dir)
    again = [int(x) for x in out.split()]
    reserved = len(set(again) & issued)
    h.log(f"{case}: exit {rc}, {len(again)} numbers printed, {reserved} of them re-served")
    h.check(rc != 0 and "STORE_REGRESSED" in err,
            f"{case}: not refused: exit {rc}, {len(again)} numbers ({reserved} re-served): {err[:600]}")
    h.check(not again, f"{case}: printed {len(again)} numbers although refused")


def run(pg):
    pg.psql("postgres", "CREATE DATABASE ids")
    url = pg.url("ids")
    rc, _, err = segment("create", TAG, "--step", "100", "--store", url, "--data-dir", "a")
    h.check(rc == 0, f"create: exit {rc}: {err[:600]}")
    saved = pg.psql("ids", f"SELECT max_id FROM leaf_alloc WHERE biz_tag = '{TAG}'")
    rc, out, err = segment("next", TAG, "-n", "1000", "--store", url, "--data-dir", "a")
    h.check(rc == 0, f"next: exit {rc}: {err[:600]}")
    issued = {int(x) for x in out.split()}
    h.check(len(issued) == 1000, f"{len(issued)} numbers")
    # The store keeps its own ID.
    sid = pg.psql("ids", "SELECT value FROM flurry_segment_meta WHERE key = 'store_id'")
    h.check(re.fullmatch(r"store-id:[0-9a-f]{32}", sid or "") is not None, f"store ID {sid!r}")

    pg.psql("ids", f"UPDATE leaf_alloc SET max_id = {saved} WHERE biz_tag = '{TAG}'")
    refused(url + "?sslmode=disable", "b", "sslmode added", issued)
    refused(f"host=localhost port={pg.port} dbname=ids user=postgres", "c", "host=localhost", issued)
    shutil.rmtree(os.path.join(h.WORK, "a"))
    refused(url, "d", "data directory a deleted", issued)
    now = pg.psql("ids", f"SELECT max_id FROM leaf_alloc WHERE biz_tag = '{TAG}'")
    h.check(now == saved, f"the refused store moved from {saved} to {now}")

    # A new database in the old one's place, the tag created again from 1.
    pg.psql("postgres", "DROP DATABASE ids")
    pg.psql("postgres", "CREATE DATABASE ids")
    rc, _, err = segment("create", TAG, "--step", "100", "--store", url, "--data-dir", "e")
    h.check(rc == 0, f"create again: exit {rc}: {err[:600]}")
    sid2 = pg.psql("ids", "SELECT value FROM flurry_segment_meta WHERE key = 'store_id'")
    h.check(sid2 and sid2 != sid, f"the new database's store ID {sid2!r} (was {sid!r})")
    # Another spelling of the host too: only the cluster key (system identifier, database, schema)
    # is left in common with the old store.
    refused(f"host=localhost port={pg.port} dbname=ids user=postgres", "f",
            "database dropped and created again", issued)


def main():
    h.init()
    pg = Postgres(h.WORK)
    pg.start()
    try:
        run(pg)
    finally:
        pg.stop()  # before run_main removes the work directory


if __name__ == "__main__":
    h.run_main(main)
