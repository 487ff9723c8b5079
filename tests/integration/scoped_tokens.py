#!/usr/bin/env python3
"""Scoped tokens over real HTTP (issue 20), against the real `flurry serve`:

1. Every route of the scope table in docs/operations.md ("Tokens and scopes"), mirrored in ROUTES
   below, with open_scopes = none: without a token 401 TOKEN_MISSING with WWW-Authenticate:
   Bearer; with a token of another scope 403 SCOPE_MISSING; with a token of its scope (and with
   one holding every scope) its success status; an unknown token 401 TOKEN_UNKNOWN. /healthz,
   /readyz and /metrics answer without a token.
2. The default open_scopes (ids,read): issuing and reading need no token, admin and
   orders:decode still do; admin_token_file's token has admin and orders:decode, nothing else.
3. A broken token file stops the start naming the file and the line, never a token;
   --print-config shows the path only.
4. SIGHUP reloads the token files: a new token works for the next request and the old one is
   unknown; a broken file keeps the previous tokens and logs event=reload_failed (no token).
5. No token appears anywhere in the servers' logs.

Usage: scoped_tokens.py FLURRY
"""

import os
import signal
import subprocess

import harness as h

K1 = "2b7e151628aed2a6abf7158809cf4f3c"
TOKENS = {
    "ids": "tok-ids-0b8e1d4c7a2f5e9b3c6d0a1e4f7b2c5d",
    "read": "tok-read-6f2a9c4e1b7d3a8f5c0e2b9d6a4f1c7e",
    "admin": "tok-admin-3c7e0a5d2f9b6e1a8c4d7f0b3e6a9d2c",
    "orders:decode": "tok-decode-9d1f4b7e0c3a6d9f2b5e8c1a4d7f0b3e",
}
ALL = "tok-all-5a8d1c4f7b0e3a6d9c2f5b8e1a4d7c0f"
ADMIN_FILE_TOKEN = "tok-adminfile-1e4b7d0a3c6f9e2b5d8a1c4f7e0b3d6a"
UNKNOWN = "tok-unknown-7c0f3a6d9b2e5c8f1a4d7b0e3c6f9a2d"
SCOPES = list(TOKENS)


