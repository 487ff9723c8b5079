#!/usr/bin/env python3
"""UUIDv7 and ULID over HTTP: `encoding=uuidv7|ulid` on /v1/ids (JSON and text) gives real
UUIDv7s (Python's uuid module agrees on version and variant) and ULIDs that increase like the IDs
and carry this node and a time within seconds of now; /v1/ids/{id}?encoding=... decodes them back
to the ID inside (the same ID `flurry decode` finds); bad text is 400 with the codec's message;
a server whose layout cannot carry them (time:41@10ms) refuses both encodings with 400 and the
reason, and still serves the others.

Usage: wide_http.py FLURRY
"""
import json
import os
import subprocess
import sys
import time
import uuid

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

EPOCH_MS = 1735689600000  # the default layout's epoch, 2025-01-01Z
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
COARSE = "time:41@10ms,node:10,seq:12;epoch=2025-01-01Z"


def ids_of(r, what):
    h.check(r.status == 200, f"{what}: expected 200, got {r}")
    if r.headers.get("content-type", "").startswith("text/plain"):
        return r.text.split("\n")[:-1]
    return r.json()["ids"]


def unix_ms_of(text):
    if "-" in text:
        return int(text.replace("-", "")[:12], 16)
    v = 0
    for c in text:
        v = v * 32 + CROCKFORD.index(c)
    return v >> 80


def decode(port, text, encoding):
    r = h.request(port, f"/v1/ids/{text}?encoding={encoding}")
    h.check(r.status == 200, f"GET /v1/ids/{text}?encoding={encoding}: {r}")
    return r.json()


def cli_decode(text):
    p = subprocess.run([h.FLURRY, "decode", "--json", text], capture_output=True, timeout=60)
    h.check(p.returncode == 0, f"flurry decode {text}: {p.stderr.decode()}")
    return json.loads(p.stdout)


def main():
    h.init()
    srv = h.Server("wide", os.path.join(h.WORK, "data")).start()
    port, node = srv.port, srv.node
    last = 0
    for encoding in ("uuidv7", "ulid"):
        for fmt in ("json", "text"):
            path = f"/v1/ids?count=500&encoding={encoding}&format={fmt}"
            texts = ids_of(h.request(port, path), path)
            h.check(len(texts) == 500, f"{path}: {len(texts)} IDs")
            h.check(texts == sorted(texts) and len(set(texts)) == 500, f"{path}: texts do not increase")
            for t in texts:
                if encoding == "uuidv7":
                    u = uuid.UUID(t)
                    h.check(u.version == 7 and u.variant == uuid.RFC_4122 and str(u) == t, f"{path}: {t}")
                else:
                    h.check(len(t) == 26 and t[0] <= "7" and all(c in CROCKFORD for c in t), f"{path}: {t}")
            now = time.time() * 1000
            h.check(abs(unix_ms_of(texts[-1]) - now) < 10000, f"{path}: {texts[-1]} is not near now")
            ids = []
            for t in (texts[0], texts[250], texts[-1]):
                d = decode(port, t, encoding)
                h.check(d["unix_ms"] == unix_ms_of(t), f"decode {t}: unix_ms {d['unix_ms']}")
                h.check(d["node"] == node, f"decode {t}: node {d['node']}, the server is node {node}")
                h.check(int(d["id"]) == int(cli_decode(t)["id"]), f"{t}: HTTP and flurry decode disagree")
                h.check(d["unix_ms"] == EPOCH_MS + (int(d["id"]) >> 22), f"decode {t}: time is not the ID's")
                ids.append(int(d["id"]))
            h.check(last < ids[0] < ids[1] < ids[2], f"{path}: IDs inside do not increase: {ids}, after {last}")
            last = ids[2]
        # Lower case is fine for a ULID, upper case for a UUID.
        t = ids_of(h.request(port, f"/v1/ids?encoding={encoding}"), encoding)[0]
        other = t.lower() if encoding == "ulid" else t.upper()
        h.check(decode(port, other, encoding)["id"] == decode(port, t, encoding)["id"], f"{other}: case")

    # format=number is decimal by definition.
    r = h.request(port, "/v1/ids?format=number&encoding=uuidv7")
    h.check_error_body(r, 400, "format=number&encoding=uuidv7", code="INVALID_ARGUMENT")
    # Bad text: 400 and what is wrong with it.
    for text, encoding, why in (
            ("01941f29-7fe8-4014-807f-ffffffffffff", "uuidv7", "version 4"),
            ("01941f29-7fe8-7014-c07f-ffffffffffff", "uuidv7", "variant bits 11"),
            ("01941f29-7fe8-7014-807f-fffffffffff", "uuidv7", "35 characters"),
            ("018cc251-f400-7000-8000-000000000000", "uuidv7", "before the layout's epoch"),
            ("81JGFJJZZ80501R00000000000", "ulid", "overflows 128 bits"),
            ("01JGFJJZZ80501R0000000000U", "ulid", "bad character 'U' at position 25"),
            ("01941f29-7fe8-7014-807f-ffffffffffff", "ulid", "36 characters")):
        r = h.request(port, f"/v1/ids/{text}?encoding={encoding}")
        err = h.check_error_body(r, 400, f"decode {text} as {encoding}", code="INVALID_ARGUMENT",
                                 reason="")  # BAD_INPUT is left out
        h.check(why in err["message"], f"decode {text} as {encoding}: {err['message']!r} lacks {why!r}")
    r = h.request(port, "/v1/ids?encoding=uuid")
    err = h.check_error_body(r, 400, "encoding=uuid", code="INVALID_ARGUMENT")
    h.check("uuidv7 or ulid" in err["message"], f"encoding=uuid: {err['message']!r}")
    rc, _ = srv.stop()
    h.check(rc == 0, f"server exited {rc}")

    # A layout with 10 ms units cannot carry them: 400 with the reason, other encodings still work.
    coarse = h.Server("coarse", os.path.join(h.WORK, "coarse"), args=["--layout", COARSE]).start()
    for encoding in ("uuidv7", "ulid"):
        for path in (f"/v1/ids?encoding={encoding}", f"/v1/ids/1?encoding={encoding}"):
            err = h.check_error_body(h.request(coarse.port, path), 400, path, code="INVALID_ARGUMENT",
                                     reason="")  # BAD_INPUT is left out
            h.check("coarser than 1 ms" in err["message"] and encoding in err["message"],
                    f"{path}: {err['message']!r}")
    ids_of(h.request(coarse.port, "/v1/ids?encoding=hex&count=3"), "coarse layout, hex")
    rc, _ = coarse.stop()
    h.check(rc == 0, f"coarse server exited {rc}")


if __name__ == "__main__":
    h.run_main(main)
