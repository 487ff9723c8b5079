#!/usr/bin/python3
"""The timestamp oracle's transports (issue 35) on the real `flurry serve`: GET /v1/tso and
flurry.v1.Tso (Get, Stream) on the leader, their count bounds, a server without --tso
(NOT_FOUND / TSO_OFF), and a follower on the same data directory (the SQLite registry: one of
the two leads): HTTP 307 to the leader with the error body naming it, gRPC UNAVAILABLE /
NOT_LEADER with the leader's addresses in ErrorInfo.metadata, /readyz/tso, /healthz's "tso"
object, gRPC health flurry.v1.Tso and the flurry_tso_* metrics.

Usage: tso_api.py FLURRY PYTHON_STUBS
"""
import http.client
import os
import sys
import time
import urllib.parse

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpclib as g  # noqa: E402

h = g.init()
SC = g.grpc.StatusCode
pb = g.pb
TSO_BITS_SEQ = 18  # the tso layout: time:45@1ms,seq:18 (docs/id-format.md)


def tso_stub(port):
    return g.rpc.TsoStub(g.channel(port))


def http_tso(port, count=None, conn=None):
    """GET /v1/tso[?count=N] -> (first, count), checking the body's shape."""
    path = "/v1/tso" if count is None else f"/v1/tso?count={count}"
    r = h.request(port, path, conn=conn)
    h.check(r.status == 200, f"GET {path}: {r}")
    h.check(r.headers.get("content-type") == "application/json", f"GET {path}: {r.headers}")
    j = r.json()
    h.check(isinstance(j, dict) and set(j) == {"first", "count"}, f"GET {path}: body {r.body!r}")
    h.check(isinstance(j["first"], str) and j["first"].isdigit(), f"GET {path}: first is not a decimal string: {j}")
    want = 1 if count is None else count
    h.check(j["count"] == want, f"GET {path}: count {j['count']}, asked {want}")
    return int(j["first"]), j["count"]


class Grants:
    """Every grant answered, in the order the answers came (each asked after the one before
    was answered): each must lie wholly above the one before."""

    def __init__(self):
        self.last = 0  # the highest timestamp seen
        self.total = 0
        self.requests = 0

    def add(self, first, count, what):
        h.check(count >= 1, f"{what}: count {count}")
        h.check(first > self.last, f"{what}: first {first} not above the last timestamp seen {self.last}")
        h.check((first + count - 1) >> 63 == 0, f"{what}: {first}+{count} leaves 63 bits")
        self.last = first + count - 1
        self.total += count
        self.requests += 1


def wait_role(srv, role, timeout=60.0):
    """Waits until /healthz's tso.role is `role`; returns the tso object."""
    seen = {}

    def has_role():
        try:
            j = h.request(srv.port, "/healthz", timeout=2).json()
        except (OSError, http.client.HTTPException):
            return False
        seen["last"] = j
        tso = j.get("tso") if isinstance(j, dict) else None
        return tso if isinstance(tso, dict) and tso.get("role") == role else False
    return h.wait_for(has_role, f"{srv.name}: /healthz tso.role {role} (last: {seen.get('last')})", timeout,
                      period=0.05)


def health_status(grpc_port, service):
    from stdgrpc.health.v1 import health_pb2 as hpb
    try:
        return g.health(grpc_port).Check(hpb.HealthCheckRequest(service=service), timeout=5).status
    except g.grpc.RpcError as e:
        return e.code()


def metrics(port):
    return h.request(port, "/metrics").text


def metric(text, name):
    v = h.metric(text, name)
    h.check(v is not None, f"/metrics lacks {name}")
    return v


def max_batch_of(port):
    """The oracle's max_batch, from the refusal of a count far above any: the message names it."""
    r = h.request(port, "/v1/tso?count=18446744073709551615")
    err = h.check_error_body(r, 400, "count=2^64-1", code="INVALID_ARGUMENT", reason="")
    msg = err["message"]
    h.check("max_batch (" in msg, f"count=2^64-1: the message does not name max_batch: {msg!r}")
    n = int(msg.split("max_batch (", 1)[1].split(")", 1)[0])
    h.check(n >= 1, f"max_batch {n}")
    return n


