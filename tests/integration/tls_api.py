#!/usr/bin/env python3
"""HTTPS and mTLS on the HTTP listener (tls_cert_file, tls_key_file, tls_client_ca_file), with
certificates from tests/testing/make_certs.sh:

- IDs over HTTPS, verified against the test CA, with Python's ssl and with curl --cacert;
- plain HTTP to the TLS port gets no ID (the handshake fails, the connection is closed), nor
  does a TLS 1.1 client;
- a verifying client refuses the expired and the self-signed server certificates;
- mTLS: a client without a certificate and one of the wrong CA are refused in the handshake, a
  client of the right CA is served; the failures are counted in /metrics;
- a bad key file, a mismatched pair, a missing file, a key readable by others and a certificate
  without its key fail the start with a message naming the file.

Usage: tls_api.py FLURRY
"""
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
import warnings

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import tlslib as t  # noqa: E402


def expect_tls_refusal(port, ctx, what, expect=None):
    """A request with `ctx` must fail in TLS (no answer, no ID); returns the error text."""
    try:
        r = t.https(port, "/v1/ids?count=1", ctx)
    except (ssl.SSLError, OSError) as e:
        text = str(e)
        if expect:
            h.check(any(x in text for x in expect), f"{what}: refused, but with {text!r}; expected one of {expect}")
        return text
    h.fail(f"{what}: answered {r}; it should have been refused in the TLS handshake")


def cli(*args):
    return subprocess.run([h.FLURRY, *args], capture_output=True, text=True, timeout=60)


