#!/usr/bin/env python3
"""A `flurry serve` refused because its data directory belongs to another registry leaves the
directory exactly as it found it: no segments.db, no segment-floors/, no file created, changed
or removed (real processes, the directory snapshot compared file by file).

  1. A directory first used by `flurry next` (SQLite registry): `serve --registry etcd` refused.
  2. A directory first used by a static registry (`flurry next --node 5`): a
     default `serve` (SQLite) refused, as `make run` on a host whose default directory belongs to
     another registry.
  3. The control: `serve` with the directory's own registry starts, and then segments.db and
     segment-floors/ are there (the snapshot would have seen them).

Usage: refused_start_files.py FLURRY [CLIENT]
"""
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def flurry(*args):
    p = subprocess.run([h.FLURRY] + [str(a) for a in args], stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=60, cwd=h.WORK)
    h.check(p.returncode == 0, f"flurry {' '.join(map(str, args))}: exit {p.returncode}: {p.stderr.decode()}")


def snapshot(d):
    """Every entry under d: path -> (type and mode, size, mtime in ns, inode)."""
    out = {}
    for root, dirs, files in os.walk(d):
        for name in dirs + files:
            p = os.path.join(root, name)
            st = os.lstat(p)
            out[os.path.relpath(p, d)] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def refused_leaves_nothing(what, d, args):
    before = snapshot(d)
    h.check(before, f"{what}: the directory is empty before the refused start")
    log = h.refused_start(h.Server(what, d, args), what)
    h.check("belongs to the registry" in log and "--data-dir" in log,
            f"{what}: expected the identity refusal naming --data-dir: {log[-800:]}")
    after = snapshot(d)
    for name in ("segments.db", "segment-floors"):
        h.check(name not in after, f"{what}: the refused start created {name}")
    h.check(after == before, f"{what}: the refused start changed the directory: "
            f"created {sorted(set(after) - set(before))}, removed {sorted(set(before) - set(after))}, "
            f"changed {sorted(k for k in before if k in after and before[k] != after[k])}")
    h.log(f"{what}: refused, the {len(before)} entries of the directory untouched")


def main():
    sqlite_dir = os.path.join(h.WORK, "sqlite-dir")
    flurry("next", "-n", 3, "--state-dir", sqlite_dir)
    refused_leaves_nothing("etcd on a SQLite directory", sqlite_dir,
                           ["--registry", "etcd", "--etcd-endpoints", "127.0.0.1:9", "--cluster", "elsewhere"])

    static_dir = os.path.join(h.WORK, "static-dir")
    flurry("next", "-n", 3, "--state-dir", static_dir, "--node", 5)
    refused_leaves_nothing("default serve on a static directory", static_dir, [])

    # The control: the directory's own registry starts, and the files the refusals must not
    # create are there now.
    srv = h.Server("own-registry", sqlite_dir).start()
    after = snapshot(sqlite_dir)
    for name in ("segments.db", "segment-floors"):
        h.check(name in after, f"a started server has no {name} (the check above would see nothing)")
    rc, _ = srv.stop()
    h.check(rc == 0, f"own-registry exited {rc}")


h.init()
h.run_main(main)
