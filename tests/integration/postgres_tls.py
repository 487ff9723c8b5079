#!/usr/bin/env python3
"""The PostgreSQL registry over TLS with real processes: a real PostgreSQL server in TLS mode
(pglib: ssl=on, `hostssl` lines only, certificates from tests/testing/make_certs.sh) and
`flurry serve --registry postgres` over sslmode=verify-full.

1. A server as role flurry_pw (scram-sha-256, its password in the URL, an sslpassword beside it)
   starts, serves IDs, and no printed form shows either secret: its log, --print-config, /readyz,
   /metrics, `flurry nodes` (the registry's description).
2. A server as role flurry authenticated by its client certificate (CN=flurry), with a password
   read from a passfile for flurry_pw by a third server: both serve, on other node IDs.
3. A server certificate for another host name is refused under verify-full: the start fails with
   a message naming the mismatch; sslmode=disable is refused by the server (no plain text).
4. The start warning: a URL naming no sslmode for a host that is not loopback logs
   event=config_warning recommending verify-full; a loopback URL logs none.

Usage: postgres_tls.py FLURRY
"""
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
from pglib import PASSWORD_USER_PASSWORD, Postgres  # noqa: E402

KEY_PASSWORD = "k3y-Passphrase-9"
SECRETS = (PASSWORD_USER_PASSWORD, KEY_PASSWORD)


def main():
    h.init()
    pg = Postgres(h.WORK, tls=True)
    try:
        run(pg)
    finally:
        pg.stop()  # before run_main removes the work directory


def server_log(s):
    """What the server wrote (the harness's own "== command" lines carry the URL as given)."""
    return "".join(line for line in s.log_text().splitlines(True) if not line.startswith("== "))


def check_no_secret(text, what):
    for secret in SECRETS:
        h.check(secret not in text, f"{what} shows a secret: {text[-2000:]}")


def serve_args(url):
    return ["--registry", "postgres", "--postgres-url", url, "--lease-ttl-ms", "3000"]


