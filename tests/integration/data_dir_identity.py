#!/usr/bin/env python3
"""One data directory, one registry identity; one node ID per host (real processes).

1. A directory first used with the SQLite registry refuses `serve`, `next`, `order new` and
   `nodes` with other registry settings, each naming both identities.
2. Two `flurry serve` on defaults from two working directories share the absolute default data
   directory (one SQLite registry, two node IDs). Two `flurry serve` on one host in two data
   directories (SQLite each): never one node ID twice;
   the second steps over the first's node ID and its log names the first process. Two static
   registries configured with one node ID: the second is refused, naming the first process.
3. `flurry next -n 1000000` (and `flurry order new`) on the data directory of a `flurry serve
   --registry etcd` under load: refused (the directory belongs to etcd), never the server's IDs;
   with the server's registry settings they lease another node ID from etcd and issue beside it.
4. Two etcd clusters (`--cluster blue`, then `green`) on one data directory: the second is refused
   by the identity rule with a message naming both clusters, not a false `registry_regressed`.
5. As 3 beside `flurry serve --registry postgres`.

Usage: data_dir_identity.py FLURRY
"""
import os
import re
import secrets
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
from etcd_registry import Etcd  # noqa: E402
from pglib import Postgres  # noqa: E402

NEXT_COUNT = 1_000_000


def flurry(*args, timeout=120):
    """Runs the flurry CLI; returns (exit code, stdout, stderr)."""
    p = subprocess.run([h.FLURRY] + [str(a) for a in args], stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=timeout, cwd=h.WORK)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def check_refused(what, result, *names):
    rc, out, err = result
    h.check(rc == 1, f"{what}: exit {rc}, expected a refusal (1); stderr: {err[:600]!r}; stdout: {out[:200]!r}")
    for name in names:
        h.check(name in err, f"{what}: the refusal does not name {name!r}: {err[:800]!r}")
    h.check("--data-dir" in err, f"{what}: the refusal does not say how to proceed: {err[:800]!r}")


class Load:
    """Collects a server's IDs from a thread until stopped."""

    def __init__(self, server):
        self.server = server
        self.ids = []
        self.errors = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                self.ids += h.get_ids(self.server.port, 50_000)
            except Exception as e:  # noqa: BLE001 - reported by stop()
                self.errors.append(repr(e))
                return

    def start(self):
        self._thread.start()
        while not self.ids and not self.errors:  # the load runs before the rival starts
            time.sleep(0.01)
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(60)
        h.check(not self.errors, f"load on {self.server.name}: {self.errors[:1]}")
        return set(self.ids)


def decode_orders(codes, keyfile):
    ids = []
    for i in range(0, len(codes), 5000):
        rc, out, err = flurry("order", "decode", "--key-file", keyfile, *codes[i:i + 5000])
        h.check(rc == 0, f"order decode: exit {rc}: {err[:300]}")
        ids += [int(line.split()[-1]) if line.split() else 0 for line in out.splitlines()]
    return ids


