#!/usr/bin/env python3
"""One registry (and one static state directory) belongs to one layout.

Two layouts over the same node IDs collide even when their node IDs differ: with the default
layout (time:41, node:10, seq:12) and time:41,seq:12,node:10, node 0's seq 1 is node 1's seq 0.
Before the fix two servers on one data directory, one per layout, got node IDs 0 and 1 and issued
thousands of equal IDs within seconds. Now:
  * a second server with another layout on a sqlite data directory exits at start with a message
    naming both layouts (and the first keeps serving);
  * the same with static registries (--registry static --node 0 / --node 1);
  * `flurry next --layout` with another layout on either kind of directory is refused likewise;
  * the same layout is welcome (a second server gets the next node ID);
  * a data directory the server may not write (as user nobody) or on a read-only file system is
    reported with the system's own reason and the path, not "No such file or directory".

Usage: layouts.py FLURRY
"""
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

DEFAULT = "time:41@1ms,node:10,seq:12;epoch=2025-01-01T00:00:00.000Z"
OTHER = "time:41@1ms,seq:12,node:10;epoch=2025-01-01T00:00:00.000Z"


def refused_start(name, data, args, want):
    s = h.Server(name, data, args).launch()
    try:
        rc = s.proc.wait(20)
    except subprocess.TimeoutExpired:
        h.fail(f"{name}: started with another layout on the same directory")
    log = s.log_text()
    h.check(rc != 0, f"{name}: exit code {rc}")
    for w in want:
        h.check(w in log, f"{name}: the refusal does not say {w!r}: {log[-800:]}")
    return log


def sqlite_dirs():
    data = os.path.join(h.WORK, "sqlite")
    a = h.Server("a", data).start()
    ids = h.get_ids(a.port, 1000)
    refused_start("b", data, ["--layout", OTHER], [DEFAULT, OTHER, "layout"])
    c = h.Server("c", data, ["--layout", "flurry"]).start()
    h.check(c.node != a.node, f"same layout: nodes {a.node} and {c.node}")
    more = h.get_ids(a.port, 1000)
    h.check(more[0] > ids[-1], "the first server stopped serving")
    p = subprocess.run([h.FLURRY, "next", "--state-dir", data, "--layout", OTHER], capture_output=True)
    err = p.stderr.decode()
    h.check(p.returncode != 0 and DEFAULT in err and OTHER in err,
            f"flurry next --layout OTHER on a sqlite directory: rc {p.returncode}: {err}")
    p = subprocess.run([h.FLURRY, "next", "--state-dir", data], capture_output=True)
    h.check(p.returncode == 0, f"flurry next with the same layout: {p.stderr.decode()}")
    a.stop()
    c.stop()
    h.log("sqlite: another layout refused by serve and next, the same layout welcome")


def static_dirs():
    data = os.path.join(h.WORK, "static")
    a = h.Server("s0", data, ["--registry", "static", "--node", "0"]).start()
    refused_start("s1", data, ["--registry", "static", "--node", "1", "--layout", OTHER],
                  [DEFAULT, OTHER])
    p = subprocess.run([h.FLURRY, "next", "--state-dir", data, "--node", "2", "--layout", OTHER],
                       capture_output=True)
    err = p.stderr.decode()
    h.check(p.returncode != 0 and DEFAULT in err and OTHER in err,
            f"flurry next --node 2 --layout OTHER on a static directory: rc {p.returncode}: {err}")
    s2 = h.Server("s2", data, ["--registry", "static", "--node", "2"]).start()
    a.stop()
    s2.stop()
    h.log("static: another layout refused by serve and next, the same layout welcome")


def unwritable_dirs():
    parent = os.path.join(h.WORK, "locked")
    os.makedirs(os.path.join(parent, "data"))
    os.chmod(parent, 0o755)
    os.chmod(os.path.join(parent, "data"), 0o555)
    os.chmod(h.WORK, 0o755)
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    binary = h.binary_for_any_user()  # the build tree may be out of nobody's reach (/root)
    for name, data in (("eacces-new", os.path.join(parent, "new")),
                       ("eacces-existing", os.path.join(parent, "data"))):
        s = h.Server(name, data, wrapper=nobody, preexec=False, binary=binary).launch()
        rc = s.proc.wait(20)
        log = s.log_text()
        # A directory another user owns is refused before it is tried (it could hold planted files).
        reason = "owned by user ID 0" if name == "eacces-existing" else "Permission denied"
        h.check(rc != 0 and reason in log and data in log,
                f"{name}: rc {rc}, the message lacks the reason or the path: {log[-600:]}")
    # A read-only file system, in a mount namespace of its own so nothing else sees it.
    ro = os.path.join(h.WORK, "ro")
    os.makedirs(ro)
    out = os.path.join(h.WORK, "ro.log")
    port = h.free_port()
    script = (f"mount -t tmpfs -o ro,mode=0700 tmpfs {ro} && exec {h.FLURRY} serve --listen 127.0.0.1:{port} "
              f"--data-dir {ro} > {out} 2>&1")
    p = subprocess.run(["unshare", "-m", "sh", "-c", script], timeout=30)
    with open(out) as f:
        log = f.read()
    h.check(p.returncode != 0 and "Read-only file system" in log and ro in log,
            f"read-only data dir: rc {p.returncode}: {log[-600:]}")
    h.log("unwritable data directories: Permission denied / Read-only file system, with the path")


def main():
    h.init()
    sqlite_dirs()
    static_dirs()
    unwritable_dirs()


if __name__ == "__main__":
    h.run_main(main)