def run(pg):
    pg.start()
    pg.create_database("ids")
    h.log(f"PostgreSQL (TLS) on port {pg.port}")
    ca = f"{pg.certs}/ca.pem"
    base = f"127.0.0.1:{pg.port}/ids"
    scram_url = (f"postgresql://flurry_pw:{PASSWORD_USER_PASSWORD}@{base}?sslmode=verify-full"
                 f"&sslrootcert={ca}&sslpassword={KEY_PASSWORD}")

    # 1. scram, the password in the URL: serves, and shows no secret anywhere.
    a = h.Server("a", os.path.join(h.WORK, "data-a"), serve_args(scram_url)).start()
    ids_a = h.get_ids(a.port, 10_000)
    h.check_increasing(ids_a, "a's IDs")
    h.check("postgres:postgresql://flurry_pw:***@" in a.log_text(),
            f"a's log does not name its registry with the password masked: {a.log_text()[-2000:]}")
    h.check("event=config_warning" not in a.log_text(), f"a warned: {a.log_text()[-2000:]}")
    for path in ("/readyz", "/metrics", "/healthz"):
        r = h.request(a.port, path)
        check_no_secret(r.text, path)
    p = subprocess.run([h.FLURRY, "serve", "--data-dir", os.path.join(h.WORK, "data-a")]
                       + serve_args(scram_url) + ["--print-config"], capture_output=True, timeout=30)
    h.check(p.returncode == 0, f"--print-config exited {p.returncode}: {p.stderr.decode()[:500]}")
    printed = p.stdout.decode() + p.stderr.decode()
    h.check("flurry_pw:***@" in printed and "sslpassword=***" in printed,
            f"--print-config does not show the URL masked: {printed}")
    check_no_secret(printed, "--print-config")
    p = subprocess.run([h.FLURRY, "nodes", "list", "--registry", "postgres", "--postgres-url", scram_url,
                        "--data-dir", os.path.join(h.WORK, "data-ops")], capture_output=True, timeout=60)
    listed = p.stdout.decode() + p.stderr.decode()
    h.check(p.returncode == 0 and f"node" in listed, f"flurry nodes list exited {p.returncode}: {listed}")
    h.check("flurry_pw:***@" in listed, f"flurry nodes does not name the registry masked: {listed}")
    check_no_secret(listed, "flurry nodes list")

    # 2. A client certificate (role flurry), and a password from a passfile (role flurry_pw).
    b = h.Server("b", os.path.join(h.WORK, "data-b"), serve_args(pg.url("ids"))).start()
    passfile = os.path.join(h.WORK, "pgpass")
    with open(passfile, "w") as f:
        f.write(f"127.0.0.1:{pg.port}:ids:flurry_pw:{PASSWORD_USER_PASSWORD}\n")
    os.chmod(passfile, 0o600)
    c = h.Server("c", os.path.join(h.WORK, "data-c"), serve_args(
        f"postgresql://flurry_pw@{base}?sslmode=verify-full&sslrootcert={ca}&passfile={passfile}")).start()
    h.check(len({a.node, b.node, c.node}) == 3, f"nodes a={a.node} b={b.node} c={c.node}")
    ids = ids_a + h.get_ids(b.port, 10_000) + h.get_ids(c.port, 10_000)
    h.check(len(set(ids)) == len(ids), "an ID was issued twice")
    for s in (a, b, c):
        check_no_secret(server_log(s), f"{s.name}'s log")
    h.log(f"nodes a={a.node} b={b.node} c={c.node}, {len(ids)} IDs, no duplicate, no secret shown")

    # 3. Refusals at start, each naming its cause; never a fallback to plain text.
    def refused(name, url, cause):
        s = h.Server(name, os.path.join(h.WORK, f"data-{name}"), serve_args(url))
        s.launch()
        try:
            s.proc.wait(30)
        except subprocess.TimeoutExpired:
            h.fail(f"{name} started with {url}")
        h.check(s.proc.returncode != 0, f"{name} exited 0")
        h.check(cause in s.log_text(), f"{name}'s log does not say {cause!r}: {s.log_text()[-2000:]}")
        check_no_secret(server_log(s), f"{name}'s log")

    pg.psql("postgres", "ALTER SYSTEM SET ssl_cert_file = 'wronghost.pem'")
    pg.psql("postgres", "ALTER SYSTEM SET ssl_key_file = 'wronghost.key'")
    pg.psql("postgres", "SELECT pg_reload_conf()")
    h.wait_for(lambda: pg.psql("postgres", "SHOW ssl_cert_file") == "wronghost.pem", "the reload")
    refused("wronghost", pg.url("ids"), 'does not match host name "127.0.0.1"')
    pg.psql("postgres", "ALTER SYSTEM RESET ssl_cert_file")
    pg.psql("postgres", "ALTER SYSTEM RESET ssl_key_file")
    pg.psql("postgres", "SELECT pg_reload_conf()")
    refused("plain", f"postgresql://flurry_pw:{PASSWORD_USER_PASSWORD}@{base}?sslmode=disable",
            "no encryption")
    h.check_increasing(h.get_ids(b.port, 100), "b's IDs after the refusals")

    # 4. The start warning for a connection a man in the middle can downgrade (a documentation
    # address: the start then fails to connect, after the warning).
    w = h.Server("warned", os.path.join(h.WORK, "data-w"),
                 serve_args("postgresql://flurry@192.0.2.1:5432/ids?connect_timeout=1"))
    w.launch()
    h.wait_log(w, r"event=config_warning postgres_url postgresql://flurry@192\.0\.2\.1:5432/ids.*"
                  r"sslmode=prefer.*sslmode=verify-full", timeout=30)
    w.kill()
    for s in (a, b, c):
        s.stop()


if __name__ == "__main__":
    h.run_main(main)
