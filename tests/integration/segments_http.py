#!/usr/bin/env python3
"""Segment mode over real HTTP: `flurry serve` with an admin token file and its SQLite segment store
in a temporary data directory. Tag creation with no, a wrong and the right token (401, 401, 201,
409), 400 messages for bad bodies, tags and parameters, IDs increasing and unique over a few
thousand requests (one connection and several at once), ranges, the Leaf-compatible route, the list
and one tag's state, 405 with Allow, the /segments redirect to the console and the per-tag metrics.
A store outage (the SQLite file locked by another connection) gives 503 with Retry-After within
about segment_max_wait_ms, never a hang, while snowflake IDs keep coming; the tag serves again once
the lock is gone. The token never appears in the server's log, even at log level trace, nor in
--print-config; a missing or empty token file stops the start with a message naming the file.

Usage: segments_http.py FLURRY
"""
import http.client
import os
import sqlite3
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

TOKEN = "it-S3cret-token-7f3a9c-0b5e2d41a6c8f9e3"
MAX_WAIT_MS = 300


def post(port, body, token=None, scheme="Bearer", conn=None):
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"{scheme} {token}"
    return h.request(port, "/v1/segments", method="POST", headers=headers, body=body, conn=conn)


def seg_ids(port, tag, count=1, conn=None):
    r = h.request(port, f"/v1/segments/{tag}/ids?count={count}", conn=conn)
    h.check(r.status == 200, f"ids of {tag}: expected 200, got {r}")
    ids = r.json().get("ids")
    h.check(isinstance(ids, list) and len(ids) == count and all(isinstance(x, str) and x.isdigit() for x in ids),
            f"ids of {tag}: bad body {r.body[:300]!r}")
    return [int(x) for x in ids]


def check_bad(r, what, needle, code="INVALID_ARGUMENT"):
    err = h.check_error_body(r, 400, what, code=code)
    h.check(needle in err["message"], f"{what}: message {err['message']!r} does not say {needle!r}")


def startup_errors(work):
    """A missing or empty token file stops the start, naming the file; never the token."""
    missing = os.path.join(work, "no-such-token")
    p = subprocess.run([h.FLURRY, "serve", "--listen", "127.0.0.1:0", "--data-dir", os.path.join(work, "e1"),
                        "--admin-token-file", missing], capture_output=True, timeout=30)
    h.check(p.returncode != 0, "serve with a missing token file started")
    h.check(b"no-such-token" in p.stderr and b"admin_token_file" in p.stderr,
            f"the error does not name the token file: {p.stderr!r}")
    empty = os.path.join(work, "empty-token")
    with open(empty, "w") as f:
        f.write("  \n")
    os.chmod(empty, 0o600)
    p = subprocess.run([h.FLURRY, "serve", "--listen", "127.0.0.1:0", "--data-dir", os.path.join(work, "e2"),
                        "--admin-token-file", empty], capture_output=True, timeout=30)
    h.check(p.returncode != 0 and b"empty-token" in p.stderr and b"empty" in p.stderr,
            f"serve with an empty token file: {p.returncode} {p.stderr!r}")
    p = subprocess.run([h.FLURRY, "serve", "--segment-stores", "nosuch://x", "--print-config"],
                       capture_output=True, timeout=30)
    h.check(p.returncode == 2 and b"segment_stores" in p.stderr,
            f"a bad segment_stores is not a usage error naming the key: {p.returncode} {p.stderr!r}")


