"""Conformance and unit tests: pure functions of the library against clients/conformance/cases.json,
and the buffer and retry rules on a fake clock (no network, no sleeping)."""

import pytest

from flurry_client import (AsyncClient, Client, DecodedOrder, FlurryError, FlurrySettingsError,
                           Layout)
from flurry_client._core import (Buffer, RetryRound, Settings, classify, leader_endpoint,
                                 next_batch_size, parse_decoded_order, parse_error, parse_tso,
                                 retry_wait)


def expected_decode(d):
    out = {"time": d.time, "unix_ms": d.unix_ms, "ticks": d.ticks, "node": d.node, "seq": d.seq}
    if d.clock is not None:
        out["clock"] = d.clock
    out["fields"] = [{"name": k, "value": v} for k, v in d.fields.items()]
    return out


def test_decode_vectors(cases):
    n = 0
    for lay in cases["layouts"]:
        layout = Layout(lay["layout"])
        for v in lay["decode"]:
            got = expected_decode(layout.decode(v["id"]))
            assert got == v["expect"], (lay["name"], v["id"])
            assert list(got) == list(v["expect"]), "fields in order, clock only with a clock field"
            if v["id"] == str(int(v["id"])):
                assert expected_decode(layout.decode(int(v["id"]))) == v["expect"]
            n += 1
    assert n >= 50
    d = Layout(cases["layouts"][0]["layout"]).decode(12)
    assert hash(d) == hash(Layout(cases["layouts"][0]["layout"]).decode("00012"))


def test_decode_errors(cases):
    for lay in cases["layouts"]:
        layout = Layout(lay["layout"])
        for text in lay["decode_errors"]:
            with pytest.raises(FlurryError) as e:
                layout.decode(text)
            assert e.value.code == "INVALID_ARGUMENT", (lay["name"], text)
            if text.isdigit():
                with pytest.raises(FlurryError):
                    layout.decode(int(text))


def test_order_decodes(cases):
    """Order-number answers become a typed DecodedOrder (docs/clients.md, "Order numbers"): the
    snowflake variant with the ID decoded as decode() does, the segment variant with its tag;
    an answer that does not fit is UNKNOWN."""
    layouts = {lay["name"]: Layout(lay["layout"]) for lay in cases["layouts"]}
    sources = set()
    for c in cases["order_decodes"]:
        layout = layouts[c["layout"]]
        asked = []

        def get_layout():
            asked.append(True)
            return layout
        if "expect_error" in c:
            with pytest.raises(FlurryError) as e:
                parse_decoded_order(c["answer"].encode(), get_layout)
            assert e.value.code == c["expect_error"], c["name"]
            continue
        got = parse_decoded_order(c["answer"].encode(), get_layout)
        x = c["expect"]
        assert isinstance(got, DecodedOrder)
        assert (got.order_number, got.key_version, got.source, got.id, got.tag) == \
            (x["order_number"], x["key_version"], x["source"], int(x["id"]), x["tag"]), c["name"]
        if x["decoded"] is None:
            assert got.decoded is None and not asked, c["name"]
        else:
            assert got.decoded is not None and got.decoded.id == got.id
            assert expected_decode(got.decoded) == x["decoded"], c["name"]
            assert got.decoded == layout.decode(got.id)
        sources.add(got.source)
        with pytest.raises(AttributeError):
            got.id = 5  # frozen
    assert sources == {"snowflake", "segment"}
    assert sum("expect_error" in c for c in cases["order_decodes"]) >= 10


def test_error_answers(cases):
    for c in cases["errors"]:
        body = c["body"].encode() if c["body"] is not None else None
        err = parse_error(c["status"], c["retry_after_header"], body, "http://h:1")
        x = c["expect"]
        assert err.code == x["code"], c["name"]
        assert err.reason == x["reason"], c["name"]
        assert err.http_status == c["status"], c["name"]
        assert err.endpoint == "http://h:1"
        if "message" in x:
            assert err.message == x["message"], c["name"]
        if "message_prefix" in x:
            assert err.message.startswith(x["message_prefix"]), c["name"]
        if c["status"]:  # a connection error has no Retry-After
            assert err.retry_after == x["retry_after"], c["name"]
        assert classify(c["status"], err.retry_after is not None) == x["action"], c["name"]


