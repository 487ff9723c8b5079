#!/usr/bin/env python3
"""Makes (or checks) clients/conformance/cases.json, the suite every client's tests read.

    make_cases.py path/to/flurry            write cases.json beside this script
    make_cases.py path/to/flurry --check    fail unless cases.json equals what the server says now

Decode vectors and refusals come from real servers: one `flurry serve` per layout answers
/v1/layout and /v1/ids/{id} for each ID, and `flurry decode --json` must agree. Error answers
captured from a server are included beside hand-made ones (a proxy's page, Retry-After forms).
The retry waits, batch sizes and tso answers follow docs/clients.md; --check recomputes them.
Order-number answers come from a server with a test key, for numbers `flurry order encode` makes.
Standard library only.
"""

import json
import os
import random
import subprocess
import sys
import tempfile
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet  # noqa: E402  (its Server and http_request)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases.json")

LAYOUTS = [
    ("flurry", "flurry"),
    ("twitter", "twitter"),
    ("sonyflake", "sonyflake"),
    ("multiclock", "multiclock"),
    ("js-safe", "js-safe"),
    ("100us", "time:40@100us,node:10,seq:13;epoch=2025-01-01Z"),
    # 2^40 seconds outlive 2262, where 64-bit nanoseconds end: the server saturates the time.
    ("1s-saturating", "time:40@1s,node:10,seq:13;epoch=2025-01-01Z"),
]

# Texts the server is asked to decode; its verdict (fields or 400) is recorded either way.
TEXTS = ["0", "1", "00012", "+1", "-1", "abc", "0x10", "1.5", "1e3", "18446744073709551615",
         "18446744073709551616", "99999999999999999999999", "9223372036854775807",
         "9223372036854775808"]


def ids_for(layout_json, rng):
    bits = layout_json["bits"]
    top = (1 << bits) - 1
    out = [0, top, top >> 1]
    for f in layout_json["fields"]:  # each field at its largest, the others zero
        out.append(((1 << f["bits"]) - 1) << f["shift"])
    for _ in range(8):
        out.append(rng.getrandbits(bits))
    return out


def server_decode(port, text):
    status, _, body = fleet.http_request(port, "/v1/ids/" + urllib.parse.quote(text, safe=""))
    j = json.loads(body)
    if status == 200:
        expect = {k: j[k] for k in ("time", "unix_ms", "ticks", "node", "seq")}
        if "clock" in j:
            expect["clock"] = j["clock"]
        expect["fields"] = [{"name": k, "value": v} for k, v in j["fields"].items()]
        for k in ("unix_ms", "ticks", "node", "seq"):
            assert abs(expect[k]) < 2**53, (text, k, expect[k])
        return status, expect
    if status != 400 or j["error"]["code"] != "INVALID_ARGUMENT":
        raise RuntimeError(f"/v1/ids/{text}: unexpected {status} {body[:200]!r}")
    return status, None