def main():
    h.init()
    certs = t.make_certs(os.path.join(h.WORK, "certs"), "flurry")
    ca = os.path.join(certs, "ca.pem")
    good = t.client_context(ca)

    # ---- HTTPS ----
    srv = t.start("https", os.path.join(h.WORK, "d1"),
                  t.tls_args(certs) + ["--grpc-listen", "", "--idle-timeout-ms", "1000"], good)
    port = srv.port
    r = t.https(port, "/v1/ids?count=3", good)
    h.check(r.status == 200 and len(r.json()["ids"]) == 3, f"HTTPS /v1/ids: {r}")
    # By name too: the certificate is for localhost as well.
    r = t.https(port, "/healthz", good, host="localhost")
    h.check(r.status == 200, f"HTTPS by name: {r}")
    out = subprocess.run(["curl", "-sS", "--cacert", ca, f"https://127.0.0.1:{port}/v1/ids?count=2"],
                         capture_output=True, text=True, timeout=30)
    h.check(out.returncode == 0 and '"ids"' in out.stdout, f"curl --cacert: rc={out.returncode} {out.stdout!r} {out.stderr!r}")
    out = subprocess.run(["curl", "-sS", f"https://127.0.0.1:{port}/v1/ids?count=2"],
                         capture_output=True, text=True, timeout=30)
    h.check(out.returncode != 0 and "ids" not in out.stdout, f"curl without the CA was served: {out.stdout!r}")
    h.check("tls_loaded" in srv.log_text() and "(https)" in srv.log_text(), "the start log does not say HTTPS")
    h.log("HTTPS: Python ssl and curl --cacert served; curl without the CA refused")

    # The CLI: https:// with the CA; without it the verification error; TLS files with http://.
    url = f"https://127.0.0.1:{port}"
    out = cli("segment", "list", "--server", url, "--ca-file", ca)
    h.check(out.returncode == 0, f"flurry segment list --server {url} --ca-file: {out.returncode} {out.stderr!r}")
    out = cli("segment", "list", "--server", url)
    h.check(out.returncode != 0 and "certificate verify failed: unable to get local issuer certificate" in out.stderr,
            f"flurry segment list without the CA: {out.returncode} {out.stderr!r}")
    out = cli("segment", "list", "--server", f"http://127.0.0.1:{port}", "--ca-file", ca)
    h.check(out.returncode == 2 and "are for an https:// server" in out.stderr,
            f"TLS files with an http:// server: {out.returncode} {out.stderr!r}")
    h.log("CLI: segment list over https:// with --ca-file; without it refused, naming the verification error")

    # Plain HTTP to the TLS port: no ID, the connection closed.
    try:
        r = h.request(port, "/v1/ids?count=1", timeout=5)
        h.check('"ids"' not in r.body, f"plain HTTP to the TLS port got IDs: {r}")
    except (OSError, h.http.client.HTTPException) as e:
        h.log(f"plain HTTP to the TLS port: {type(e).__name__} (no answer)")

    # TLS 1.1: refused by the server (the client allows it at security level 0).
    warnings.simplefilter("ignore", DeprecationWarning)  # TLS 1.0/1.1, on purpose
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.check_hostname = False
    old.verify_mode = ssl.CERT_NONE
    old.set_ciphers("ALL:@SECLEVEL=0")
    old.minimum_version = ssl.TLSVersion.TLSv1
    old.maximum_version = ssl.TLSVersion.TLSv1_1
    text = expect_tls_refusal(port, old, "TLS 1.1")
    h.check("NO_PROTOCOLS_AVAILABLE" not in text and "no protocols available" not in text,
            f"the client could not offer TLS 1.1 at all ({text}); the test proves nothing")
    h.log(f"TLS 1.1 refused: {text}")

    # A client that connects and never starts the handshake is closed after the request timeout
    # (idle_timeout_ms, 1 s here, as it is shorter than 10 s).
    stalled = socket.create_connection(("127.0.0.1", port), timeout=10)
    t0 = time.monotonic()
    h.check(stalled.recv(1) == b"", "a stalled handshake got bytes")
    waited = time.monotonic() - t0
    h.check(0.5 <= waited <= 5, f"a stalled handshake was closed after {waited:.2f} s, expected about 1 s")
    stalled.close()
    h.log(f"a client that never starts the handshake is closed after {waited:.2f} s")

    r = t.https(port, "/metrics", good)
    failures = h.metric(r.body, "flurry_http_tls_handshake_failures_total")
    h.check(failures is not None and failures >= 3, f"handshake failures counted: {failures}")
    # A keep-alive connection left open does not hold the stop.
    keep = h.http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=good)
    h.check(t.https(port, "/v1/ids?count=1", good, conn=keep).status == 200, "keep-alive HTTPS")
    rc, took = srv.stop()
    h.check(rc == 0 and took < 5, f"HTTPS server with an open connection: exit {rc} after {took:.2f} s")
    keep.close()

    # ---- Server certificates a verifying client refuses ----
    for name, why in (("expired", "certificate has expired"), ("selfsigned", "self-signed certificate"),
                      ("wronghost", "IP address mismatch")):
        s = t.start_unverified(name, os.path.join(h.WORK, name), t.tls_args(certs, name) + ["--grpc-listen", ""])
        expect_tls_refusal(s.port, good, f"{name} server certificate", [why])
        h.check(s.stop()[0] == 0, f"{name}: exit code")
    h.log("expired, self-signed and wrong-host server certificates refused by a verifying client")

    # ---- mTLS ----
    srv = t.start("mtls", os.path.join(h.WORK, "d2"), t.tls_args(certs, client_ca=True) + ["--grpc-listen", ""],
                  t.client_context(ca, os.path.join(certs, "client-flurry.pem"), os.path.join(certs, "client-flurry.key")))
    port = srv.port
    client = t.client_context(ca, os.path.join(certs, "client-flurry.pem"), os.path.join(certs, "client-flurry.key"))
    r = t.https(port, "/v1/ids?count=2", client)
    h.check(r.status == 200 and len(r.json()["ids"]) == 2, f"mTLS, good client: {r}")
    # TLS 1.3 refuses a client certificate after the client's handshake: the client sees the
    # alert, or a reset if it was still sending its request.
    resets = ["reset by peer", "Broken pipe", "EOF occurred"]
    expect_tls_refusal(port, good, "mTLS without a client certificate",
                       ["CERTIFICATE_REQUIRED", "certificate required"] + resets)
    stranger = t.client_context(ca, os.path.join(certs, "other-client.pem"), os.path.join(certs, "other-client.key"))
    expect_tls_refusal(port, stranger, "mTLS, client of the wrong CA", ["UNKNOWN_CA", "unknown ca"] + resets)
    h.check("client certificates required" in srv.log_text(), "the start log does not say mTLS")
    url = f"https://127.0.0.1:{port}"
    out = cli("segment", "list", "--server", url, "--ca-file", ca,
              "--cert-file", os.path.join(certs, "client-flurry.pem"),
              "--tls-key-file", os.path.join(certs, "client-flurry.key"))
    h.check(out.returncode == 0, f"CLI with a client certificate: {out.returncode} {out.stderr!r}")
    out = cli("segment", "list", "--server", url, "--ca-file", ca)
    h.check(out.returncode != 0 and "asked for a client certificate" in out.stderr,
            f"CLI without a client certificate: {out.returncode} {out.stderr!r}")
    r = t.https(port, "/metrics", client)
    failures = h.metric(r.body, "flurry_http_tls_handshake_failures_total")
    h.check(failures is not None and failures >= 2, f"mTLS refusals counted: {failures}")
    h.check(srv.stop()[0] == 0, "mTLS server: exit code")
    h.log("mTLS: no certificate and wrong-CA certificate refused in the handshake, good client served "
          "(Python and the CLI)")

    # ---- Bad files fail the start, naming the file ----
    bad = os.path.join(h.WORK, "bad")
    os.makedirs(bad)
    not_pem = os.path.join(bad, "not-pem.key")
    with open(not_pem, "w") as f:
        f.write("not a key\n")
    os.chmod(not_pem, 0o600)
    open_key = os.path.join(bad, "open.key")
    shutil.copy(os.path.join(certs, "server.key"), open_key)
    os.chmod(open_key, 0o644)
    server_pem = os.path.join(certs, "server.pem")
    cases = [
        ("bad key", ["--tls-cert-file", server_pem, "--tls-key-file", not_pem],
         [not_pem, "holds no usable PEM private key"]),
        ("mismatched pair", ["--tls-cert-file", server_pem, "--tls-key-file", os.path.join(certs, "client-flurry.key")],
         [os.path.join(certs, "client-flurry.key"), "does not match the certificate", server_pem]),
        ("missing certificate", ["--tls-cert-file", os.path.join(bad, "missing.pem"), "--tls-key-file", os.path.join(certs, "server.key")],
         [os.path.join(bad, "missing.pem"), "No such file or directory"]),
        ("key readable by others", ["--tls-cert-file", server_pem, "--tls-key-file", open_key],
         [open_key, "mode 0644", "chmod 600"]),
        ("missing client CA", t.tls_args(certs) + ["--tls-client-ca-file", os.path.join(bad, "no-ca.pem")],
         [os.path.join(bad, "no-ca.pem"), "TLS client CA file"]),
        ("certificate without key", ["--tls-cert-file", server_pem],
         ["tls_cert_file is set but tls_key_file is not"]),
    ]
    for what, args, expect in cases:
        rc, text = t.refused_start(what.replace(" ", "_"), os.path.join(h.WORK, "d3"), args + ["--grpc-listen", ""])
        h.check(rc != 0, f"{what}: the server started (exit {rc})")
        for needle in expect:
            h.check(needle in text, f"{what}: the message does not name {needle!r}:\n{text[-1500:]}")
        h.check("PRIVATE KEY" not in text, f"{what}: key material in the output")
    h.log("bad key, mismatched pair, missing files, an open key and a lone certificate refuse the start")


h.run_main(main)
