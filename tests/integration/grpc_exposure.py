#!/usr/bin/env python3
"""The gRPC listener's TLS files and message limit (issue 32, part 7), with Debian's grpcio:

1. A garbage certificate, then a key that does not match its certificate, put in place of the
   running server's files (with SIGHUP, and left there past gRPC's 10 s re-read): new gRPC
   handshakes keep completing with the certificate the server had, as HTTPS does, and the failure
   is logged; a good pair of another CA then reaches gRPC within about 10 s of the SIGHUP.
2. StreamRange with grpc_max_message_bytes at its minimum (64 KiB, below the 512 KiB of the
   largest chunk): every ID asked for arrives, in chunks that fit, unique and increasing, and the
   server counts exactly as many issued.

Usage: grpc_exposure.py FLURRY PYTHON_STUBS
"""
import os
import shutil
import signal
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpclib as g  # noqa: E402

h = g.init()
import tlslib as t  # noqa: E402  (after grpclib put the test directory on the path)

# gRPC's FileWatcherCertificateProvider period (server::kGrpcTlsRefresh), with a margin.
REFRESH_S = 10
LOOK_S = REFRESH_S + 3


def replace(src, dst):
    tmp = dst + ".new"
    shutil.copyfile(src, tmp)
    os.chmod(tmp, 0o600)
    os.replace(tmp, dst)


def tls_channel(port, root):
    with open(root, "rb") as f:
        creds = g.grpc.ssl_channel_credentials(root_certificates=f.read())
    return g.grpc.secure_channel(f"127.0.0.1:{port}", creds)


def handshake_ok(port, root):
    """A new channel trusting `root` completes a Layout call."""
    ch = tls_channel(port, root)
    try:
        return bool(g.rpc.IdsStub(ch).Layout(g.pb.LayoutRequest(), timeout=3).layout)
    except g.grpc.RpcError:
        return False
    finally:
        ch.close()


def bad_files_keep_the_pair():
    a = t.make_certs(os.path.join(h.WORK, "a"))
    b = t.make_certs(os.path.join(h.WORK, "b"))
    live = os.path.join(h.WORK, "live")
    os.makedirs(live)
    pem, key = os.path.join(live, "server.pem"), os.path.join(live, "server.key")
    replace(os.path.join(a, "server.pem"), pem)
    replace(os.path.join(a, "server.key"), key)
    ctx = t.client_context(os.path.join(a, "ca.pem"))
    srv = t.start("tls", os.path.join(h.WORK, "tls-data"),
                  t.tls_args(live) + ["--grpc-listen", "127.0.0.1:0"], ctx)
    port = g.grpc_port(srv)
    ca_a, ca_b = os.path.join(a, "ca.pem"), os.path.join(b, "ca.pem")
    h.check(handshake_ok(port, ca_a), "gRPC over TLS with certificate A")

    def keeps_a(what):
        """New handshakes present A for LOOK_S seconds (past gRPC's re-read of its files)."""
        deadline = time.monotonic() + LOOK_S
        n = 0
        while time.monotonic() < deadline:
            h.check(handshake_ok(port, ca_a), f"{what}: a new gRPC handshake failed after "
                    f"{LOOK_S - (deadline - time.monotonic()):.1f} s ({n} completed before)")
            n += 1
            time.sleep(0.25)
        r = t.https(srv.port, "/v1/ids?count=1", ctx)
        h.check(r.status == 200, f"{what}: HTTPS with certificate A: {r}")
        return n

    with open(pem, "w") as f:
        f.write("-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n")
    os.kill(srv.pid, signal.SIGHUP)
    h.wait_log(srv, "event=reload_failed part=tls")
    n = keeps_a("a garbage certificate")
    h.log(f"a garbage certificate: {n} new gRPC handshakes over {LOOK_S} s, all with certificate A")

    replace(os.path.join(b, "server.pem"), pem)  # B's certificate beside A's key
    os.kill(srv.pid, signal.SIGHUP)
    h.wait_for(lambda: srv.log_text().count("event=reload_failed part=tls") >= 2, "the second failed reload",
               timeout=10)
    n = keeps_a("a key that does not match its certificate")
    h.log(f"a mismatched pair: {n} new gRPC handshakes over {LOOK_S} s, all with certificate A")
    h.check("event=reload_failed part=grpc_tls" in srv.log_text(),
            "gRPC's copy of the files was never refused in the log")

    replace(os.path.join(b, "server.key"), key)
    os.kill(srv.pid, signal.SIGHUP)
    h.wait_log(srv, "event=reloaded part=tls")
    started = time.monotonic()
    h.wait_for(lambda: handshake_ok(port, ca_b), "certificate B on the gRPC listener", timeout=REFRESH_S + 15)
    h.log(f"a good pair of another CA served by gRPC {time.monotonic() - started:.1f} s after SIGHUP")
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc}")


def stream_range_fits_small_messages():
    limit = 65536
    srv, port = g.start("small", os.path.join(h.WORK, "small"), ["--grpc-max-message-bytes", str(limit)])
    before = g.issued(srv.port)
    count = 100000
    chunks = list(g.ids(port).StreamRange(g.pb.RangeRequest(count=count), timeout=60))
    got = []
    for c in chunks:
        h.check(len(c.ids) <= limit, f"a chunk of {len(c.ids)} bytes, above grpc_max_message_bytes {limit}")
        got.extend(g.unpack(c.ids))
    h.check(len(got) == count, f"StreamRange({count}) delivered {len(got)} IDs")
    h.check_increasing(got, "StreamRange's IDs")
    h.check(len(set(got)) == count, "duplicate IDs")
    issued = g.issued(srv.port) - before
    h.check(issued == count, f"the server issued {issued} IDs for {count} delivered")
    h.log(f"StreamRange({count}) with grpc_max_message_bytes={limit}: {len(chunks)} chunks, every ID "
          "delivered, none issued beyond them")
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc}")


def main():
    stream_range_fits_small_messages()
    bad_files_keep_the_pair()


h.run_main(main)
