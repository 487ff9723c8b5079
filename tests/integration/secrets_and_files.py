#!/usr/bin/env python3
"""Secrets and files (issue 17, section 4), against the real binary:

1. --print-config and the start error never show a password: postgres_url as a URL and as
   key=value pairs (password, sslpassword, percent-encoded), and every PostgreSQL entry of
   segment_stores.
2. The admin token: a short token and a token file readable by group or others stop the start
   (the message names the mode and chmod 600); `flurry segment create --server` reads the file
   with the same rules and accepts the same token as the server; a wrong guess is answered no
   sooner than 100 ms later, and guesses on several connections from one address are compared
   no more than the token brake's budget allows (the rest refused at once), while a client on
   another address with the right token is not held back.
3. Data directories: created 0700 and their files 0600 under umask 0; a symbolic link planted at
   a lock or state file is refused and its target left untouched; a data directory writable by
   group or others, or owned by another user, is refused.
4. Forged order numbers (version 1, 19 random digits, the public Damm check digit) are refused:
   snowflake ones whose time is not possible, segment ones above the tag's max_id; a segment
   number without ?tag= is a 400 that says so.

Usage: secrets_and_files.py FLURRY [HTTP_CLIENT]   (SECRETS_IT_ONLY=token_rules: one part only)
"""

import http.client
import json
import os
import random
import stat
import subprocess
import threading
import time

import harness as h

TOKEN = "sec-test-admin-token-5e0b7c2a9f14d3e6"
KEY = "2b7e151628aed2a6abf7158809cf4f3c"
DELAY_S = 0.1  # Authorizer::kFailedTokenDelay (src/ops/include/ops/authorizer.h)
CLIENT_BURST, CLIENT_RATE = 20, 10  # GuessBrake (src/ops/include/ops/guess_brake.h)

DAMM = [
    [0, 3, 1, 7, 5, 9, 8, 6, 4, 2],
    [7, 0, 9, 2, 1, 5, 4, 8, 6, 3],
    [4, 2, 0, 6, 8, 7, 1, 3, 5, 9],
    [1, 7, 5, 0, 9, 8, 3, 4, 2, 6],
    [6, 1, 2, 3, 0, 4, 5, 9, 7, 8],
    [3, 6, 7, 4, 2, 0, 9, 5, 8, 1],
    [5, 8, 6, 9, 7, 2, 0, 1, 3, 4],
    [8, 9, 4, 5, 3, 6, 2, 0, 1, 7],
    [9, 4, 3, 8, 6, 1, 7, 2, 0, 5],
    [2, 5, 8, 1, 4, 3, 6, 7, 9, 0],
]


def damm(digits):
    interim = 0
    for d in digits:
        interim = DAMM[interim][int(d)]
    return str(interim)


def forged(rng, prefix=""):
    """A number anyone can make: version 1, 19 random digits, the right Damm check digit."""
    body = "1" + "".join(rng.choice("0123456789") for _ in range(19))
    return prefix + body + damm(body)


def private_file(path, text, mode=0o600):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def run(args, **kw):
    return subprocess.run([h.FLURRY] + args, capture_output=True, timeout=60, **kw)


def secrets_are_masked():
    secrets = ["url-Secret-1", "ssl-Secret-2", "kv-Secret-3", "kvssl-Secret-4", "store-Secret-5", "q-Secret-6"]
    url = f"postgresql://flurry:{secrets[0]}@127.0.0.1:1/ids?sslpassword={secrets[1]}&sslmode=disable"
    kv = f"host=127.0.0.1 port=1 dbname=ids password='{secrets[2]}' sslpassword={secrets[3]}"
    stores = f"sqlite, postgres://u:{secrets[4]}@127.0.0.1:1/s, host=127.0.0.1 port=1 dbname=t password={secrets[5]}"
    data = os.path.join(h.WORK, "masked")
    for pg in (url, kv):
        p = run(["serve", "--data-dir", data, "--registry", "postgres", "--postgres-url", pg,
                 "--segment-stores", stores, "--print-config"])
        out = p.stdout.decode() + p.stderr.decode()
        h.check(p.returncode == 0, f"--print-config: {p.returncode} {out}")
        for s in secrets:
            h.check(s not in out, f"--print-config shows the secret {s}: {out}")
        h.check("postgres_url" in out and "***" in out and "segment_stores" in out, f"--print-config: {out}")
        # The start fails (nothing listens on port 1): the error names the server, never a secret.
        p = run(["serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--registry", "postgres",
                 "--postgres-url", pg], env=dict(os.environ, FLURRY_LOG_LEVEL="trace"))
        out = p.stdout.decode() + p.stderr.decode()
        h.check(p.returncode != 0 and "127.0.0.1" in out, f"start against port 1: {p.returncode} {out}")
        for s in secrets:
            h.check(s not in out, f"the start error shows the secret {s}: {out}")
    h.log("passwords masked in --print-config and the start error")