def off(data):
    """A server without --tso: NOT_FOUND / TSO_OFF on both transports, whatever the count."""
    srv, port = g.start("off", data)
    for q in ("", "?count=1", "?count=0", "?count=x"):
        r = h.request(srv.port, "/v1/tso" + q)
        err = h.check_error_body(r, 404, f"GET /v1/tso{q} without --tso", code="NOT_FOUND", reason="TSO_OFF")
        h.check("--tso" in err["message"], f"TSO_OFF's message does not say how: {err['message']!r}")
    r = h.request(srv.port, "/readyz/tso")
    h.check(r.status == 503 and r.json().get("reason") == "TSO_OFF" and r.json().get("ready") is False,
            f"/readyz/tso without --tso: {r}")
    h.check("tso" not in h.request(srv.port, "/healthz").json(), "/healthz has a tso object without --tso")
    h.check(h.metric(metrics(srv.port), "flurry_tso_leader") is None, "flurry_tso_leader without --tso")
    stub = tso_stub(port)
    g.expect_error("Tso.Get without --tso", lambda: stub.Get(pb.TsoRequest(count=1)), SC.NOT_FOUND, "TSO_OFF",
                   message="--tso", retry=False)
    g.expect_error("Tso.Get count=0 without --tso", lambda: stub.Get(pb.TsoRequest(count=0)), SC.NOT_FOUND,
                   "TSO_OFF", retry=False)
    g.expect_error("Tso.Stream without --tso", lambda: list(stub.Stream(iter([pb.TsoRequest(count=1)]))),
                   SC.NOT_FOUND, "TSO_OFF", retry=False)
    h.check(health_status(port, "flurry.v1.Tso") == SC.NOT_FOUND,
            "gRPC health knows flurry.v1.Tso on a server without --tso")
    rc, _ = srv.stop()
    h.check(rc == 0, f"the server without --tso exited {rc}")


