#!/usr/bin/env python3
"""SIGHUP re-reads the TLS files while a keep-alive HTTPS load runs:

- threads issue IDs over HTTPS (keep-alive connections, and a new connection every few requests
  so that handshakes happen throughout) while server.pem/server.key are replaced by a certificate
  of another CA and the server gets SIGHUP: new handshakes present the new certificate (its
  SHA-256 compared), connections opened before keep working, no request fails, the IDs stay
  unique and increasing, the node and its lease are kept;
- a reload with a broken certificate file is logged (event=reload_failed part=tls) and the server
  keeps serving with the certificate it had.

Usage: tls_reload.py FLURRY
"""
import os
import shutil
import signal
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import tlslib as t  # noqa: E402

THREADS = 4
NEW_CONNECTION_EVERY = 20


def replace(src, dst):
    """dst's contents become src's in one rename (as a certificate manager swaps files)."""
    tmp = dst + ".new"
    shutil.copyfile(src, tmp)
    os.chmod(tmp, 0o600)
    os.replace(tmp, dst)


def main():
    h.init()
    a = t.make_certs(os.path.join(h.WORK, "a"))
    b = t.make_certs(os.path.join(h.WORK, "b"))
    bundle = os.path.join(h.WORK, "both-cas.pem")
    with open(bundle, "w") as out:
        for d in (a, b):
            with open(os.path.join(d, "ca.pem")) as f:
                out.write(f.read())
    live = os.path.join(h.WORK, "live")
    os.makedirs(live)
    for ext in ("pem", "key"):
        replace(os.path.join(a, f"server.{ext}"), os.path.join(live, f"server.{ext}"))
    ctx = t.client_context(bundle)
    srv = t.start("reload", os.path.join(h.WORK, "data"), t.tls_args(live) + ["--grpc-listen", ""], ctx)
    port, node = srv.port, srv.node
    fp_a, fp_b = t.file_fingerprint(os.path.join(a, "server.pem")), t.file_fingerprint(os.path.join(b, "server.pem"))
    h.check(t.fingerprint(port) == fp_a, "the server does not present certificate A")

    # A connection opened before the reload, used again after it.
    early = h.http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=ctx)
    first = t.https(port, "/v1/ids?count=1", ctx, conn=early)
    h.check(first.status == 200, f"early connection: {first}")

    stop = threading.Event()
    results = [[] for _ in range(THREADS)]
    errors = []

    def load(i):
        conn = None
        n = 0
        while not stop.is_set():
            try:
                if conn is None or n % NEW_CONNECTION_EVERY == 0:
                    if conn is not None:
                        conn.close()
                    conn = h.http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=ctx)
                r = t.https(port, "/v1/ids?count=1", ctx, conn=conn)
                if r.status != 200:
                    errors.append(f"thread {i}: {r}")
                else:
                    results[i].extend(r.json()["ids"])
            except Exception as e:  # noqa: BLE001 - every failure is a test failure
                errors.append(f"thread {i}: {type(e).__name__}: {e}")
                conn = None
            n += 1
        if conn is not None:
            conn.close()

    workers = [threading.Thread(target=load, args=(i,)) for i in range(THREADS)]
    for w in workers:
        w.start()
    time.sleep(1.0)
    for ext in ("pem", "key"):
        replace(os.path.join(b, f"server.{ext}"), os.path.join(live, f"server.{ext}"))
    os.kill(srv.pid, signal.SIGHUP)
    h.wait_log(srv, "event=reloaded part=tls")
    h.check(t.fingerprint(port) == fp_b, "after SIGHUP a new handshake does not present certificate B")
    time.sleep(1.0)
    stop.set()
    for w in workers:
        w.join(30)
    h.check(not errors, f"{len(errors)} requests failed during the reload, first: {errors[:3]}")
    total = sum(len(r) for r in results)
    h.check(total > 100, f"only {total} IDs issued by the load")
    for i, ids in enumerate(results):
        h.check_increasing(ids, f"thread {i}'s IDs")
    every = [x for r in results for x in r]
    h.check(len(set(every)) == len(every), "duplicate IDs")
    again = t.https(port, "/v1/ids?count=1", ctx, conn=early)
    h.check(again.status == 200 and again.json()["ids"][0] > first.json()["ids"][0],
            f"the connection opened before the reload: {again}")
    h.check(early.sock.getpeercert(binary_form=True) is not None, "early connection lost its TLS session")
    early.close()
    r = t.https(port, "/readyz", ctx)
    h.check(r.status == 200 and r.json()["node"] == node, f"/readyz after the reload: {r}")
    h.log(f"reload under load: {total} IDs over {THREADS} threads, no failure, new handshakes see B, "
          "the early connection kept, node kept")

    # A broken file: the reload fails, logged, and the server keeps certificate B.
    with open(os.path.join(live, "server.pem"), "w") as f:
        f.write("-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n")
    os.kill(srv.pid, signal.SIGHUP)
    h.wait_log(srv, "event=reload_failed part=tls")
    log = srv.log_text()
    h.check(os.path.join(live, "server.pem") in log.split("event=reload_failed part=tls", 1)[1],
            "the failed reload's message does not name the file")
    h.check(t.fingerprint(port) == fp_b, "after a failed reload the server does not present certificate B")
    r = t.https(port, "/v1/ids?count=1", ctx)
    h.check(r.status == 200, f"after a failed reload: {r}")
    h.check(srv.alive(), "the server exited after a failed reload")
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc}")
    h.log("a reload with a broken certificate file is logged and the old certificate kept")


h.run_main(main)