def test_retry_waits(cases):
    for c in cases["retry_waits"]:
        assert retry_wait(c["round"], c["retry_after"], c["u"]) == pytest.approx(c["wait"], abs=1e-9), c


def test_batch_sizes(cases):
    for c in cases["batch_sizes"]:
        size, got = None, []
        for e in c["events"]:
            if e == "first":
                size = None
            size = next_batch_size(size, e == "expired", c["min_batch"], c["max_batch"],
                                   c["server_max_batch"])
            got.append(size)
        assert got == c["expect"], c


def test_tso_answers(cases):
    for c in cases["tso"]["grants"]:
        if "first" in c["expect"]:
            assert parse_tso(c["body"].encode(), c["count"], "e") == int(c["expect"]["first"]), c
        else:
            with pytest.raises(FlurryError) as e:
                parse_tso(c["body"].encode(), c["count"], "e")
            assert e.value.code == c["expect"]["code"], c
    for c in cases["tso"]["leaders"]:
        ep = leader_endpoint(c["location"])
        assert (ep.url if ep else None) == c["leader"], c


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def answers(rr, script):
    """Plays a call: script maps (round, endpoint) to an error or None (success). Returns the
    endpoints tried and the waits, as the clients' loops do, advancing the fake clock."""
    tried, waits = [], []
    while True:
        for i in rr.order():
            rr.check_deadline("e%d" % i)
            tried.append(i)
            err = script(rr.round, i)
            if err is None:
                rr.succeeded(i)
                return tried, waits
            rr.failed(i, err)
        w = rr.end_round()
        waits.append(w)
        rr.clock.now += w


def e503(ra="1", reason="LEASE_EXPIRING"):
    return parse_error(503, ra, b'{"error":{"code":"UNAVAILABLE","reason":"%s","message":"m"}}'
                       % reason.encode(), "x")


def test_retry_after_is_honoured_then_success():
    clock = FakeClock()
    rr = RetryRound(1, 0, clock() + 5.0, clock, lambda: 0.5)
    tried, waits = answers(rr, lambda r, i: e503() if r < 2 else None)
    assert tried == [0, 0, 0]
    assert waits == [pytest.approx(1.1), pytest.approx(1.1)]


def test_wait_past_the_deadline_raises_the_last_answer_at_once():
    clock = FakeClock()
    rr = RetryRound(1, 0, clock() + 0.5, clock, lambda: 0.0)
    with pytest.raises(FlurryError) as e:
        answers(rr, lambda r, i: e503(reason="CLOCK_BEHIND"))
    assert (e.value.code, e.value.reason, e.value.http_status) == ("UNAVAILABLE", "CLOCK_BEHIND", 503)
    assert clock.now == 100.0  # no wait


def test_failover_skips_an_endpoint_for_the_rest_of_the_call():
    clock = FakeClock()
    rr = RetryRound(3, 1, clock() + 60, clock, lambda: 0.0)
    lost = e503(ra=None, reason="LEASE_LOST")
    conn = parse_error(0, None, b"refused", "x")
    script = {1: lost, 2: conn, 0: conn}
    tried, waits = answers(rr, lambda r, i: script[i] if r < 2 else None)
    # round 0: 1 (out for good), 2, 0; rounds 1 and 2 without endpoint 1.
    assert tried == [1, 2, 0, 2, 0, 2]
    assert waits == [pytest.approx(0.1), pytest.approx(0.2)]
    assert rr.next_first == 2


def test_every_endpoint_out_raises_the_last():
    clock = FakeClock()
    rr = RetryRound(2, 0, clock() + 60, clock, lambda: 0.0)
    with pytest.raises(FlurryError) as e:
        answers(rr, lambda r, i: e503(ra=None, reason="TIME_EXHAUSTED%d" % i))
    assert e.value.reason == "TIME_EXHAUSTED1"


def test_fatal_is_never_retried():
    clock = FakeClock()
    rr = RetryRound(2, 0, clock() + 60, clock, lambda: 0.0)
    bad = parse_error(400, "1", b'{"error":{"code":"INVALID_ARGUMENT","message":"no"}}', "x")
    tried = []
    with pytest.raises(FlurryError) as e:
        answers(rr, lambda r, i: tried.append(i) or bad)
    assert tried == [0] and e.value.code == "INVALID_ARGUMENT"