def private_file(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
    return path


def token_file(path, entries):
    return private_file(path, "# scoped tokens of the test\n\n" +
                        "".join(f"{t} {scopes}\n" for t, scopes in entries))


def auth(token):
    return {"Authorization": f"Bearer {token}"} if token else {}


_made = [0]


def new_tag_body():
    _made[0] += 1
    return '{"tag":"made%d","step":10}' % _made[0]


def routes(id_, code):
    """The scope table of docs/operations.md: (method, path, scope, success status, body maker)."""
    return [
        ("GET", "/v1/ids?count=2", "ids", 200, None),
        ("HEAD", "/v1/ids", "ids", 200, None),
        ("GET", "/api/snowflake/get/k", "ids", 200, None),
        ("GET", "/v1/order-numbers?count=1", "ids", 200, None),
        ("GET", "/v1/segments/orders/ids?count=2", "ids", 200, None),
        ("GET", "/v1/segments/orders/range?size=5", "ids", 200, None),
        ("GET", "/api/segment/get/orders", "ids", 200, None),
        ("GET", "/v1/tso?count=2", "ids", 200, None),
        ("HEAD", "/v1/tso", "ids", 200, None),
        ("GET", f"/v1/ids/{id_}", "read", 200, None),
        ("GET", f"/decodeSnowflakeId?snowflakeId={id_}", "read", 200, None),
        ("GET", "/v1/layout", "read", 200, None),
        ("GET", "/v1/nodes", "read", 200, None),
        ("GET", "/v1/status", "read", 200, None),
        ("GET", "/v1/events?since=0", "read", 200, None),
        ("GET", "/v1/segments", "read", 200, None),
        ("GET", "/v1/segments/orders", "read", 200, None),
        ("POST", "/v1/segments", "admin", 201, new_tag_body),
        ("GET", f"/v1/order-numbers/{code}", "orders:decode", 200, None),
        ("GET", "/healthz", None, 200, None),
        ("GET", "/readyz", None, 200, None),
        ("GET", "/readyz/tso", None, 200, None),
        ("GET", "/metrics", None, 200, None),
        # The console's files and the old /segments page's redirect carry no data.
        ("GET", "/console", None, 200, None),
        ("GET", "/console/console.js", None, 200, None),
        ("GET", "/segments", None, 302, None),
    ]


def call(port, method, path, token=None, body=None):
    headers = auth(token)
    if body is not None:
        headers["Content-Type"] = "application/json"
    return h.request(port, path, method=method, headers=headers, body=body)


def check_refused(r, status, reason, what):
    if r.status == status and r.body == b"":  # HEAD: the status alone
        return
    h.check_error_body(r, status, what, reason=reason)


def every_route_by_scope(srv, table):
    port = srv.port
    for method, path, scope, ok, make_body in table:
        what = f"{method} {path}"
        body = make_body() if make_body else None
        if scope is None:
            r = call(port, method, path)
            h.check(r.status == ok, f"{what} without a token: {r}")
            continue
        r = call(port, method, path, body=body)
        check_refused(r, 401, "TOKEN_MISSING", f"{what} without a token")
        h.check(r.headers.get("www-authenticate") == "Bearer", f"{what}: 401 without WWW-Authenticate: {r.headers}")
        for other in SCOPES:
            if other == scope:
                continue
            r = call(port, method, path, TOKENS[other], body=body)
            check_refused(r, 403, "SCOPE_MISSING", f"{what} with a token of scope {other}")
            h.check("www-authenticate" not in r.headers, f"{what}: 403 with WWW-Authenticate")
        for token in (TOKENS[scope], ALL):
            r = call(port, method, path, token, body=make_body() if make_body else None)
            h.check(r.status == ok, f"{what} with a token of scope {scope}: expected {ok}, got {r}")
    r = call(port, "GET", "/v1/layout", UNKNOWN)
    check_refused(r, 401, "TOKEN_UNKNOWN", "an unknown token")
    r = h.request(port, "/v1/layout", headers={"Authorization": "Basic " + TOKENS["read"]})
    h.check(r.status == 401, f"Basic scheme: {r}")
    h.log(f"{len(table)} routes x (no token, {len(SCOPES)} scopes, all) checked")


def setup_server(name, args):
    data = os.path.join(h.WORK, name)
    srv = h.Server(name, data, args=args).start()
    return srv


def first_id_and_code(port, token=None):
    r = call(port, "GET", "/v1/ids?count=1", token)
    h.check(r.status == 200, f"an ID: {r}")
    id_ = r.json()["ids"][0]
    r = call(port, "GET", "/v1/order-numbers?count=1", token)
    h.check(r.status == 200, f"an order number: {r}")
    return id_, r.json()["order_numbers"][0]


def main():
    h.init()
    keys = private_file(os.path.join(h.WORK, "keys"), f"1 = {K1}\n")
    tokens = token_file(os.path.join(h.WORK, "tokens"),
                        [(TOKENS[s], s) for s in SCOPES] + [(ALL, "ids , read,admin,orders:decode")])
    admin_file = private_file(os.path.join(h.WORK, "admin-token"), ADMIN_FILE_TOKEN + "\n")
    logs = []

    # 3. Refusals at start and --print-config.
    bad = private_file(os.path.join(h.WORK, "bad-tokens"),
                       f"{TOKENS['ids']} ids\n{TOKENS['read']} ids,raed\n")
    p = subprocess.run([h.FLURRY, "serve", "--data-dir", os.path.join(h.WORK, "never"),
                        "--token-file", bad], capture_output=True, timeout=30)
    h.check(p.returncode != 0 and b"bad-tokens" in p.stderr and b"line 2: scope 2 is not one of" in p.stderr,
            f"a bad token file: {p.returncode} {p.stderr!r}")
    for t in (TOKENS["ids"], TOKENS["read"]):
        h.check(t.encode() not in p.stderr and t[4:20].encode() not in p.stderr, f"a token in the start error: {p.stderr!r}")
    os.chmod(bad, 0o644)
    p = subprocess.run([h.FLURRY, "serve", "--data-dir", os.path.join(h.WORK, "never"),
                        "--token-file", bad], capture_output=True, timeout=30)
    h.check(p.returncode != 0 and b"chmod 600" in p.stderr, f"a token file others may read: {p.stderr!r}")
    p = subprocess.run([h.FLURRY, "serve", "--data-dir", os.path.join(h.WORK, "never"), "--print-config",
                        "--token-file", tokens, "--open-scopes", "none"], capture_output=True, timeout=30)
    h.check(p.returncode == 0 and f"token_file = '{tokens}'".encode() in p.stdout
            and b"open_scopes = 'none'" in p.stdout, f"--print-config: {p.stdout!r} {p.stderr!r}")
    h.check(all(t.encode() not in p.stdout for t in TOKENS.values()), "a token in --print-config")
    p = subprocess.run([h.FLURRY, "serve", "--data-dir", os.path.join(h.WORK, "never"), "--open-scopes", "admin"],
                       capture_output=True, timeout=30)
    h.check(p.returncode != 0 and b"open_scopes" in p.stderr and b"always need a token" in p.stderr,
            f"open_scopes = admin: {p.stderr!r}")

    # 1. Every route, open_scopes = none.
    closed = setup_server("closed", ["--token-file", tokens, "--order-key-file", keys, "--open-scopes", "none",
                                     "--log-level", "trace", "--tso"])
    logs.append(closed)
    h.wait_for(lambda: h.request(closed.port, "/readyz/tso").status == 200, "the timestamp oracle to lead", 30)
    r = call(closed.port, "POST", "/v1/segments", TOKENS["admin"], body='{"tag":"orders","step":100}')
    h.check(r.status == 201, f"create orders: {r}")
    id_, code = first_id_and_code(closed.port, ALL)
    every_route_by_scope(closed, routes(id_, code))

    # The CLI reads the same file and sends, per request, a token with the route's scope.
    base = f"http://127.0.0.1:{closed.port}"
    env = {k: v for k, v in os.environ.items() if k != "FLURRY_TOKEN_FILE"}
    p = subprocess.run([h.FLURRY, "segment", "list", "--server", base], capture_output=True, timeout=30, env=env)
    h.check(p.returncode != 0 and b"401" in p.stderr and b"--token-file" in p.stderr,
            f"segment list without a token: {p.returncode} {p.stderr!r}")
    for verb in (["segment", "list"], ["segment", "show", "orders"], ["segment", "next", "orders", "-n", "3"],
                 ["segment", "create", "cli-made"], ["order", "new", "-n", "2"]):
        p = subprocess.run([h.FLURRY, *verb, "--server", base, "--token-file", tokens],
                           capture_output=True, timeout=30, env=env)
        h.check(p.returncode == 0, f"{' '.join(verb)} --token-file: {p.returncode} {p.stderr!r}")
    p = subprocess.run([h.FLURRY, "order", "new", "--server", base], capture_output=True, timeout=30,
                       env=dict(env, FLURRY_TOKEN_FILE=tokens))
    h.check(p.returncode == 0 and len(p.stdout.split()) == 1, f"order new with FLURRY_TOKEN_FILE: {p.stderr!r}")
    # Only a token with the route's scope is sent: a file without one sends none (401, saying which
    # scope); a token the server knows without the scope is 403.
    readers = token_file(os.path.join(h.WORK, "readers"), [(TOKENS["read"], "read")])
    p = subprocess.run([h.FLURRY, "segment", "create", "nope", "--server", base, "--token-file", readers],
                       capture_output=True, timeout=30, env=env)
    h.check(p.returncode != 0 and b"401" in p.stderr and b"a token with scope admin" in p.stderr,
            f"segment create with a read token only: {p.stderr!r}")
    mislabelled = token_file(os.path.join(h.WORK, "mislabelled"), [(TOKENS["read"], "admin")])
    p = subprocess.run([h.FLURRY, "segment", "create", "nope", "--server", base, "--token-file", mislabelled],
                       capture_output=True, timeout=30, env=env)
    h.check(p.returncode != 0 and b"403" in p.stderr and b"does not have scope admin" in p.stderr
            and TOKENS["read"].encode() not in p.stderr, f"segment create with a read token as admin: {p.stderr!r}")

    # 2. The default: issuing and reading open; admin_token_file's token has admin and
    # orders:decode only.
    default = setup_server("default", ["--admin-token-file", admin_file, "--order-key-file", keys])
    logs.append(default)
    port = default.port
    id_, code = first_id_and_code(port)
    for path in ["/v1/ids?count=3", f"/v1/ids/{id_}", "/v1/layout", "/v1/segments"]:
        r = call(port, "GET", path)
        h.check(r.status == 200, f"open GET {path}: {r}")
    check_refused(call(port, "POST", "/v1/segments", body='{"tag":"t"}'), 401, "TOKEN_MISSING", "create, no token")
    check_refused(call(port, "GET", f"/v1/order-numbers/{code}"), 401, "TOKEN_MISSING", "decode, no token")
    r = call(port, "POST", "/v1/segments", ADMIN_FILE_TOKEN, body='{"tag":"t"}')
    h.check(r.status == 201, f"create with admin_token_file's token: {r}")
    r = call(port, "GET", f"/v1/order-numbers/{code}", ADMIN_FILE_TOKEN)
    h.check(r.status == 200, f"decode with admin_token_file's token: {r}")
    # A token on an open route is not even looked at (an unknown one too).
    r = call(port, "GET", "/v1/ids", UNKNOWN)
    h.check(r.status == 200, f"an unknown token on an open route: {r}")
    default.stop()

    # 2b. open_scopes = read: issuing needs a token, reading does not.
    ids_closed = setup_server("ids-closed", ["--token-file", tokens, "--open-scopes", "read"])
    logs.append(ids_closed)
    check_refused(call(ids_closed.port, "GET", "/v1/ids"), 401, "TOKEN_MISSING", "require ids: GET /v1/ids")
    h.check(call(ids_closed.port, "GET", "/v1/ids", TOKENS["ids"]).status == 200, "require ids: with the ids token")
    h.check(call(ids_closed.port, "GET", "/v1/layout").status == 200, "require ids: /v1/layout stays open")
    ids_closed.stop()

    # 4. SIGHUP reloads the token file.
    port = closed.port
    fresh = "tok-fresh-2d5a8c1f4e7b0d3a6c9f2e5b8d1a4c7f"
    token_file(tokens, [(fresh, "read")])
    os.kill(closed.pid, signal.SIGHUP)
    h.wait_log(closed, r"event=reloaded part=tokens")
    h.check(call(port, "GET", "/v1/layout", fresh).status == 200, "the new token after SIGHUP")
    check_refused(call(port, "GET", "/v1/layout", TOKENS["read"]), 401, "TOKEN_UNKNOWN", "the old token after SIGHUP")
    private_file(tokens, f"{UNKNOWN} read,everything\n")
    os.kill(closed.pid, signal.SIGHUP)
    h.wait_log(closed, r"event=reload_failed part=tokens")
    h.check(call(port, "GET", "/v1/layout", fresh).status == 200, "the kept token after a failed reload")
    check_refused(call(port, "GET", "/v1/layout", UNKNOWN), 401, "TOKEN_UNKNOWN", "a token of the broken file")
    h.check("line 1: scope 2 is not one of" in closed.log_text(), "the failed reload's cause is not logged")
    rc, _ = closed.stop()
    h.check(rc == 0, f"exit code {rc}")

    # 5. No token, nor a part of one, in any log.
    for srv in logs:
        text = srv.log_text()
        for t in list(TOKENS.values()) + [ALL, ADMIN_FILE_TOKEN, UNKNOWN, fresh]:
            h.check(t not in text and t[4:24] not in text, f"{srv.name}: a token in the log")
    h.log("no token in the logs")


if __name__ == "__main__":
    h.run_main(main)
