"""Integration tests a-h of docs/clients.md against the real fleet of clients/conformance/fleet.py,
for Client (threads) and, where they apply, AsyncClient (asyncio tasks)."""

import asyncio
import threading
import time
import urllib.error

import pytest

from flurry_client import AsyncClient, Client, FlurryError

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


def test_h_decode_order(fleet):
    # client_python starts the fleet with an order-number key file (CMakeLists.txt); a fleet
    # started without one answers 501, which must come back typed.
    try:
        code = fleet.order_number(0)
    except urllib.error.HTTPError as e:
        assert e.code == 501
        with Client(fleet.endpoints, token=fleet.admin_token) as c:
            with pytest.raises(FlurryError) as err:
                c.decode_order("12345")
            assert (err.value.code, err.value.http_status) == ("UNIMPLEMENTED", 501)
        return
    with Client(fleet.endpoints, token=fleet.admin_token) as c:
        got = c.decode_order(code)
        assert got == fleet.server_decode_order(0, code)
        assert got["source"] == "snowflake" and c.decode(got["id"]).unix_ms == got["unix_ms"]
    with Client(fleet.endpoints) as c:
        assert c.decode_order(code, token=fleet.admin_token)["id"] == got["id"]
        with pytest.raises(FlurryError) as err:
            c.decode_order(code)
        assert (err.value.code, err.value.reason, err.value.http_status) == \
            ("UNAUTHENTICATED", "TOKEN_MISSING", 401)


def test_closed_client_refuses(fleet):
    c = Client(fleet.endpoints)
    c.next()
    c.close()
    with pytest.raises(FlurryError) as e:
        c.next()
    assert e.value.code == "CANCELLED"
