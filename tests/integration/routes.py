#!/usr/bin/env python3
"""Every route of `flurry serve`, with curl, with the C++ client (Boost.Beast) and with Python's
http.client, and the values checked: IDs increase across calls and clients, decode to this node
and to a time within seconds of now, the encodings round-trip through `flurry decode`, the
Leaf-compatible routes have Leaf's shapes, and /metrics counts what was issued.

Usage: routes.py FLURRY HTTP_CLIENT
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

FLURRY_TEXT = "time:41@1ms,node:10,seq:12;epoch=2025-01-01T00:00:00.000Z"


def cli_decode(value, fmt="dec"):
    p = subprocess.run([h.FLURRY, "decode", "--format", fmt, "--json", value], capture_output=True)
    h.check(p.returncode == 0, f"flurry decode --format {fmt} {value}: {p.stderr.decode()}")
    return json.loads(p.stdout)


def near_now(unix_ms, what, slack_ms=5000):
    now = time.time() * 1000
    h.check(abs(now - unix_ms) < slack_ms, f"{what}: time {unix_ms} ms is not within {slack_ms} ms of now {now:.0f}")


def main():
    h.init(need_client=True)
    srv = h.Server("routes", os.path.join(h.WORK, "data")).start()
    port, node = srv.port, srv.node
    h.log(f"server on port {port}, node {node}")
    issued = 0
    state = {"last": 0}

    def take(ids, what):
        nonlocal issued
        h.check_increasing(ids, what, above=state["last"])
        for i in ids:
            h.check(h.node_of(i) == node, f"{what}: ID {i} has node {h.node_of(i)}, server is node {node}")
        state["last"] = ids[-1]
        issued += len(ids)

    clients = [
        ("curl", lambda p: h.curl(port, p)),
        ("c++", lambda p: h.cpp_client(port, [p])[0]),
        ("python", lambda p: h.request(port, p)),
    ]
    for cname, get in clients:
        def ok(path, ctype="application/json"):
            r = get(path)
            h.check(r.status == 200, f"{cname} GET {path}: expected 200, got {r}")
            ct = r.headers.get("content-type", "")
            h.check(ct.split(";")[0].strip().lower() == ctype, f"{cname} GET {path}: content type {ct!r}, expected {ctype}")
            return r

        # /v1/ids: the default (JSON strings), format=json and encoding=dec explicitly.
        for path, n in (("/v1/ids?count=1", 1), ("/v1/ids?count=1000", 1000),
                        ("/v1/ids?count=7&format=json", 7), ("/v1/ids?count=3&encoding=dec", 3),
                        ("/v1/ids?encoding=dec&count=2&format=json", 2)):
            j = ok(path).json()
            h.check(isinstance(j, dict) and list(j) == ["ids"], f"{cname} {path}: body {j!r:.300}")
            ids = j["ids"]
            h.check(len(ids) == n and all(isinstance(x, str) and x.isdigit() for x in ids),
                    f"{cname} {path}: expected {n} decimal strings: {ids!r:.300}")
            take([int(x) for x in ids], f"{cname} {path}")

        # format=number: JSON numbers, exact (Python's json reads big integers exactly).
        r = ok("/v1/ids?count=5&format=number")
        h.check(re.search(rb'"\d', r.body) is None, f"{cname} format=number: quoted numbers: {r.body!r}")
        ids = r.json()["ids"]
        h.check(len(ids) == 5 and all(type(x) is int for x in ids), f"{cname} format=number: {ids!r}")
        take(ids, f"{cname} format=number")

        # format=text: text/plain, one per line.
        r = ok("/v1/ids?count=5&format=text", "text/plain")
        lines = r.text.splitlines()
        h.check(len(lines) == 5 and all(x.isdigit() for x in lines), f"{cname} format=text: {r.text!r}")
        take([int(x) for x in lines], f"{cname} format=text")

        # Encodings round-trip through the CLI's decoder.
        for enc in ("hex", "base32", "base62"):
            for path, textual in ((f"/v1/ids?count=3&encoding={enc}", False),
                                  (f"/v1/ids?count=3&encoding={enc}&format=text", True)):
                r = ok(path, "text/plain" if textual else "application/json")
                vals = r.text.splitlines() if textual else r.json()["ids"]
                h.check(len(vals) == 3 and all(isinstance(v, str) and v for v in vals), f"{cname} {path}: {vals!r}")
                dec = []
                for v in vals:
                    d = cli_decode(v, enc)
                    h.check(d["encodings"][enc] == v, f"{cname} {path}: {v} re-encodes as {d['encodings'][enc]}")
                    h.check(d["node"] == node, f"{cname} {path}: {v} decodes to node {d['node']}")
                    near_now(d["unix_ms"], f"{cname} {path}: {v}")
                    dec.append(int(d["id"]))
                take(dec, f"{cname} {path}")

        # /v1/ids/{id}: the decoded fields, as `flurry decode --json` gives them.
        last = state["last"]
        j = ok(f"/v1/ids/{last}").json()
        ref = cli_decode(str(last))
        h.check(str(j.get("id")) == str(last), f"{cname} /v1/ids/{last}: id {j.get('id')!r}")
        for key in ("time", "unix_ms", "ticks", "node", "seq", "fields", "layout"):
            h.check(key in j, f"{cname} /v1/ids/{{id}}: no {key!r} in {j}")
            h.check(j[key] == ref[key], f"{cname} /v1/ids/{last}: {key} {j[key]!r}, flurry decode says {ref[key]!r}")
        h.check(j["node"] == node, f"{cname} /v1/ids/{{id}}: node {j['node']}")
        near_now(j["unix_ms"], f"{cname} /v1/ids/{last}")
        h.check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", j["time"]) is not None,
                f"{cname} /v1/ids/{{id}}: time {j['time']!r} is not ISO-8601 UTC")

        # /v1/layout: the text form, fields, epoch, lifetime end, rate limit.
        r = ok("/v1/layout")
        j = r.json()
        h.check(FLURRY_TEXT in r.text, f"{cname} /v1/layout: the text form {FLURRY_TEXT} is missing: {r.text[:500]}")
        h.check("2025-01-01" in r.text and "2094-09-07" in r.text,
                f"{cname} /v1/layout: epoch or lifetime end missing: {r.text[:500]}")
        h.check("4096000" in r.text, f"{cname} /v1/layout: rate limit 4096000 missing: {r.text[:500]}")
        for f in ("time", "node", "seq"):
            h.check(f'"{f}"' in r.text, f"{cname} /v1/layout: field {f} missing: {r.text[:500]}")

        # Leaf: /api/snowflake/get/{key} -> the ID as plain text.
        for key in ("orders", "leaf-segment-test", "a"):
            r = ok(f"/api/snowflake/get/{key}", "text/plain")
            t = r.text.strip()
            h.check(t.isdigit(), f"{cname} /api/snowflake/get/{key}: body {r.text!r}")
            take([int(t)], f"{cname} /api/snowflake/get/{key}")

        # Leaf: /decodeSnowflakeId?snowflakeId=ID -> timestamp, workerId, sequenceId.
        last = state["last"]
        ref = cli_decode(str(last))
        j = ok(f"/decodeSnowflakeId?snowflakeId={last}").json()
        for key in ("timestamp", "workerId", "sequenceId"):
            h.check(key in j, f"{cname} /decodeSnowflakeId: no {key!r} in {j}")
            h.check(str(j[key]).isdigit(), f"{cname} /decodeSnowflakeId: {key} {j[key]!r} is not a number")
        h.check(int(j["workerId"]) == node, f"{cname} /decodeSnowflakeId: workerId {j['workerId']} != node {node}")
        h.check(int(j["sequenceId"]) == ref["seq"], f"{cname} /decodeSnowflakeId: sequenceId {j['sequenceId']} != {ref['seq']}")
        h.check(int(j["timestamp"]) == ref["unix_ms"],
                f"{cname} /decodeSnowflakeId: timestamp {j['timestamp']} != unix ms {ref['unix_ms']}")

        # Health, readiness, metrics.
        r = get("/healthz")
        h.check(r.status == 200, f"{cname} /healthz: {r}")
        j = ok("/readyz").json()
        h.check(j.get("ready") is True and j.get("node") == node, f"{cname} /readyz: {j}")
        r = ok("/metrics", "text/plain")
        got = h.metric(r.text, "flurry_ids_issued_total")
        h.check(got is not None and got >= issued, f"{cname} /metrics: flurry_ids_issued_total {got}, issued {issued}")
        reqs = h.metric(r.text, "flurry_http_requests_total", {"code": "200"})
        h.check(reqs is not None and reqs >= 10, f"{cname} /metrics: flurry_http_requests_total{{code=200}} = {reqs}")
        rem = h.metric(r.text, "flurry_lease_remaining_seconds")
        h.check(rem is not None and rem > 0, f"{cname} /metrics: flurry_lease_remaining_seconds = {rem}")
        h.check(h.metric(r.text, "flurry_ready") == 1, f"{cname} /metrics: flurry_ready is not 1")
        h.check(h.metric(r.text, "flurry_http_requests_total", {"route": "/v1/ids", "code": "200"}),
                f"{cname} /metrics: no flurry_http_requests_total{{route=\"/v1/ids\",code=\"200\"}}")
        # The families the issue asks for, each with its TYPE line.
        for family, kind in (("flurry_ids_issued_total", "counter"), ("flurry_http_requests_total", "counter"),
                             ("flurry_http_request_duration_seconds", "histogram"),
                             ("flurry_clock_lead_seconds", "gauge"), ("flurry_rollback_events_total", "counter"),
                             ("flurry_throttle_waits_total", "counter"), ("flurry_lease_renewals_total", "counter"),
                             ("flurry_lease_renewal_failures_total", "counter"),
                             ("flurry_lease_remaining_seconds", "gauge"), ("flurry_horizon_ahead_seconds", "gauge"),
                             ("flurry_ready", "gauge")):
            h.check(re.search(rf"^# TYPE {family} {kind}$", r.text, re.M),
                    f"{cname} /metrics: no '# TYPE {family} {kind}'")
        h.check(h.metric(r.text, "flurry_http_request_duration_seconds_bucket", {"le": "+Inf"}),
                f"{cname} /metrics: no latency histogram samples")
        ahead = h.metric(r.text, "flurry_horizon_ahead_seconds")
        h.check(ahead is not None and ahead > 0, f"{cname} /metrics: flurry_horizon_ahead_seconds = {ahead}")
        h.log(f"{cname}: every route ok")

    # The largest batch (max_batch, default 100000).
    ids = h.get_ids(port, 100000)
    take(ids, "count=100000")

    # Keep-alive: many requests on one connection, with every client.
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    sock = None
    for i in range(50):
        ids = h.get_ids(port, 10, conn=conn)
        take(ids, "keep-alive python")
        if sock is None:
            sock = conn.sock
        h.check(conn.sock is sock, f"python: the connection was not kept alive (request {i})")
    conn.close()
    rs = h.cpp_client(port, ["/v1/ids?count=2"] * 20 + ["/healthz", "/v1/layout", "/metrics"])
    h.check(all(r.status == 200 for r in rs), f"C++ client keep-alive: {[r.status for r in rs]}")
    for r in rs[:20]:
        take([int(x) for x in r.json()["ids"]], "keep-alive c++")
    p = subprocess.run(["curl", "-sS", "-v", f"http://127.0.0.1:{port}/v1/ids?count=1",
                        f"http://127.0.0.1:{port}/v1/ids?count=1"], capture_output=True)
    h.check(p.returncode == 0, f"curl two URLs: {p.stderr.decode()[-300:]}")
    h.check(b"Re-using existing connection" in p.stderr or b"Reusing existing connection" in p.stderr,
            "curl: the connection was not reused for the second URL")

    # HTTP/1.0 without keep-alive still gets an answer.
    p = subprocess.run(["curl", "-sS", "--http1.0", f"http://127.0.0.1:{port}/v1/ids?count=2"], capture_output=True)
    h.check(p.returncode == 0 and len(json.loads(p.stdout)["ids"]) == 2, f"curl --http1.0: {p.stdout!r} {p.stderr!r}")

    h.check(srv.alive(), "the server died")


h.run_main(main)
