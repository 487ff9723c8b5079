"""tso() of Client and AsyncClient against the fleet's real servers (fleet.py runs them with
--tso: two servers sharing one SQLite registry, so one leads the timestamp oracle and the other
redirects to it). See docs/clients.md, "Timestamps"."""

import asyncio
import threading
import time

from flurry_client import AsyncClient, Client

from test_integration import run_threads


def strictly_increasing(values):
    return all(a < b for a, b in zip(values, values[1:]))


def check_callers(per_caller):
    for values in per_caller:
        assert strictly_increasing(values), "a caller's timestamps must strictly increase"
    total = sum(map(len, per_caller))
    assert len(set().union(*map(set, per_caller))) == total, "a timestamp was handed out twice"


def test_tso_sequential_calls_increase(fleet):
    fleet.tso_leader()  # a test before may have killed the leader: wait out the election
    with Client(fleet.endpoints) as c:
        values = [c.tso() for _ in range(500)]
    assert strictly_increasing(values)
    # Across clients too: a call that begins after another ended gets a larger value.
    with Client(fleet.endpoints[0]) as a, Client(fleet.endpoints[1]) as b:
        values = []
        for _ in range(50):
            values += [a.tso(), b.tso()]
    assert strictly_increasing(values)


def test_tso_concurrent_callers_share_requests(fleet):
    leader = fleet.tso_leader()
    calls = 16 * 300
    # Only the leader's proxy: every request passes it and is counted, none is redirected.
    with Client(fleet.endpoints[leader]) as c:
        per_caller = run_threads(16, lambda k: [c.tso() for _ in range(calls // 16)])
    check_callers(per_caller)
    st = fleet.stats(leader)["tso"]
    assert st["max_in_flight"] == 1, st
    # Batching: callers that arrive while a request is in flight share the next one.
    assert st["requests"] * 2 <= calls, f"{st['requests']} requests for {calls} calls"


def test_tso_async_concurrent_callers_share_requests(fleet):
    leader = fleet.tso_leader()

    async def main():
        async with AsyncClient(fleet.endpoints[leader]) as c:
            async def caller():
                return [await c.tso() for _ in range(50)]
            return await asyncio.gather(*[caller() for _ in range(64)])

    per_caller = asyncio.run(main())
    check_callers(per_caller)
    st = fleet.stats(leader)["tso"]
    assert st["max_in_flight"] == 1, st
    assert st["requests"] * 2 <= 64 * 50, f"{st['requests']} requests for {64 * 50} calls"


def test_tso_callers_arriving_during_a_request_share_the_next(fleet):
    """While one request is held at the proxy, 8 more callers arrive: none takes from the held
    request (sent before they called); the next request carries all 8 (count 8)."""
    leader = fleet.tso_leader()
    with Client(fleet.endpoints[leader]) as c:
        c.tso()  # connected
        fleet.reset(leader)
        fleet.delay(leader, ms=1000, count=1)
        held = []
        t = threading.Thread(target=lambda: held.append(c.tso()))
        t.start()
        time.sleep(0.2)  # the held request is at the proxy now
        late = run_threads(8, lambda k: c.tso())
        t.join()
    assert fleet.stats(leader)["tso"]["requests"] == 2  # the held one, then one for the 8
    assert len(set(late)) == 8 and min(late) > held[0]
    assert max(late) - min(late) == 7  # one grant of 8 consecutive values


def test_tso_follows_the_redirect_and_keeps_the_leader(fleet):
    leader = fleet.tso_leader()
    follower = 1 - leader
    with Client(fleet.endpoints[follower]) as c:
        values = [c.tso() for _ in range(100)]
    assert strictly_increasing(values)
    # One request reached the follower (answered 307); the other 99 went to the leader itself.
    assert fleet.stats(follower)["tso"]["requests"] == 1

    async def main():
        async with AsyncClient(fleet.endpoints[follower]) as a:
            return [await a.tso() for _ in range(100)]

    more = asyncio.run(main())
    assert strictly_increasing(more) and more[0] > values[-1]
    assert fleet.stats(follower)["tso"]["requests"] == 2


def test_tso_after_the_leader_dies_goes_back_to_the_endpoints(fleet):
    leader = fleet.tso_leader()
    follower = 1 - leader
    with Client(fleet.endpoints[follower], timeout=60) as c:
        before = c.tso()  # redirected: the client now asks the leader directly
        fleet.kill(leader)
        after = c.tso()  # the leader refuses connections: the follower, until it leads
    assert after > before
    assert fleet.tso_leader() == follower
    assert fleet.stats(follower)["tso"]["requests"] >= 2
