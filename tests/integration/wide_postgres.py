#!/usr/bin/env python3
"""UUIDv7 and ULID forms of flurry IDs against independent readers: 10^6 IDs from `flurry next
--format uuidv7` are COPYed into a uuid column of a real PostgreSQL server (initdb in the work
directory), so PostgreSQL's own parser accepts every one; the millisecond PostgreSQL reads from
each UUID's first 48 bits equals the time flurry gives the ID inside it (epoch + ticks, the ID
taken from the documented bit positions, and `flurry decode` itself on a sample); PostgreSQL's
ORDER BY on the uuid column and Python's sort of the texts both keep the order the IDs were issued
in (increasing). ULID: the same checks in Python, the ID back through `flurry decode`.

Usage: wide_postgres.py FLURRY
"""
import json
import os
import subprocess
import sys
import uuid

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
from pglib import Postgres  # noqa: E402

COUNT = 1_000_000
EPOCH_MS = 1735689600000  # the default layout's epoch, 2025-01-01Z
FIELD_BITS = 22  # node:10, seq:12 below the 41-bit time field
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
SAMPLE = 40  # IDs also decoded by `flurry decode`, spread over the run


def flurry(*args):
    p = subprocess.run([h.FLURRY, *args], capture_output=True, timeout=120)
    h.check(p.returncode == 0, f"flurry {' '.join(args[:4])}... exited {p.returncode}: {p.stderr.decode()[:500]}")
    return p.stdout.decode()


def issue(fmt, state):
    texts = flurry("next", "-n", str(COUNT), "--format", fmt, "--state-dir", state).split("\n")
    h.check(texts[-1] == "", "output does not end with a newline")
    texts = texts[:-1]
    h.check(len(texts) == COUNT, f"{len(texts)} {fmt} lines, expected {COUNT}")
    return texts


def uuid_id(text):
    """The flurry ID inside a UUIDv7, from the bit positions docs/design.md gives: the 22 field
    bits lead the 74 bits after the version and variant; the time is the millisecond."""
    v = int(text.replace("-", ""), 16)
    payload = ((v >> 64) & 0xFFF) << 62 | (v & ((1 << 62) - 1))
    return ((v >> 80) - EPOCH_MS) << FIELD_BITS | payload >> (74 - FIELD_BITS)


def ulid_value(text):
    v = 0
    for c in text:
        v = v * 32 + CROCKFORD.index(c)
    return v


def ulid_id(text):
    v = ulid_value(text)
    return ((v >> 80) - EPOCH_MS) << FIELD_BITS | (v & ((1 << 80) - 1)) >> (80 - FIELD_BITS)


def check_sample(texts, ids, fmt):
    """`flurry decode` (the form recognised by its shape) gives back the ID and its time."""
    for i in range(0, COUNT, COUNT // SAMPLE):
        j = json.loads(flurry("decode", "--json", texts[i]))
        h.check(int(j["id"]) == ids[i], f"flurry decode {texts[i]}: id {j['id']}, expected {ids[i]}")
        h.check(j["unix_ms"] == EPOCH_MS + (ids[i] >> FIELD_BITS),
                f"flurry decode {texts[i]}: unix_ms {j['unix_ms']}")
        again = json.loads(flurry("decode", "--format", fmt, "--json", texts[i].lower()))
        h.check(again["id"] == j["id"], f"decode --format {fmt} of the lower-case text differs")


def check_uuids(pg, texts):
    ids = [uuid_id(t) for t in texts]
    h.check(all(a < b for a, b in zip(ids, ids[1:])), "the IDs inside the UUIDs do not increase")
    h.check(sorted(texts) == texts, "sorting the UUID texts does not sort like the IDs")
    for t in texts[:: COUNT // 1000]:
        u = uuid.UUID(t)
        h.check(u.version == 7 and u.variant == uuid.RFC_4122, f"Python's uuid: {t} is not a UUIDv7")
    check_sample(texts, ids, "uuidv7")

    pg.psql("postgres", "CREATE DATABASE wide")
    pg.psql("wide", "CREATE TABLE ids (n integer NOT NULL, u uuid NOT NULL)")
    rows = "".join(f"{n}\t{t}\n" for n, t in enumerate(texts)).encode()
    psql = [os.path.join(pg.bindir, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
            "-p", str(pg.port), "-U", "postgres", "-d", "wide"]
    p = subprocess.run(psql + ["-c", "COPY ids (n, u) FROM STDIN"], input=rows, capture_output=True,
                       timeout=120)
    h.check(p.returncode == 0, f"COPY into a uuid column refused: {p.stderr.decode()[:500]}")
    h.check(pg.psql("wide", "SELECT count(*) || ' ' || count(DISTINCT u) FROM ids") == f"{COUNT} {COUNT}",
            "PostgreSQL did not keep every UUID, or saw duplicates")
    # The first 48 bits as PostgreSQL reads them, in PostgreSQL's uuid order.
    sql = ("COPY (SELECT n, u::text, ('x' || lpad(substr(replace(u::text, '-', ''), 1, 12), 16, '0'))"
           "::bit(64)::bigint FROM ids ORDER BY u) TO STDOUT")
    p = subprocess.run(psql + ["-c", sql], capture_output=True, timeout=120)
    h.check(p.returncode == 0, f"reading the UUIDs back: {p.stderr.decode()[:500]}")
    lines = p.stdout.decode().split("\n")[:-1]
    h.check(len(lines) == COUNT, f"{len(lines)} rows read back")
    for expect, line in enumerate(lines):
        n, text, ms = line.split("\t")
        n, ms = int(n), int(ms)
        h.check(n == expect, f"ORDER BY u puts the ID issued {n}th at place {expect}: not the ID order")
        h.check(text == texts[n], f"PostgreSQL prints {text} for {texts[n]}")
        h.check(ms == EPOCH_MS + (ids[n] >> FIELD_BITS),
                f"PostgreSQL reads {ms} ms from {text}; flurry's time of ID {ids[n]} is "
                f"{EPOCH_MS + (ids[n] >> FIELD_BITS)}")
    h.log(f"{COUNT} UUIDv7: PostgreSQL accepts them, reads flurry's millisecond, sorts them like the IDs")


def check_ulids(texts):
    ids = [ulid_id(t) for t in texts]
    h.check(all(a < b for a, b in zip(ids, ids[1:])), "the IDs inside the ULIDs do not increase")
    h.check(sorted(texts) == texts, "sorting the ULID texts does not sort like the IDs")
    for t in texts:
        if len(t) != 26 or t[0] > "7":
            h.fail(f"not a ULID: {t}")
    check_sample(texts, ids, "ulid")
    h.log(f"{COUNT} ULIDs: increasing, their time flurry's, decoded back to the IDs")


def main():
    h.init()
    state = os.path.join(h.WORK, "state-dir")
    uuids = issue("uuidv7", state)
    ulids = issue("ulid", state)
    h.check(ulid_id(ulids[0]) > uuid_id(uuids[-1]), "the second run's IDs are not above the first's")
    check_ulids(ulids)
    pg = Postgres(h.WORK)
    pg.start()
    try:
        check_uuids(pg, uuids)
    finally:
        pg.stop()  # before run_main removes the work directory


if __name__ == "__main__":
    h.run_main(main)