def cli_decode(flurry, layout_text, text):
    r = subprocess.run([flurry, "decode", "--json", "--layout", layout_text, "--", text],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    j = json.loads(r.stdout)
    return j


def layout_cases(flurry, work):
    out = []
    for name, layout in LAYOUTS:
        srv = fleet.Server(flurry, name, work, os.path.join(work, name),
                           ["--grpc-listen", "", "--log-level", "warn", "--layout", layout])
        os.makedirs(srv.data_dir)
        srv.start()
        try:
            _, _, body = fleet.http_request(srv.port, "/v1/layout")
            lj = json.loads(body)
            rng = random.Random(name)
            decode, errors = [], []
            texts = [str(i) for i in ids_for(lj, rng)] + TEXTS
            if lj["bits"] < 64:
                texts.append(str(1 << lj["bits"]))  # the first ID with a bit above the layout
            seen = set()
            for text in texts:
                if text in seen:
                    continue
                seen.add(text)
                status, expect = server_decode(srv.port, text)
                cli = cli_decode(flurry, lj["text"], text)
                if status == 200:
                    if cli is None or cli["time"] != expect["time"] or cli["ticks"] != expect["ticks"] \
                            or cli["node"] != expect["node"] or cli["unix_ms"] != expect["unix_ms"]:
                        raise RuntimeError(f"{name} {text}: server and CLI disagree: {expect} {cli}")
                    decode.append({"id": text, "expect": expect})
                else:
                    if cli is not None:
                        raise RuntimeError(f"{name} {text}: the server refuses it, the CLI decodes it")
                    errors.append(text)
            out.append({"name": name, "layout": lj, "decode": decode, "decode_errors": errors})
        finally:
            srv.stop()
    return out


def captured_errors(flurry, work):
    """Error answers of a real server: (name, status, headers, body)."""
    token = "conformance-cases-admin-token-7e2b9f4a1c6d3e8b5a0f"
    tf = os.path.join(work, "token")
    with open(tf, "w") as f:
        f.write(token + "\n")
    os.chmod(tf, 0o600)
    srv = fleet.Server(flurry, "errors", work, os.path.join(work, "errors"),
                       ["--grpc-listen", "", "--log-level", "warn", "--admin-token-file", tf])
    os.makedirs(srv.data_dir)
    srv.start()
    out = []
    try:
        def grab(name, path, method="GET", headers=None, body=None):
            status, h, data = fleet.http_request(srv.port, path, method, headers, body)
            out.append((name, status, h.get("retry-after"), data.decode()))
        grab("count zero (400)", "/v1/ids?count=0")
        grab("unknown tag (404)", "/v1/segments/no-such-tag/range?size=10")
        grab("no token (401)", "/v1/segments", "POST", {"Content-Type": "application/json"}, b'{"tag":"x"}')
        grab("wrong method (405)", "/v1/ids", "POST", {"Content-Type": "application/json"}, b"{}")
        grab("order numbers off (501)", "/v1/order-numbers?count=1")
    finally:
        srv.stop()
    return out


ORDER_KEY = "1 = 00112233445566778899aabbccddeeff"  # a test key, the one the clients' fleets use
ORDER_TAG = "orders"
# Snowflake IDs of the flurry layout (a server refuses one later than its clock) and tag numbers:
# the first ID, node and seq at their largest, and 2026-01-01T00:00:00.000Z on node 5.
ORDER_IDS = [0, 1, (1 << 22) - 1, 31536000000 << 22 | 5 << 12 | 7]
ORDER_TAG_NUMBERS = [1, 2, 1000]  # the server decodes only numbers of the tag it handed out


def order_answer_cases(flurry, work):
    """GET /v1/order-numbers/{code} answers of a real server for numbers `flurry order encode`
    made with the same key (so the file is the same on every run), and what each client must
    make of them: a DecodedOrder (docs/clients.md, "Order numbers"). The `decoded` expected of a
    snowflake number is the server's own decode of the ID (as in `layouts`)."""
    token = "conformance-cases-admin-token-3f9a1d7c5b2e8f4a6c0d"
    tf = os.path.join(work, "order-token")
    kf = os.path.join(work, "order-keys")
    for path, text in ((tf, token), (kf, ORDER_KEY)):
        with open(path, "w") as f:
            f.write(text + "\n")
        os.chmod(path, 0o600)
    srv = fleet.Server(flurry, "orders", work, os.path.join(work, "orders"),
                       ["--grpc-listen", "", "--log-level", "warn", "--admin-token-file", tf,
                        "--order-key-file", kf, "--layout", "flurry",
                        "--segment-stores", "sqlite:" + os.path.join(work, "orders-segments.db")])
    os.makedirs(srv.data_dir)
    srv.start()
    auth = {"Authorization": f"Bearer {token}"}
    out = []
    try:
        body = json.dumps({"tag": ORDER_TAG, "start": 1, "step": 1000}).encode()
        status, _, data = fleet.http_request(srv.port, "/v1/segments", "POST",
                                             dict(auth, **{"Content-Type": "application/json"}), body)
        if status != 201:
            raise RuntimeError(f"creating tag {ORDER_TAG}: {status} {data[:300]!r}")
        status, _, data = fleet.http_request(srv.port, f"/v1/segments/{ORDER_TAG}/range?size=1000")
        if status != 200 or json.loads(data)["end"] != "1001":
            raise RuntimeError(f"taking 1..1000 of tag {ORDER_TAG}: {status} {data[:300]!r}")

        def encode(number, tag=None):
            cmd = [flurry, "order", "encode", "--key-file", kf, "--layout", "flurry", str(number)]
            if tag:
                cmd[3:3] = ["--tag", tag]
            return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()[0]

        for source, numbers in (("snowflake", ORDER_IDS), ("segment", ORDER_TAG_NUMBERS)):
            for number in numbers:
                code = encode(number, ORDER_TAG if source == "segment" else None)
                path = "/v1/order-numbers/" + urllib.parse.quote(code, safe="")
                if source == "segment":
                    path += "?tag=" + ORDER_TAG
                status, _, data = fleet.http_request(srv.port, path, headers=auth)
                if status != 200:
                    raise RuntimeError(f"{path}: {status} {data[:300]!r}")
                j = json.loads(data)
                if j["id"] != str(number) or j["source"] != source:
                    raise RuntimeError(f"{path}: the server decodes it to {j}, not {source} {number}")
                expect = {"order_number": code, "key_version": "1", "source": source,
                          "id": str(number), "tag": ORDER_TAG if source == "segment" else None,
                          "decoded": None}
                if source == "snowflake":
                    _, expect["decoded"] = server_decode(srv.port, str(number))
                out.append({"name": f"{source} {number}", "layout": "flurry", "answer": data.decode(),
                            "expect": expect})
    finally:
        srv.stop()
    # Answers that do not fit: a client raises UNKNOWN and hands out nothing half-filled.
    good = json.loads(out[0]["answer"])
    seg = json.loads(out[-1]["answer"])

    def bad(name, answer):
        text = answer if isinstance(answer, str) else json.dumps(answer, separators=(",", ":"))
        out.append({"name": name, "layout": "flurry", "answer": text, "expect_error": "UNKNOWN"})

    bad("not JSON", "<html>order</html>")
    bad("a JSON array", [good])
    bad("no id", {k: v for k, v in good.items() if k != "id"})
    bad("an id that is a JSON number", dict(good, id=int(good["id"])))
    bad("an id that is not decimal", dict(good, id="12a"))
    bad("an id of 2^64", dict(seg, id=str(1 << 64)))
    bad("an id above the layout's 63 bits", dict(good, id=str(1 << 63)))
    bad("no source", {k: v for k, v in good.items() if k != "source"})
    bad("an unknown source", dict(seg, source="ticket"))
    bad("a segment number without its tag", {k: v for k, v in seg.items() if k != "tag"})
    bad("a segment number with an empty tag", dict(seg, tag=""))
    bad("no key_version", {k: v for k, v in seg.items() if k != "key_version"})
    bad("no order_number", {k: v for k, v in seg.items() if k != "order_number"})
    return out


def error_cases(captured):
    cases = []
    for name, status, ra, body in captured:
        e = json.loads(body)["error"]
        cases.append({"name": "server: " + name, "status": status, "retry_after_header": ra,
                      "body": body, "expect": {"code": e["code"], "reason": e.get("reason", ""),
                                               "message": e["message"], "retry_after": None,
                                               "action": "fatal"}})

    def flurry_body(code, reason, message):
        err = {"code": code}
        if reason:
            err["reason"] = reason
        err["message"] = message
        return json.dumps({"error": err}, separators=(",", ":"))

    def add(name, status, ra, body, code, reason, message, retry_after, action, prefix=False):
        expect = {"code": code, "reason": reason, "retry_after": retry_after, "action": action}
        expect["message_prefix" if prefix else "message"] = message
        cases.append({"name": name, "status": status, "retry_after_header": ra, "body": body,
                      "expect": expect})

    m = "the lease renewal is overdue"
    add("503 LEASE_EXPIRING with Retry-After", 503, "1", flurry_body("UNAVAILABLE", "LEASE_EXPIRING", m),
        "UNAVAILABLE", "LEASE_EXPIRING", m, 1, "retry")
    m = "the clock is 1500.0 ms behind the last issued time"
    add("503 CLOCK_BEHIND, Retry-After 2", 503, "2", flurry_body("UNAVAILABLE", "CLOCK_BEHIND", m),
        "UNAVAILABLE", "CLOCK_BEHIND", m, 2, "retry")
    m = "large responses hold the response budget"
    add("503 RESPONSE_BUDGET", 503, "1", flurry_body("RESOURCE_EXHAUSTED", "RESPONSE_BUDGET", m),
        "RESOURCE_EXHAUSTED", "RESPONSE_BUDGET", m, 1, "retry")
    m = "the layout's time field has run out"
    add("503 TIME_EXHAUSTED without Retry-After", 503, None,
        flurry_body("FAILED_PRECONDITION", "TIME_EXHAUSTED", m),
        "FAILED_PRECONDITION", "TIME_EXHAUSTED", m, None, "failover")
    m = "the registry gave the node ID to another owner"
    add("503 LEASE_LOST without Retry-After", 503, None, flurry_body("FAILED_PRECONDITION", "LEASE_LOST", m),
        "FAILED_PRECONDITION", "LEASE_LOST", m, None, "failover")
    m = "internal error: boom"
    add("500 INTERNAL", 500, None, flurry_body("INTERNAL", "", m), "INTERNAL", "", m, None, "fatal")
    m = "no such ID"
    add("400 with Retry-After is still fatal", 400, "1", flurry_body("INVALID_ARGUMENT", "", m),
        "INVALID_ARGUMENT", "", m, 1, "fatal")
    html = "<html><body><h1>502 Bad Gateway</h1></body></html>"
    add("502 from a proxy, HTML", 502, None, html, "UNAVAILABLE", "", "HTTP 502", None, "failover", True)
    add("504 from a proxy, empty, Retry-After 3", 504, "3", "", "UNAVAILABLE", "", "HTTP 504", 3,
        "retry", True)
    add("429 from a proxy is a 4xx: fatal", 429, "5", "Too Many Requests", "UNKNOWN", "", "HTTP 429", 5,
        "fatal", True)
    add("503 whose body is JSON but not an error", 503, "1", '{"ids":[]}', "UNAVAILABLE", "", "HTTP 503",
        1, "retry", True)
    add("503 whose error lacks a message", 503, "1", '{"error":{"code":"UNAVAILABLE"}}', "UNAVAILABLE",
        "", "", 1, "retry")
    m = "busy"
    for ra, value, what in (("Wed, 21 Oct 2015 07:28:00 GMT", 1, "an HTTP-date counts as 1 s"),
                            ("1.5", 1, "a fraction counts as 1 s"), ("0", 0, "zero"),
                            ("-1", 1, "a negative value counts as 1 s"), ("120", 120, "two minutes")):
        add(f"503 Retry-After {ra!r}: {what}", 503, ra, flurry_body("UNAVAILABLE", "SHUT_DOWN", m),
            "UNAVAILABLE", "SHUT_DOWN", m, value, "retry")
    cases.append({"name": "connection refused or reset", "status": 0, "retry_after_header": None,
                  "body": None, "expect": {"code": "UNAVAILABLE", "reason": "", "retry_after": None,
                                           "action": "retry"}})
    return cases


def retry_wait(rnd, retry_after, u):
    backoff = min(0.1 * 2**rnd, 5.0)
    return max(retry_after or 0.0, backoff) * (1.0 + 0.2 * u)


def retry_cases():
    out = []
    for rnd, ra, u in [(0, None, 0.0), (0, None, 0.5), (1, None, 0.0), (2, None, 0.999), (5, None, 0.0),
                       (6, None, 0.0), (20, None, 0.25), (0, 1, 0.0), (0, 1, 0.5), (3, 1, 0.0), (4, 1, 0.0),
                       (5, 1, 0.75), (0, 0, 0.0), (0, 30, 0.1), (9, 2, 0.0), (63, None, 0.0)]:
        out.append({"round": rnd, "retry_after": ra, "u": u, "wait": round(retry_wait(rnd, ra, u), 12)})
    return out


def batch_sizes(min_batch, max_batch, server_max, events):
    hi = min(max_batch, server_max)
    lo = min(min_batch, hi)
    sizes, batch = [], None
    for e in events:
        if e == "first":
            batch = lo
        elif e == "low":
            batch = min(batch * 2, hi)
        elif e == "expired":
            batch = max(batch // 2, lo)
        sizes.append(batch)
    return sizes


def batch_cases():
    seqs = [
        (256, 16384, 100000, ["first"] + ["low"] * 8 + ["expired", "expired", "low"]),
        (256, 16384, 1000, ["first", "low", "low", "low", "expired", "expired", "expired", "low"]),
        (1, 3, 100000, ["first", "low", "low", "expired", "low"]),
        (256, 16384, 100, ["first", "low", "expired"]),
    ]
    return [{"min_batch": a, "max_batch": b, "server_max_batch": c, "events": ev,
             "expect": batch_sizes(a, b, c, ev)} for a, b, c, ev in seqs]


def tso_cases():
    """tso(): GET /v1/tso?count=N answers ({"first":"<decimal>","count":N}, spec of docs/clients.md)
    with the first value each must give, or UNKNOWN for one that does not fit; and 307 Locations
    with the leader's base URL a client keeps (null: not one it can follow)."""
    grants = []
    for name, body, count, first in [
        ("one", '{"first":"15791727575040000","count":1}', 1, "15791727575040000"),
        ("a batch of 8", '{"first":"15791727575040003","count":8}', 8, "15791727575040003"),
        ("zero", '{"first":"0","count":3}', 3, "0"),
        ("the last values below 2^64", '{"first":"18446744073709551614","count":2}', 2,
         "18446744073709551614"),
        ("past 2^64", '{"first":"18446744073709551615","count":2}', 2, None),
        ("another count", '{"first":"15791727575040000","count":2}', 1, None),
        ("first as a number", '{"first":15791727575040000,"count":1}', 1, None),
        ("first not decimal", '{"first":"0x10","count":1}', 1, None),
        ("first signed", '{"first":"-1","count":1}', 1, None),
        ("first empty", '{"first":"","count":1}', 1, None),
        ("no first", '{"count":1}', 1, None),
        ("not JSON", "<html>ok</html>", 1, None),
    ]:
        expect = {"first": first} if first is not None else {"code": "UNKNOWN"}
        grants.append({"name": name, "body": body, "count": count, "expect": expect})
    leaders = [{"location": loc, "leader": leader} for loc, leader in [
        ("http://10.0.0.7:7609/v1/tso?count=3", "http://10.0.0.7:7609"),
        ("https://tso.example.com:8443/v1/tso?count=1", "https://tso.example.com:8443"),
        ("http://[::1]:7609/v1/tso?count=1", "http://[::1]:7609"),
        ("/v1/tso?count=1", None),
        ("ftp://10.0.0.7:7609/v1/tso", None),
        ("leader:7609", None),
    ]]
    return {"grants": grants, "leaders": leaders}


def build(flurry):
    work = tempfile.mkdtemp(prefix="flurry-cases-")
    os.environ["FLURRY_HOST_GUARD_SCOPE"] = work
    os.environ["FLURRY_HOST_DIR"] = os.path.join(work, "host")  # host_dir.h
    os.makedirs(os.environ["FLURRY_HOST_DIR"], exist_ok=True)
    os.chmod(os.environ["FLURRY_HOST_DIR"], 0o1777)
    os.environ["XDG_STATE_HOME"] = os.path.join(work, "state")
    try:
        return {
            "about": "The conformance suite of flurry's clients; see docs/clients.md. Made by "
                     "make_cases.py from real servers; do not edit by hand.",
            "layouts": layout_cases(flurry, work),
            "errors": error_cases(captured_errors(flurry, work)),
            "retry_waits": retry_cases(),
            "batch_sizes": batch_cases(),
            "order_decodes": order_answer_cases(flurry, work),
            "tso": tso_cases(),
        }
    finally:
        import shutil
        shutil.rmtree(work, ignore_errors=True)


def normalised(cases):
    c = json.loads(json.dumps(cases))
    for lay in c["layouts"]:
        lay["layout"].pop("node", None)  # the node ID the server happened to claim
    return c


def main():
    if len(sys.argv) < 2:
        sys.exit(f"usage: {sys.argv[0]} path/to/flurry [--check]")
    flurry = os.path.realpath(sys.argv[1])
    for k in list(os.environ):
        if k.startswith("FLURRY_"):
            del os.environ[k]
    cases = build(flurry)
    if "--check" in sys.argv[2:]:
        with open(OUT) as f:
            stored = json.load(f)
        if normalised(stored) != normalised(cases):
            a = json.dumps(normalised(stored), indent=1).splitlines()
            b = json.dumps(normalised(cases), indent=1).splitlines()
            import difflib
            print("\n".join(list(difflib.unified_diff(a, b, "cases.json", "server now", lineterm=""))[:80]))
            sys.exit("FAIL: cases.json differs from what the server says now; run make_cases.py")
        n = sum(len(lay["decode"]) + len(lay["decode_errors"]) for lay in cases["layouts"])
        print(f"ok: {n} decode vectors over {len(cases['layouts'])} layouts, {len(cases['errors'])} "
              f"error answers, {len(cases['retry_waits'])} waits, {len(cases['batch_sizes'])} batch "
              f"sequences, {len(cases['order_decodes'])} order-number answers")
        return
    with open(OUT, "w") as f:
        json.dump(cases, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
