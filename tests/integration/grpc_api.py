#!/usr/bin/python3
"""The gRPC API (flurry.v1) of the real `flurry serve`: every RPC, its errors with their codes,
`flurry-reason` and `retry-after-ms`, the same answers as HTTP, reflection, health, metrics, and
the settings (grpc_listen empty turns gRPC off; a port in use stops the start, naming the
setting).

Usage: grpc_api.py FLURRY PYTHON_STUBS
"""
import http.client
import os
import socket
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpclib as g  # noqa: E402

h = g.init()
SC = g.grpc.StatusCode
pb = g.pb
MAX_RANGE = 300_000


def write(path, text):
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(text)
    return path


def throttle_waits(http_port):
    return h.metric(h.request(http_port, "/metrics").text, "flurry_throttle_waits_total") or 0


def snowflake_ids(port, http_port):
    ids = g.ids(port)
    one = ids.Next(pb.NextRequest(count=1))
    h.check(len(one.ids) == 1 and not one.texts, f"Next(count=1): {one}")
    batch = ids.Next(pb.NextRequest(count=1000))
    h.check(len(batch.ids) == 1000, f"Next(count=1000): {len(batch.ids)} IDs")
    h.check_increasing([one.ids[0]] + list(batch.ids), "Next")
    for enc, parse in ((pb.ENCODING_HEX, lambda t: int(t, 16)), (pb.ENCODING_DECIMAL, int)):
        r = ids.Next(pb.NextRequest(count=3, encoding=enc))
        texts = list(r.texts) if enc != pb.ENCODING_DECIMAL else [str(i) for i in r.ids]
        h.check([parse(t) for t in texts] == list(r.ids), f"Next encoding {enc}: {r}")
    b32 = ids.Next(pb.NextRequest(count=2, encoding=pb.ENCODING_BASE32))
    h.check(len(b32.texts) == 2 and all(len(t) == 13 for t in b32.texts), f"base32: {b32}")
    # The HTTP API decodes what gRPC encodes, and the other way round.
    http_view = h.request(http_port, f"/v1/ids/{b32.texts[0]}?encoding=base32").json()
    h.check(int(http_view["id"]) == b32.ids[0], f"HTTP decodes the base32 text to {http_view}")

    # UUIDv7 and ULID: texts of the IDs in the same answer, decoded back to them by Decode and by
    # HTTP, in Next and in Stream.
    for enc, name, length in ((pb.ENCODING_UUIDV7, "uuidv7", 36), (pb.ENCODING_ULID, "ulid", 26)):
        r = ids.Next(pb.NextRequest(count=5, encoding=enc))
        h.check(len(r.ids) == 5 and len(r.texts) == 5 and all(len(t) == length for t in r.texts),
                f"Next {name}: {r}")
        h.check(sorted(r.texts) == list(r.texts), f"{name} texts do not sort like the IDs: {r.texts}")
        for i, text in zip(r.ids, r.texts):
            d = ids.Decode(pb.DecodeRequest(id=text, encoding=enc))
            h.check(d.id == i, f"Decode {name} {text}: {d.id} != {i}")
            view = h.request(http_port, f"/v1/ids/{text}?encoding={name}").json()
            h.check(int(view["id"]) == i, f"HTTP decodes the {name} text {text} to {view}")
        streamed = list(ids.Stream(pb.NextRequest(count=2, encoding=enc) for _ in range(3)))
        for a in streamed:
            h.check(len(a.texts) == 2 and [ids.Decode(pb.DecodeRequest(id=t, encoding=enc)).id
                                           for t in a.texts] == list(a.ids), f"Stream {name}: {a}")
    a_uuid = ids.Next(pb.NextRequest(count=1, encoding=pb.ENCODING_UUIDV7)).texts[0]
    g.expect_error("Decode(uuidv7 text as ulid)",
                   lambda: ids.Decode(pb.DecodeRequest(id=a_uuid, encoding=pb.ENCODING_ULID)),
                   SC.INVALID_ARGUMENT, "BAD_INPUT", "ulid")

    max_batch = ids.Layout(pb.LayoutRequest()).max_batch
    # gRPC's messages name the message field, not HTTP's query parameter.
    g.expect_error("Next(count=0)", lambda: ids.Next(pb.NextRequest(count=0)), SC.INVALID_ARGUMENT,
                   "BAD_INPUT", 'field "count": 0 is too small (at least 1)', retry=False)
    g.expect_error("Next(count=max_batch+1)", lambda: ids.Next(pb.NextRequest(count=max_batch + 1)),
                   SC.INVALID_ARGUMENT, "BAD_INPUT", str(max_batch))
    g.expect_error("Next(encoding=99)", lambda: ids.Next(pb.NextRequest(count=1, encoding=99)),
                   SC.INVALID_ARGUMENT, "BAD_INPUT", "encoding")

    # Decode and Layout say what HTTP says.
    d = ids.Decode(pb.DecodeRequest(id=str(one.ids[0])))
    view = h.request(http_port, f"/v1/ids/{one.ids[0]}").json()
    h.check(d.id == one.ids[0] and d.time == view["time"] and d.unix_ms == view["unix_ms"]
            and d.node == view["node"] and d.seq == view["seq"] and d.ticks == view["ticks"]
            and d.layout == view["layout"], f"Decode {d} vs HTTP {view}")
    h.check([(f.name, f.value) for f in d.fields] == list(view["fields"].items()), f"fields {d.fields}")
    d = ids.Decode(pb.DecodeRequest(id=b32.texts[1], encoding=pb.ENCODING_BASE32))
    h.check(d.id == b32.ids[1], f"Decode base32: {d}")
    g.expect_error("Decode(x)", lambda: ids.Decode(pb.DecodeRequest(id="12x4")), SC.INVALID_ARGUMENT,
                   "BAD_INPUT", "12x4")
    g.expect_error("Decode(2^63)", lambda: ids.Decode(pb.DecodeRequest(id=str(1 << 63))),
                   SC.INVALID_ARGUMENT, "BAD_INPUT")
    lay = ids.Layout(pb.LayoutRequest())
    http_layout = h.request(http_port, "/v1/layout").json()
    h.check(lay.layout == http_layout["text"] and lay.epoch == http_layout["epoch"]
            and lay.node == http_layout["node"] and lay.max_batch == http_layout["max_batch"]
            and [(f.name, f.bits) for f in lay.fields] == [(f["name"], f["bits"]) for f in http_layout["fields"]],
            f"Layout {lay} vs HTTP {http_layout}")

    # Stream: one response per request, in order; a bad count ends the stream.
    def requests(counts):
        for c in counts:
            yield pb.NextRequest(count=c)
    got = [len(r.ids) for r in ids.Stream(requests([1, 10, 100]))]
    h.check(got == [1, 10, 100], f"Stream answered {got}")
    seen = []

    def bad_stream():
        for r in ids.Stream(requests([5, 0, 5])):
            seen.append(len(r.ids))
    g.expect_error("Stream with count 0", bad_stream, SC.INVALID_ARGUMENT, "BAD_INPUT", 'field "count"')
    h.check(seen == [5], f"Stream before the bad request answered {seen}")
    g.expect_error("Stream asking for more than max_batch",
                   lambda: list(ids.Stream(requests([max_batch + 1]))), SC.INVALID_ARGUMENT, "BAD_INPUT",
                   str(max_batch))

    # StreamRange: chunks of packed IDs, all of them, increasing.
    all_ids = []
    for chunk in ids.StreamRange(pb.RangeRequest(count=MAX_RANGE)):
        all_ids += g.unpack(chunk.ids)
    h.check(len(all_ids) == MAX_RANGE, f"StreamRange gave {len(all_ids)} IDs")
    h.check_increasing(all_ids, "StreamRange", above=one.ids[0])
    g.expect_error("StreamRange(0)", lambda: list(ids.StreamRange(pb.RangeRequest(count=0))),
                   SC.INVALID_ARGUMENT, "BAD_INPUT", "count")
    g.expect_error("StreamRange(max_range+1)",
                   lambda: list(ids.StreamRange(pb.RangeRequest(count=MAX_RANGE + 1))),
                   SC.INVALID_ARGUMENT, "BAD_INPUT", "grpc_max_range")
    return max_batch


