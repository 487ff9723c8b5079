#!/usr/bin/env python3
"""Order numbers over real HTTP: `flurry serve` with an order-number key file and an admin token.
10,000 order numbers from the snowflake generator, all distinct and of one length, each decoding
(through GET /v1/order-numbers/{code} with the token, and through `flurry order decode
--key-file`) to distinct, increasing IDs; numbers from a segment tag decoding to the tag's IDs;
neither the key bytes nor the token in the server's log (at trace) or /metrics; a restart with a
rotated key file (a new active version) still decoding the old numbers; a server without keys
answering 501 and still serving /v1/ids; a bad key file stopping the start without showing it.

Usage: order_numbers.py FLURRY
"""
import http.client
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

TOKEN = "order-it-S3cret-9c1d-7e2a5b8f0c3d6e91"
K1 = "2b7e151628aed2a6abf7158809cf4f3c"
K2 = "6a1f0c9e55b3d2e47a8b19f03c6d2e8175a4b9c0d1e2f30415263748596a7b8c"
COUNT = 10_000
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
    return path


def issue(port, conn, count, tag=None):
    numbers = []
    while len(numbers) < count:
        n = min(1000, count - len(numbers))
        q = f"/v1/order-numbers?count={n}" + (f"&tag={tag}" if tag else "")
        r = h.request(port, q, conn=conn)
        h.check(r.status == 200, f"GET {q}: {r}")
        got = r.json().get("order_numbers")
        h.check(isinstance(got, list) and len(got) == n, f"GET {q}: bad body {r.body[:200]!r}")
        numbers += got
    return numbers


def decode_http(port, conn, code, tag=None):
    path = f"/v1/order-numbers/{code}" + (f"?tag={tag}" if tag else "")
    r = h.request(port, path, headers=AUTH, conn=conn)
    h.check(r.status == 200, f"GET {path}: {r}")
    return r.json()


def decode_cli(keys, codes, tag=None):
    extra = ["--tag", tag] if tag else []
    p = subprocess.run([h.FLURRY, "order", "decode", "--key-file", keys] + extra + codes, capture_output=True,
                       timeout=120)
    h.check(p.returncode == 0, f"flurry order decode: {p.returncode} {p.stderr[:300]!r}")
    return [int(x) for x in p.stdout.split()]


def no_secrets(srv, port, what):
    metrics = h.request(port, "/metrics").text
    for secret in (K1, K2, TOKEN, K1[:16], K2[:16]):
        h.check(secret not in srv.log_text(), f"{what}: a secret appears in the server's log")
        h.check(secret not in metrics, f"{what}: a secret appears in /metrics")
    return metrics


