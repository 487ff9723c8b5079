#!/usr/bin/env python3
"""A segment store moved back under load is refused, never served again (store floors).

One `flurry serve` on its SQLite segment store (<data_dir>/segments.db) serves tag `t` while a
client takes /v1/segments/t/ids?count=500 without pause and keeps every ID. The store is moved
back four ways, as an operator or a restore would:

1. max_id moved down (UPDATE leaf_alloc SET max_id = 1);
2. a backup taken (the sqlite3 backup API, as `.backup`), IDs issued, the backup restored;
3. the tag's row deleted;
4. the server stopped, segments.db deleted, the server started again and the tag created again
   with start 1 (POST /v1/segments).

Each time: once the buffers are used up the client gets 503 with Retry-After and reason
STORE_REGRESSED (the body names the floor), /metrics counts flurry_segment_store_regressed_total,
the log has event=segment_store_regressed, and the store is left as it was (nothing allocated
from it); `flurry segment next` on the same data directory is refused the same way. The store is then repaired to the floor the 503 named, and the tag serves again within
a few seconds. Over the whole run: 0 duplicates among every ID handed out.

Usage: segments_regressed.py FLURRY
"""
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

TAG = "t"
TOKEN = "segments-regressed-test-token-0123456789"
FLOOR_RE = re.compile(r"(?:set max_id to|with start) at least (\d+)")