def segment_mode(port):
    seg = g.segments(port)
    spec = pb.SegmentCreateRequest(tag="orders", start=1, step=100, description="gRPC tag")
    g.expect_error("Create without a token", lambda: seg.Create(spec), SC.UNAUTHENTICATED, "TOKEN_MISSING")
    g.expect_error("Create with a wrong token", lambda: seg.Create(spec, metadata=g.auth("x" * 40)),
                   SC.UNAUTHENTICATED, "TOKEN_UNKNOWN", "not one this server accepts")
    row = seg.Create(spec, metadata=g.auth())
    h.check(row.tag == "orders" and row.step == 100 and row.description == "gRPC tag"
            and row.update_time.endswith("Z"), f"Create: {row}")
    g.expect_error("Create twice", lambda: seg.Create(spec, metadata=g.auth()), SC.ALREADY_EXISTS, None)
    g.expect_error("Create a bad name", lambda: seg.Create(pb.SegmentCreateRequest(tag="a/b"), metadata=g.auth()),
                   SC.INVALID_ARGUMENT, "BAD_INPUT", "tag")
    g.expect_error("Create with step 0", lambda: seg.Create(pb.SegmentCreateRequest(tag="zero", step=0),
                                                            metadata=g.auth()),
                   SC.INVALID_ARGUMENT, "BAD_INPUT", "step")
    # A request over 64 KiB is refused by gRPC itself, before flurry sees it.
    g.expect_error("Create with a 100 KB description",
                   lambda: seg.Create(pb.SegmentCreateRequest(tag="big", description="x" * 100_000), metadata=g.auth()),
                   SC.RESOURCE_EXHAUSTED, None, flurry=False)
    r = seg.Next(pb.SegmentNextRequest(tag="orders", count=5))
    h.check(list(r.ids) == [1, 2, 3, 4, 5], f"Segments.Next: {r}")
    rng = seg.Range(pb.SegmentRangeRequest(tag="orders", size=10))
    h.check(rng.end - rng.start == 10 and rng.delta == 1 and rng.start >= 6, f"Segments.Range: {rng}")
    g.expect_error("Range larger than a range", lambda: seg.Range(pb.SegmentRangeRequest(tag="orders", size=500)),
                   SC.OUT_OF_RANGE, None)
    g.expect_error("Next of an unknown tag", lambda: seg.Next(pb.SegmentNextRequest(tag="nosuchtag", count=1)),
                   SC.NOT_FOUND, None, "nosuchtag")
    g.expect_error("Next of a bad name", lambda: seg.Next(pb.SegmentNextRequest(tag="..", count=1)),
                   SC.INVALID_ARGUMENT, "BAD_INPUT", "tag")
    g.expect_error("Next(count=0)", lambda: seg.Next(pb.SegmentNextRequest(tag="orders", count=0)),
                   SC.INVALID_ARGUMENT, "BAD_INPUT", "count")
    tags = seg.List(pb.SegmentListRequest()).tags
    h.check([t.tag for t in tags] == ["orders"] and tags[0].max_id >= 101, f"List: {tags}")
    got = seg.Get(pb.SegmentGetRequest(tag="orders"))
    h.check(got.served and got.ids_issued >= 5 and got.stored.tag == "orders", f"Get: {got}")
    g.expect_error("Get of an unknown tag", lambda: seg.Get(pb.SegmentGetRequest(tag="nosuchtag")),
                   SC.NOT_FOUND, None)