def creation(port):
    body = '{"tag":"orders","start":1,"step":100,"description":"order lines"}'
    r = post(port, body)
    h.check_error_body(r, 401, "POST without a token", code="UNAUTHENTICATED")
    h.check(r.headers.get("www-authenticate") == "Bearer", f"401 without WWW-Authenticate: Bearer: {r.headers}")
    h.check_error_body(post(port, body, token="wrong"), 401, "POST with a wrong token", code="UNAUTHENTICATED")
    h.check_error_body(post(port, body, token=TOKEN + "x"), 401, "POST with a longer token", code="UNAUTHENTICATED")
    h.check_error_body(post(port, body, token=TOKEN, scheme="Basic"), 401, "POST with Basic", code="UNAUTHENTICATED")
    r = h.request(port, "/v1/segments/orders")
    h.check_error_body(r, 404, "a tag refused creation", code="NOT_FOUND")
    r = post(port, body, token=TOKEN)
    h.check(r.status == 201, f"POST with the token: expected 201, got {r}")
    row = r.json()
    h.check(row.get("tag") == "orders" and row.get("max_id") == "1" and row.get("step") == 100
            and row.get("delta") == 1 and row.get("remainder") == 0 and row.get("description") == "order lines"
            and isinstance(row.get("update_time"), str) and row["update_time"].endswith("Z"),
            f"201 body: {row}")
    h.check_error_body(post(port, body, token=TOKEN), 409, "POST of an existing tag", code="ALREADY_EXISTS")

    for bad, needle in [
        ("", "empty"),
        ("not json", "not valid JSON"),
        ('{"tag":"x","size":1}', 'unknown field "size"'),
        ('{"tag":"x","step":"10"}', '"step" must be a whole number'),
        ('{"tag":"x","start":-5}', "must not be negative"),
        ('["x"]', "JSON object"),
        ('{"step":10}', '"tag" is missing'),
        ('{"tag":"has space"}', "segment tag"),
        ('{"tag":"x","step":0}', "step"),
    ]:
        check_bad(post(port, bad, token=TOKEN), f"POST {bad!r}", needle)
    r = post(port, '{"tag":"big","description":"' + "d" * 9000 + '"}', token=TOKEN)
    h.check_error_body(r, 413, "a body over body_limit")
    # Two Authorization headers, one of them right: refused.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.putrequest("POST", "/v1/segments")
    conn.putheader("Authorization", "Bearer wrong")
    conn.putheader("Authorization", f"Bearer {TOKEN}")
    conn.putheader("Content-Length", "12")
    conn.endheaders(b'{"tag":"two"}'[:12])
    r = conn.getresponse()
    h.check(r.status == 401, f"two Authorization headers: {r.status}")
    r.read()
    conn.close()
    # A chunked body is read whole.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", "/v1/segments", body=iter([b'{"tag":', b'"chunked"', b',"step":7}']),
                 headers={"Authorization": f"Bearer {TOKEN}"}, encode_chunked=True)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    h.check(r.status == 201 and b'"step":7' in data, f"a chunked POST: {r.status} {data!r}")