def leader_checks(a, a_grpc, grants):
    """The leader: grants on both transports, strictly increasing, consecutive within a grant;
    count bounds; HEAD; readiness, health and metrics."""
    max_batch = max_batch_of(a.port)
    h.log(f"the oracle's max_batch: {max_batch}")
    before = metrics(a.port)
    conn = http.client.HTTPConnection("127.0.0.1", a.port, timeout=10)
    for count in (None, 1, 2, 7, 1000, max_batch):
        first, n = http_tso(a.port, count, conn=conn)
        grants.add(first, n, f"GET /v1/tso?count={count}")
    for _ in range(200):
        first, n = http_tso(a.port, 3, conn=conn)
        grants.add(first, n, "GET /v1/tso?count=3 (keep-alive)")
    conn.close()
    # A timestamp decodes as an ID of the tso layout: its time is about now.
    now_ms = time.time() * 1000
    epoch_ms = 1735689600000  # 2025-01-01Z
    ts_ms = (grants.last >> TSO_BITS_SEQ) + epoch_ms
    h.check(abs(ts_ms - now_ms) < 10_000, f"the last timestamp's time {ts_ms} is not about now ({now_ms})")

    # Count bounds: 400 with the usual error body, nothing granted.
    for q, words in (("count=0", "too small"), (f"count={max_batch + 1}", "max_batch"), ("count=abc", "whole number"),
                     ("count=", "empty"), ("count=-1", "whole number"), ("cnt=1", "cnt")):
        r = h.request(a.port, f"/v1/tso?{q}")
        err = h.check_error_body(r, 400, f"GET /v1/tso?{q}", code="INVALID_ARGUMENT")
        h.check(words in err["message"], f"GET /v1/tso?{q}: message {err['message']!r} lacks {words!r}")
    r = h.request(a.port, "/v1/tso?count=5", method="HEAD")
    h.check(r.status == 200 and r.body == b"", f"HEAD /v1/tso: {r}")
    r = h.request(a.port, "/v1/tso", method="POST", body=b"")
    h.check_error_body(r, 405, "POST /v1/tso", code="UNIMPLEMENTED", reason="METHOD_NOT_ALLOWED")

    # gRPC: Get, then one Stream of many requests answered in order.
    stub = tso_stub(a_grpc)
    for count in (1, 5, max_batch):
        resp = stub.Get(pb.TsoRequest(count=count))
        h.check(resp.count == count, f"Tso.Get(count={count}): {resp}")
        grants.add(resp.first, resp.count, f"Tso.Get(count={count})")
    counts = [1 + (i * 37) % 500 for i in range(300)]
    answers = list(stub.Stream(iter([pb.TsoRequest(count=c) for c in counts])))
    h.check([x.count for x in answers] == counts, "Tso.Stream: the answers' counts are not the requests' in order")
    for i, x in enumerate(answers):
        grants.add(x.first, x.count, f"Tso.Stream answer {i}")
    first, n = http_tso(a.port, 4)
    grants.add(first, n, "GET /v1/tso after gRPC")
    for count, words in ((0, "too small"), (max_batch + 1, "max_batch")):
        g.expect_error(f"Tso.Get(count={count})", lambda: stub.Get(pb.TsoRequest(count=count)),
                       SC.INVALID_ARGUMENT, "BAD_INPUT", message=words, retry=False)
    # A bad request in a stream ends it with INVALID_ARGUMENT; the answers before it stand.
    got = []
    try:
        for x in stub.Stream(iter([pb.TsoRequest(count=2), pb.TsoRequest(count=3), pb.TsoRequest(count=0),
                                   pb.TsoRequest(count=4)])):
            got.append(x)
        h.fail("Tso.Stream with count=0 ended without an error")
    except g.grpc.RpcError as e:
        h.check(e.code() == SC.INVALID_ARGUMENT and "too small" in e.details(),
                f"Tso.Stream with count=0: {e.code()} {e.details()!r}")
    h.check([x.count for x in got] == [2, 3], f"Tso.Stream answers before the bad request: {got}")
    for x in got:
        grants.add(x.first, x.count, "Tso.Stream before its bad request")
    first, n = http_tso(a.port, 1)
    grants.add(first, n, "GET /v1/tso after the refused stream")

    # Readiness, health (JSON and gRPC), metrics.
    r = h.request(a.port, "/readyz/tso")
    h.check(r.status == 200 and r.json().get("ready") is True and r.json().get("role") == "leader",
            f"/readyz/tso on the leader: {r}")
    tso = h.request(a.port, "/healthz").json()["tso"]
    h.check(tso["role"] == "leader" and isinstance(tso["term"], int) and tso["term"] >= 1,
            f"/healthz tso on the leader: {tso}")
    h.check(tso["leader"] == {"http": f"127.0.0.1:{a.port}", "grpc": f"127.0.0.1:{a_grpc}"},
            f"/healthz tso.leader on the leader: {tso}")
    # Health follows the oracle every 200 ms.
    h.wait_for(lambda: health_status(a_grpc, "flurry.v1.Tso") == 1, "gRPC health flurry.v1.Tso SERVING on the leader",
               5)
    after = metrics(a.port)
    h.check(metric(after, "flurry_tso_leader") == 1, "flurry_tso_leader is not 1 on the leader")
    h.check(metric(after, "flurry_tso_term") == tso["term"], "flurry_tso_term is not /healthz's term")
    for name in ("flurry_tso_leader_changes_total", "flurry_tso_window_saves_total", "flurry_tso_wait_seconds_total",
                 "flurry_tso_not_leader_total"):
        metric(after, name)
    h.check(metric(after, "flurry_tso_leader_changes_total") >= 1, "no leader change counted on the leader")
    h.check(metric(after, "flurry_tso_window_saves_total") >= 1, "no window save counted on the leader")
    d_requests = metric(after, "flurry_tso_requests_total") - metric(before, "flurry_tso_requests_total")
    d_ts = metric(after, "flurry_tso_timestamps_total") - metric(before, "flurry_tso_timestamps_total")
    h.log(f"leader: {grants.requests} grants, {grants.total} timestamps; metrics moved by {d_requests:.0f} "
          f"requests, {d_ts:.0f} timestamps")
    h.check(d_requests >= grants.requests, f"flurry_tso_requests_total moved by {d_requests} only")
    h.check(d_ts >= grants.total, f"flurry_tso_timestamps_total moved by {d_ts} only")
    h.check(metric(after, "flurry_http_requests_total") is not None, "flurry_http_requests_total")
    h.check(h.metric(after, "flurry_http_requests_total", {"route": "/v1/tso", "code": "200"}) >= 200,
            "flurry_http_requests_total for /v1/tso")
    h.check(h.metric(after, "flurry_grpc_requests_total", {"method": "/flurry.v1.Tso/Stream"}) is not None,
            "flurry_grpc_requests_total for Tso/Stream")
    return max_batch


