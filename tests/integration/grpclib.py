"""Helpers for the gRPC integration tests (Debian's python3-grpcio, run with /usr/bin/python3).

A test script does

    import grpclib as g
    h = g.init()                  # argv: FLURRY PYTHON_STUBS; then harness.init()
    srv, port = g.start("a", data_dir)
    ids = g.ids(port)             # a flurry.v1.Ids stub on a fresh channel
    ...

The stubs (flurry.v1, grpc.health.v1, grpc.reflection.v1alpha) are generated at build time into
the build tree (src/grpc/CMakeLists.txt); their directory is the script's second argument. Each
server listens for gRPC on 127.0.0.1 and a port it picks itself (--grpc-listen 127.0.0.1:0),
read back from its start log line.
"""

import os
import re
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

grpc = None
pb = None
rpc = None
health_pb = None
health_rpc = None
refl_pb = None
refl_rpc = None
rpc_status_pb = None

TOKEN = "grpc-it-S3cret-4b1d-9e2a5b8f0c3d6e91"
K1 = "2b7e151628aed2a6abf7158809cf4f3c"


def init():
    """argv: FLURRY PYTHON_STUBS_DIR. Imports grpc and the stubs, then harness.init()."""
    global grpc, pb, rpc, health_pb, health_rpc, refl_pb, refl_rpc, rpc_status_pb
    if len(sys.argv) < 3:
        print(f"usage: {sys.argv[0]} path/to/flurry path/to/python-stubs", file=sys.stderr)
        sys.exit(2)
    stubs = os.path.realpath(sys.argv.pop(2))
    sys.path.insert(0, stubs)
    import grpc as grpc_module  # noqa: E402
    from flurry.v1 import flurry_pb2, flurry_pb2_grpc  # noqa: E402
    from stdgrpc.health.v1 import health_pb2, health_pb2_grpc  # noqa: E402
    from stdgrpc.reflection.v1alpha import reflection_pb2, reflection_pb2_grpc  # noqa: E402
    from stdgrpc.rpc import status_pb2  # noqa: E402
    grpc, pb, rpc = grpc_module, flurry_pb2, flurry_pb2_grpc
    health_pb, health_rpc = health_pb2, health_pb2_grpc
    refl_pb, refl_rpc = reflection_pb2, reflection_pb2_grpc
    rpc_status_pb = status_pb2
    h.init()
    return h


_GRPC_LINE = re.compile(r"grpc_listen=127\.0\.0\.1:(\d+)")


def grpc_port(srv, timeout=15.0):
    """The gRPC port of a started server, from its start log line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = _GRPC_LINE.search(srv.log_text())
        if m:
            return int(m.group(1))
        h.check(srv.alive(), f"{srv.name} exited before it named its gRPC port")
        time.sleep(0.02)
    h.fail(f"{srv.name}: no grpc_listen=127.0.0.1:PORT in its log within {timeout} s")


def start(name, data, args=(), env=None, ready=True, wrapper=()):
    """A flurry serve with gRPC on 127.0.0.1 and a port of its choosing; returns (server, port)."""
    srv = h.Server(name, data, list(args) + ["--grpc-listen", "127.0.0.1:0"], env=env,
                   wrapper=wrapper).start(ready=ready)
    return srv, grpc_port(srv)


def channel(port):
    return grpc.insecure_channel(f"127.0.0.1:{port}",
                                 options=[("grpc.max_receive_message_length", 64 << 20)])


def ids(port):
    return rpc.IdsStub(channel(port))


def segments(port):
    return rpc.SegmentsStub(channel(port))


def orders(port):
    return rpc.OrderNumbersStub(channel(port))


def health(port):
    return health_rpc.HealthStub(channel(port))


def auth(token=TOKEN):
    return [("authorization", f"Bearer {token}")]


def trailers(err):
    """The trailing metadata of an RpcError as a dict."""
    return {k: v for k, v in (err.trailing_metadata() or ())}


def status_details(what, err, code, reason, retry):
    """Checks the google.rpc.Status in `grpc-status-details-bin` as a stock client reads it: the
    code and message of the call, google.rpc.ErrorInfo{reason, domain "flurry"} exactly when
    there is a reason, google.rpc.RetryInfo{1 s} exactly when the call is to be retried."""
    raw = trailers(err).get("grpc-status-details-bin")
    h.check(raw is not None, f"{what}: no grpc-status-details-bin")
    st = rpc_status_pb.Status.FromString(raw)
    h.check(st.code == code.value[0] and st.message == err.details(),
            f"{what}: status details {st.code} {st.message!r} vs {code} {err.details()!r}")
    infos, retries = [], []
    for d in st.details:
        if d.type_url == "type.googleapis.com/google.rpc.ErrorInfo":
            infos.append(rpc_status_pb.ErrorInfo.FromString(d.value))
        elif d.type_url == "type.googleapis.com/google.rpc.RetryInfo":
            retries.append(rpc_status_pb.RetryInfo.FromString(d.value))
        else:
            h.fail(f"{what}: unexpected detail {d.type_url}")
    if reason is None:
        h.check(not infos, f"{what}: an ErrorInfo without a reason: {infos}")
    else:
        h.check(len(infos) == 1 and infos[0].reason == reason and infos[0].domain == "flurry",
                f"{what}: ErrorInfo {infos}, expected reason {reason}")
    if retry is not None:
        h.check(len(retries) == (1 if retry else 0), f"{what}: RetryInfo {retries}")
        if retry:
            h.check(retries[0].retry_delay.seconds == 1, f"{what}: RetryInfo {retries[0]}")


def expect_error(what, call, code, reason=None, message=None, retry=None, flurry=True):
    """Runs call(); it must raise an RpcError with `code` (a grpc.StatusCode), the flurry reason
    `reason` in trailing metadata `flurry-reason` (None: no such entry), a details text containing
    `message`, and `retry-after-ms` present exactly when `retry`. With `flurry` (an answer of
    flurry's, not of gRPC itself) the same in grpc-status-details-bin (status_details). Returns
    the error."""
    try:
        got = call()
    except grpc.RpcError as e:
        t = trailers(e)
        h.check(e.code() == code, f"{what}: expected {code}, got {e.code()} {e.details()!r} {t}")
        h.check(t.get("flurry-reason") == reason,
                f"{what}: flurry-reason {t.get('flurry-reason')!r}, expected {reason!r} ({e.details()!r})")
        if message is not None:
            h.check(message in (e.details() or ""), f"{what}: details {e.details()!r} lack {message!r}")
        if retry is not None:
            h.check(("retry-after-ms" in t) == retry, f"{what}: retry-after-ms {t.get('retry-after-ms')!r}")
            if retry:
                h.check(t["retry-after-ms"] == "1000", f"{what}: retry-after-ms {t['retry-after-ms']!r}")
        if flurry:
            status_details(what, e, code, reason, retry)
        return e
    h.fail(f"{what}: expected {code}, got an answer: {str(got)[:300]}")


def unpack(chunk_bytes):
    """The IDs of an IdChunk (little-endian fixed64)."""
    h.check(len(chunk_bytes) % 8 == 0, f"a chunk of {len(chunk_bytes)} bytes")
    return [int.from_bytes(chunk_bytes[i:i + 8], "little") for i in range(0, len(chunk_bytes), 8)]


def issued(port):
    """flurry_ids_issued_total of the server with HTTP port `port`."""
    v = h.metric(h.request(port, "/metrics").text, "flurry_ids_issued_total")
    h.check(v is not None, "no flurry_ids_issued_total in /metrics")
    return int(v)