def serving(port):
    # One connection, a few thousand requests of one ID, then batches: increasing and unique.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    ids = []
    for _ in range(2500):
        ids += seg_ids(port, "orders", conn=conn)
    for _ in range(50):
        ids += seg_ids(port, "orders", count=20, conn=conn)
    conn.close()
    h.check(ids[0] == 1, f"the first ID of a tag starting at 1 is {ids[0]}")
    h.check_increasing(ids, "segment IDs over one connection")
    h.check(len(set(ids)) == len(ids) == 3500, "segment IDs repeat")

    # Several connections at once: unique together, increasing per connection.
    results, errors = [[] for _ in range(4)], []

    def worker(i):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            for _ in range(300):
                results[i] += seg_ids(port, "orders", count=3, conn=c)
            c.close()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    h.check(not errors, f"concurrent clients failed: {errors[:3]}")
    together = [x for r in results for x in r]
    for i, r in enumerate(results):
        h.check_increasing(r, f"connection {i}")
    h.check(len(set(together)) == len(together) == 3600, "concurrent segment IDs repeat")
    h.check(min(together) > max(ids), "IDs went back below earlier ones")
    last = max(together)

    r = h.request(port, "/v1/segments/orders/range?size=10")
    h.check(r.status == 200, f"range: {r}")
    rg = r.json()
    h.check(set(rg) == {"start", "end", "delta"} and int(rg["end"]) - int(rg["start"]) == 10 and rg["delta"] == 1
            and int(rg["start"]) > last, f"range body: {rg}")
    r = h.request(port, "/api/segment/get/orders")
    h.check(r.status == 200 and r.headers.get("content-type", "").startswith("text/plain")
            and r.text.isdigit() and int(r.text) >= int(rg["end"]), f"Leaf get: {r}")

    r = h.request(port, "/v1/segments")
    h.check(r.status == 200, f"list: {r}")
    tags = r.json().get("tags")
    h.check(isinstance(tags, list) and [t["tag"] for t in tags] == ["chunked", "orders"], f"list: {tags}")
    h.check(int(tags[1]["max_id"]) > last, f"list: max_id {tags[1]['max_id']} not above the IDs issued")

    r = h.request(port, "/v1/segments/orders")
    h.check(r.status == 200, f"tag state: {r}")
    s = r.json()
    h.check(s.get("served") is True and s.get("ids_issued") == 3500 + 3600 + 10 + 1 and s.get("base_step") == 100
            and isinstance(s.get("current"), dict) and s["stored"]["tag"] == "orders", f"tag state: {s}")
    cur = s["current"]
    for key in ("start", "end", "delta", "remainder", "size", "remaining", "step", "store", "fetched_at", "fetch_ms"):
        h.check(key in cur, f"current lacks {key}: {cur}")
    h.check(isinstance(cur["start"], str) and "segments.db" in cur["store"], f"current: {cur}")

    # 400s with messages, 404s, 405s.
    check_bad(h.request(port, "/v1/segments/orders/ids?count=0"), "count=0", "too small")
    check_bad(h.request(port, "/v1/segments/orders/ids?count=x"), "count=x", "not a whole number")
    check_bad(h.request(port, "/v1/segments/orders/ids?count=100001"), "count too large", "max_batch")
    check_bad(h.request(port, "/v1/segments/orders/ids?cnt=1"), "unknown parameter", "cnt")
    check_bad(h.request(port, "/v1/segments/orders/range?size=0"), "size=0", "size")
    check_bad(h.request(port, "/v1/segments/orders/range?size=100000"), "size beyond a range", "", code="OUT_OF_RANGE")
    check_bad(h.request(port, "/v1/segments/bad%2Ftag/ids"), "a tag with a slash", "not a valid tag name")
    check_bad(h.request(port, "/v1/segments/b%C3%A4d/ids"), "a non-ASCII tag", "not a valid tag name")
    h.check_error_body(h.request(port, "/v1/segments/nope/ids"), 404, "unknown tag", code="NOT_FOUND")
    h.check_error_body(h.request(port, "/api/segment/get/nope"), 404, "unknown tag (Leaf)", code="NOT_FOUND")
    r = h.request(port, "/v1/segments", method="PUT", body="{}")
    h.check_error_body(r, 405, "PUT /v1/segments", code="UNIMPLEMENTED")
    h.check(r.headers.get("allow") == "GET, HEAD, POST", f"PUT /v1/segments: Allow {r.headers.get('allow')!r}")
    r = h.request(port, "/v1/segments/orders/ids", method="PUT", body="{}")
    h.check_error_body(r, 405, "PUT on ids", code="UNIMPLEMENTED")
    h.check(r.headers.get("allow") == "GET, HEAD", f"PUT on ids: Allow {r.headers.get('allow')!r}")
    r = h.request(port, "/v1/ids", method="POST", body="{}", headers={"Authorization": f"Bearer {TOKEN}"})
    h.check_error_body(r, 405, "POST /v1/ids", code="UNIMPLEMENTED")
    r = h.request(port, "/v1/segments/orders/ids?count=50", method="HEAD")
    h.check(r.status == 200 and r.body == b"", f"HEAD: {r}")
    h.check(h.request(port, "/v1/segments/orders").json()["ids_issued"] == s["ids_issued"],
            "HEAD issued IDs")

    # The old page's address leads to the console's Tags section (tests/web tests the console);
    # then the metrics.
    r = h.request(port, "/segments")
    h.check(r.status == 302 and r.headers.get("location") == "/console#tags", f"/segments: {r}")
    m = h.request(port, "/metrics").text
    for name in ("flurry_segment_ids_issued_total", "flurry_segment_ids_skipped_total",
                 "flurry_segment_ranges_fetched_total", "flurry_segment_store_errors_total",
                 "flurry_segment_waits_total", "flurry_segment_unavailable_total", "flurry_segment_remaining",
                 "flurry_segment_step", "flurry_segment_fetch_seconds_sum", "flurry_segment_fetch_seconds_count"):
        h.check(h.metric(m, name, {"tag": "orders"}) is not None, f"/metrics lacks {name}{{tag=\"orders\"}}")
    h.check(h.metric(m, "flurry_segment_ids_issued_total", {"tag": "orders"}) == s["ids_issued"],
            "flurry_segment_ids_issued_total does not count what was issued")
    h.check(h.metric(m, "flurry_http_requests_total", {"route": "/v1/segments", "code": "201"}) == 2,
            "the two 201s are not counted")


