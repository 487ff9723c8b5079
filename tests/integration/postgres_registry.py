#!/usr/bin/env python3
"""The PostgreSQL registry with real processes: a real PostgreSQL server (initdb in the work
directory, on 127.0.0.1 and a free port) and `flurry serve --registry postgres` processes, each
with a data directory of its own, as on separate hosts (so nothing but the database hands a horizon
from one to the next):

1. A and B start at the same moment: different node IDs (0 and 1), their IDs decode to them.
2. A is killed with SIGKILL (no release). C, started at once, does not get A's node ID: A's lease
   still holds.
3. After the TTL, D gets A's node ID, with a greater fencing token, and inherits A's horizon. D's
   wall clock is set 5 s back (libfaketime), so only the inherited horizon can keep it above A:
   it waits for its clock at start (event=start_delayed), then every ID it issues is above every
   ID A issued. D's lease stays live although its clock is behind: lease times are the database's.
   No duplicate across A, B, C and D.
4. D stops with SIGTERM and releases its node ID (owner NULL in the database).
5. Operators (`flurry nodes`): the listing shows every node ID with its state, owner and horizon;
   releasing B's live node ID is refused (LEASE_LIVE naming B), by force it fences B out, which
   claims a node ID again and serves above everything it issued.

Usage: postgres_registry.py FLURRY
"""
import json
import os
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
from pglib import Postgres  # noqa: E402

TTL_MS = 2000


def rows(pg):
    """node -> (owner or None, token, horizon present) of every row of flurry_nodes."""
    out = {}
    text = pg.psql("ids", "SELECT node, coalesce(owner, '<null>'), token, horizon IS NOT NULL "
                          "FROM flurry_nodes ORDER BY node")
    for line in text.splitlines():
        node, owner, token, has_horizon = line.split("|")
        out[int(node)] = (None if owner == "<null>" else owner, int(token), has_horizon == "t")
    return out


def main():
    h.init()
    pg = Postgres(h.WORK)
    try:
        run(pg)
    finally:
        pg.stop()  # before run_main removes the work directory


