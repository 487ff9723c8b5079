"""Integration tests a-h of docs/clients.md against the real fleet of clients/conformance/fleet.py,
for Client (threads) and, where they apply, AsyncClient (asyncio tasks)."""

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request

import pytest

from flurry_client import AsyncClient, Client, DecodedOrder, FlurryError

MILLION = 1_000_000


def run_threads(count, fn):
    """Runs fn(k) in `count` threads; returns their results, raising the first error."""
    results, errors = [None] * count, []

    def body(k):
        try:
            results[k] = fn(k)
        except BaseException as e:  # handed to the test
            errors.append(e)

    threads = [threading.Thread(target=body, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def assert_distinct_and_increasing(per_caller, total):
    for ids in per_caller:
        assert all(a < b for a, b in zip(ids, ids[1:])), "a caller's IDs must strictly increase"
    assert len(set().union(*map(set, per_caller))) == total, "an ID was handed out twice"


def check_million(fleet, per_caller, before):
    assert_distinct_and_increasing(per_caller, MILLION)
    for i in range(len(fleet.servers)):
        assert fleet.stats(i)["ids"]["max_in_flight"] <= 1
    grew = fleet.id_requests_ok() - before
    assert 0 < grew <= 100, f"{grew} ID requests for 10^6 IDs"


# a. 10^6 IDs by 32 concurrent callers, one request in flight, few requests in all.
def test_a_million_ids_from_32_threads(fleet):
    before = fleet.id_requests_ok()
    with Client(fleet.endpoints) as c:
        share = MILLION // 32
        per_caller = run_threads(32, lambda k: [c.next() for _ in range(share)])
    check_million(fleet, per_caller, before)


# The path a free-threaded Python takes (the lock on every next()); 10^5 IDs, as it is slow
# under the GIL.
def test_a_locked_path_from_32_threads(fleet):
    with Client(fleet.endpoints) as c:
        c._lockless = False
        per_caller = run_threads(32, lambda k: [c.next() for _ in range(MILLION // 320)])
    assert_distinct_and_increasing(per_caller, MILLION // 10)


def test_a_million_ids_from_32_tasks(fleet):
    before = fleet.id_requests_ok()

    async def main():
        async with AsyncClient(fleet.endpoints) as c:
            async def caller():
                out = []
                for _ in range(MILLION // 32):
                    out.append(await c.next())
                    if len(out) % 1000 == 0:
                        await asyncio.sleep(0)  # let the other tasks in
                return out
            return await asyncio.gather(*(caller() for _ in range(32)))

    check_million(fleet, asyncio.run(main()), before)


# b. An ID handed out is never older than max_age by its own timestamp, even after idling.
def test_b_max_age_after_idle(fleet):
    with Client(fleet.endpoints[0], max_age=0.2) as c:
        c.next()
        for _ in range(3):
            time.sleep(0.4)  # the idle the test is about
            requests = fleet.stats(0)["ids"]["requests"]
            wall_ms = time.time() * 1000
            ids = [c.next() for _ in range(50)] + c.next(20)
            for id in ids:
                assert c.decode(id).unix_ms >= wall_ms - 200 - 1
            assert fleet.stats(0)["ids"]["requests"] > requests, "a stale buffer must be refilled"


def test_b_async_max_age_after_idle(fleet):
    async def main():
        async with AsyncClient(fleet.endpoints[0], max_age=0.2) as c:
            await c.next()
            for _ in range(3):
                await asyncio.sleep(0.4)  # the idle the test is about
                requests = fleet.stats(0)["ids"]["requests"]
                wall_ms = time.time() * 1000
                ids = [await c.next() for _ in range(50)] + await c.next(20)
                for id in ids:
                    assert (await c.decode(id)).unix_ms >= wall_ms - 200 - 1
                assert fleet.stats(0)["ids"]["requests"] > requests

    asyncio.run(main())


# The server's clock steps back while the client takes IDs: by 2 s (the server waits about 1 s,
# its max_lead allowing the rest) and then to 6 s behind (a wait longer than max_wait_ms: the
# server answers 503 CLOCK_BEHIND with Retry-After, and the client retries until the server can
# wait it out). No call fails, no ID comes twice, and the IDs keep increasing across both steps.
def test_server_clock_steps_back(fleet):
    waits, fails = fleet.rollbacks(0, "wait"), fleet.rollbacks(0, "fail")
    ids = []
    try:
        with Client(fleet.endpoints[0], max_batch=256, timeout=15) as c:
            ids += [c.next() for _ in range(1000)]
            for offset in (-2, -6):
                fleet.clock(0, offset)
                until = time.monotonic() + 1.5
                while time.monotonic() < until:  # refills keep going to the stepped server
                    ids.append(c.next())
                ids += [c.next() for _ in range(2000)]
    finally:
        fleet.clock(0, 0)
    assert_distinct_and_increasing([ids], len(ids))
    assert fleet.rollbacks(0, "wait") > waits, "the 2 s step was not seen as a rollback"
    assert fleet.rollbacks(0, "fail") > fails, "the 6 s step was not refused (CLOCK_BEHIND)"


# c. 503 with Retry-After is retried after the time asked; a short timeout fails fast.
def test_c_retry_after_then_success(fleet):
    with Client(fleet.endpoints[0]) as c:
        c.layout()
        fleet.fault(0, 503, count=2, retry_after=1, reason="LEASE_EXPIRING")
        t0 = time.monotonic()
        c.next()
        took = time.monotonic() - t0
    assert 2.0 <= took < 5.0
    assert fleet.stats(0)["faulted"] == 2


def test_c_short_timeout_fails_fast(fleet):
    with Client(fleet.endpoints[0], timeout=0.5) as c:
        c.layout()
        fleet.fault(0, 503, count=2, retry_after=1, reason="LEASE_EXPIRING")
        t0 = time.monotonic()
        with pytest.raises(FlurryError) as e:
            c.next()
        took = time.monotonic() - t0
    assert took < 0.45, "the wait would pass the deadline: the answer comes at once"
    assert (e.value.code, e.value.reason, e.value.http_status, e.value.retry_after) == \
        ("UNAVAILABLE", "LEASE_EXPIRING", 503, 1)
    assert e.value.message == "injected by fleet.py" and e.value.endpoint == fleet.endpoints[0]


def test_c_async_retry_after(fleet):
    async def main():
        async with AsyncClient(fleet.endpoints[0]) as c:
            await c.layout()
            fleet.fault(0, 503, count=2, retry_after=1, reason="LEASE_EXPIRING")
            t0 = time.monotonic()
            await c.next()
            took = time.monotonic() - t0
            assert 2.0 <= took < 5.0
            assert fleet.stats(0)["faulted"] == 2
        async with AsyncClient(fleet.endpoints[0], timeout=0.5) as c:
            await c.layout()
            fleet.fault(0, 503, count=2, retry_after=1, reason="LEASE_EXPIRING")
            t0 = time.monotonic()
            with pytest.raises(FlurryError) as e:
                await c.next()
            assert time.monotonic() - t0 < 0.45
            assert (e.value.code, e.value.reason) == ("UNAVAILABLE", "LEASE_EXPIRING")

    asyncio.run(main())


# d. A 4xx is raised at once with the server's reason, after exactly one request.
def test_d_4xx_never_retried(fleet):
    with Client(fleet.endpoints) as c:
        with pytest.raises(FlurryError) as e:
            c.segment("no-such-tag").next()
        assert (e.value.code, e.value.http_status) == ("NOT_FOUND", 404)
        assert fleet.stats(0)["segments"]["requests"] + fleet.stats(1)["segments"]["requests"] == 1
        c.layout()
        fleet.fault(0, 400, count=5, code="INVALID_ARGUMENT", reason="BAD_THING")
        with pytest.raises(FlurryError) as e:
            c.next()
        assert (e.value.code, e.value.reason, e.value.http_status) == ("INVALID_ARGUMENT", "BAD_THING", 400)
        assert fleet.stats(0)["ids"]["requests"] == 1 and fleet.stats(1)["ids"]["requests"] == 0


def test_d_async_4xx_never_retried(fleet):
    async def main():
        async with AsyncClient(fleet.endpoints) as c:
            with pytest.raises(FlurryError) as e:
                await c.segment("no-such-tag").next()
            assert (e.value.code, e.value.http_status) == ("NOT_FOUND", 404)
            await c.layout()
            fleet.fault(0, 400, count=5, code="INVALID_ARGUMENT", reason="BAD_THING")
            with pytest.raises(FlurryError) as e:
                await c.next()
            assert (e.value.code, e.value.reason) == ("INVALID_ARGUMENT", "BAD_THING")

    asyncio.run(main())
    assert fleet.stats(0)["segments"]["requests"] + fleet.stats(1)["segments"]["requests"] == 1
    assert fleet.stats(0)["ids"]["requests"] == 1 and fleet.stats(1)["ids"]["requests"] == 0


# e. Failover to the second server when the first is killed, no ID twice.
def test_e_failover(fleet):
    node1 = fleet.node(1)
    with Client(fleet.endpoints) as c:
        ids = [c.next() for _ in range(5000)]
        assert {c.decode(i).node for i in ids} == {fleet.node(0)}
        fleet.kill(0)
        from_1 = 0
        for _ in range(200_000):
            id = c.next()
            ids.append(id)
            if c.decode(id).node == node1:
                from_1 += 1
                if from_1 == 1000:
                    break
    assert from_1 == 1000, "no IDs from server 1 after server 0 was killed"
    assert len(set(ids)) == len(ids)


def test_e_async_failover(fleet):
    node1 = fleet.node(1)

    async def main():
        async with AsyncClient(fleet.endpoints) as c:
            ids = [await c.next() for _ in range(5000)]
            fleet.kill(0)
            from_1 = 0
            for _ in range(200_000):
                id = await c.next()
                ids.append(id)
                if (await c.decode(id)).node == node1:
                    from_1 += 1
                    if from_1 == 1000:
                        break
            return ids, from_1

    ids, from_1 = asyncio.run(main())
    assert from_1 == 1000
    assert len(set(ids)) == len(ids)


# f. A server killed while a refill is in flight: the waiting caller gets an ID from the other.
def test_f_killed_during_refill(fleet):
    node1 = fleet.node(1)
    with Client(fleet.endpoints) as c:
        c.layout()
        fleet.delay(0, 3000, count=1)
        killer = threading.Timer(0.3, fleet.kill, args=(0,))
        killer.start()
        t0 = time.monotonic()
        id = c.next()
        took = time.monotonic() - t0
        killer.join()
        assert c.decode(id).node == node1
    assert 0.3 <= took < 2.0, took
    assert fleet.stats(0)["reset"] >= 1


def test_f_async_killed_during_refill(fleet):
    node1 = fleet.node(1)

    async def main():
        async with AsyncClient(fleet.endpoints) as c:
            await c.layout()
            fleet.delay(0, 3000, count=1)
            loop = asyncio.get_running_loop()
            killer = loop.run_in_executor(None, lambda: (time.sleep(0.3), fleet.kill(0)))
            t0 = time.monotonic()
            id = await c.next()
            took = time.monotonic() - t0
            await killer
            assert (await c.decode(id)).node == node1
            return took

    took = asyncio.run(main())
    assert 0.3 <= took < 2.0, took


# g. Segment numbers: once each, in order, across range refills; one range request in flight.
def test_g_segments_from_8_threads(fleet):
    with Client(fleet.endpoints[0], segment_range=100) as c:
        seg = c.segment("orders")
        assert c.segment("orders") is seg
        per_caller = run_threads(8, lambda k: [seg.next() for _ in range(625)])
    assert_distinct_and_increasing(per_caller, 5000)
    st = fleet.stats(0)["segments"]
    assert st["requests"] >= 50 and st["max_in_flight"] <= 1, st


def test_g_segments_from_32_tasks(fleet):
    async def main():
        async with AsyncClient(fleet.endpoints[0], segment_range=100) as c:
            seg = c.segment("orders")

            async def caller():
                out = []
                for _ in range(160):
                    out.append(await seg.next())
                    await asyncio.sleep(0)
                return out
            return await asyncio.gather(*(caller() for _ in range(32)))

    assert_distinct_and_increasing(asyncio.run(main()), 5120)
    st = fleet.stats(0)["segments"]
    assert st["requests"] >= 50 and st["max_in_flight"] <= 1, st


# h. Decode against the running server's layout equals the server's own decode.
def test_h_decode_matches_the_server(fleet):
    with Client(fleet.endpoints) as c:
        ids = [c.next() for _ in range(10)] + c.next(10)
        for id in ids:
            mine, theirs = c.decode(id), fleet.server_decode(0, id)
            assert (mine.time, mine.unix_ms, mine.ticks, mine.node, mine.seq) == \
                (theirs["time"], theirs["unix_ms"], theirs["ticks"], theirs["node"], theirs["seq"])
            assert dict(mine.fields) == theirs["fields"]
            assert c.decode(str(id)) == mine
        with pytest.raises(FlurryError) as e:
            c.decode(1 << 63)
        assert e.value.code == "INVALID_ARGUMENT"


def order_number(fleet, tag=None):
    url = f"{fleet.servers[0]}/v1/order-numbers?count=1" + (f"&tag={tag}" if tag else "")
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())["order_numbers"][0]


def test_h_decode_order(fleet):
    # client_python starts the fleet with an order-number key file (CMakeLists.txt), so
    # decode_order meets a real decode of both variants.
    code = order_number(fleet)
    with Client(fleet.endpoints, token=fleet.admin_token) as c:
        got = c.decode_order(code)
        theirs = fleet.server_decode_order(0, code)
        assert isinstance(got, DecodedOrder)
        assert (got.order_number, got.key_version, got.source, got.id, got.tag) == \
            (theirs["order_number"], theirs["key_version"], "snowflake", int(theirs["id"]), None)
        d = got.decoded
        assert d == c.decode(got.id)
        assert (d.time, d.unix_ms, d.ticks, d.node, d.seq, dict(d.fields)) == \
            (theirs["time"], theirs["unix_ms"], theirs["ticks"], theirs["node"], theirs["seq"],
             theirs["fields"])
        # The tag variant: a segment tag's number, decoded with ?tag=.
        seg_code = order_number(fleet, "orders")
        seg = c.decode_order(seg_code, tag="orders")
        theirs = fleet.server_decode_order(0, seg_code + "?tag=orders")
        assert (seg.order_number, seg.source, seg.tag, seg.id, seg.decoded) == \
            (seg_code, "segment", "orders", int(theirs["id"]), None)
        # A mistyped number is the server's 400, raised at once.
        bad = code[:-1] + str((int(code[-1]) + 1) % 10)
        with pytest.raises(FlurryError) as err:
            c.decode_order(bad)
        assert (err.value.code, err.value.http_status) == ("INVALID_ARGUMENT", 400)
    with Client(fleet.endpoints) as c:
        assert c.decode_order(code, token=fleet.admin_token).id == got.id
        with pytest.raises(FlurryError) as err:
            c.decode_order(code)
        assert (err.value.code, err.value.reason, err.value.http_status) == \
            ("UNAUTHENTICATED", "TOKEN_MISSING", 401)


def test_h_async_decode_order(fleet):
    code, seg_code = order_number(fleet), order_number(fleet, "orders")

    async def main():
        async with AsyncClient(fleet.endpoints, token=fleet.admin_token) as c:
            got = await c.decode_order(code)
            assert got.source == "snowflake" and got.tag is None
            assert got.decoded == await c.decode(got.id)
            seg = await c.decode_order(seg_code, tag="orders")
            assert (seg.source, seg.tag, seg.decoded) == ("segment", "orders", None)
            return got
    got = asyncio.run(main())
    assert got.id == int(fleet.server_decode_order(0, code)["id"])


def assert_closed(e):
    assert (e.code, e.message, e.reason, e.http_status) == ("CANCELLED", "the client is closed", "", 0)


def test_closed_client_refuses(fleet):
    c = Client(fleet.endpoints, token=fleet.admin_token)
    c.next()
    c.segment("orders").next()
    c.decode(1)  # the layout is read
    c.close()
    c.close()  # idempotent
    seg = c.segment("orders")
    for call in (c.next, lambda: c.next(10), seg.next, lambda: c.decode(1),
                 lambda: c.decode_order("12345")):
        with pytest.raises(FlurryError) as e:
            call()
        assert_closed(e.value)


HELD_MS = 8000  # the servers hold each answer this long; a call closed meanwhile ends long before


def test_close_ends_the_calls_waiting(fleet):
    """Calls waiting for an answer, for the refill of another caller, for a range and between
    retry rounds when close() runs all end with CANCELLED, none after the held answer."""
    c = Client(fleet.endpoints, token=fleet.admin_token, timeout=60)
    c.decode(1)  # the layout is read before the servers are held
    code = order_number(fleet)
    for i in range(len(fleet.servers)):
        fleet.delay(i, ms=HELD_MS, count=100)
    calls = [c.next, c.next, lambda: c.next(100), c.segment("orders").next, lambda: c.decode_order(code)]
    errors = [None] * len(calls)
    ended = [0.0] * len(calls)

    def run(k):
        try:
            calls[k]()
        except FlurryError as e:
            errors[k] = e
        ended[k] = time.monotonic()
    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(calls))]
    for t in threads:
        t.start()
    time.sleep(1.0)  # every call is now waiting on a held answer or on the refill
    closed_at = time.monotonic()
    c.close()
    for t in threads:
        t.join()
    for k in range(len(calls)):
        assert errors[k] is not None, f"call {k} succeeded after close()"
        assert_closed(errors[k])
        assert ended[k] - closed_at < HELD_MS / 1000 - 2, f"call {k} waited for the held answer"
    fleet.restore()
    # Between retry rounds: the server asks for 30 s, the call's timeout allows it.
    fleet.fault(0, status=503, retry_after=30, count=100)
    fleet.fault(1, status=503, retry_after=30, count=100)
    c = Client(fleet.endpoints, timeout=60)
    box = []
    t = threading.Thread(target=lambda: box.append(pytest.raises(FlurryError, c.next)))
    t.start()
    time.sleep(1.0)
    closed_at = time.monotonic()
    c.close()
    t.join()
    assert time.monotonic() - closed_at < 10
    assert_closed(box[0].value)


def test_async_close_ends_the_calls_waiting(fleet):
    code = order_number(fleet)

    async def main():
        c = AsyncClient(fleet.endpoints, token=fleet.admin_token, timeout=60)
        await c.decode(1)
        for i in range(len(fleet.servers)):
            fleet.delay(i, ms=HELD_MS, count=100)
        seg = c.segment("orders")
        calls = [c.next(), c.next(), c.next(100), seg.next(), c.decode_order(code)]
        tasks = [asyncio.ensure_future(x) for x in calls]
        await asyncio.sleep(1.0)
        closed_at = time.monotonic()
        await c.close()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        took = time.monotonic() - closed_at
        for k, r in enumerate(results):
            assert isinstance(r, FlurryError), (k, r)
            assert_closed(r)
        assert took < HELD_MS / 1000 - 2, "a call waited for the held answer"
        await c.close()
        for call in (c.next(), c.next(10), seg.next(), c.decode(1), c.decode_order(code)):
            with pytest.raises(FlurryError) as e:
                await call
            assert_closed(e.value)
        fleet.restore()
        fleet.fault(0, status=503, retry_after=30, count=100)
        fleet.fault(1, status=503, retry_after=30, count=100)
        c = AsyncClient(fleet.endpoints, timeout=60)
        waiting = asyncio.ensure_future(c.next(5))  # its own request: sleeps between rounds
        await asyncio.sleep(1.0)
        closed_at = time.monotonic()
        await c.close()
        with pytest.raises(FlurryError) as e:
            await waiting
        assert_closed(e.value)
        assert time.monotonic() - closed_at < 10
    asyncio.run(main())