def test_deadline_before_any_answer_is_deadline_exceeded():
    clock = FakeClock()
    rr = RetryRound(2, 0, clock() + 1.0, clock, lambda: 0.0)

    def timing_out(r, i):
        clock.now += 1.0  # the connection timed out at the call's deadline
        return parse_error(0, None, b"timeout: timed out", "x")

    with pytest.raises(FlurryError) as e:
        answers(rr, timing_out)
    assert e.value.code == "DEADLINE_EXCEEDED" and e.value.http_status == 0


def test_buffer_drops_a_stale_batch_whole_and_halves():
    b = Buffer(0.5)
    assert b.refill_due() and b.begin_refill() is False
    b.end_refill(4, [1, 2, 3, 4], 101.0, 100.0)
    assert b.fresh(100.5) and b.take() == 1
    assert not b.fresh(101.0), "the batch's deadline is exclusive"
    assert b.dropped and b.remaining() == 0
    assert b.begin_refill() is True  # the next refill halves
    assert next_batch_size(4, True, 2, 8, 100) == 2


def test_buffer_trigger_is_the_low_water_position():
    b = Buffer(0.5)
    b.begin_refill()
    b.end_refill(8, list(range(8)), 200.0, 100.0)
    # After taking position p, 7 - p are left; a refill is due once fewer than 4 are: p >= 4.
    assert b.trigger == 4
    for want in range(4):
        assert b.pos < b.trigger and b.take() == want
    assert b.pos == b.trigger and not b.refill_due()
    assert b.fresh(100.0) and b.take() == 4 and b.refill_due(), "3 left: the slow path refills"
    b.begin_refill()
    assert b.trigger == 8, "with a refill in flight the whole batch is open"
    b.end_refill(16, list(range(8, 24)), 200.0, 100.0)
    # 3 + 16 left, low water 8: not due before the end of this batch.
    assert b.trigger == 8
    assert b.take_many(5, 100.0) == [5, 6, 7, 8, 9]
    assert b.remaining() == 14


SETTINGS_ERRORS = [
    ({"endpoints": []}, "endpoints"),
    ({"endpoints": "ftp://h:1"}, "endpoints"),
    ({"endpoints": "127.0.0.1:7609"}, "endpoints"),
    ({"endpoints": ["http://h:1", "http://h:99999"]}, "endpoints"),
    ({"min_batch": 600, "max_batch": 500}, "min_batch"),
    ({"min_batch": 0}, "min_batch"),
    ({"max_batch": 1.5}, "max_batch"),
    ({"low_water": 1.0}, "low_water"),
    ({"low_water": 0}, "low_water"),
    ({"segment_prefetch": 1.2}, "segment_prefetch"),
    ({"max_age": 0}, "max_age"),
    ({"max_age": -1}, "max_age"),
    ({"timeout": float("nan")}, "timeout"),
    ({"timeout": "5"}, "timeout"),
    ({"segment_range": 0}, "segment_range"),
    ({"token": ""}, "token"),
    ({"max_agee": 1}, "max_agee"),
]


@pytest.mark.parametrize("kind", [Client, AsyncClient])
def test_settings_are_validated_when_made(kind):
    for kw, name in SETTINGS_ERRORS:
        kw = dict(kw)
        endpoints = kw.pop("endpoints", "http://127.0.0.1:7609")
        with pytest.raises(ValueError) as e:  # the language's error for a bad argument
            kind(endpoints, **kw)
        assert isinstance(e.value, FlurrySettingsError) and isinstance(e.value, FlurryError)
        assert e.value.code == "INVALID_ARGUMENT" and e.value.setting == name, (kw, e.value)
        assert e.value.message.startswith(name + ": "), (kw, e.value)
    s = Settings.make(["http://a:1/", "https://b"], token="t")
    assert [e.url for e in s.endpoints] == ["http://a:1", "https://b"]
    assert (s.endpoints[1].port, s.max_age, s.min_batch, s.max_batch, s.low_water, s.timeout,
            s.segment_range, s.segment_prefetch) == (443, 1.0, 256, 16384, 0.5, 5.0, 1000, 0.1)