def beside_server(name, args, expect_identity, keyfile):
    """`flurry next` and `flurry order new` on the data directory of a server using `args`."""
    data = os.path.join(h.WORK, f"{name}-data")
    srv = h.Server(name, data, args).start()
    load = Load(srv).start()
    t0 = time.monotonic()
    nxt = flurry("next", "-n", NEXT_COUNT, "--state-dir", data, timeout=180)
    orders = flurry("order", "new", "-n", 50_000, "--key-file", keyfile, "--state-dir", data)
    # With the server's registry settings they lease a node ID of their own from its registry.
    same = flurry("next", "-n", 200_000, "--data-dir", data, *args, timeout=180)
    same_orders = flurry("order", "new", "-n", 20_000, "--key-file", keyfile, "--state-dir", data, *args)
    served = load.stop()
    h.log(f"{name}: server issued {len(served)} IDs meanwhile; next exit {nxt[0]} "
          f"in {time.monotonic() - t0:.1f} s")
    h.check(len(served) >= 100_000, f"{name}: the server issued only {len(served)} IDs under load")
    if nxt[0] == 0:
        issued = [int(x) for x in nxt[1].split()]
        h.check(len(issued) == NEXT_COUNT, f"{name}: next printed {len(issued)} IDs")
        dup = served.intersection(issued)
        h.check(not dup, f"{name}: flurry next issued {len(dup)} of the server's IDs "
                         f"(next on node {h.node_of(issued[0])}, server on node {srv.node})")
    else:
        check_refused(f"{name}: flurry next beside the server", nxt, "sqlite:registry.db", expect_identity)
    if orders[0] == 0:
        ids = decode_orders(orders[1].split(), keyfile)
        dup = served.intersection(ids)
        h.check(not dup, f"{name}: flurry order new numbered {len(dup)} of the server's IDs")
    else:
        check_refused(f"{name}: flurry order new beside the server", orders, "sqlite:registry.db",
                      expect_identity)
    h.check(same[0] == 0, f"{name}: next with the server's registry settings: exit {same[0]}: {same[2][:600]}")
    issued = [int(x) for x in same[1].split()]
    nodes = {h.node_of(i) for i in issued}
    h.check(len(issued) == 200_000 and srv.node not in nodes,
            f"{name}: next with the server's settings issued {len(issued)} IDs on nodes {nodes} "
            f"(server on node {srv.node})")
    h.check(not served.intersection(issued), f"{name}: next with the server's settings repeated its IDs")
    h.check(same_orders[0] == 0, f"{name}: order new with the server's settings: {same_orders[2][:600]}")
    ids = decode_orders(same_orders[1].split(), keyfile)
    h.check(len(ids) == 20_000 and srv.node not in {h.node_of(i) for i in ids},
            f"{name}: order new with the server's settings numbered IDs of the server's node")
    h.check(not served.intersection(ids), f"{name}: order new with the server's settings repeated its IDs")
    # The server kept serving, on its node, unharmed.
    h.check(h.request(srv.port, "/readyz").status == 200, f"{name}: server not ready after the rivals")
    rc, _ = srv.stop()
    h.check(rc == 0, f"{name}: server exited {rc}")


def part1_identity_mismatch():
    d = os.path.join(h.WORK, "d1")
    rc, _, err = flurry("next", "-n", 3, "--state-dir", d)
    h.check(rc == 0, f"first next: {err}")
    with open(os.path.join(d, "registry-identity")) as f:
        h.check(f.read() == "sqlite:registry.db\n", "the directory did not record sqlite:registry.db")
    etcd_args = ["--registry", "etcd", "--etcd-endpoints", "127.0.0.1:9", "--cluster", "elsewhere"]
    etcd_id = "etcd:cluster=elsewhere;prefix=/flurry/elsewhere"
    log = h.refused_start(h.Server("mismatch", d, etcd_args), "serve with etcd on a SQLite directory")
    for name in ("sqlite:registry.db", etcd_id, "--data-dir"):
        h.check(name in log, f"serve's refusal does not name {name!r}: {log[-800:]}")
    check_refused("next --node 5", flurry("next", "--state-dir", d, "--node", 5), "sqlite:registry.db",
                  "\"static\"")
    keyfile = os.path.join(h.WORK, "keys")
    check_refused("order new --node 5",
                  flurry("order", "new", "--key-file", keyfile, "--state-dir", d, "--node", 5),
                  "sqlite:registry.db", '"static"')
    check_refused("nodes list", flurry("nodes", "list", "--data-dir", d, *etcd_args), "sqlite:registry.db",
                  etcd_id)
    # The same settings still work, and nothing of the refused registries was left behind.
    rc, out, err = flurry("nodes", "list", "--data-dir", d)
    h.check(rc == 0, f"nodes list with the directory's own registry: {err}")
    h.check(not os.path.exists(os.path.join(d, "horizon-node-5.state")), "a refused static registry wrote")


def part2_two_dirs_one_host():
    a = h.Server("sqlite-a", os.path.join(h.WORK, "a")).start()
    b = h.Server("sqlite-b", os.path.join(h.WORK, "b")).start()
    h.log(f"two data directories: a on node {a.node}, b on node {b.node}")
    h.check(a.node != b.node, f"a and b, each with its own SQLite file, both issue as node {a.node}")
    h.check(re.search(rf"node_in_use.*process {a.pid}\b", b.log_text()),
            f"b's log does not name a (pid {a.pid}) as the holder of node {a.node}")
    ids_a = set(h.get_ids(a.port, 100_000))
    ids_b = h.get_ids(b.port, 100_000)
    h.check(not ids_a.intersection(ids_b), "a and b issued the same IDs")
    # flurry next in a third directory steps over both.
    rc, out, err = flurry("next", "-n", 1000, "--state-dir", os.path.join(h.WORK, "c"))
    h.check(rc == 0, f"next in a third directory: {err}")
    nodes = {h.node_of(int(x)) for x in out.split()}
    h.check(not nodes & {a.node, b.node}, f"next issued as node {nodes} beside a and b")
    h.check(str(a.pid) in err or str(b.pid) in err, f"next did not say which process holds the node: {err}")
    for s in (a, b):
        s.stop()

    # Static: one node ID configured in two directories.
    s1 = h.Server("static-1", os.path.join(h.WORK, "s1"), ["--registry", "static", "--node", "7"]).start()
    s2 = h.Server("static-2", os.path.join(h.WORK, "s2"), ["--registry", "static", "--node", "7"])
    log = h.refused_start(s2, "a second static node 7 on the host")
    h.check("NODE_IN_USE" in log and f"process {s1.pid}" in log,
            f"the refusal does not name the first process ({s1.pid}): {log[-600:]}")
    rc, out, err = flurry("next", "--node", 7, "--state-dir", os.path.join(h.WORK, "s3"))
    h.check(rc == 1 and f"process {s1.pid}" in err, f"next --node 7 beside it: exit {rc}: {err[:400]}")
    s1.stop()


