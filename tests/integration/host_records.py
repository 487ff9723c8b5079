#!/usr/bin/env python3
"""A node's horizon is known to every process of the host that can issue as that node, whatever
its user, registry or data directory; the host guard sees layouts by structure and across network
namespaces (real processes, every ID kept, duplicates counted exactly).

A layout of 4 IDs per millisecond (seq:2) puts a loaded server up to max_lead (1 s) ahead of its
clock within a moment, as a heavily loaded default layout would be: the case where a successor that
starts at its clock repeats IDs.

1. `flurry next -n 1000000` in data directory A, then at once in data directory B (two SQLite
   registries, both node 0), three pairs: no ID twice.
2. `flurry serve --data-dir x` under load, SIGTERM, then `flurry serve --data-dir y` at once; and
   the same with kill -9: no ID twice.
3. `flurry serve` on etcd (node 0) under load, stopped, then at once `flurry next --data-dir other`
   (its own SQLite registry: node 0 again), as the STATE_MISMATCH advice suggests: no ID twice.
4. `flurry serve` run by root under load, stopped, then a plain `flurry next` by user nobody, whose
   default data directory is in its home: no ID twice.
5. Two servers, one static node, layouts equal up to a field's name (`node:10`, `worker:10`), two
   data directories: the second is refused; with SQLite registries it takes another node ID. A
   static node in a container is warned about (event=static_node_unguarded).
6. The same static node in two network namespaces (two containers sharing the host directory),
   two data directories: the second is refused; with another host directory it starts (the
   control: what refused it was the guard).

Usage: host_records.py FLURRY
"""
import os
import pwd
import shutil
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
from etcd_registry import Etcd  # noqa: E402

SLOW = "time:41@1ms,node:10,seq:2;epoch=2025-01-01Z;bits=53"
SLOW_WORKER = "time:41@1ms,worker:10,seq:2;epoch=2025-01-01Z;bits=53"
SLOW_SEQ_BITS = 2


def flurry(*args, timeout=180, env=None, wrapper=(), binary=None):
    p = subprocess.run(list(wrapper) + [binary or h.FLURRY] + [str(a) for a in args], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=timeout, cwd=h.WORK, env=env)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def duplicates(ids):
    return len(ids) - len(set(ids))


class Load:
    """Takes IDs from a server in a thread until stopped (or until the server goes away)."""

    def __init__(self, server, count=200):
        self.server, self.count = server, count
        self.ids, self.errors = [], []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                self.ids += h.get_ids(self.server.port, self.count)
            except Exception as e:  # noqa: BLE001 - a server stopped under load
                self.errors.append(repr(e))
                return

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(60)
        return self.ids


def lead_ms(server, ids):
    """How far the last ID's time lies ahead of now, in ms (the slow layout's epoch is 2025)."""
    epoch_ms = 1735689600000
    tick = ids[-1] >> (10 + SLOW_SEQ_BITS)
    return epoch_ms + tick - time.time() * 1000


def loaded(name, data, args, seconds=2.5):
    """A server on the slow layout, loaded until it runs ahead of its clock; returns (server, load)."""
    srv = h.Server(name, data, ["--layout", SLOW] + list(args)).start()
    load = Load(srv).start()
    time.sleep(seconds)
    return srv, load


def part1_next_pairs():
    total = dup_total = 0
    for i in range(3):
        a = flurry("next", "-n", 1_000_000, "--state-dir", os.path.join(h.WORK, f"next-a{i}"))
        b = flurry("next", "-n", 1_000_000, "--state-dir", os.path.join(h.WORK, f"next-b{i}"))
        for what, r in (("A", a), ("B", b)):
            h.check(r[0] == 0, f"pair {i}: next in {what}: exit {r[0]}: {r[2][:400]}")
        ids = [int(x) for x in a[1].split()] + [int(x) for x in b[1].split()]
        h.check(len(ids) == 2_000_000, f"pair {i}: {len(ids)} IDs printed")
        total += len(ids)
        dup_total += duplicates(ids)
    h.log(f"1. next in two data directories, 3 pairs: {total} IDs, {dup_total} duplicates")
    h.check(dup_total == 0, f"next in two data directories one after the other repeated {dup_total} IDs")


def part2_serve_then_serve():
    for how, sig in (("SIGTERM", "term"), ("kill -9", "kill")):
        x, load = loaded(f"x-{sig}", os.path.join(h.WORK, f"x-{sig}"), [])
        if sig == "term":
            rc, _ = x.stop()
            h.check(rc == 0, f"{how}: x exited {rc}")
        else:
            x.kill()
        first = load.stop()
        ahead = lead_ms(x, first)
        y = h.Server(f"y-{sig}", os.path.join(h.WORK, f"y-{sig}"), ["--layout", SLOW]).start(timeout=30)
        h.check(y.node == x.node, f"{how}: y took node {y.node}, x had {x.node}: the case is not reproduced")
        second = [i for _ in range(4) for i in h.get_ids(y.port, 2000, timeout=60)]
        y.stop()
        dup = duplicates(first + second)
        h.log(f"2. serve x ({how}, last ID {ahead:.0f} ms ahead of the clock), then serve y at once: "
              f"{len(first) + len(second)} IDs, {dup} duplicates")
        h.check(len(first) >= 4000, f"{how}: x issued only {len(first)} IDs under load")
        h.check(dup == 0, f"{how}: serve in a second data directory repeated {dup} of the first one's IDs")