def follower_checks(a, a_grpc, b, b_grpc, grants):
    """The follower: 307 to the leader (HTTP), NOT_LEADER with the leader's addresses (gRPC),
    not ready, NOT_SERVING; and the redirect, followed, is answered by the leader."""
    tso = wait_role(b, "follower")
    leader = {"http": f"127.0.0.1:{a.port}", "grpc": f"127.0.0.1:{a_grpc}"}
    h.check(tso["leader"] == leader, f"/healthz tso.leader on the follower: {tso}, expected {leader}")
    before = metrics(b.port)
    for q in ("?count=3", ""):
        r = h.request(b.port, f"/v1/tso{q}")
        err = h.check_error_body(r, 307, f"GET /v1/tso{q} on the follower", code="UNAVAILABLE", reason="NOT_LEADER")
        h.check(err.get("leader") == leader, f"the 307's body names leader {err.get('leader')}, expected {leader}")
        want = f"http://127.0.0.1:{a.port}/v1/tso{q}"
        h.check(r.headers.get("location") == want, f"Location {r.headers.get('location')!r}, expected {want!r}")
        h.check("retry-after" not in r.headers, f"a 307 with Retry-After: {r.headers}")
    # Bad counts are refused here, before anything is asked of the oracle: the follower checks
    # against its own max_batch.
    h.check_error_body(h.request(b.port, "/v1/tso?count=0"), 400, "count=0 on the follower", code="INVALID_ARGUMENT")
    # Following the redirect: curl -L ends at the leader with a grant above every earlier one.
    r = h.curl(b.port, "/v1/tso?count=6", extra=["-L"])
    h.check(r.status == 200, f"curl -L from the follower: {r}")
    j = r.json()
    grants.add(int(j["first"]), j["count"], "GET /v1/tso?count=6 followed from the follower")
    h.check(j["count"] == 6, f"curl -L: {j}")
    # HEAD is answered as GET would be (the redirect), taking nothing.
    r = h.request(b.port, "/v1/tso?count=2", method="HEAD")
    h.check(r.status == 307 and r.headers.get("location") == f"http://127.0.0.1:{a.port}/v1/tso?count=2",
            f"HEAD /v1/tso on the follower: {r}")

    # gRPC: UNAVAILABLE / NOT_LEADER, the leader in ErrorInfo.metadata, no retry advice.
    stub = tso_stub(b_grpc)
    for what, call in (("Tso.Get", lambda: stub.Get(pb.TsoRequest(count=2))),
                       ("Tso.Stream", lambda: list(stub.Stream(iter([pb.TsoRequest(count=2)] * 3))))):
        e = g.expect_error(f"{what} on the follower", call, SC.UNAVAILABLE, "NOT_LEADER", retry=False)
        st = g.rpc_status_pb.Status.FromString(g.trailers(e)["grpc-status-details-bin"])
        infos = [g.rpc_status_pb.ErrorInfo.FromString(d.value) for d in st.details
                 if d.type_url == "type.googleapis.com/google.rpc.ErrorInfo"]
        meta = dict(infos[0].metadata)
        h.check(meta == {"leader_http": leader["http"], "leader_grpc": leader["grpc"]},
                f"{what} on the follower: ErrorInfo.metadata {meta}, expected the leader's addresses")
        # The client goes there and is answered.
        resp = tso_stub(int(meta["leader_grpc"].rsplit(":", 1)[1])).Get(pb.TsoRequest(count=2))
        grants.add(resp.first, resp.count, f"Tso.Get at the leader {what} named")
    g.expect_error("Tso.Get count=0 on the follower", lambda: stub.Get(pb.TsoRequest(count=0)),
                   SC.INVALID_ARGUMENT, "BAD_INPUT", retry=False)

    r = h.request(b.port, "/readyz/tso")
    h.check(r.status == 503 and r.json().get("ready") is False and r.json().get("role") == "follower"
            and r.json().get("reason"), f"/readyz/tso on the follower: {r}")
    h.check(h.request(b.port, "/readyz").status == 200, "the follower's /readyz (snowflake IDs) is not 200")
    h.wait_for(lambda: health_status(b_grpc, "flurry.v1.Tso") == 2,
               "gRPC health flurry.v1.Tso NOT_SERVING on the follower", 5)
    h.check(health_status(b_grpc, "flurry.v1.Ids") == 1, "gRPC health flurry.v1.Ids is not SERVING on the follower")
    after = metrics(b.port)
    h.check(metric(after, "flurry_tso_leader") == 0, "flurry_tso_leader is not 0 on the follower")
    moved = metric(after, "flurry_tso_not_leader_total") - metric(before, "flurry_tso_not_leader_total")
    h.log(f"follower: flurry_tso_not_leader_total moved by {moved:.0f}")
    h.check(moved >= 5, f"flurry_tso_not_leader_total moved by {moved} after 5 refusals at least")
    h.check(h.metric(after, "flurry_http_requests_total", {"route": "/v1/tso", "code": "307"}) >= 3,
            "flurry_http_requests_total counts no 307 for /v1/tso")


def main():
    off(os.path.join(h.WORK, "off"))
    data = os.path.join(h.WORK, "shared")
    a, a_grpc = g.start("a", data, ["--tso"])
    wait_role(a, "leader")
    grants = Grants()
    leader_checks(a, a_grpc, grants)
    b, b_grpc = g.start("b", data, ["--tso"])
    follower_checks(a, a_grpc, b, b_grpc, grants)
    # The redirect's address stays where the leader is, including after more grants there.
    first, n = http_tso(a.port, 9)
    grants.add(first, n, "GET /v1/tso at the leader after the follower's redirects")
    h.log(f"{grants.requests} grants, {grants.total} timestamps, each wholly above the one answered before it")
    for s in (b, a):
        rc, _ = s.stop()
        h.check(rc == 0, f"{s.name} exited {rc}")


if __name__ == "__main__":
    h.run_main(main)