def token_rules():
    work = os.path.join(h.WORK, "tokens")
    os.makedirs(work)
    data = os.path.join(work, "data")

    def start_error(token_file):
        try:
            p = subprocess.run([h.FLURRY, "serve", "--listen", "127.0.0.1:0", "--data-dir", data,
                                "--admin-token-file", token_file], capture_output=True, timeout=10)
        except subprocess.TimeoutExpired:
            h.fail(f"serve started with the token file {token_file} (still running after 10 s)")
        h.check(p.returncode != 0, f"serve started with {token_file}")
        return p.stderr.decode()

    short = private_file(os.path.join(work, "short"), "a\n")
    err = start_error(short)
    h.check("at least 32" in err and "short" in err, f"a one-letter token: {err}")
    for mode in (0o666, 0o644, 0o640):
        shared = private_file(os.path.join(work, f"shared-{mode:o}"), TOKEN + "\n", mode)
        err = start_error(shared)
        h.check(f"mode 0{mode:o}" in err and "chmod 600" in err and TOKEN not in err,
                f"a token file of mode {mode:o}: {err}")
        # The CLI reads the file with the same rules, so it refuses it the same way.
        p = run(["segment", "create", "t", "--server", "http://127.0.0.1:9", "--admin-token-file", shared])
        h.check(p.returncode != 0 and "chmod 600" in p.stderr.decode(), f"CLI with mode {mode:o}: {p.stderr!r}")

    token_file = private_file(os.path.join(work, "token"), f"\n  {TOKEN} \n")
    srv = h.Server("tokens", data, args=["--admin-token-file", token_file]).start()
    port = srv.port
    base = f"http://127.0.0.1:{port}"
    # The CLI and the server read one token from one file (surrounding whitespace trimmed).
    p = run(["segment", "create", "orders", "--server", base, "--admin-token-file", token_file])
    h.check(p.returncode == 0, f"CLI create with the server's token file: {p.returncode} {p.stderr!r}")
    wrong_file = private_file(os.path.join(work, "wrong"), "not-the-token-but-long-enough-to-send\n")
    p = run(["segment", "create", "other", "--server", base, "--admin-token-file", wrong_file])
    h.check(p.returncode != 0 and b"401" in p.stderr
            and b"does not accept the token" in p.stderr, f"CLI with a wrong token: {p.returncode} {p.stderr!r}")

    # Guessing on one connection: every wrong token answered after the delay (one at a time stays
    # within the brake's budget: 10 a second).
    guesses = 20
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=("127.0.0.2", 0))
    started = time.monotonic()
    for i in range(guesses):
        r = h.request(port, "/v1/segments", method="POST", conn=conn, body='{"tag":"x"}',
                      headers={"Authorization": f"Bearer guess-{i}", "Content-Type": "application/json"})
        h.check(r.status == 401, f"guess {i}: {r}")
    took = time.monotonic() - started
    conn.close()
    h.check(took >= guesses * DELAY_S, f"{guesses} wrong guesses took {took:.2f} s, less than {guesses} x {DELAY_S} s")
    h.log(f"{guesses} wrong guesses on one connection: {took:.2f} s ({guesses / took:.1f} guesses/s)")

    # Guessing on eight connections at once from one address: the tokens compared stay within the
    # brake's budget for the address (its burst, then its rate).
    compared = []
    lock = threading.Lock()

    def guesser(n):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=("127.0.0.3", 0))
        for i in range(10):
            r = h.request(port, "/v1/segments", method="POST", conn=c, body='{"tag":"x"}',
                          headers={"Authorization": f"Bearer g{n}-{i}", "Content-Type": "application/json"})
            with lock:
                compared.append(r.status)
        c.close()

    # Meanwhile a client with the right token is never held back by the guesses.
    rightful = []

    def holder():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for i in range(10):
            r = h.request(port, "/v1/segments", method="POST", conn=c, body=f'{{"tag":"during-{i}"}}',
                          headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
            rightful.append(r.status)
            time.sleep(0.02)
        c.close()

    started = time.monotonic()
    threads = [threading.Thread(target=guesser, args=(n,)) for n in range(8)]
    threads.append(threading.Thread(target=holder))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - started
    refused = compared.count(401)
    h.check(set(compared) <= {401, 503}, f"parallel guesses answered {sorted(set(compared))}")
    h.check(all(200 <= s < 300 for s in rightful), f"the right token during the guessing: {rightful}")
    budget = CLIENT_BURST + CLIENT_RATE * took
    h.check(refused <= budget, f"{refused} tokens compared in {took:.2f} s: more than the budget {budget:.0f}")
    h.log(f"80 parallel guesses: {refused} compared (401), {compared.count(503)} held off (503) in {took:.2f} s")
    # The right token still works once the guessing stops.
    p = run(["segment", "create", "later", "--server", base, "--admin-token-file", token_file])
    h.check(p.returncode == 0, f"CLI create after the guessing: {p.returncode} {p.stderr!r}")
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc}")