def part3_etcd_then_next():
    etcd = Etcd().start()
    args = ["--registry", "etcd", "--etcd-endpoints", f"127.0.0.1:{etcd.client_port}", "--cluster", "hr"]
    srv, load = loaded("on-etcd", os.path.join(h.WORK, "on-etcd"), args)
    rc, _ = srv.stop()
    first = load.stop()
    h.check(rc == 0, f"the etcd server exited {rc}")
    # What the STATE_MISMATCH message on the server's directory advises: another data directory.
    rc, out, err = flurry("next", "-n", 8000, "--layout", SLOW, "--data-dir", os.path.join(h.WORK, "other"))
    h.check(rc == 0, f"next in another data directory: exit {rc}: {err[:400]}")
    second = [int(x) for x in out.split()]
    dup = duplicates(first + second)
    h.log(f"3. serve on etcd (node {srv.node}), then next in another data directory: "
          f"{len(first) + len(second)} IDs, {dup} duplicates")
    h.check(dup == 0, f"next beside a stopped etcd server repeated {dup} of its IDs")


def part4_root_then_user():
    if os.geteuid() != 0:
        h.log("4. skipped: needs root to run as a second user")
        return
    nobody = pwd.getpwnam("nobody")
    binary = h.binary_for_any_user()
    srv, load = loaded("root-server", os.path.join(h.WORK, "root-data"), [])
    rc, _ = srv.stop()
    first = load.stop()
    h.check(rc == 0, f"root's server exited {rc}")
    home = os.path.join(h.WORK, "nobody-home")
    os.makedirs(home, exist_ok=True)
    os.chown(home, nobody.pw_uid, nobody.pw_gid)
    env = {k: v for k, v in os.environ.items() if k != "XDG_STATE_HOME"}
    env["HOME"] = home
    wrapper = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]
    rc, out, err = flurry("next", "-n", 8000, "--layout", SLOW, env=env, wrapper=wrapper, binary=binary)
    h.check(rc == 0, f"next as nobody: exit {rc}: {err[:400]}")
    h.check(os.path.isdir(os.path.join(home, ".local", "state", "flurry")),
            "nobody's next did not use the default data directory in its home")
    second = [int(x) for x in out.split()]
    dup = duplicates(first + second)
    h.log(f"4. serve as root, then next as nobody: {len(first) + len(second)} IDs, {dup} duplicates")
    h.check(dup == 0, f"nobody's next repeated {dup} of root's server's IDs")


def refused(server, what):
    log = h.refused_start(server, what)
    h.check("NODE_IN_USE" in log, f"{what}: not refused with NODE_IN_USE: {log[-600:]}")
    return log


def part5_names_are_labels():
    static = ["--registry", "static", "--node", "5"]
    # As if in a container (the variable systemd-nspawn and Podman set): a static node is then
    # guarded only as far as the host directory is shared, and the server says so.
    a = h.Server("static-node", os.path.join(h.WORK, "s-node"), ["--layout", SLOW] + static,
                 env=dict(os.environ, container="podman")).start()
    h.check("event=static_node_unguarded" in a.log_text(),
            f"a static node in a container was not warned about: {a.log_text()[-600:]}")
    b = h.Server("static-worker", os.path.join(h.WORK, "s-worker"), ["--layout", SLOW_WORKER] + static)
    log = refused(b, "static node 5 as worker:10 beside node:10")
    h.check(str(a.pid) in log, f"the refusal does not name the holder (pid {a.pid}): {log[-400:]}")
    a.stop()
    # Leasing registries step over the node ID instead.
    c = h.Server("lease-node", os.path.join(h.WORK, "l-node"), ["--layout", SLOW]).start()
    d = h.Server("lease-worker", os.path.join(h.WORK, "l-worker"), ["--layout", SLOW_WORKER]).start()
    h.check(c.node != d.node, f"node:10 and worker:10 in two data directories both issue as node {c.node}")
    ids = h.get_ids(c.port, 2000) + h.get_ids(d.port, 2000)
    h.check(duplicates(ids) == 0, "node:10 and worker:10 issued the same IDs")
    h.log(f"5. node:10 and worker:10: static node refused, leased nodes {c.node} and {d.node}")
    c.stop()
    d.stop()


def part6_network_namespaces():
    if os.geteuid() != 0 or not shutil.which("ip"):
        h.log("6. skipped: needs root and ip(8) for network namespaces")
        return
    ns = f"flurry-it-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        static = ["--layout", SLOW, "--registry", "static", "--node", "9"]
        a = h.Server("ns-host", os.path.join(h.WORK, "ns-a"), static).start()
        inside = ["ip", "netns", "exec", ns]
        b = h.Server("ns-other", os.path.join(h.WORK, "ns-b"), static, wrapper=inside)
        log = refused(b, "static node 9 in another network namespace")
        h.check(str(a.pid) in log, f"the refusal does not name the holder (pid {a.pid}): {log[-400:]}")
        # The control: with a host directory of its own the same start succeeds in the namespace.
        other_host = os.path.join(h.WORK, "other-host")
        os.makedirs(other_host, mode=0o755, exist_ok=True)
        env = dict(os.environ, FLURRY_HOST_DIR=other_host)
        c = h.Server("ns-control", os.path.join(h.WORK, "ns-c"), static, wrapper=inside, env=env)
        c.launch()
        time.sleep(3)
        h.check(c.alive(), f"the control in the namespace did not start: {c.log_text()[-600:]}")
        c.stop()
        a.stop()
        h.log("6. static node in two network namespaces: the second refused, naming the first")
    finally:
        subprocess.run(["ip", "netns", "delete", ns], check=False)


def main():
    h.init()
    part1_next_pairs()
    part2_serve_then_serve()
    part3_etcd_then_next()
    part4_root_then_user()
    part5_names_are_labels()
    part6_network_namespaces()


if __name__ == "__main__":
    h.run_main(main)
