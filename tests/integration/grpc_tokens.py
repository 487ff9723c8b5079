#!/usr/bin/env python3
"""Scoped tokens and TLS on the gRPC listener (issue 20), with Debian's grpcio:

1. Every method of the gRPC scope table in docs/operations.md (mirrored in METHODS below), with
   open_scopes = none: without a token UNAUTHENTICATED / TOKEN_MISSING, with a token of another
   scope PERMISSION_DENIED / SCOPE_MISSING, with a token of its scope OK; an unknown token
   UNAUTHENTICATED / TOKEN_UNKNOWN (after the delay); the reasons in flurry-reason and in
   grpc-status-details-bin; health answers without a token. A refused request's message errors
   come after the credential (a bad count without a token is UNAUTHENTICATED).
2. With tls_cert_file/tls_key_file: a TLS channel trusting ca.pem works, a plain channel and a
   channel trusting another CA do not; with tls_client_ca_file a channel without a client
   certificate, or with one of another CA, is refused and one with the CA's client certificate
   works (with the token checks unchanged).

Usage: grpc_tokens.py FLURRY PYTHON_STUBS_DIR
"""

import os
import shutil
import subprocess
import time

os.environ["GRPC_VERBOSITY"] = "NONE"  # the refused handshakes below are expected

import grpclib as g

h = g.init()
import tlslib  # noqa: E402  (after grpclib put the test directory on the path)

K1 = "2b7e151628aed2a6abf7158809cf4f3c"
TOKENS = {
    "ids": "gtok-ids-0b8e1d4c7a2f5e9b3c6d0a1e4f7b2c5d",
    "read": "gtok-read-6f2a9c4e1b7d3a8f5c0e2b9d6a4f1c7e",
    "admin": "gtok-admin-3c7e0a5d2f9b6e1a8c4d7f0b3e6a9d2c",
    "orders:decode": "gtok-decode-9d1f4b7e0c3a6d9f2b5e8c1a4d7f0b3e",
}
UNKNOWN = "gtok-unknown-7c0f3a6d9b2e5c8f1a4d7b0e3c6f9a2d"
SC = None  # grpc.StatusCode, once imported