def run(pg):
    pg.start()
    pg.psql("postgres", "CREATE DATABASE ids")
    url = pg.url("ids")
    h.log(f"PostgreSQL on port {pg.port}")

    def server(name, env=None, extra=()):
        data = os.path.join(h.WORK, f"data-{name}")  # one per process, as on separate hosts
        return h.Server(name, data, ["--registry", "postgres", "--postgres-url", url,
                                     "--lease-ttl-ms", str(TTL_MS)] + list(extra), env=env)

    # 1. Two processes racing for their first claim.
    a, b = server("a"), server("b")
    for s in (a, b):
        s.launch()
    for s in (a, b):
        h.check(s.wait_http(), f"{s.name} exited with {s.proc.returncode} at start")
        s.ready = s.wait_ready()
    h.log(f"nodes: a={a.node} b={b.node}")
    h.check(sorted((a.node, b.node)) == [0, 1], f"a and b got nodes {a.node} and {b.node}, not 0 and 1")
    m = re.search(r"postgres:postgresql://postgres@127\.0\.0\.1:\d+/ids", a.log_text())
    h.check(m is not None, "a's log does not name the postgres registry it uses")
    ids_a = h.get_ids(a.port, 50_000)
    ids_b = h.get_ids(b.port, 50_000)
    h.check(all(h.node_of(i) == a.node for i in ids_a), "a's IDs do not all carry its node")
    h.check(all(h.node_of(i) == b.node for i in ids_b), "b's IDs do not all carry its node")
    time.sleep(1.5)  # a saves horizons ahead of its clock meanwhile
    ids_a += h.get_ids(a.port, 50_000)
    before = rows(pg)
    h.check(before.get(a.node, (None,))[0] is not None, f"a's row is not owned: {before}")
    a_token = before[a.node][1]

    # 2. A dies without releasing; its lease still holds for a new process.
    a.kill()
    killed_at = time.monotonic()
    c = server("c").start()
    h.check(c.node not in (a.node, b.node), f"c got node {c.node} while a's lease (node {a.node}) still held")
    h.check(time.monotonic() - killed_at < TTL_MS / 1000, "c took longer than the TTL to start")
    ids_c = h.get_ids(c.port, 10_000)

    # 3. After the TTL, A's node ID goes to D, which starts above A's horizon though its clock is
    # 5 s behind.
    time.sleep(max(0.0, TTL_MS / 1000 + 0.5 - (time.monotonic() - killed_at)))
    h.check_libfaketime()
    env = h.faked_clock_env(os.path.join(h.WORK, "faketime-offset"), "-5")
    d = server("d", env=env, extra=["--max-wait-ms", "10000"]).start(timeout=30)
    h.check(d.node == a.node, f"d got node {d.node}, not the dead a's node {a.node}")
    h.check("event=start_delayed" in d.log_text(),
            "d did not wait for its clock: it inherited no horizon ahead of it")
    live = pg.psql("ids", f"SELECT expires_at > now() + interval '{TTL_MS // 2} milliseconds' "
                          f"FROM flurry_nodes WHERE node = {d.node}")
    h.check(live == "t", f"d's lease does not run a TTL ahead of the database's clock ({live})")
    after = rows(pg)
    h.check(after[a.node][0] is not None and after[a.node][1] > a_token,
            f"node {a.node}'s row after d's claim: {after[a.node]} (a's token was {a_token})")
    h.check(after[a.node][2], f"node {a.node} has no horizon in the database")
    ids_d = h.get_ids(d.port, 50_000)
    h.check(all(h.node_of(i) == a.node for i in ids_d), "d's IDs do not all carry the node it took")
    h.check(min(ids_d) > max(ids_a), f"d issued {min(ids_d)}, not above a's last ID {max(ids_a)}: "
                                     "the horizon did not pass from a to d")
    ids_b += h.get_ids(b.port, 10_000)
    everything = ids_a + ids_b + ids_c + ids_d
    h.check(len(set(everything)) == len(everything),
            f"{len(everything) - len(set(everything))} duplicate IDs across a, b, c and d")

    # 4. A clean stop releases the node ID in the database.
    rc, _ = d.stop()
    h.check(rc == 0, f"d exited {rc} after SIGTERM")
    released = rows(pg)[a.node]
    h.check(released[0] is None and released[2], f"node {a.node} after d stopped: {released}")

    # 5. The operators' commands on the same database.
    def nodes(expect, *args):
        cmd = [h.FLURRY, "nodes"] + list(args) + ["--registry", "postgres", "--postgres-url", url,
                                                  "--data-dir", os.path.join(h.WORK, "data-ops")]
        p = subprocess.run(cmd, capture_output=True, timeout=60)
        h.check(p.returncode == expect, f"{' '.join(cmd)} exited {p.returncode}, not {expect}: "
                                        f"{p.stdout.decode()[:500]} {p.stderr.decode()[:500]}")
        return p.stdout.decode(), p.stderr.decode()

    out, _ = nodes(0, "list", "--json")
    listing = json.loads(out)
    h.check(listing["layout"].startswith("time:41@1ms,node:10,seq:12"), f"layout: {listing}")
    by_node = {n["node"]: n for n in listing["nodes"]}
    h.check(sorted(by_node) == sorted({a.node, b.node, c.node}), f"listed nodes: {sorted(by_node)}")
    h.check(by_node[a.node]["state"] == "free" and by_node[a.node]["horizon"] is not None,
            f"the released node: {by_node[a.node]}")
    h.check(by_node[b.node]["state"] == "live" and by_node[b.node]["owner"].endswith(f":{b.pid}")
            and by_node[b.node]["lease_expires"].endswith("Z"), f"b's node: {by_node[b.node]}")
    h.check_nodes_route(b, by_node)  # the console's fleet agrees
    _, err = nodes(1, "release", str(b.node))
    h.check("LEASE_LIVE" in err and f":{b.pid}" in err, f"release of b's live node: {err}")
    nodes(1, "release", "999")  # no such row: NOT_FOUND
    before = max(ids_b)
    nodes(0, "release", str(b.node), "--force")
    h.wait_log(b, r"event=lease_reclaimed", timeout=10)
    deadline = time.monotonic() + 10
    while h.request(b.port, "/readyz").status != 200:
        h.check(time.monotonic() < deadline, "b is not ready again 10 s after its forced release")
        time.sleep(0.05)
    more_b = h.get_ids(b.port, 10_000)
    h.check(min(more_b) > before, f"b issued {min(more_b)} after its forced release, not above {before}")
    everything += more_b
    h.check(len(set(everything)) == len(everything), "duplicate IDs after b's forced release")
    for s in (b, c):
        rc, _ = s.stop()
        h.check(rc == 0, f"{s.name} exited {rc} after SIGTERM")


if __name__ == "__main__":  # imported for its Postgres (pglib.py) too
    h.run_main(main)