def order_numbers(port, http_port):
    orders = g.orders(port)
    ids = g.ids(port)
    before = ids.Next(pb.NextRequest(count=1)).ids[0]
    numbers = list(orders.New(pb.OrderNewRequest(count=3)).order_numbers)
    h.check(len(numbers) == 3 and len(set(numbers)) == 3 and all(len(n) == 21 for n in numbers),
            f"New: {numbers}")
    g.expect_error("Decode without a token", lambda: orders.Decode(pb.OrderDecodeRequest(order_number=numbers[0])),
                   SC.UNAUTHENTICATED, "TOKEN_MISSING")
    d = orders.Decode(pb.OrderDecodeRequest(order_number=numbers[0]), metadata=g.auth())
    h.check(d.source == "snowflake" and d.key_version == 1 and d.id > before, f"Decode: {d}")
    # HTTP decodes the same number to the same ID.
    view = h.request(http_port, f"/v1/order-numbers/{numbers[0]}",
                     headers={"Authorization": f"Bearer {g.TOKEN}"}).json()
    h.check(int(view["id"]) == d.id, f"HTTP decodes {numbers[0]} to {view}")
    wrong = numbers[0][:20] + str((int(numbers[0][20]) + 1) % 10)
    e = g.expect_error("Decode a wrong check digit",
                       lambda: orders.Decode(pb.OrderDecodeRequest(order_number=wrong), metadata=g.auth()),
                       SC.INVALID_ARGUMENT, "BAD_INPUT")
    t = g.trailers(e)
    h.check(t.get("flurry-order-fault") == "check" and t.get("flurry-order-fault-position") == "21",
            f"the fault of a wrong check digit: {t}")
    g.expect_error("Decode garbage", lambda: orders.Decode(pb.OrderDecodeRequest(order_number="x"), metadata=g.auth()),
                   SC.INVALID_ARGUMENT, "BAD_INPUT")
    tagged = list(orders.New(pb.OrderNewRequest(count=2, tag="orders")).order_numbers)
    d = orders.Decode(pb.OrderDecodeRequest(order_number=tagged[0], tag="orders"), metadata=g.auth())
    h.check(d.source == "segment" and d.tag == "orders", f"Decode a tag's number: {d}")
    g.expect_error("New for an unknown tag", lambda: orders.New(pb.OrderNewRequest(count=1, tag="nosuchtag")),
                   SC.NOT_FOUND, None)
    g.expect_error("New(count=0)", lambda: orders.New(pb.OrderNewRequest(count=0)), SC.INVALID_ARGUMENT,
                   "BAD_INPUT", "count")


