"""Forked clients never repeat an ID (docs/clients.md, "Fork"): a client that holds IDs or a
segment range when the process forks must not hand the same numbers out in both processes, as a
pre-forking server (gunicorn --preload, uWSGI, multiprocessing) would make it do. Against the real
fleet of clients/conformance/fleet.py; every number from the parent and its children is
collected and checked for duplicates."""

import asyncio
import json
import multiprocessing
import os
import signal
import threading
import time
import traceback

from flurry_client import AsyncClient, Client

# max_age is long so that the buffer copied at fork is still fresh whatever the machine's load:
# these tests are about the copy, not about age.
SETTINGS = {"max_age": 60.0}
TAG = "orders"  # created by fleet.py (client_python's TAGS)


def in_child(path, work):
    """Forks; the child runs work() and writes its JSON result (or its error) to `path`, then
    leaves with os._exit (no pytest machinery runs in it). Returns the child's PID."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            out = {"result": work()}
        except BaseException:
            out, code = {"error": traceback.format_exc()}, 1
        try:
            with open(path, "w") as f:
                json.dump(out, f)
        finally:
            os._exit(code)
    return pid


def child_result(pid, path, limit=60.0):
    """Waits for the child (killing it after `limit` seconds: a hung child means a deadlock);
    returns what it wrote."""
    until = time.monotonic() + limit
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > until:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"the child did not finish within {limit} s (a deadlock?)")
        time.sleep(0.02)
    with open(path) as f:
        out = json.load(f)
    assert "error" not in out, "the child failed:\n" + out["error"]
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    return out["result"]


def assert_no_duplicates(*groups):
    every = [n for g in groups for n in g]
    dups = len(every) - len(set(every))
    assert dups == 0, f"{dups} numbers were handed out twice across the processes"


def take(c, ids, numbers):
    seg = c.segment(TAG)
    return [c.next() for _ in range(ids)], [seg.next() for _ in range(numbers)]


# The live probe's case: one ID taken (the buffer and a segment range are now held), a fork, then
# parent and child each take 20,000 IDs and 3,000 segment numbers.
def test_fork_child_and_parent_share_no_id(fleet, tmp_path):
    with Client(fleet.endpoints, **SETTINGS) as c:
        c.next()
        c.segment(TAG).next()
        path = str(tmp_path / "child.json")
        pid = in_child(path, lambda: take(c, 20_000, 3_000))
        mine = take(c, 20_000, 3_000)
        theirs = child_result(pid, path)
    assert len(theirs[0]) == 20_000 and len(theirs[1]) == 3_000
    assert_no_duplicates(mine[0], theirs[0])
    assert_no_duplicates(mine[1], theirs[1])


# A fork while the client is busy: a refill in flight (held 3 s at the proxy), a range fetch in
# flight, and another thread holding the client's lock at the moment of the fork. The child has
# none of those threads: it must neither wait for their refill nor find their lock held.
def test_fork_during_a_refill_with_the_lock_held(fleet, tmp_path):
    with Client(fleet.endpoints[0], timeout=10, **SETTINGS) as c:
        seg = c.segment(TAG)
        first = [c.next()] + [seg.next()]
        fleet.delay(0, 3000, count=1)
        first += [c.next() for _ in range(200)]  # past low water: the refill starts, held
        first += [seg.next() for _ in range(200)]  # past segment_prefetch: a fetch starts
        until = time.monotonic() + 5
        while fleet.stats(0)["ids"]["in_flight"] == 0 and time.monotonic() < until:
            time.sleep(0.01)
        assert c._refill is not None, "no refill in flight at the fork"
        held, release = threading.Event(), threading.Event()

        def holder():
            with c._lock:
                held.set()
                release.wait()

        t = threading.Thread(target=holder)
        t.start()
        held.wait()
        path = str(tmp_path / "child.json")
        pid = in_child(path, lambda: take(c, 20_000, 3_000))
        release.set()
        t.join()
        mine = take(c, 20_000, 3_000)
        theirs = child_result(pid, path)
    assert_no_duplicates(first + mine[0], theirs[0])
    assert_no_duplicates(first + mine[1], theirs[1])


# multiprocessing with the fork start method: a pool of 4 workers inherits a client that holds
# IDs and a range (as a module-level client in a --preload'ed app would).
_CLIENT = None


def _worker(_):
    return take(_CLIENT, 5_000, 1_000)


def test_multiprocessing_fork_pool(fleet):
    global _CLIENT
    with Client(fleet.endpoints, **SETTINGS) as c:
        _CLIENT = c
        try:
            c.next()
            c.segment(TAG).next()
            with multiprocessing.get_context("fork").Pool(4) as pool:
                results = pool.map_async(_worker, range(4)).get(120)
            results.append(take(c, 5_000, 1_000))
        finally:
            _CLIENT = None
    assert len(results) == 5
    assert_no_duplicates(*(r[0] for r in results))
    assert_no_duplicates(*(r[1] for r in results))


# AsyncClient: the parent takes an ID and a segment number in one event loop (the preload), forks
# two children, and each child takes its numbers in an event loop of its own. The parent goes on
# with what it holds (50 of each, no request).
def test_async_client_forked_children_share_no_id(fleet, tmp_path):
    c = AsyncClient(fleet.endpoints, **SETTINGS)

    async def take_async(ids, numbers):
        seg = c.segment(TAG)
        return [await c.next() for _ in range(ids)], [await seg.next() for _ in range(numbers)]

    first = asyncio.run(take_async(1, 1))
    paths = [str(tmp_path / f"child{k}.json") for k in range(2)]
    pids = [in_child(p, lambda: asyncio.run(take_async(20_000, 3_000))) for p in paths]
    mine = asyncio.run(take_async(50, 50))
    children = [child_result(pid, p) for pid, p in zip(pids, paths)]
    assert_no_duplicates(first[0] + mine[0], *(r[0] for r in children))
    assert_no_duplicates(first[1] + mine[1], *(r[1] for r in children))
