#!/usr/bin/env python3
"""The etcd registry with real processes: a real etcd and `flurry serve --registry etcd`.

1. A and B (each with its own data directory, as on two hosts) share cluster "t": they get
   different node IDs, and their IDs decode to them.
2. A is killed with SIGKILL. Its node key stays in etcd while its lease lives and is gone within
   the TTL and etcd's expiry slack; its horizon stays.
3. C, started then, claims A's node ID (the lowest free one), inherits A's horizon from etcd (C's
   data directory is new: nothing local to go by) and issues only IDs above A's last one.
   `flurry nodes list` shows B and C live; `nodes release` refuses B's live lease.
4. D, with another layout on the same cluster, is refused (STATE_MISMATCH naming both layouts),
   and so is E, on cluster "T" beside "t" (names compare exactly; case twins are refused).
5. B and C stop on SIGTERM, releasing their node IDs: their node keys are gone at once.

Usage: etcd_registry.py FLURRY
"""
import base64
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

TTL_MS = 2000
# etcd looks for expired leases every 500 ms and then deletes their keys through Raft.
EXPIRY_SLACK_S = 1.5
CLUSTER = "t"


class Etcd:
    """A single-member etcd on 127.0.0.1 and free ports, killed by PID at exit (harness cleanup)."""

    def __init__(self):
        self.name = "etcd"
        self.client_port = h.free_port()
        self.peer_port = h.free_port()
        self.logpath = os.path.join(h.WORK, "etcd.log")
        self.proc = None

    def launch(self, cmd):
        """Starts `cmd` (this etcd), killed by PID at exit, its log dumped on failure."""
        with open(self.logpath, "ab") as logf:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                         preexec_fn=h._die_with_parent)
        h._servers.append(self)

    def start(self, timeout=30.0):
        client = f"http://127.0.0.1:{self.client_port}"
        peer = f"http://127.0.0.1:{self.peer_port}"
        cmd = [os.environ.get("FLURRY_ETCD", "etcd"), "--name=it", f"--data-dir={h.WORK}/etcd-data",
               f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
               f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
               f"--initial-cluster=it={peer}", "--logger=zap", "--log-level=warn"]
        self.launch(cmd)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            h.check(self.proc.poll() is None, f"etcd exited with {self.proc.returncode} at start")
            try:
                self.range(f"/flurry/{CLUSTER}/probe")
                return self
            except (OSError, http.client.HTTPException):
                time.sleep(0.05)
        h.fail(f"etcd did not answer within {timeout} s")

    @property
    def endpoint(self):
        return f"127.0.0.1:{self.client_port}"

    def post(self, path, body):
        conn = http.client.HTTPConnection("127.0.0.1", self.client_port, timeout=5)
        try:
            conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            h.check(r.status == 200, f"etcd {path}: HTTP {r.status} {data[:300]!r}")
            return json.loads(data)
        finally:
            conn.close()

    def range(self, key):
        """The value of `key` and its create_revision, or None when absent."""
        j = self.post("/v3/kv/range", {"key": base64.b64encode(key.encode()).decode()})
        kvs = j.get("kvs", [])
        if not kvs:
            return None
        return base64.b64decode(kvs[0].get("value", "")).decode(), int(kvs[0]["create_revision"])

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def dump_log(self, lines=20):
        try:
            with open(self.logpath, "rb") as f:
                text = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return
        print(f"--- {self.name} log (last {lines} lines) ---", file=sys.stderr)
        for line in text[-lines:]:
            print(f"  {line}", file=sys.stderr)