def modes_under(root):
    """(path, mode) of every directory and file under root, root included."""
    out = [(root, stat.S_IMODE(os.lstat(root).st_mode))]
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            out.append((p, stat.S_IMODE(os.lstat(p).st_mode)))
    return out


def data_dir_rules():
    work = os.path.join(h.WORK, "dirs")
    os.makedirs(work)
    data = os.path.join(work, "a", "b", "data")
    token_file = private_file(os.path.join(work, "token"), TOKEN + "\n")
    old_umask = os.umask(0)
    try:
        srv = h.Server("umask0", data, args=["--admin-token-file", token_file]).start()
        r = h.request(srv.port, "/v1/segments", method="POST", body='{"tag":"t"}',
                      headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
        h.check(r.status == 201, f"creating a tag: {r}")
        h.check(len(h.get_ids(srv.port, 10)) == 10, "IDs under umask 0")
        h.check(h.request(srv.port, "/v1/segments/t/ids?count=3").status == 200, "segment IDs under umask 0")
        rc, _ = srv.stop()
        h.check(rc == 0, f"exit code {rc}")
    finally:
        os.umask(old_umask)
    for d in (os.path.join(work, "a"), os.path.join(work, "a", "b")):
        mode = stat.S_IMODE(os.stat(d).st_mode)
        h.check(mode == 0o700, f"{d} was created {mode:o} under umask 0, not 700")
    entries = modes_under(data)
    files = [(p, m) for p, m in entries if os.path.isfile(p)]
    h.check(len(files) >= 3, f"files in the data directory: {entries}")
    for p, m in entries:
        want = 0o700 if os.path.isdir(p) else 0o600
        h.check(m == want, f"{p} has mode {m:o} under umask 0, expected {want:o}")
    h.log(f"umask 0: {len(entries)} entries of the data directory, all 700/600")

    # A symbolic link planted at each lock, state and database file: the start is refused, naming
    # the link, and the file it points to keeps its content.
    planted = [p for p, _ in entries if os.path.isfile(p) and p.endswith((".lock", ".state", ".db"))]
    h.check(planted, f"no lock or state files to plant a link at: {entries}")
    for victim in planted:
        target = os.path.join(work, "precious-" + os.path.basename(victim))
        with open(target, "w") as f:
            f.write("precious\n")
        saved = victim + ".saved"
        os.rename(victim, saved)
        os.symlink(target, victim)
        p = run(["serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--admin-token-file", token_file])
        with open(target) as f:
            content = f.read()
        h.check(content == "precious\n", f"a link at {victim}: its target was written: {content!r}")
        h.check(p.returncode != 0 and b"symbolic link" in p.stderr,
                f"a link at {victim}: exit {p.returncode}, {p.stderr[-400:]!r}")
        os.unlink(victim)
        os.rename(saved, victim)
    h.log(f"links planted at {len(planted)} lock/state/database files: each refused, targets untouched")

    # A data directory others may write to, or another user's: refused, saying how to fix it.
    for mode in (0o770, 0o777, 0o702):
        os.chmod(data, mode)
        p = run(["serve", "--listen", "127.0.0.1:0", "--data-dir", data])
        err = p.stderr.decode()
        h.check(p.returncode != 0 and f"mode 0{mode:o}" in err and "chmod 700" in err,
                f"a data directory of mode {mode:o}: {p.returncode} {err}")
        p = run(["next", "-n", "1", "--state-dir", data])
        h.check(p.returncode != 0, f"flurry next in a data directory of mode {mode:o}: {p.stdout!r}")
    os.chmod(data, 0o700)
    if os.geteuid() == 0:
        os.chown(data, 65534, 65534)
        p = run(["serve", "--listen", "127.0.0.1:0", "--data-dir", data])
        err = p.stderr.decode()
        h.check(p.returncode != 0 and "owned by user ID 65534" in err, f"another user's data directory: {err}")
        os.chown(data, 0, 0)
    srv = h.Server("again", data).start()
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc} after the repairs")


