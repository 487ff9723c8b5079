#!/usr/bin/env python3
"""A restored SQLite segment store is refused whatever data directory or spelling reaches it.

The floors of a segment store (the end of the last range it gave this host) are kept under the
store's identity (the store ID inside the file, the file's real path) in the data directory and in
the host directory every flurry process of the host shares (FLURRY_HOST_DIR, set per test by the
harness). So, after a backup of the store is restored:

1. `flurry segment next` with a data directory that never saw the store is refused
   (STORE_REGRESSED), 0 numbers re-served, the store untouched;
2. so is it once the first data directory is deleted as well (the host-wide floor remains);
3. so is every other spelling of the file: sqlite:./x.db, sqlite:x.db, sqlite:sub/../x.db, the
   absolute path;
4. so is a copy of the backup at another path (found by its store ID);
5. a server that took 20,000 IDs and whose data directory is then deleted leaves the same
   protection: after the restore, `next -n 20000` in a fresh data directory re-serves none.

The store is then repaired to the floor the refusal named and serves above every number handed
out: 0 duplicates over the whole run.

Usage: segments_floor_identity.py FLURRY
"""
import os
import re
import shutil
import sqlite3
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

TAG = "t"
FLOOR_RE = re.compile(r"set max_id to at least (\d+)")
TOKEN = "segments-floor-identity-token-0123456789"


def segment(*args, cwd=None):
    p = subprocess.run([h.FLURRY, "segment", *args], capture_output=True, timeout=120,
                       cwd=cwd or h.WORK)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def take(store, data_dir, n):
    rc, out, err = segment("next", TAG, "-n", str(n), "--store", store, "--data-dir", data_dir)
    h.check(rc == 0, f"next -n {n} --store {store} --data-dir {data_dir}: exit {rc}: {err[:600]}")
    ids = [int(x) for x in out.split()]
    h.check(len(ids) == n, f"{len(ids)} numbers, not {n}")
    return ids


def refused(store, data_dir, n, case, issued):
    """`next` must be refused with STORE_REGRESSED and print no number; returns the floor named."""
    rc, out, err = segment("next", TAG, "-n", str(n), "--store", store, "--data-dir", data_dir)
    again = [int(x) for x in out.split()]
    reserved = len(set(again) & issued)
    h.log(f"{case}: exit {rc}, {len(again)} numbers printed, {reserved} of them re-served")
    h.check(rc != 0 and "STORE_REGRESSED" in err,
            f"{case}: not refused: exit {rc}, {len(again)} numbers ({reserved} re-served): {err[:600]}")
    h.check(not again, f"{case}: printed {len(again)} numbers although refused")
    m = FLOOR_RE.search(err)
    h.check(m is not None, f"{case}: the refusal names no floor: {err[:600]}")
    return int(m.group(1))


def max_id(db):
    con = sqlite3.connect(db, timeout=10)
    try:
        return con.execute("SELECT max_id FROM leaf_alloc WHERE biz_tag = ?", (TAG,)).fetchone()[0]
    finally:
        con.close()


def copy_db(src, dst):
    a, b = sqlite3.connect(src, timeout=10), sqlite3.connect(dst, timeout=10)
    a.backup(b)  # as the sqlite3 shell's .backup / .restore
    a.close()
    b.close()


def run():
    os.makedirs(os.path.join(h.WORK, "store"))
    os.makedirs(os.path.join(h.WORK, "sub"))
    db = os.path.join(h.WORK, "store", "x.db")
    store = "sqlite:store/x.db"
    backup = os.path.join(h.WORK, "backup.db")
    issued = set()

    def record(ids):
        h.check(not set(ids) & issued, "a number was issued twice")
        issued.update(ids)

    rc, _, err = segment("create", TAG, "--step", "100", "--store", store, "--data-dir", "a")
    h.check(rc == 0, f"create: exit {rc}: {err[:600]}")
    copy_db(db, backup)
    record(take(store, "a", 1000))
    saved = max_id(backup)

    # 1. Restored, then another data directory.
    copy_db(backup, db)
    floor = refused(store, "b", 3, "restored, another data directory", issued)
    h.check(floor > max(issued), f"floor {floor} not above {max(issued)}")
    h.check(max_id(db) == saved, f"the refused store moved to {max_id(db)}")
    # 2. The first data directory deleted as well.
    shutil.rmtree(os.path.join(h.WORK, "a"))
    refused(store, "c", 3, "restored, the first data directory deleted", issued)
    # 3. Other spellings of the file, each with a data directory of its own.
    for i, spelling in enumerate(["sqlite:./store/x.db", "sqlite:sub/../store/x.db",
                                  "sqlite:" + db, "sqlite:" + os.path.join(h.WORK, "sub", "..", "store", "x.db")]):
        refused(spelling, f"spelling-{i}", 3, f"spelling {spelling}", issued)
    # 4. A copy of the backup at another path: the store ID it carries.
    os.makedirs(os.path.join(h.WORK, "elsewhere"))
    copy_db(backup, os.path.join(h.WORK, "elsewhere", "copy.db"))
    refused("sqlite:elsewhere/copy.db", "d", 3, "a restored copy at another path", issued)
    h.check(max_id(os.path.join(h.WORK, "elsewhere", "copy.db")) == saved, "the copy moved")

    # Repaired to the floor: serves above everything.
    con = sqlite3.connect(db, timeout=10)
    con.execute("UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = ?", (floor, TAG))
    con.commit()
    con.close()
    record(take(store, "b", 500))

    # 5. A server takes 20,000 IDs; its data directory is deleted after it stops.
    copy_db(db, backup)
    token_file = os.path.join(h.WORK, "token")
    with open(os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(TOKEN + "\n")
    srv = h.Server("s", os.path.join(h.WORK, "srv"),
                   ["--segment-stores", "sqlite:" + db, "--admin-token-file", token_file]).start()
    got = []
    while len(got) < 20000:
        r = h.request(srv.port, f"/v1/segments/{TAG}/ids?count=1000", timeout=15)
        h.check(r.status == 200, f"ids from the server: {r}")
        got.extend(int(x) for x in r.json()["ids"])
    record(got)
    rc, _ = srv.stop()
    h.check(rc == 0, f"server exit {rc}")
    shutil.rmtree(os.path.join(h.WORK, "srv"))
    copy_db(backup, db)
    refused(store, "e", 20000, "server's store restored, its data directory deleted", issued)
    h.log(f"{len(issued)} numbers handed out, 0 issued twice")


def main():
    h.init()
    run()


h.run_main(main)