def main():
    h.init()
    etcd = Etcd().start()
    args = ["--registry", "etcd", "--etcd-endpoints", etcd.endpoint, "--cluster", CLUSTER,
            "--lease-ttl-ms", str(TTL_MS), "--log-level", "debug"]
    node_key = lambda n: f"/flurry/{CLUSTER}/nodes/{n}"  # noqa: E731

    # 1. Two processes, two node IDs.
    a = h.Server("a", os.path.join(h.WORK, "a"), args).start()
    b = h.Server("b", os.path.join(h.WORK, "b"), args).start()
    h.check(a.node != b.node, f"a and b share node {a.node}")
    h.check({a.node, b.node} == {0, 1}, f"a and b got nodes {a.node} and {b.node}, not the lowest two")
    ids_a = h.get_ids(a.port, 20_000)
    ids_b = h.get_ids(b.port, 20_000)
    h.check(all(h.node_of(i) == a.node for i in ids_a), "a's IDs are not all of its node")
    h.check(all(h.node_of(i) == b.node for i in ids_b), "b's IDs are not all of its node")
    key_a = etcd.range(node_key(a.node))
    h.check(key_a is not None and json.loads(key_a[0]).get("owner"), f"no node key with an owner for a: {key_a}")
    # A's horizon reaches etcd in the background.
    deadline = time.monotonic() + 5
    while etcd.range(f"/flurry/{CLUSTER}/horizon/{a.node}") is None:
        h.check(time.monotonic() < deadline, "a saved no horizon in etcd within 5 s")
        time.sleep(0.05)
    ids_a += h.get_ids(a.port, 20_000)
    last_a = max(ids_a)

    # 2. A dies; its lease outlives it by the TTL, then etcd deletes its node key.
    rc, _ = a.stop(signal.SIGKILL)
    t_kill = time.monotonic()
    h.check(etcd.range(node_key(a.node)) is not None, "a's node key vanished at once when it was killed")
    while etcd.range(node_key(a.node)) is not None:
        h.check(time.monotonic() - t_kill < TTL_MS / 1000 + EXPIRY_SLACK_S + 1,
                f"a's node key still in etcd {time.monotonic() - t_kill:.1f} s after the kill")
        time.sleep(0.05)
    gone_after = time.monotonic() - t_kill
    h.log(f"a's node key gone {gone_after:.2f} s after the kill (TTL {TTL_MS} ms)")
    h.check(gone_after > TTL_MS / 1000 - 0.7 - 0.3,
            f"a's node key gone after {gone_after:.2f} s, before its lease could have run out")
    h.check(etcd.range(f"/flurry/{CLUSTER}/horizon/{a.node}") is not None, "a's horizon left etcd with its lease")

    # 3. C takes A's node ID and starts above A's horizon.
    c = h.Server("c", os.path.join(h.WORK, "c"), args).start()
    h.check(c.node == a.node, f"c got node {c.node}, not the dead a's node {a.node}")
    claimed = h.wait_log(c, rf"event=lease_claimed node={c.node} token=(\d+) \S+ inherited=(\w+)")
    h.check(claimed.group(2) == "true", f"c did not inherit a horizon: {claimed.group(0)}")
    h.check(int(claimed.group(1)) > key_a[1], f"c's token {claimed.group(1)} is not above a's {key_a[1]}")
    ids_c = h.get_ids(c.port, 20_000)
    h.check(all(h.node_of(i) == c.node for i in ids_c), "c's IDs are not all of its node")
    h.check_increasing(ids_c, "c", above=last_a)
    everything = ids_a + ids_b + ids_c + h.get_ids(b.port, 20_000)
    h.check(len(set(everything)) == len(everything), f"{len(everything) - len(set(everything))} duplicate IDs")

    # The operators' view (`flurry nodes`) of the same cluster.
    nodes_args = args[:-2] + ["--data-dir", os.path.join(h.WORK, "operator")]
    p = subprocess.run([h.FLURRY, "nodes", "list", "--json"] + nodes_args, capture_output=True, timeout=30)
    h.check(p.returncode == 0, f"nodes list exited {p.returncode}: {p.stderr.decode()[:300]}")
    listed = {n["node"]: n for n in json.loads(p.stdout)["nodes"]}
    for s in (b, c):
        n = listed.get(s.node, {})
        h.check(n.get("state") == "live" and n.get("owner", "").endswith(f":{s.pid}"),
                f"nodes list shows {s.name}'s node {s.node} as {n}")
    # The console's fleet (GET /v1/nodes) agrees, from each process's side.
    for s in (b, c):
        h.check_nodes_route(s, listed)
    p = subprocess.run([h.FLURRY, "nodes", "release", str(b.node)] + nodes_args, capture_output=True, timeout=30)
    h.check(p.returncode == 1 and b"LEASE_LIVE" in p.stderr,
            f"nodes release of b's live node: exit {p.returncode}, {p.stderr.decode()[:300]}")

    # 4. Another layout on the same cluster is refused.
    d = h.Server("d", os.path.join(h.WORK, "d"), args + ["--layout", "twitter"]).launch()
    try:
        rc = d.proc.wait(20)
    except subprocess.TimeoutExpired:
        h.fail("d, with another layout, was not refused within 20 s")
    h.check(rc != 0, f"d, with another layout, exited {rc}")
    h.check(re.search(r"STATE_MISMATCH", d.log_text()) and "epoch=2010-11-04T01:42:54.657Z" in d.log_text(),
            "d's refusal does not say STATE_MISMATCH naming its layout")

    # 4b. A cluster name that differs only by letter case ("T" beside "t") is another key prefix in
    # etcd, so it would hand out the same node IDs again: refused, naming the name in use, even
    # from another host (its own host-guard scope here).
    twin_args = list(args)
    twin_args[twin_args.index("--cluster") + 1] = CLUSTER.upper()
    other_host = dict(os.environ, FLURRY_HOST_GUARD_SCOPE=os.path.join(h.WORK, "other-host"))
    e = h.Server("e", os.path.join(h.WORK, "e"), twin_args, env=other_host).launch()
    try:
        rc = e.proc.wait(20)
    except subprocess.TimeoutExpired:
        h.fail(f"e, on cluster {CLUSTER.upper()!r} beside {CLUSTER!r}, was not refused within 20 s")
    h.check(rc != 0, f"e, on cluster {CLUSTER.upper()!r}, exited {rc}")
    h.check("STATE_MISMATCH" in e.log_text() and f'differs only by letter case from "{CLUSTER}"' in e.log_text(),
            "e's refusal does not say STATE_MISMATCH naming the cluster in use")

    # 5. A clean stop releases the node ID at once.
    for s in (b, c):
        rc, _ = s.stop()
        h.check(rc == 0, f"{s.name} exited {rc} after SIGTERM")
        h.check(etcd.range(node_key(s.node)) is None, f"{s.name}'s node key is still in etcd after its stop")


if __name__ == "__main__":  # data_dir_identity.py imports Etcd
    h.run_main(main)