def private_file(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
    return path


def auth(token):
    return [("authorization", f"Bearer {token}")] if token else []


_made = [0]


def methods(channel, id_text, code):
    """The gRPC scope table: (name, scope, call(metadata))."""
    pb, rpc = g.pb, g.rpc
    ids, seg, orders = rpc.IdsStub(channel), rpc.SegmentsStub(channel), rpc.OrderNumbersStub(channel)
    tso = rpc.TsoStub(channel)

    def create(md):
        _made[0] += 1
        return seg.Create(pb.SegmentCreateRequest(tag=f"made{_made[0]}", step=10), metadata=md)

    return [
        ("Ids/Next", "ids", lambda md: ids.Next(pb.NextRequest(count=2), metadata=md)),
        ("Ids/Stream", "ids", lambda md: list(ids.Stream(iter([pb.NextRequest(count=1)]), metadata=md))),
        ("Ids/StreamRange", "ids", lambda md: list(ids.StreamRange(pb.RangeRequest(count=10), metadata=md))),
        ("Segments/Next", "ids", lambda md: seg.Next(pb.SegmentNextRequest(tag="orders", count=2), metadata=md)),
        ("Segments/Range", "ids", lambda md: seg.Range(pb.SegmentRangeRequest(tag="orders", size=5), metadata=md)),
        ("OrderNumbers/New", "ids", lambda md: orders.New(pb.OrderNewRequest(count=1), metadata=md)),
        ("Ids/Decode", "read", lambda md: ids.Decode(pb.DecodeRequest(id=id_text), metadata=md)),
        ("Ids/Layout", "read", lambda md: ids.Layout(pb.LayoutRequest(), metadata=md)),
        ("Segments/List", "read", lambda md: seg.List(pb.SegmentListRequest(), metadata=md)),
        ("Segments/Get", "read", lambda md: seg.Get(pb.SegmentGetRequest(tag="orders"), metadata=md)),
        ("Segments/Create", "admin", create),
        ("OrderNumbers/Decode", "orders:decode",
         lambda md: orders.Decode(pb.OrderDecodeRequest(order_number=code), metadata=md)),
        ("Tso/Get", "ids", lambda md: tso.Get(pb.TsoRequest(count=2), metadata=md)),
        ("Tso/Stream", "ids", lambda md: list(tso.Stream(iter([pb.TsoRequest(count=1)]), metadata=md))),
    ]


def every_method_by_scope(channel):
    pb, rpc = g.pb, g.rpc
    seg = rpc.SegmentsStub(channel)
    seg.Create(pb.SegmentCreateRequest(tag="orders", step=100), metadata=auth(TOKENS["admin"]))
    id_text = str(rpc.IdsStub(channel).Next(pb.NextRequest(count=1), metadata=auth(TOKENS["ids"])).ids[0])
    code = rpc.OrderNumbersStub(channel).New(pb.OrderNewRequest(count=1),
                                             metadata=auth(TOKENS["ids"])).order_numbers[0]
    table = methods(channel, id_text, code)
    for name, scope, call in table:
        g.expect_error(f"{name} without a token", lambda: call([]), SC.UNAUTHENTICATED, "TOKEN_MISSING",
                       f"scope {scope}")
        for other, token in TOKENS.items():
            if other == scope:
                continue
            g.expect_error(f"{name} with a token of scope {other}", lambda: call(auth(token)),
                           SC.PERMISSION_DENIED, "SCOPE_MISSING", f"scope {scope}")
        call(auth(TOKENS[scope]))
    g.expect_error("an unknown token", lambda: table[7][2](auth(UNKNOWN)), SC.UNAUTHENTICATED, "TOKEN_UNKNOWN")
    g.expect_error("a stream with an unknown token", lambda: table[2][2](auth(UNKNOWN)), SC.UNAUTHENTICATED,
                   "TOKEN_UNKNOWN")
    # The credential before the message: a bad count without a token says nothing of the count.
    # Worded for gRPC: the metadata, not HTTP's Authorization header.
    g.expect_error("a bad count without a token",
                   lambda: rpc.IdsStub(channel).Next(pb.NextRequest(count=0)), SC.UNAUTHENTICATED, "TOKEN_MISSING",
                   "send authorization metadata: Bearer <token>")
    g.expect_error("a credential that is not Bearer <token>",
                   lambda: rpc.IdsStub(channel).Next(pb.NextRequest(count=1), metadata=[("authorization", "Basic x")]),
                   SC.UNAUTHENTICATED, "TOKEN_MISSING", "the authorization metadata must be Bearer <token>")
    g.expect_error("a bad StreamRange without a token",
                   lambda: list(rpc.IdsStub(channel).StreamRange(pb.RangeRequest(count=0))),
                   SC.UNAUTHENTICATED, "TOKEN_MISSING")
    g.expect_error("a bad count with the token",
                   lambda: rpc.IdsStub(channel).Next(pb.NextRequest(count=0), metadata=auth(TOKENS["ids"])),
                   SC.INVALID_ARGUMENT, "BAD_INPUT")
    st = g.health_rpc.HealthStub(channel).Check(g.health_pb.HealthCheckRequest(service=""))
    h.check(st.status == g.health_pb.HealthCheckResponse.SERVING, f"health without a token: {st}")
    h.log(f"{len(table)} methods x (no token, {len(TOKENS)} scopes) checked")


def tls_channel(port, root, cert=None, key=None):
    def read(p):
        with open(p, "rb") as f:
            return f.read()
    creds = g.grpc.ssl_channel_credentials(root_certificates=read(root),
                                          private_key=read(key) if key else None,
                                          certificate_chain=read(cert) if cert else None)
    return g.grpc.secure_channel(f"127.0.0.1:{port}", creds)


def layout_over(channel, timeout=5):
    return g.rpc.IdsStub(channel).Layout(g.pb.LayoutRequest(), metadata=auth(TOKENS["read"]), timeout=timeout)


def refused(what, call):
    try:
        call()
    except g.grpc.RpcError as e:
        h.check(e.code() in (SC.UNAVAILABLE, SC.DEADLINE_EXCEEDED), f"{what}: {e.code()} {e.details()!r}")
        return
    h.fail(f"{what}: answered")


def tls_start(name, args, ca, cert=None, key=None):
    """A server with TLS settings, waited for over HTTPS; returns (server, gRPC port)."""
    ctx = tlslib.client_context(cafile=ca, cert=cert, key=key)
    srv = tlslib.start(name, os.path.join(h.WORK, name), args + ["--grpc-listen", "127.0.0.1:0"], ctx)
    return srv, g.grpc_port(srv)


def tls(tokens, keys):
    certs = tlslib.make_certs(os.path.join(h.WORK, "certs"))
    c = lambda name: os.path.join(certs, name)  # noqa: E731
    # The listener's files in a directory of their own, replaced below to see them re-read.
    served = os.path.join(h.WORK, "served")
    os.makedirs(served)
    for name in ("server.pem", "server.key"):
        shutil.copy(c(name), os.path.join(served, name))
    args = ["--token-file", tokens, "--order-key-file", keys, "--open-scopes", "none",
            "--tls-cert-file", os.path.join(served, "server.pem"),
            "--tls-key-file", os.path.join(served, "server.key")]
    srv, port = tls_start("tls", args, c("ca.pem"))
    h.check(layout_over(tls_channel(port, c("ca.pem"))).layout, "Layout over TLS")
    g.expect_error("Layout over TLS without a token",
                   lambda: g.rpc.IdsStub(tls_channel(port, c("ca.pem"))).Layout(g.pb.LayoutRequest()),
                   SC.UNAUTHENTICATED, "TOKEN_MISSING")
    refused("a plain channel to the TLS listener", lambda: layout_over(g.channel(port), timeout=2))
    refused("a channel trusting another CA", lambda: layout_over(tls_channel(port, c("other-ca.pem")), timeout=2))
    # TLS 1.2 at least: a TLS 1.1 handshake is refused (the client allowed to offer it: security
    # level 0), a TLS 1.2 one completes.
    for version, ok in (("-tls1_1", False), ("-tls1_2", True)):
        p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", version, "-alpn", "h2",
                            "-cipher", "DEFAULT@SECLEVEL=0", "-CAfile", c("ca.pem"), "-verify_return_error"],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
        h.check((p.returncode == 0) == ok, f"openssl s_client {version}: {p.returncode} {p.stderr[-300:]!r}")
    # A certificate of another CA written over the files: served within kGrpcTlsRefresh (10 s),
    # without a restart.
    renewed = tlslib.make_certs(os.path.join(h.WORK, "renewed"))
    for name in ("server.key", "server.pem"):
        shutil.copy(os.path.join(renewed, name), os.path.join(served, name) + ".new")
        os.replace(os.path.join(served, name) + ".new", os.path.join(served, name))
    started = time.monotonic()

    def renewed_served():
        try:
            return bool(layout_over(tls_channel(port, os.path.join(renewed, "ca.pem")), timeout=2).layout)
        except g.grpc.RpcError:
            return False
    h.wait_for(renewed_served, "the renewed certificate on the gRPC listener", timeout=25)
    h.log(f"renewed certificate served by gRPC {time.monotonic() - started:.1f} s after the files changed")
    srv.stop()

    mtls_args = args + ["--tls-client-ca-file", c("ca.pem")]
    for name in ("server.pem", "server.key"):
        shutil.copy(c(name), os.path.join(served, name))
    srv, port = tls_start("mtls", mtls_args, c("ca.pem"), c("client-flurry.pem"), c("client-flurry.key"))
    refused("mTLS without a client certificate", lambda: layout_over(tls_channel(port, c("ca.pem")), timeout=2))
    refused("mTLS with a client of another CA",
            lambda: layout_over(tls_channel(port, c("ca.pem"), c("other-client.pem"), c("other-client.key")),
                                timeout=2))
    ok = tls_channel(port, c("ca.pem"), c("client-flurry.pem"), c("client-flurry.key"))
    h.check(layout_over(ok).layout, "Layout over mTLS")
    g.expect_error("mTLS with a token of another scope",
                   lambda: g.rpc.IdsStub(ok).Layout(g.pb.LayoutRequest(), metadata=auth(TOKENS["ids"])),
                   SC.PERMISSION_DENIED, "SCOPE_MISSING")
    srv.stop()
    h.log("gRPC over TLS and mTLS checked")


def main():
    global SC
    SC = g.grpc.StatusCode
    keys = private_file(os.path.join(h.WORK, "keys"), f"1 = {K1}\n")
    tokens = private_file(os.path.join(h.WORK, "tokens"), "".join(f"{t} {s}\n" for s, t in TOKENS.items()))
    srv, port = g.start("scopes", os.path.join(h.WORK, "scopes"),
                        ["--token-file", tokens, "--order-key-file", keys, "--open-scopes", "none", "--tso"])
    h.wait_for(lambda: h.request(srv.port, "/readyz/tso").status == 200, "the timestamp oracle to lead", 30)
    every_method_by_scope(g.channel(port))
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc}")
    text = srv.log_text()
    h.check(all(t not in text for t in list(TOKENS.values()) + [UNKNOWN]), "a token in the log")
    if os.environ.get("GRPC_TOKENS_TLS", "1") == "1":
        tls(tokens, keys)


if __name__ == "__main__":
    h.run_main(main)