class Client(threading.Thread):
    """Takes IDs without pause; keeps every ID and the last refusal."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.ids = []
        self.lock = threading.Lock()
        self.refusals = 0
        self.last_refusal = None
        self.ok_since_refusal = 0
        self.stop = False
        self.error = None

    def run(self):
        try:
            while not self.stop:
                try:
                    r = h.request(self.port, f"/v1/segments/{TAG}/ids?count=500", timeout=10)
                except OSError:
                    time.sleep(0.05)  # the server is being restarted
                    continue
                with self.lock:
                    if r.status == 200:
                        self.ids.extend(int(x) for x in r.json()["ids"])
                        self.ok_since_refusal += 1
                    else:
                        self.refusals += 1
                        self.last_refusal = r
                        self.ok_since_refusal = 0
                if r.status != 200:
                    time.sleep(0.01)
        except Exception as e:  # reported by the main thread
            self.error = e

    def count(self):
        with self.lock:
            return len(self.ids)


def sql(db, statement):
    con = sqlite3.connect(db, timeout=10)
    try:
        con.execute(statement)
        con.commit()
    finally:
        con.close()


def max_id(db):
    con = sqlite3.connect(db, timeout=10)
    try:
        row = con.execute("SELECT max_id FROM leaf_alloc WHERE biz_tag = ?", (TAG,)).fetchone()
        return None if row is None else row[0]
    finally:
        con.close()


def refused(client, srv, case, moved_to):
    """Waits for a STORE_REGRESSED 503 and checks it; returns the floor the body names."""
    def seen():
        with client.lock:
            r = client.last_refusal
            return r if r is not None and client.ok_since_refusal == 0 else None
    r = h.wait_for(seen, f"{case}: a 503 once the store went backwards")
    h.check(r.status == 503, f"{case}: {r}")
    h.check(r.headers.get("retry-after") is not None, f"{case}: no Retry-After: {r.headers}")
    body = r.json()
    h.check(body.get("reason") == "STORE_REGRESSED" or "STORE_REGRESSED" in r.body.decode(),
            f"{case}: the 503 does not say STORE_REGRESSED: {r.body[:600]!r}")
    m = FLOOR_RE.search(r.body.decode())
    h.check(m is not None, f"{case}: the 503 does not name the floor: {r.body[:600]!r}")
    floor = int(m.group(1))
    with client.lock:
        highest = max(client.ids)
    h.check(floor > highest, f"{case}: the floor {floor} is not above the highest ID issued, {highest}")
    # Refusals leave the store as it was found.
    time.sleep(0.3)
    now = max_id(os.path.join(srv.data_dir, "segments.db"))
    h.check(now == moved_to, f"{case}: the store moved from {moved_to} to {now} while refused")
    h.log(f"{case}: refused (503 STORE_REGRESSED, floor {floor})")
    return floor


def recovered(client, case):
    before = client.count()
    h.wait_for(lambda: client.count() > before + 5000, f"{case}: IDs again after the repair")
    h.log(f"{case}: served again after the repair")


def run():
    data = os.path.join(h.WORK, "data")
    db = os.path.join(data, "segments.db")
    token_file = os.path.join(h.WORK, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    args = ["--admin-token-file", token_file, "--segment-max-step", "4000"]
    srv = h.Server("a", data, args).start()

    def create(start):
        r = h.request(srv.port, "/v1/segments", method="POST",
                      headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
                      body=json.dumps({"tag": TAG, "start": start, "step": 1000}))
        h.check(r.status == 201, f"POST /v1/segments start {start}: {r}")

    create(1)
    client = Client(srv.port)
    client.start()
    h.wait_for(lambda: client.count() >= 20000, "the first 20,000 IDs")

    # 1. max_id moved down.
    sql(db, "UPDATE leaf_alloc SET max_id = 1")
    floor = refused(client, srv, "max_id moved down", 1)
    # The CLI on the same data directory keeps the same floors: refused too, the store untouched.
    p = subprocess.run([h.FLURRY, "segment", "next", TAG, "--data-dir", data, "-n", "3"],
                       capture_output=True, timeout=60, cwd=h.WORK)
    out = p.stdout.decode() + p.stderr.decode()
    h.check(p.returncode != 0 and "STORE_REGRESSED" in out and p.stdout.strip() == b"",
            f"flurry segment next on the moved-back store: exit {p.returncode}: {out[:600]}")
    h.check(max_id(db) == 1, f"flurry segment next moved the store to {max_id(db)}")
    sql(db, f"UPDATE leaf_alloc SET max_id = {floor}")
    recovered(client, "max_id moved down")

    # 2. A backup restored.
    backup = os.path.join(h.WORK, "backup.db")
    src, dst = sqlite3.connect(db, timeout=10), sqlite3.connect(backup)
    src.backup(dst)
    src.close()
    dst.close()
    saved = max_id(backup)
    start = client.count()
    h.wait_for(lambda: client.count() >= start + 50000, "50,000 IDs after the backup")
    src, dst = sqlite3.connect(backup), sqlite3.connect(db, timeout=10)
    src.backup(dst)  # what the sqlite3 shell's .restore does
    src.close()
    dst.close()
    floor = refused(client, srv, "backup restored", saved)
    sql(db, f"UPDATE leaf_alloc SET max_id = {floor}")
    recovered(client, "backup restored")

    # 3. The tag's row deleted.
    sql(db, f"DELETE FROM leaf_alloc WHERE biz_tag = '{TAG}'")
    floor = refused(client, srv, "tag row deleted", None)
    create(floor)
    recovered(client, "tag row deleted")

    # 4. segments.db deleted, the server restarted, the tag created again with start 1.
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit {rc} after SIGTERM")
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    with client.lock:
        client.last_refusal = None
    srv.start()
    client.port = srv.port
    create(1)
    floor = refused(client, srv, "segments.db deleted and the tag created again", 1)
    sql(db, f"UPDATE leaf_alloc SET max_id = {floor}")
    recovered(client, "segments.db deleted and the tag created again")

    client.stop = True
    client.join(30)
    if client.error is not None:
        raise client.error
    ids = client.ids
    dup = len(ids) - len(set(ids))
    h.log(f"{len(ids)} IDs, {client.refusals} refusals, {dup} duplicates")
    h.check(dup == 0, f"{dup} IDs were issued twice")
    metrics = h.request(srv.port, "/metrics").text
    counted = h.metric(metrics, "flurry_segment_store_regressed_total", {"tag": TAG})
    h.check(counted is not None and counted >= 1,
            f"flurry_segment_store_regressed_total{{tag=\"{TAG}\"}} is {counted}")
    h.check("event=segment_store_regressed" in srv.log_text(), "no event=segment_store_regressed in the log")
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit {rc} after SIGTERM")


def main():
    h.init()
    run()


h.run_main(main)
