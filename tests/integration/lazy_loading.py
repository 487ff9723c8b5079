#!/usr/bin/env python3
"""A server loads and starts only what its settings use (docs/architecture.md, "Loading and
starting lazily"):

- with gRPC off (grpc_listen = "") and the SQLite registry, none of gRPC's libraries (its module
  flurry_grpc.so, libgrpc, protobuf, Abseil), none of libpq's (libpq, Kerberos, LDAP, GnuTLS,
  libssl) and no libcrypto (order numbers are off) is mapped, and no blocking-pool or
  segment-fetcher thread runs; the store pool's threads start with the first request deferred to
  it;
- with gRPC on, the module is loaded from beside the binary and serves;
- a binary without its module refuses to start with gRPC on, naming the module and where it
  looked (or, for a file there that is not the module, why), and serves with gRPC off;
- with TLS on, flurry_tls.so, libssl and libcrypto are mapped (and a binary without the module
  refuses to start, naming where it looked); without TLS settings none of them is;
- with the etcd registry (gRPC off), the etcd module flurry_etcd.so and gRPC's libraries are
  mapped (not the gRPC front end flurry_grpc.so); the SQLite server above maps neither. Its idle
  RSS and threads are printed beside the SQLite server's, measured in the same run; a binary
  without flurry_etcd.so refuses to start on etcd, naming where it looked.

Usage: lazy_loading.py FLURRY
"""
import os
import shutil
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import memlib  # noqa: E402
import tlslib as t  # noqa: E402
from etcd_registry import Etcd  # noqa: E402

GRPC_LIBS = ("flurry_grpc.so", "flurry_etcd.so", "libgrpc", "libprotobuf", "libabsl_", "libupb", "libre2")
PQ_LIBS = ("libpq.so", "libkrb5", "libgssapi", "libldap", "libgnutls", "libssl")
CRYPTO_LIBS = ("libcrypto",)  # order numbers' AES, loaded with their keys
LIBM = "/usr/lib/x86_64-linux-gnu/libm.so.6"
# main, signals, the HTTP I/O thread (--io-threads 1), the monitor, the lease keeper, the
# generator's horizon.
DEFAULT_THREADS = 6
STORE_THREADS = 4  # ops::Pools::kDefaultStoreThreads


def mapped(pid):
    with open(f"/proc/{pid}/maps") as f:
        return {line.split()[-1] for line in f if "/" in line}


def threads(pid):
    """The fewest threads of 10 looks 20 ms apart: a lease renewal runs on a thread of its own for
    as long as the registry takes to answer, and is not counted."""
    fewest = None
    for _ in range(10):
        n = len(os.listdir(f"/proc/{pid}/task"))
        fewest = n if fewest is None else min(fewest, n)
        time.sleep(0.02)
    return fewest


def loaded(paths, prefixes):
    return sorted(p for p in paths if any(os.path.basename(p).startswith(x) for x in prefixes))


