#!/usr/bin/env python3
"""The console's read routes on two real `flurry serve` processes sharing one SQLite data
directory: GET /v1/nodes lists both node IDs with this_process right on each; after SIGKILL of
the second its row stays live with lease_remaining_ms falling, then turns free once its lease TTL
passed; GET /v1/events of the first holds its lease_claimed; GET /v1/status is sane and its
activity history counts the IDs taken.

Usage: console_routes.py FLURRY
"""
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

TTL_MS = 1500


def nodes(s):
    r = h.request(s.port, "/v1/nodes")
    h.check(r.status == 200, f"{s.name} /v1/nodes: {r}")
    return r.json()


def row(doc, node):
    rows = [n for n in doc["nodes"] if n["node"] == node]
    h.check(len(rows) == 1, f"node {node} not listed once in {doc}")
    return rows[0]


def main():
    h.init()
    data = os.path.join(h.WORK, "data")
    args = ["--lease-ttl-ms", str(TTL_MS)]
    a = h.Server("a", data, args).start()
    b = h.Server("b", data, args).start()
    h.log(f"nodes: a={a.node} b={b.node}")
    h.check(a.node != b.node, f"both processes run as node {a.node}")

    # Both list both node IDs, each marking its own row only.
    for s, other in ((a, b), (b, a)):
        doc = nodes(s)
        h.check(doc["this_node"] == s.node, f"{s.name}: this_node {doc['this_node']}")
        h.check(doc["registry"].startswith("sqlite:"), f"{s.name}: registry {doc['registry']}")
        mine, theirs = row(doc, s.node), row(doc, other.node)
        h.check(mine["this_process"] is True and theirs["this_process"] is False,
                f"{s.name}: this_process {mine} {theirs}")
        h.check(mine["token"] == doc["this_token"], f"{s.name}: token {mine} {doc['this_token']}")
        for n in (mine, theirs):
            h.check(n["state"] == "live" and 0 < n["lease_remaining_ms"] <= TTL_MS,
                    f"{s.name}: row {n}")
            h.check(n["owner"].endswith(":" + str((s if n is mine else other).pid)),
                    f"{s.name}: owner {n['owner']}")

    # /v1/events of the first: its claim.
    ev = h.request(a.port, "/v1/events").json()
    claimed = [e for e in ev["events"] if e["kind"] == "lease_claimed"]
    h.check(len(claimed) == 1 and claimed[0]["node"] == a.node and claimed[0]["seq"] == 1,
            f"a's events: {ev}")
    h.check(claimed[0]["details"]["token"] == row(nodes(a), a.node)["token"], f"claim: {claimed}")
    h.check(h.request(a.port, "/v1/events?since=x").status == 400, "since=x is not refused")

    # SIGKILL the second: its lease is not released; it runs out on the registry's clock.
    b.kill()
    killed_at = time.monotonic()
    first = row(nodes(a), b.node)
    h.check(first["state"] == "live", f"b's row right after SIGKILL: {first}")
    second = h.wait_for(lambda: (lambda n: n if n["state"] == "live" and
                                 n["lease_remaining_ms"] < first["lease_remaining_ms"] else None)(
                                     row(nodes(a), b.node)),
                        "b's lease_remaining_ms to fall", timeout=TTL_MS / 1000)
    h.log(f"b's lease remaining: {first['lease_remaining_ms']} ms, then {second['lease_remaining_ms']} ms")
    freed = h.wait_for(lambda: (lambda n: n if n["state"] == "free" else None)(row(nodes(a), b.node)),
                       "b's node ID to turn free", timeout=TTL_MS / 1000 + 3)
    h.log(f"b's node ID free {time.monotonic() - killed_at:.2f} s after SIGKILL")
    h.check(freed["lease_expires_unix_ms"] is None and freed["lease_remaining_ms"] is None
            and freed["this_process"] is False and freed["horizon"] is not None,
            f"b's freed row: {freed}")

    # /v1/status: this node, ready, and the activity history counting IDs taken.
    st = h.request(a.port, "/v1/status").json()
    h.check(st["node"] == a.node and st["ready"] is True and st["readiness"] is None,
            f"status: {st}")
    h.check(st["lease"]["state"] == "held" and st["lease"]["ttl_ms"] == TTL_MS, f"lease: {st['lease']}")
    h.check(st["layout"] == h.request(a.port, "/v1/layout").json(), "status.layout is not /v1/layout")
    h.check(st["activity"]["interval_ms"] == 1000 and [s["name"] for s in st["activity"]["series"]]
            == ["snowflake", "segment", "order_numbers"], f"activity: {st['activity']}")
    h.get_ids(a.port, 500)

    def counted():
        series = h.request(a.port, "/v1/status").json()["activity"]["series"]
        return sum(series[0]["ids"]) >= 500

    h.wait_for(counted, "the 500 IDs in the snowflake activity series", timeout=3)
    rc, _ = a.stop()
    h.check(rc == 0, f"a exited {rc} after SIGTERM")


h.run_main(main)