def outage(port, db):
    """The store locked: 503 with Retry-After in about segment_max_wait_ms; snowflake IDs unaffected."""
    r = post(port, '{"tag":"tiny","step":5}', token=TOKEN)
    h.check(r.status == 201, f"create tiny: {r}")
    seg_ids(port, "tiny")
    locker = sqlite3.connect(db, timeout=10, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        got_503 = None
        t_end = time.monotonic() + 30
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            r = h.request(port, "/v1/segments/tiny/ids", timeout=15)
            took = time.monotonic() - t0
            h.check(took < MAX_WAIT_MS / 1000 + 3, f"a request took {took:.1f} s during the outage")
            if r.status == 503:
                got_503 = (r, took)
                break
            h.check(r.status == 200, f"during the outage: {r}")
        h.check(got_503 is not None, "no 503 while the store was locked")
        r, took = got_503
        h.check_error_body(r, 503, "tiny while the store is locked", code="UNAVAILABLE")
        h.check(r.headers.get("retry-after") == "1", f"503 without Retry-After: {r.headers}")
        # Snowflake IDs do not wait for the segment store.
        t0 = time.monotonic()
        h.get_ids(port, 5)
        h.check(time.monotonic() - t0 < 1.0, "snowflake IDs waited for the segment store")
        h.check(h.request(port, "/healthz").status == 200, "healthz during the outage")
        h.check(h.request(port, "/v1/segments/tiny").status == 200, "a served tag's state during the outage")
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    deadline = time.monotonic() + 15
    while True:
        r = h.request(port, "/v1/segments/tiny/ids", timeout=15)
        if r.status == 200:
            break
        h.check(time.monotonic() < deadline, f"tiny does not serve again after the outage: {r}")
        time.sleep(0.1)


def main():
    h.init()
    token_file = os.path.join(h.WORK, "admin-token")
    with open(os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(f"\n  {TOKEN}  \n")
    data = os.path.join(h.WORK, "data")
    args = ["--admin-token-file", token_file, "--log-level", "trace",
            "--segment-max-wait-ms", str(MAX_WAIT_MS), "--segment-max-step", "200"]
    p = subprocess.run([h.FLURRY, "serve", "--data-dir", data, "--print-config"] + args,
                       capture_output=True, timeout=30)
    h.check(p.returncode == 0 and token_file.encode() in p.stdout and TOKEN.encode() not in p.stdout,
            f"--print-config: {p.returncode} {p.stdout!r} {p.stderr!r}")
    startup_errors(h.WORK)

    srv = h.Server("segments", data, args=args).start()
    port = srv.port
    creation(port)
    serving(port)
    outage(port, os.path.join(data, "segments.db"))
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc}")
    log = srv.log_text()
    h.check("segment_stores=sqlite:" in log, "the ready line does not name the segment store")
    h.check(TOKEN not in log, "the admin token appears in the server's log")


if __name__ == "__main__":
    h.run_main(main)