def reflection_and_health(port):
    stub = g.refl_rpc.ServerReflectionStub(g.channel(port))
    req = g.refl_pb.ServerReflectionRequest(list_services="")
    resp = next(iter(stub.ServerReflectionInfo(iter([req]))))
    names = sorted(s.name for s in resp.list_services_response.service)
    for want in ("flurry.v1.Ids", "flurry.v1.Segments", "flurry.v1.OrderNumbers", "grpc.health.v1.Health",
                 "grpc.reflection.v1alpha.ServerReflection"):
        h.check(want in names, f"reflection lists {names}, not {want}")
    req = g.refl_pb.ServerReflectionRequest(file_containing_symbol="flurry.v1.Ids")
    resp = next(iter(stub.ServerReflectionInfo(iter([req]))))
    from google.protobuf import descriptor_pb2
    files = [descriptor_pb2.FileDescriptorProto.FromString(b)
             for b in resp.file_descriptor_response.file_descriptor_proto]
    h.check(any(f.name == "flurry/v1/flurry.proto" and f.package == "flurry.v1"
                and "StreamRange" in [m.name for s in f.service for m in s.method] for f in files),
            f"reflection's file for flurry.v1.Ids: {[f.name for f in files]}")

    hs = g.health(port)
    for service in ("", "flurry.v1.Ids"):
        st = hs.Check(g.health_pb.HealthCheckRequest(service=service)).status
        h.check(st == g.health_pb.HealthCheckResponse.SERVING, f"health of {service!r}: {st}")
    g.expect_error("health of an unknown service",
                   lambda: hs.Check(g.health_pb.HealthCheckRequest(service="nope")), SC.NOT_FOUND, None,
                   flurry=False)


def metrics(http_port):
    text = h.request(http_port, "/metrics").text
    ok = h.metric(text, "flurry_grpc_requests_total", {"method": "/flurry.v1.Ids/Next", "code": "OK"})
    h.check(ok and ok >= 5, f"flurry_grpc_requests_total for Next OK: {ok}")
    bad = h.metric(text, "flurry_grpc_errors_total", {"method": "/flurry.v1.Ids/Next", "reason": "BAD_INPUT"})
    h.check(bad == 3, f"flurry_grpc_errors_total for Next BAD_INPUT: {bad}")
    n = h.metric(text, "flurry_grpc_request_duration_seconds_count", {"method": "/flurry.v1.Ids/Next"})
    h.check(n and n >= 8, f"flurry_grpc_request_duration_seconds_count for Next: {n}")
    sent = h.metric(text, "flurry_grpc_ids_sent_total", {"method": "/flurry.v1.Ids/StreamRange"})
    h.check(sent == MAX_RANGE, f"flurry_grpc_ids_sent_total for StreamRange: {sent}")


def coarse_layout():
    """A layout whose time unit is coarser than 1 ms cannot carry UUIDv7 or ULID: Next, Stream and
    Decode refuse them with INVALID_ARGUMENT and the codec's reason; other encodings still work."""
    srv, port = g.start("coarse", os.path.join(h.WORK, "coarse"),
                        ["--layout", "time:41@10ms,node:10,seq:12;epoch=2025-01-01Z"])
    ids = g.ids(port)
    for enc, name in ((pb.ENCODING_UUIDV7, "uuidv7"), (pb.ENCODING_ULID, "ulid")):
        for what, call in (
                (f"Next({name}) on 10 ms", lambda: ids.Next(pb.NextRequest(count=1, encoding=enc))),
                (f"Stream({name}) on 10 ms",
                 lambda: list(ids.Stream(iter([pb.NextRequest(count=1, encoding=enc)])))),
                (f"Decode({name}) on 10 ms",
                 lambda: ids.Decode(pb.DecodeRequest(id="01890a5d-ac96-7000-8000-000000000000",
                                                     encoding=enc)))):
            err = g.expect_error(what, call, SC.INVALID_ARGUMENT, "BAD_INPUT", "coarser than 1 ms")
            h.check('field "encoding"' in err.details() and name in err.details(),
                    f"{what}: the message names neither the field nor {name}: {err.details()!r}")
    hexed = ids.Next(pb.NextRequest(count=3, encoding=pb.ENCODING_HEX))
    h.check([int(t, 16) for t in hexed.texts] == list(hexed.ids), f"coarse layout, hex: {hexed}")
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc}")


