"""HTTPS helpers for the TLS tests (tls_api.py, tls_reload.py, lazy_loading.py): certificates from
tests/testing/make_certs.sh, a `flurry serve` with TLS settings started and waited for over HTTPS,
and requests with Python's ssl."""
import hashlib
import http.client
import json
import os
import ssl
import subprocess
import time

import harness as h

MAKE_CERTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testing", "make_certs.sh")


def make_certs(directory, *client_cns):
    """Runs make_certs.sh into `directory`; returns it."""
    r = subprocess.run(["bash", MAKE_CERTS, directory, *client_cns], capture_output=True, text=True)
    h.check(r.returncode == 0, f"make_certs.sh failed: {r.stderr}")
    return directory


def client_context(cafile=None, cert=None, key=None, verify=True):
    """A verifying client context (the CA `cafile`), optionally with a client certificate."""
    ctx = ssl.create_default_context(cafile=cafile)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def tls_args(certs, name="server", client_ca=False):
    args = ["--tls-cert-file", os.path.join(certs, f"{name}.pem"),
            "--tls-key-file", os.path.join(certs, f"{name}.key")]
    if client_ca:
        args += ["--tls-client-ca-file", os.path.join(certs, "ca.pem")]
    return args


class Answer:
    def __init__(self, status, body, headers):
        self.status, self.body, self.headers = status, body, headers

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return f"<{self.status} {self.body[:200]!r}>"


def https(port, path, ctx, conn=None, timeout=10.0, host="127.0.0.1"):
    """GET over HTTPS (a new connection unless `conn`); returns an Answer."""
    c = conn or http.client.HTTPSConnection(host, port, timeout=timeout, context=ctx)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return Answer(r.status, r.read().decode(), {k.lower(): v for k, v in r.getheaders()})
    finally:
        if conn is None:
            c.close()


def fingerprint(port, timeout=10.0):
    """SHA-256 of the certificate a new handshake with the server presents (not verified)."""
    import socket
    ctx = client_context(verify=False)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            return hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest()


def file_fingerprint(pem_path):
    with open(pem_path) as f:
        der = ssl.PEM_cert_to_DER_cert(f.read())
    return hashlib.sha256(der).hexdigest()


def start(name, data_dir, args, ctx, timeout=15.0):
    """Starts `flurry serve` with TLS settings in `args` and waits for /readyz 200 over HTTPS
    verified with `ctx`. Returns the harness Server (its .node set)."""
    srv = h.Server(name, data_dir, args)
    deadline = time.monotonic() + timeout
    srv.launch()
    last = None
    while time.monotonic() < deadline:
        h.check(srv.alive(), f"{name} exited with {srv.proc.returncode} at start:\n{srv.log_text()[-2000:]}")
        try:
            r = https(srv.port, "/readyz", ctx, timeout=2)
            last = r
            if r.status == 200:
                srv.ready = r.json()
                return srv
        except (OSError, http.client.HTTPException) as e:
            last = e
        time.sleep(0.02)
    h.fail(f"{name}: not ready over HTTPS within {timeout} s (last: {last})")


def refused_start(name, data_dir, args, timeout=15.0):
    """Runs `flurry serve` that must fail at start; returns (exit code, its output)."""
    srv = h.Server(name, data_dir, args)
    srv.launch()
    try:
        rc = srv.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        srv.kill()
        h.fail(f"{name}: still running {timeout} s after start; it should have refused to start")
    return rc, srv.log_text()


def start_unverified(name, data_dir, args, timeout=15.0):
    """Starts `flurry serve` whose certificate a verifying client refuses, and waits until a
    handshake without verification succeeds."""
    srv = h.Server(name, data_dir, args)
    srv.launch()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        h.check(srv.alive(), f"{name} exited with {srv.proc.returncode} at start:\n{srv.log_text()[-2000:]}")
        try:
            fingerprint(srv.port, timeout=2)
            return srv
        except (OSError, ssl.SSLError):
            time.sleep(0.02)
    h.fail(f"{name}: no TLS handshake within {timeout} s")