def main():
    h.init()

    # gRPC off, SQLite: nothing of gRPC or libpq, no pool thread.
    srv = h.Server("off", os.path.join(h.WORK, "off"), ["--grpc-listen", "", "--io-threads", "1"]).start()
    libs = mapped(srv.pid)
    h.check(not loaded(libs, GRPC_LIBS), f"gRPC off, yet mapped: {loaded(libs, GRPC_LIBS)}")
    h.check(not loaded(libs, PQ_LIBS), f"no PostgreSQL configured, yet mapped: {loaded(libs, PQ_LIBS)}")
    h.check(not loaded(libs, CRYPTO_LIBS), f"no order keys, yet mapped: {loaded(libs, CRYPTO_LIBS)}")
    idle = threads(srv.pid)
    h.check(idle <= DEFAULT_THREADS, f"an idle default server runs {idle} threads, at most "
            f"{DEFAULT_THREADS} expected (pools and fetcher start on first use)")
    h.log(f"gRPC off: no gRPC, libpq or libcrypto library mapped, {idle} threads")
    time.sleep(1.0)  # settled after start
    sqlite_rss = memlib.rss_mib(srv.pid)
    # An unknown tag is looked up in the store on a pool thread: the store pool starts then.
    r = h.request(srv.port, "/v1/segments/nosuch/ids")
    h.check(r.status == 404, f"unknown segment tag: {r}")
    busy = threads(srv.pid)
    h.check(busy >= idle + STORE_THREADS, f"the store pool did not start: {idle} then {busy} threads")
    h.check(srv.stop()[0] == 0, "gRPC off: exit code")

    # gRPC on: the module (and gRPC) loaded from beside the binary, serving.
    on = h.Server("on", os.path.join(h.WORK, "on")).start()
    libs = mapped(on.pid)
    module = os.path.join(os.path.dirname(h.FLURRY), "flurry_grpc.so")
    h.check(os.path.realpath(module) in {os.path.realpath(p) for p in libs},
            f"gRPC on, {module} not mapped")
    h.check(loaded(libs, ("libgrpc",)), "gRPC on, libgrpc not mapped")
    # The ready line is logged once both listeners are up, which may be just after /readyz answers.
    h.wait_log(on, r" ready in .*grpc_listen=127\.0\.0\.1:\d+")
    h.check(on.stop()[0] == 0, "gRPC on: exit code")

    # The binary without its module.
    alone = os.path.join(h.WORK, "alone")
    os.mkdir(alone)
    binary = os.path.join(alone, "flurry")
    shutil.copy2(h.FLURRY, binary)
    missing = h.Server("missing", os.path.join(h.WORK, "missing"), binary=binary).launch()
    rc = missing.proc.wait(15)
    text = missing.log_text()
    h.check(rc != 0, "gRPC on without the module: the server started")
    h.check("flurry_grpc.so is not installed" in text and os.path.join(alone, "flurry_grpc.so") in text
            and "--grpc-listen ''" in text, f"gRPC on without the module: unclear error: {text}")
    h.log("without the module: refused with gRPC on, naming where it looked")
    # A file there that is not the module: refused, saying why.
    for name, content, why in (("garbage", b"not an ELF file", "cannot be loaded"),
                               ("libm", None, "has no entry point flurry_grpc_module_v1")):
        fake = os.path.join(alone, "flurry_grpc.so")
        if content is None:
            shutil.copy2(LIBM, fake)  # a shared object, but not flurry's
        else:
            with open(fake, "wb") as f:
                f.write(content)
        bad = h.Server(f"bad_{name}", os.path.join(h.WORK, f"bad_{name}"), binary=binary).launch()
        rc = bad.proc.wait(15)
        text = bad.log_text()
        h.check(rc != 0 and f"the gRPC module \"{fake}\" {why}" in text,
                f"a {name} module: exit {rc}, expected a refusal saying {why!r}: {text}")
        os.remove(fake)
    h.log("a file that is not the module: refused, naming it and why")
    http_only = h.Server("http_only", os.path.join(h.WORK, "http_only"), ["--grpc-listen", ""],
                         binary=binary).start()
    h.check(len(h.get_ids(http_only.port, 5)) == 5, "without the module, gRPC off: no IDs")
    h.check(http_only.stop()[0] == 0, "without the module, gRPC off: exit code")

    # TLS on: its module and OpenSSL are loaded (from beside the binary); without the module the
    # start is refused, naming where it looked.
    certs = t.make_certs(os.path.join(h.WORK, "certs"))
    ctx = t.client_context(os.path.join(certs, "ca.pem"))
    tls = t.start("tls", os.path.join(h.WORK, "tls"), t.tls_args(certs) + ["--grpc-listen", ""], ctx)
    libs = mapped(tls.pid)
    module = os.path.join(os.path.dirname(h.FLURRY), "flurry_tls.so")
    h.check(os.path.realpath(module) in {os.path.realpath(p) for p in libs}, f"TLS on, {module} not mapped")
    h.check(loaded(libs, ("libssl",)) and loaded(libs, CRYPTO_LIBS), "TLS on, libssl/libcrypto not mapped")
    h.check(not loaded(libs, GRPC_LIBS), f"TLS on, gRPC off, yet mapped: {loaded(libs, GRPC_LIBS)}")
    h.check(tls.stop()[0] == 0, "TLS on: exit code")
    no_tls = h.Server("no_tls_module", os.path.join(h.WORK, "no_tls_module"),
                      t.tls_args(certs) + ["--grpc-listen", ""], binary=binary).launch()
    rc = no_tls.proc.wait(15)
    text = no_tls.log_text()
    h.check(rc != 0 and "TLS needs flurry_tls.so" in text and os.path.join(alone, "flurry_tls.so") in text,
            f"TLS on without its module: exit {rc}, unclear error: {text}")
    h.log("TLS on: flurry_tls.so, libssl and libcrypto mapped; without the module refused, naming where it looked")

    etcd_rss, etcd_threads = etcd_registry(binary)
    h.log(f"etcd registry: flurry_etcd.so and libgrpc mapped (no flurry_grpc.so); idle RSS {etcd_rss:.1f} MiB and "
          f"{etcd_threads} threads, against {sqlite_rss:.1f} MiB and {idle} threads on SQLite (same run); "
          "without the module refused, naming where it looked")


def etcd_registry(binary):
    """The etcd registry loads flurry_etcd.so and gRPC, and not the gRPC front end; without the
    module the start is refused. Its idle RSS and threads against an SQLite server's, same run."""
    etcd = Etcd().start()
    args = ["--grpc-listen", "", "--io-threads", "1", "--registry", "etcd", "--etcd-endpoints", etcd.endpoint,
            "--cluster", "lazy"]
    srv = h.Server("etcd", os.path.join(h.WORK, "etcd"), args).start()
    libs = mapped(srv.pid)
    module = os.path.join(os.path.dirname(h.FLURRY), "flurry_etcd.so")
    h.check(os.path.realpath(module) in {os.path.realpath(p) for p in libs}, f"etcd registry, {module} not mapped")
    h.check(loaded(libs, ("libgrpc",)), "etcd registry, libgrpc not mapped")
    h.check(not loaded(libs, ("flurry_grpc.so",)), "etcd registry with gRPC off, yet the gRPC front end is mapped")
    h.check(len(h.get_ids(srv.port, 5)) == 5, "etcd registry: no IDs")
    time.sleep(1.0)
    etcd_threads = threads(srv.pid)
    etcd_rss = memlib.rss_mib(srv.pid)
    h.check(srv.stop()[0] == 0, "etcd registry: exit code")
    missing = h.Server("no_etcd_module", os.path.join(h.WORK, "no_etcd_module"), args, binary=binary).launch()
    rc = missing.proc.wait(15)
    text = missing.log_text()
    h.check(rc != 0 and "flurry_etcd.so, which is not installed" in text
            and os.path.join(os.path.dirname(binary), "flurry_etcd.so") in text,
            f"etcd registry without its module: exit {rc}, unclear error: {text}")
    return etcd_rss, etcd_threads


h.run_main(main)