def throttled():
    """Faster than the layout's rate limit (seq:10: 1,024,000 IDs/s, at most 100 ms ahead): the
    generator throttles, so calls are deferred to its blocking thread and answered from there,
    in order, every ID once."""
    srv, port = g.start("throttled", os.path.join(h.WORK, "throttled"),
                        ["--layout", "time:43@1ms,node:10,seq:10;epoch=2025-01-01Z", "--max-lead-ms", "100"])
    ids = g.ids(port)
    max_batch = ids.Layout(pb.LayoutRequest()).max_batch
    t0 = time.monotonic()
    waits = throttle_waits(srv.port)
    last = 0

    def check_answer(r):  # increasing across all answers: every ID once
        nonlocal last
        h.check(len(r.ids) == max_batch, f"a throttled answer of {len(r.ids)} IDs")
        h.check(r.ids[0] > last and all(a < b for a, b in zip(r.ids, r.ids[1:])), "throttled IDs not increasing")
        last = r.ids[-1]
    for _ in range(15):
        check_answer(ids.Next(pb.NextRequest(count=max_batch)))
    for r in ids.Stream(pb.NextRequest(count=max_batch) for _ in range(15)):
        check_answer(r)
    waits = throttle_waits(srv.port) - waits
    h.log(f"{30 * max_batch} IDs at the rate limit in {time.monotonic() - t0:.1f} s, {waits:.0f} throttle waits")
    h.check(waits > 0, "the generator never throttled: the deferred path was not taken")
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc}")


def settings():
    # grpc_listen = "" (here from the environment): HTTP only.
    env = dict(os.environ, FLURRY_GRPC_LISTEN="")
    off = h.Server("off", os.path.join(h.WORK, "off"), env=env).start()
    h.check("grpc_listen=off" in off.log_text(), "the start line does not say gRPC is off")
    rc, _ = off.stop()
    h.check(rc == 0, f"exit code {rc}")
    # A gRPC port in use stops the start with a message naming the setting.
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    p = subprocess.run([h.FLURRY, "serve", "--listen", f"127.0.0.1:{h.free_port()}", "--data-dir",
                        os.path.join(h.WORK, "taken"), "--grpc-listen", f"127.0.0.1:{port}"],
                       capture_output=True, timeout=60)
    taken.close()
    h.check(p.returncode != 0 and f"grpc_listen 127.0.0.1:{port}".encode() in p.stderr,
            f"a gRPC port in use: {p.returncode} {p.stderr[-500:]!r}")
    p = subprocess.run([h.FLURRY, "serve", "--grpc-listen", "7610", "--print-config"], capture_output=True, timeout=30)
    h.check(p.returncode != 0 and b"grpc_listen" in p.stderr and b"host:port" in p.stderr,
            f"--grpc-listen 7610: {p.returncode} {p.stderr!r}")


def main():
    token = write(os.path.join(h.WORK, "admin-token"), g.TOKEN + "\n")
    keys = write(os.path.join(h.WORK, "order-keys"), f"1 = {g.K1}\n")
    srv, port = g.start("api", os.path.join(h.WORK, "data"),
                        ["--admin-token-file", token, "--order-key-file", keys,
                         "--grpc-max-range", str(MAX_RANGE)])
    snowflake_ids(port, srv.port)
    segment_mode(port)
    order_numbers(port, srv.port)
    reflection_and_health(port)
    metrics(srv.port)
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc} after SIGTERM")

    # Without order keys: UNIMPLEMENTED, as HTTP's 501.
    plain, port = g.start("plain", os.path.join(h.WORK, "plain"))
    g.expect_error("New without keys", lambda: g.orders(port).New(pb.OrderNewRequest(count=1)),
                   SC.UNIMPLEMENTED, None, "FLURRY_ORDER_KEYS")
    g.expect_error("Create without admin_token_file",
                   lambda: g.segments(port).Create(pb.SegmentCreateRequest(tag="t"), metadata=g.auth()),
                   SC.PERMISSION_DENIED, "SCOPE_MISSING")
    plain.stop()
    coarse_layout()
    throttled()
    settings()


h.run_main(main)