def main():
    h.init()
    token = write(os.path.join(h.WORK, "admin-token"), TOKEN + "\n")
    keys = write(os.path.join(h.WORK, "order-keys"), f"# test keys\n1 = {K1}\n")
    data = os.path.join(h.WORK, "data")
    args = ["--admin-token-file", token, "--order-key-file", keys, "--log-level", "trace"]

    # A bad key file stops the start, naming the file, never its content.
    bad = write(os.path.join(h.WORK, "bad-keys"), f"1 = {K1[:30]}zz\n")
    p = subprocess.run([h.FLURRY, "serve", "--listen", "127.0.0.1:0", "--data-dir", os.path.join(h.WORK, "e"),
                        "--order-key-file", bad], capture_output=True, timeout=30)
    h.check(p.returncode != 0 and b"bad-keys" in p.stderr and K1[:16].encode() not in p.stderr,
            f"a bad key file: {p.returncode} {p.stderr!r}")
    p = subprocess.run([h.FLURRY, "serve", "--data-dir", data, "--print-config"] + args,
                       capture_output=True, timeout=30, env=dict(os.environ, FLURRY_ORDER_KEYS=f"2 = {K2}"))
    h.check(p.returncode == 0 and K1.encode() not in p.stdout and K2.encode() not in p.stdout
            and b"order_key_file" in p.stdout, f"--print-config: {p.returncode} {p.stdout!r} {p.stderr!r}")

    srv = h.Server("orders", data, args=args).start()
    port = srv.port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    numbers = issue(port, conn, COUNT)
    h.check(len(set(numbers)) == COUNT, "order numbers repeat")
    h.check({len(n) for n in numbers} == {21}, f"lengths: {sorted({len(n) for n in numbers})}")
    ids = [int(decode_http(port, conn, n)["id"]) for n in numbers]
    h.check_increasing(ids, "the IDs of the order numbers")
    h.check(decode_cli(keys, numbers) == ids, "flurry order decode disagrees with the server")
    one = decode_http(port, conn, numbers[0])
    h.check(one["source"] == "snowflake" and one["key_version"] == "1" and "node" in one and "time" in one,
            f"decoded: {one}")
    r = h.request(port, f"/v1/order-numbers/{numbers[0]}")
    h.check_error_body(r, 401, "decode without the token", code="UNAUTHENTICATED")
    wrong = numbers[0][:20] + str((int(numbers[0][20]) + 1) % 10)
    err = h.check_error_body(h.request(port, f"/v1/order-numbers/{wrong}", headers=AUTH), 400, "wrong check")
    h.check(err.get("kind") == "check" and err.get("position") == 21, f"error: {err}")

    # A segment tag is a source too.
    r = h.request(port, "/v1/segments", method="POST", headers=dict(AUTH, **{"Content-Type": "application/json"}),
                  body='{"tag":"orders","start":1,"step":100}')
    h.check(r.status == 201, f"creating the tag: {r}")
    tagged = issue(port, conn, 300, tag="orders")
    h.check(len(set(tagged)) == 300, "tag order numbers repeat")
    tag_ids = [int(decode_http(port, conn, n, tag="orders")["id"]) for n in tagged]
    h.check(tag_ids == list(range(1, 301)), f"tag IDs: {tag_ids[:5]}...")
    h.check(h.request(port, "/v1/order-numbers?tag=nosuchtag").status == 404, "unknown tag")

    # flurry order new --server: the server's numbers, one per line.
    for extra, source in (([], None), (["--tag", "orders"], "orders")):
        p = subprocess.run([h.FLURRY, "order", "new", "-n", "5", "--server", f"http://127.0.0.1:{port}"] + extra,
                           capture_output=True, timeout=30)
        h.check(p.returncode == 0, f"order new --server {extra}: {p.returncode} {p.stderr!r}")
        got = p.stdout.decode().split()
        h.check(len(got) == 5 and all(len(n) == 21 for n in got), f"order new --server {extra}: {got}")
        h.check(decode_cli(keys, got, source)[0] > (300 if source else ids[-1]), "order new --server IDs")
    p = subprocess.run([h.FLURRY, "order", "new", "--tag", "nosuchtag", "--server", f"http://127.0.0.1:{port}"],
                       capture_output=True, timeout=30)
    h.check(p.returncode == 1 and b"404" in p.stderr, f"order new for an unknown tag: {p.returncode} {p.stderr!r}")

    metrics = no_secrets(srv, port, "first run")
    h.check(h.metric(metrics, "flurry_order_numbers_issued_total", {"source": "snowflake"}) == COUNT + 5,
            "issued metric (snowflake)")
    h.check(h.metric(metrics, "flurry_order_numbers_issued_total", {"source": "segment"}) == 305,
            "issued metric (segment)")
    h.check(h.metric(metrics, "flurry_order_key_info", {"active": "1", "versions": "1"}) == 1, "key info")
    conn.close()
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc}")
    h.check("order_numbers=" in srv.log_text(), "the ready line does not describe order numbers")

    # Rotation: a second key, active; old numbers still decode to the same IDs.
    write(keys, f"1 = {K1}\n2 = {K2}\nactive = 2\n")
    srv = h.Server("orders2", data, args=args).start()
    port = srv.port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    fresh = issue(port, conn, 100)
    h.check(all(n[0] == "2" for n in fresh), f"new numbers do not carry version 2: {fresh[:3]}")
    sample = numbers[::100]
    h.check([int(decode_http(port, conn, n)["id"]) for n in sample] == ids[::100], "old numbers after rotation")
    fresh_ids = [int(decode_http(port, conn, n)["id"]) for n in fresh]
    h.check(min(fresh_ids) > max(ids), "IDs after the restart are not above the earlier ones")
    h.check(decode_cli(keys, sample + fresh) == ids[::100] + fresh_ids, "CLI decode after rotation")
    metrics = no_secrets(srv, port, "after rotation")
    h.check(h.metric(metrics, "flurry_order_key_info", {"active": "2", "versions": "12"}) == 1, "key info 12")
    conn.close()
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc}")

    # Without keys: 501 saying how to configure them, and /v1/ids as ever.
    plain = h.Server("nokeys", os.path.join(h.WORK, "data2")).start()
    r = h.request(plain.port, "/v1/order-numbers?count=2")
    err = h.check_error_body(r, 501, "order numbers without keys", code="UNIMPLEMENTED")
    h.check("FLURRY_ORDER_KEYS" in err["message"], f"501 message: {err}")
    h.check(len(h.get_ids(plain.port, 5)) == 5, "/v1/ids without keys")
    rc, _ = plain.stop()
    h.check(rc == 0, f"exit code {rc}")


if __name__ == "__main__":
    h.run_main(main)
