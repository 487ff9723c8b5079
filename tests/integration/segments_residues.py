#!/usr/bin/env python3
"""Residues across segment stores are proven, whatever the order of the stores.

Two SQLite stores, a.db and b.db, and two `flurry serve` processes listing them in opposite
orders (segment_stores "sqlite:a,sqlite:b" and "sqlite:b,sqlite:a"), each with a data directory
of its own.

1. Tag `t` created in each store on its own with `flurry segment create` (delta 1 each, no residue
   rows): both servers refuse it (an error naming both stores, never an ID), and so does
   `flurry segment next` over the two stores. Before the proof, both servers served it from 1.
2. Tag `u` created through the first server (delta 2, a remainder per store): both servers serve
   it, 100,000 IDs each with the client pulling from both at once: 0 duplicates.
3. Tags "." and ".." are refused with 400 (they name directories, not tags).

Usage: segments_residues.py FLURRY
"""
import json
import os
import subprocess
import sys
import threading

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

TOKEN = "segments-residues-test-token-0123456789"
PER_SERVER = 100_000


def cli(expect_ok, *args):
    cmd = [h.FLURRY, "segment"] + list(args)
    p = subprocess.run(cmd, capture_output=True, timeout=60, cwd=h.WORK)
    out = p.stdout.decode() + p.stderr.decode()
    h.check((p.returncode == 0) == expect_ok, f"{' '.join(cmd)} exited {p.returncode}: {out[:800]}")
    return out


def run():
    a = os.path.join(h.WORK, "a.db")
    b = os.path.join(h.WORK, "b.db")
    cli_dir = os.path.join(h.WORK, "cli-data")
    for store in (a, b):
        cli(True, "create", "t", "--store", f"sqlite:{store}", "--step", "1000", "--data-dir", cli_dir)
    token_file = os.path.join(h.WORK, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    servers = []
    for name, order in (("ab", f"sqlite:{a},sqlite:{b}"), ("ba", f"sqlite:{b},sqlite:{a}")):
        servers.append(h.Server(name, os.path.join(h.WORK, f"data-{name}"),
                                ["--segment-stores", order, "--admin-token-file", token_file]).start())

    # 1. delta 1 in both stores: refused by both servers, naming both stores.
    for s in servers:
        r = h.request(s.port, "/v1/segments/t/ids?count=10")
        h.check(r.status != 200, f"{s.name} served tag t although its stores have delta 1 each: {r}")
        msg = r.json()["error"]["message"]
        h.check(a in msg and b in msg, f"{s.name}: the refusal does not name both stores: {msg}")
        h.check("below the number of stores" in msg, f"{s.name}: the refusal does not say why: {msg}")
        h.log(f"{s.name}: tag t refused ({r.status}): {msg[:160]}...")
    out = cli(False, "next", "t", "--store", f"sqlite:{b},sqlite:{a}", "--data-dir", cli_dir, "-n", "5")
    h.check(a in out and b in out, f"flurry segment next: the refusal does not name both stores: {out}")

    # 2. Created through a server: delta 2, remainders 0 and 1; both orders serve, never the same ID.
    r = h.request(servers[0].port, "/v1/segments", method="POST",
                  headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
                  body=json.dumps({"tag": "u", "start": 1, "step": 1000}))
    h.check(r.status == 201, f"POST /v1/segments: {r}")
    got = {}

    def pull(s):
        ids = []
        while len(ids) < PER_SERVER:
            r = h.request(s.port, "/v1/segments/u/ids?count=1000")
            h.check(r.status == 200, f"{s.name}: {r}")
            ids.extend(int(x) for x in r.json()["ids"])
        got[s.name] = ids

    threads = [threading.Thread(target=pull, args=(s,)) for s in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    h.check(all(s.name in got for s in servers), "a client did not finish")
    everything = got["ab"] + got["ba"]
    dup = len(everything) - len(set(everything))
    h.log(f"tag u: {len(everything)} IDs from both servers, {dup} duplicates")
    h.check(dup == 0, f"{dup} IDs issued by both servers")

    # 3. "." and "..".
    for bad in (".", ".."):
        r = h.request(servers[0].port, "/v1/segments", method="POST",
                      headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
                      body=json.dumps({"tag": bad}))
        h.check(r.status == 400 and "not tag names" in r.text, f"POST tag {bad!r}: {r}")
    for s in servers:
        rc, _ = s.stop()
        h.check(rc == 0, f"{s.name} exit {rc} after SIGTERM")


def main():
    h.init()
    run()


h.run_main(main)