def forged_numbers():
    work = os.path.join(h.WORK, "orders")
    os.makedirs(work)
    token = private_file(os.path.join(work, "token"), TOKEN + "\n")
    keys = private_file(os.path.join(work, "keys"), f"1 = {KEY}\n")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    rng = random.Random(17)
    srv = h.Server("orders", os.path.join(work, "data"),
                   args=["--admin-token-file", token, "--order-key-file", keys]).start()
    port = srv.port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def decode(code, tag=None):
        path = f"/v1/order-numbers/{code}" + (f"?tag={tag}" if tag else "")
        return h.request(port, path, headers=auth, conn=conn)

    real = h.request(port, "/v1/order-numbers?count=50", conn=conn).json()["order_numbers"]
    h.check(all(decode(n).status == 200 for n in real), "real snowflake numbers decode")
    count = 500
    accepted = 0
    for _ in range(count):
        r = decode(forged(rng))
        h.check(r.status in (200, 400), f"a forged number: {r}")
        accepted += r.status == 200
    h.log(f"forged snowflake numbers: {accepted} of {count} decoded, {count - accepted} refused "
          f"({100.0 * (count - accepted) / count:.1f} %)")
    # A forged payload decrypts to a uniform value below 10^19; it is accepted when that is an ID
    # of the flurry layout (epoch 2025-01-01, 22 bits below the time) not later than now + 1 s:
    # about 2.5 % in 2026 (450 of 500 before the check), growing as the layout ages.
    epoch_ms = 1735689600000
    share = ((int(time.time() * 1000) - epoch_ms + 1000) << 22) / 10**19
    bound = count * share + 6 * (count * share) ** 0.5 + 5
    h.check(accepted <= bound, f"{accepted} of {count} forged snowflake numbers decoded (expected at most {bound:.0f})")

    r = h.request(port, "/v1/segments", method="POST", conn=conn, body='{"tag":"orders","start":1,"step":100}',
                  headers=dict(auth, **{"Content-Type": "application/json"}))
    h.check(r.status == 201, f"creating the tag: {r}")
    tagged = h.request(port, "/v1/order-numbers?count=50&tag=orders", conn=conn).json()["order_numbers"]
    h.check([int(decode(n, "orders").json()["id"]) for n in tagged] == list(range(1, 51)), "real tag numbers")
    accepted = sum(decode(forged(rng), "orders").status == 200 for _ in range(count))
    h.log(f"forged segment numbers: {accepted} of {count} decoded")
    h.check(accepted == 0, f"{accepted} of {count} forged segment numbers decoded")
    r = decode(forged(rng), "orders")
    err = h.check_error_body(r, 400, "a forged segment number")
    h.check(err.get("kind") == "no_such_id" and "max_id" in err["message"], f"forged segment number: {err}")

    # Without ?tag= a segment number is read as a snowflake number: refused nearly always, and
    # the message says to add ?tag=.
    refused = 0
    for n in tagged:
        r = decode(n)
        if r.status == 400:
            refused += 1
            h.check("?tag=" in r.json()["error"]["message"], f"no ?tag= hint: {r.json()}")
    h.check(refused >= 45, f"only {refused} of 50 segment numbers without ?tag= refused")
    conn.close()
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc}")

    # With a prefix per source, a tag's number without ?tag= is always refused, and numbers of
    # the two sources never look alike.
    args = ["--admin-token-file", token, "--order-key-file", keys, "--order-prefix", "S",
            "--order-segment-prefix", "orders=T"]
    srv = h.Server("prefixed", os.path.join(work, "data"), args=args).start()
    port = srv.port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    snow = h.request(port, "/v1/order-numbers?count=5", conn=conn).json()["order_numbers"]
    tagged = h.request(port, "/v1/order-numbers?count=50&tag=orders", conn=conn).json()["order_numbers"]
    h.check(all(n.startswith("S") for n in snow) and all(n.startswith("T") for n in tagged),
            f"prefixes: {snow[:2]} {tagged[:2]}")
    for n in tagged:
        err = h.check_error_body(decode(n), 400, "a tag's number without ?tag=")
        h.check(err.get("kind") == "prefix" and "?tag=" in err["message"], f"without ?tag=: {err}")
    h.check(all(decode(n, "orders").status == 200 for n in tagged), "tag numbers with ?tag=")
    conn.close()
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc}")
    p = run(["serve", "--data-dir", os.path.join(work, "x"), "--order-key-file", keys,
             "--order-segment-prefix", "orders=T", "--print-config"])
    h.check(p.returncode != 0 and b"order_prefix" in p.stderr, f"a tag prefix without order_prefix: {p.stderr!r}")
    p = run(["serve", "--data-dir", os.path.join(work, "x"), "--order-key-file", keys, "--order-prefix", "ORD",
             "--order-segment-prefix", "orders=OR", "--print-config"])
    h.check(p.returncode != 0 and b"begin alike" in p.stderr, f"prefixes OR and ORD: {p.stderr!r}")


def main():
    # SECRETS_IT_ONLY=NAME runs one part (to see each fail on its own against an older binary).
    only = os.environ.get("SECRETS_IT_ONLY")
    h.init()
    for part in (secrets_are_masked, token_rules, data_dir_rules, forged_numbers):
        if only in (None, part.__name__):
            part()


if __name__ == "__main__":
    h.run_main(main)