class DefaultDirServer(h.Server):
    """`flurry serve` without --data-dir (its default), started in the working directory `cwd`."""

    def launch(self, port=None):
        self.port = port or h.free_port()
        cmd = [self.binary, "serve", "--listen", f"127.0.0.1:{self.port}"] + self.args
        with open(self.logpath, "ab") as logf:
            logf.write(f"== {' '.join(cmd)} (in {self.cwd})\n".encode())
            logf.flush()
            self.started_at = time.monotonic()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                         env=self.env, cwd=self.cwd, preexec_fn=h._die_with_parent)
        h._servers.append(self)
        return self


def part2b_defaults_from_two_directories():
    """Two servers on defaults, started from two working directories: one absolute default data
    directory ($XDG_STATE_HOME/flurry), one SQLite registry, two node IDs."""
    default = os.path.join(os.environ["XDG_STATE_HOME"], "flurry")
    servers = []
    for name in ("cwd-1", "cwd-2"):
        cwd = os.path.join(h.WORK, name)
        os.makedirs(cwd)
        servers.append(DefaultDirServer(name, default, cwd=cwd).start())
    a, b = servers
    h.check(a.node != b.node, f"two servers on defaults from two directories both issue as node {a.node}")
    h.check(os.path.exists(os.path.join(default, "registry.db")), f"no registry.db in {default}")
    for s in servers:
        h.check(not os.path.exists(os.path.join(s.cwd, "flurry-data")), f"{s.name} used ./flurry-data")
    ids = h.get_ids(a.port, 50_000)
    h.check(not set(ids).intersection(h.get_ids(b.port, 50_000)), "the two servers issued the same IDs")
    for s in servers:
        s.stop()


def part4_two_clusters(etcd):
    d = os.path.join(h.WORK, "clusters")
    base = ["--registry", "etcd", "--etcd-endpoints", etcd.endpoint, "--lease-ttl-ms", "2000"]
    blue = h.Server("blue", d, base + ["--cluster", "blue"]).start()
    h.get_ids(blue.port, 50_000)
    blue.stop()
    log = h.refused_start(h.Server("green", d, base + ["--cluster", "green"]), "green on blue's data directory")
    h.check("registry_regressed" not in log, "green reported a false registry regression")
    for name in ("cluster=blue", "cluster=green", "--data-dir"):
        h.check(name in log, f"green's refusal does not name {name!r}: {log[-800:]}")
    # In a directory of its own green starts.
    green = h.Server("green2", os.path.join(h.WORK, "green"), base + ["--cluster", "green"]).start()
    green.stop()


def main():
    h.init()
    keyfile = os.path.join(h.WORK, "keys")
    with open(keyfile, "w") as f:
        f.write(f"1 = {secrets.token_hex(32)}\n")
    os.chmod(keyfile, 0o600)
    part1_identity_mismatch()
    part2_two_dirs_one_host()
    part2b_defaults_from_two_directories()
    etcd = Etcd().start()
    beside_server("etcd", ["--registry", "etcd", "--etcd-endpoints", etcd.endpoint, "--cluster", "t"],
                  "etcd:cluster=t", keyfile)
    part4_two_clusters(etcd)
    etcd.kill()
    pg = Postgres(h.WORK)
    try:
        pg.start()
        pg.psql("postgres", "CREATE DATABASE ids")
        beside_server("postgres", ["--registry", "postgres", "--postgres-url", pg.url("ids")],
                      f"postgres:host=127.0.0.1;port={pg.port};dbname=ids;user=postgres", keyfile)
    finally:
        pg.stop()


if __name__ == "__main__":
    h.run_main(main)
