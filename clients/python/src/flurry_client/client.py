"""The thread-based client: Client and its Segment handles."""

from __future__ import annotations

import collections
import http.client
import itertools
import json
import os
import random
import socket
import ssl
import sys
import threading
import time
import urllib.parse
import weakref
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple, Union, overload

from ._core import (TSO_MAX_REDIRECTS, Buffer, Decoded, DecodedOrder, Endpoint, FlurryError, Layout,
                    Redirect, RetryRound, Settings, invalid, leader_endpoint, next_batch_size,
                    parse_decoded_order, parse_error, parse_ids, parse_tso, retry_wait)

_INF = float("inf")

# Under CPython's GIL the hot path of Client.next takes no lock (see Client._publish_locked); a
# free-threaded build (sys._is_gil_enabled() False) keeps the lock on every call.
_GIL = getattr(sys, "_is_gil_enabled", lambda: True)()
_NO_IDS = (iter(()), -_INF)


def _closed_error() -> FlurryError:
    return FlurryError("CANCELLED", "the client is closed")


# Fork (docs/clients.md, "Fork"): a child process gets a copy of every client, with the IDs and
# segment ranges the parent holds, the parent's locks (maybe held by a thread the child does not
# have) and its keep-alive sockets. After os.fork() (multiprocessing's fork start method and
# pre-forking servers call it too) every live client in the child drops all of that, so the
# child never hands out a number the parent may hand out; its first call refills. The hot path
# pays nothing for it. A fork that bypasses Python's fork hooks (a C extension calling fork()
# without PyOS_AfterFork_Child) is not seen.
_live: "weakref.WeakSet[Client]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for client in list(_live):
        client._after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


class _Pool:
    """Idle keep-alive connections per endpoint; a connection serves one request at a time."""

    def __init__(self, endpoints: Sequence[Endpoint]) -> None:
        self.endpoints = list(endpoints)  # the configured ones, then leaders tso() was sent to
        self.lock = threading.Lock()
        self.idle: List[List[http.client.HTTPConnection]] = [[] for _ in endpoints]
        self.busy: set = set()  # connections a request is using (close() shuts them down)
        self.closed = False

    def get(self, i: int, timeout: float) -> Tuple[http.client.HTTPConnection, bool]:
        with self.lock:
            if self.idle[i]:
                conn = self.idle[i].pop()
                conn.timeout = timeout
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
                self.busy.add(conn)
                return conn, True
        ep = self.endpoints[i]
        if ep.https:
            conn = http.client.HTTPSConnection(ep.host, ep.port, timeout=timeout,
                                               context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(ep.host, ep.port, timeout=timeout)
        with self.lock:
            self.busy.add(conn)
        return conn, False

    def index(self, ep: Endpoint) -> int:
        """The index of a timestamp oracle leader's endpoint, added on first sight."""
        with self.lock:
            for i, known in enumerate(self.endpoints):
                if known == ep:
                    return i
            self.endpoints.append(ep)
            self.idle.append([])
            return len(self.endpoints) - 1

    def put(self, i: int, conn: http.client.HTTPConnection) -> None:
        with self.lock:
            self.busy.discard(conn)
            if not self.closed:
                self.idle[i].append(conn)
                return
        conn.close()

    def drop(self, conn: http.client.HTTPConnection) -> None:
        """A connection that is done with and closed (not kept)."""
        conn.close()
        with self.lock:
            self.busy.discard(conn)

    def close(self) -> None:
        """Closes the idle connections and shuts down the busy ones, so a request blocked on one
        fails at once (its caller then raises CANCELLED)."""
        with self.lock:
            self.closed = True
            conns = [c for lst in self.idle for c in lst]
            self.idle = [[] for _ in self.endpoints]
            busy = list(self.busy)
        for c in conns:
            c.close()
        for c in busy:
            sock = c.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # already closed

    def after_fork(self) -> None:
        """In a forked child: a new lock, and the idle connections closed (the child's copies of
        their sockets; the parent's stay open, as closing a socket does not shut it down)."""
        self.lock = threading.Lock()
        conns = [c for lst in self.idle for c in lst]
        self.idle = [[] for _ in self.endpoints]
        self.busy = set()  # their threads are not in the child
        for c in conns:
            c.close()


class _Refill:
    """One refill in flight; waiters keep a reference to learn how it ended."""
    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = False
        self.error: Optional[FlurryError] = None


class _TsoWaiter:
    """One tso() caller: queued until a request takes it, then given its value or error."""
    __slots__ = ("taken", "done", "value", "error")

    def __init__(self) -> None:
        self.taken = False
        self.done = False
        self.value = 0
        self.error: Optional[FlurryError] = None


class Client:
    """A flurry client for threads. Thread-safe: share one per process.

    ``Client(endpoints, *, token=None, max_age=1.0, min_batch=256, max_batch=16384,
    low_water=0.5, timeout=5.0, segment_range=1000, segment_prefetch=0.1)``; durations in
    seconds. A bad setting raises FlurrySettingsError (a ValueError and a FlurryError, code
    INVALID_ARGUMENT) naming it. ``clock``,
    ``sleep`` and ``rand`` replace time.monotonic, the wait between retry rounds and
    random.random (for tests). Every call raises FlurryError on failure (see docs/clients.md)."""

    def __init__(self, endpoints: Union[str, Sequence[str]], *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Optional[Callable[[float], Any]] = None,
                 rand: Callable[[], float] = random.random, **settings: Any) -> None:
        self.settings = Settings.make(endpoints, **settings)
        s = self.settings
        self._clock = clock
        self._closed_event = threading.Event()
        self._own_sleep = sleep is None
        self._sleep = sleep or self._closed_event.wait  # close() ends a wait between rounds
        self._rand = rand
        self._pool = _Pool(s.endpoints)
        self._endpoint = 0  # where the next request starts: the endpoint that last answered
        self._layout: Optional[Layout] = None
        self._layout_lock = threading.Lock()
        self._headers = {"Authorization": f"Bearer {s.token}"} if s.token else {}
        self._segments: Dict[str, Segment] = {}
        self._closed = False
        # The buffer (see Buffer) under one lock; waiters wait on its condition.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._buf = Buffer(s.low_water)
        self._refill: Optional[_Refill] = None  # the one in flight
        # The lock-free hot path: (iterator over buf.ids[buf.pos:buf.trigger], buf.expires),
        # swapped as a whole; _hot_trigger is where that iterator stops (under the lock).
        self._hot: Tuple[Any, float] = _NO_IDS
        self._hot_trigger = 0
        self._lockless = _GIL
        # tso(): callers not yet in a request, whether one is in flight, and the leader that
        # last answered (an index of _pool.endpoints; None: ask the configured endpoints).
        self._tso_cond = threading.Condition()
        self._tso_queue: Deque[_TsoWaiter] = collections.deque()
        self._tso_busy = False
        self._tso_leader: Optional[int] = None
        _live.add(self)

    # -- public API -----------------------------------------------------------------------------

    @overload
    def next(self) -> int: ...

    @overload
    def next(self, n: int) -> List[int]: ...

    def next(self, n: Optional[int] = None) -> Union[int, List[int]]:
        """``next()``: one ID (int), from the buffer when it holds a fresh one, else after waiting
        (until ``timeout``) for the refill in flight. ``next(n)``: a list of n increasing IDs, from
        the buffer when it holds n fresh ones, else by a request of its own."""
        if n is not None:
            return self._next_many(n)
        if self._lockless:
            ids, expires = self._hot
            if self._clock() < expires:
                id = next(ids, None)
                if id is not None:
                    return id
            return self._next_slow()
        with self._lock:
            buf = self._buf
            pos = buf.pos
            if pos < buf.trigger and self._clock() < buf.expires:
                buf.pos = pos + 1
                return buf.ids[pos]
        return self._next_slow()

    def tso(self) -> int:
        """A timestamp from the cluster's timestamp oracle (GET /v1/tso), strictly greater than
        every timestamp any client got before this call began. Concurrent callers share one
        request in flight; a caller that arrives while one is in flight waits for the next,
        which carries every caller waiting then (at most ``max_batch`` of them). Nothing is
        prefetched or kept between calls. Follows a follower's 307 to the leader and keeps
        asking it until it fails. Raises FlurryError (``timeout`` covers the wait and the
        request; NOT_FOUND ``TSO_OFF`` when the server does not serve the oracle)."""
        if self._closed:
            raise _closed_error()
        deadline = self._clock() + self.settings.timeout
        me = _TsoWaiter()
        cond = self._tso_cond
        with cond:
            self._tso_queue.append(me)
            while not me.done:
                if self._closed:
                    if not me.taken:
                        self._tso_queue.remove(me)
                    raise _closed_error()
                if not self._tso_busy:
                    self._tso_send_locked()  # the queue holds at least this caller's entry or
                    continue                 # it is done
                left = deadline - self._clock()
                if left <= 0:
                    if not me.taken:
                        self._tso_queue.remove(me)  # a value granted later is skipped, not reused
                    raise FlurryError("DEADLINE_EXCEEDED", "no timestamp within the timeout: "
                                      "the tso request in flight has not answered")
                cond.wait(left)
        if me.error is not None:
            raise me.error
        return me.value

    def _tso_send_locked(self) -> None:
        """Sends one request for the callers queued now (up to max_batch), with the lock
        released during it, and hands each its timestamp in the order they called."""
        batch = []
        while self._tso_queue and len(batch) < self.settings.max_batch:
            w = self._tso_queue.popleft()
            w.taken = True
            batch.append(w)
        self._tso_busy = True
        self._tso_cond.release()
        first, error = 0, None
        try:
            first = self._tso_fetch(len(batch), self._clock() + self.settings.timeout)
        except FlurryError as e:
            error = e
        except Exception as e:  # a bug: hand it to the callers, typed
            error = FlurryError("INTERNAL", f"tso request failed: {e!r}")
        finally:
            self._tso_cond.acquire()
        for k, w in enumerate(batch):
            w.value, w.error, w.done = first + k, error, True
        self._tso_busy = False
        self._tso_cond.notify_all()

    def _tso_fetch(self, count: int, deadline: float) -> int:
        """GET /v1/tso?count=`count` to the leader last seen, else to the configured endpoints
        (with the contract's retries), following 307s to the leader; the first timestamp. A
        leader that failed in this call is asked again only after the wait between retry rounds
        (the others may redirect to it until its lease has run out)."""
        path = f"/v1/tso?count={count}"
        last: Optional[FlurryError] = None
        failed: Dict[int, FlurryError] = {}  # leaders that failed in this call, with the error
        hops = rounds = 0
        while True:
            leader = self._tso_leader
            if leader is None:
                try:
                    body, _ = self._get(path, deadline, follow=True)
                    return parse_tso(body, count, self._pool.endpoints[self._endpoint].url)
                except Redirect as r:
                    last = r.error
                    leader = self._tso_leader_index(r.location, r.error)
                if leader in failed:
                    wait = retry_wait(rounds, None, self._rand())
                    rounds += 1
                    if self._clock() + wait > deadline:
                        raise failed[leader]
                    self._sleep(wait)
                    if self._closed:
                        raise _closed_error()
                else:
                    hops += 1
                    if hops > TSO_MAX_REDIRECTS:
                        raise last
                self._tso_leader = leader
                continue
            url = self._pool.endpoints[leader].url
            left = deadline - self._clock()
            if left <= 0:
                raise last or FlurryError("DEADLINE_EXCEEDED", "the call's timeout ran out before "
                                          "the leader answered", endpoint=url)
            try:
                status, retry_after, body, _, location = self._once(leader, path, self._headers, left)
            except (OSError, http.client.HTTPException) as e:
                if self._closed:
                    raise _closed_error() from None
                last = failed[leader] = parse_error(0, None, f"{type(e).__name__}: {e}".encode(), url)
                self._tso_leader = None  # back to the configured endpoints
                continue
            if self._closed:
                raise _closed_error()
            if 200 <= status < 300:
                return parse_tso(body, count, url)
            last = parse_error(status, retry_after, body, url)
            if status == 307 and location:
                hops += 1
                if hops > TSO_MAX_REDIRECTS:
                    raise last
                self._tso_leader = self._tso_leader_index(location, last)
            elif status in (502, 503, 504):
                failed[leader] = last
                self._tso_leader = None
            else:
                raise last

    def _tso_leader_index(self, location: str, error: FlurryError) -> int:
        ep = leader_endpoint(location)
        if ep is None:
            raise error  # a redirect to nowhere we can go: the NOT_LEADER answer as it came
        return self._pool.index(ep)

    def segment(self, tag: str) -> "Segment":
        """The handle of segment tag `tag` (the same object for the same tag)."""
        if not isinstance(tag, str) or not tag:
            raise invalid(f"segment tag {tag!r}: give a non-empty name")
        with self._lock:
            seg = self._segments.get(tag)
            if seg is None:
                seg = self._segments[tag] = Segment(self, tag)
            return seg

    def layout(self) -> Layout:
        """The server's layout, read once from the first endpoint that answers."""
        if self._layout is None:
            with self._layout_lock:
                if self._layout is None:
                    body, _ = self._get("/v1/layout", self._clock() + self.settings.timeout)
                    self._layout = Layout(json.loads(body))
        return self._layout

    def decode(self, id: Union[int, str]) -> Decoded:
        """Decodes an ID locally (the layout is read once); INVALID_ARGUMENT for a bad ID,
        CANCELLED on a closed client."""
        if self._closed:
            raise _closed_error()
        return self.layout().decode(id)

    def decode_order(self, code: str, token: Optional[str] = None, tag: Optional[str] = None) -> DecodedOrder:
        """The server's decode of order number `code` (GET /v1/order-numbers/{code}; `tag`: the
        segment tag it was made from) as a DecodedOrder; needs a token with scope orders:decode
        (`token`, else the client's). A snowflake number's fields are decoded as decode() does."""
        path = "/v1/order-numbers/" + urllib.parse.quote(code, safe="")
        if tag is not None:
            path += "?tag=" + urllib.parse.quote(tag, safe="")
        body, _ = self._get(path, self._clock() + self.settings.timeout, token)
        return parse_decoded_order(body, self.layout)

    def close(self) -> None:
        """Stops refills, wakes waiters (CANCELLED) and closes connections. Idempotent."""
        with self._lock:
            self._sync_locked()
            self._closed = True
            self._buf.close()
            self._publish_locked()
            self._cond.notify_all()
            segs = list(self._segments.values())
        with self._tso_cond:
            self._tso_cond.notify_all()
        for seg in segs:
            seg._close()
        self._closed_event.set()
        self._pool.close()

    def _after_fork(self) -> None:
        """Runs in a forked child, its only thread: drops the IDs, ranges, refills in flight,
        locks and connections copied from the parent (see _after_fork_in_child). The settings,
        the layout, the preferred endpoint and whether the client is closed are kept."""
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._layout_lock = threading.Lock()
        closed_event = threading.Event()
        if self._closed_event.is_set():
            closed_event.set()
        self._closed_event = closed_event
        if self._own_sleep:
            self._sleep = closed_event.wait
        self._pool.after_fork()
        buf = self._buf = Buffer(self.settings.low_water)
        if self._closed:
            buf.close()
        self._refill = None  # its thread is not in the child: nobody would end it
        self._hot = _NO_IDS
        self._hot_trigger = 0
        self._tso_cond = threading.Condition()
        self._tso_queue = collections.deque()  # the parent's callers are not in the child
        self._tso_busy = False
        for seg in self._segments.values():
            seg._after_fork()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the buffer -----------------------------------------------------------------------------

    def _next_slow(self) -> int:
        deadline = self._clock() + self.settings.timeout
        buf = self._buf
        with self._cond:
            self._sync_locked()
            try:
                while True:
                    if self._closed:
                        raise _closed_error()
                    if buf.fresh(self._clock()):
                        id = buf.take()
                        self._maybe_refill_locked()
                        return id
                    refill = self._refill or self._start_refill_locked(deadline)
                    left = deadline - self._clock()
                    if left <= 0:
                        raise FlurryError("DEADLINE_EXCEEDED", "no fresh ID within the timeout: "
                                          "the refill in flight has not answered")
                    self._publish_locked()
                    self._cond.wait(left)
                    self._sync_locked()
                    if refill.done and refill.error is not None and not buf.fresh(self._clock()):
                        raise refill.error
            finally:
                self._publish_locked()

    # Why the hot path is safe without the lock (CPython with the GIL): next() on the
    # islice-over-list-iterator below is one C call that runs no Python code and so cannot be
    # interrupted by another thread: two threads never get the same item, and items come in
    # order. The tuple (iterator, expires) is read and replaced as a whole. Every holder of the
    # lock first calls _sync_locked, which takes the iterator's unused items back (list() on it
    # is again one C call), so a thread that read the old tuple just before finds it empty and
    # goes to the slow path; buf.pos then counts exactly the items handed out. Before releasing
    # the lock, _publish_locked hands out a new iterator. A free-threaded Python has no such
    # atomicity, hence _lockless is False there and next() takes the lock each time.

    def _sync_locked(self) -> None:
        if self._lockless:
            ids, _ = self._hot
            self._hot = _NO_IDS
            self._buf.pos = self._hot_trigger - len(list(ids))

    def _publish_locked(self) -> None:
        if self._lockless:
            buf = self._buf
            pos, trigger = buf.pos, buf.trigger
            if pos < trigger:
                it = iter(buf.ids)
                it.__setstate__(pos)
                self._hot_trigger = trigger
                self._hot = (itertools.islice(it, trigger - pos), buf.expires)
            else:
                self._hot_trigger = pos

    def _maybe_refill_locked(self) -> None:
        if self._buf.refill_due():
            self._start_refill_locked(self._clock() + self.settings.timeout)
        else:
            self._buf.set_trigger()

    def _start_refill_locked(self, deadline: float) -> _Refill:
        refill = self._refill = _Refill()
        expired = self._buf.begin_refill()
        threading.Thread(target=self._run_refill, args=(refill, deadline, expired),
                         name="flurry-refill", daemon=True).start()
        return refill

    def _run_refill(self, refill: _Refill, deadline: float, expired: bool) -> None:
        s = self.settings
        size, ids, expires = None, None, 0.0
        try:
            server_max = self.layout().max_batch
            size = next_batch_size(self._buf.batch, expired, s.min_batch, s.max_batch, server_max)
            body, sent = self._get(f"/v1/ids?count={size}&format=text", deadline)
            ids, expires = parse_ids(body), sent + s.max_age
        except FlurryError as e:
            refill.error = e
        except Exception as e:  # a garbled answer or a bug: hand it to the waiters, typed
            refill.error = FlurryError("INTERNAL", f"refill failed: {e!r}")
        with self._cond:
            self._sync_locked()
            refill.done = True
            self._refill = None
            self._buf.end_refill(size, ids, expires, self._clock())
            self._publish_locked()
            self._cond.notify_all()

    def _next_many(self, n: int) -> List[int]:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise invalid(f"next(n): n = {n!r} must be an integer of at least 1")
        layout = self.layout()
        if n > layout.max_batch:
            raise invalid(f"next(n): n = {n} is larger than the server's max_batch ({layout.max_batch})")
        with self._cond:
            if self._closed:
                raise _closed_error()
            self._sync_locked()
            try:
                out = self._buf.take_many(n, self._clock())
                if out is not None:
                    self._maybe_refill_locked()
                    return out
            finally:
                self._publish_locked()
        body, _ = self._get(f"/v1/ids?count={n}&format=text", self._clock() + self.settings.timeout)
        return parse_ids(body)

    # -- HTTP with retries ------------------------------------------------------------------------

    def _get(self, path: str, deadline: float, token: Optional[str] = None,
             follow: bool = False) -> Tuple[bytes, float]:
        """GET with the contract's retries and failover; (body, monotonic time it was sent).
        With `follow`, a 307 with a Location raises Redirect (tso() goes to the leader)."""
        eps = self.settings.endpoints
        rr = RetryRound(len(eps), self._endpoint, deadline, self._clock, self._rand)
        headers = {"Authorization": f"Bearer {token}"} if token else self._headers
        try:
            while True:
                for i in rr.order():
                    if self._closed:
                        raise _closed_error()
                    left = rr.check_deadline(eps[i].url)
                    try:
                        status, retry_after, body, sent, location = self._once(i, path, headers, left)
                    except (OSError, http.client.HTTPException) as e:
                        if self._closed:
                            raise _closed_error() from None
                        rr.failed(i, parse_error(0, None, f"{type(e).__name__}: {e}".encode(), eps[i].url))
                        continue
                    if self._closed:
                        raise _closed_error()  # what came back is dropped, never handed out
                    if 200 <= status < 300:
                        rr.succeeded(i)
                        return body, sent
                    if follow and status == 307 and location:
                        rr.succeeded(i)
                        raise Redirect(location, parse_error(status, retry_after, body, eps[i].url))
                    rr.failed(i, parse_error(status, retry_after, body, eps[i].url))
                self._sleep(rr.end_round())
                if self._closed:
                    raise _closed_error()
        finally:
            self._endpoint = rr.next_first

    def _once(self, i: int, path: str, headers: Dict[str, str],
              timeout: float) -> Tuple[int, Optional[str], bytes, float, Optional[str]]:
        """One GET to endpoint `i` of the pool: (status, Retry-After, body, monotonic time it was
        sent, Location)."""
        ep = self._pool.endpoints[i]
        for attempt in (0, 1):
            conn, reused = self._pool.get(i, timeout)
            sent = self._clock()
            try:
                conn.request("GET", ep.prefix + path, headers=headers)
                if self._closed:  # close() ran while this connection was being opened
                    raise ConnectionAbortedError("the client is closed")
                resp = conn.getresponse()
                body = resp.read()
            except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
                self._pool.drop(conn)
                if reused and attempt == 0 and not self._closed:
                    continue  # the server closed the idle keep-alive connection: a fresh one
                raise
            except BaseException:
                self._pool.drop(conn)
                raise
            if resp.will_close:
                self._pool.drop(conn)
            else:
                self._pool.put(i, conn)
            return resp.status, resp.getheader("Retry-After"), body, sent, resp.getheader("Location")
        raise AssertionError("unreachable")


class Segment:
    """A segment tag's numbers from ranges the client holds (GET /v1/segments/{tag}/range):
    once each and in order; the next range is fetched in the background once
    ``segment_prefetch`` of the current one is used. Thread-safe."""

    def __init__(self, client: Client, tag: str) -> None:
        self._client = client
        self.tag = tag
        self._path = (f"/v1/segments/{urllib.parse.quote(tag, safe='')}/range"
                      f"?size={client.settings.segment_range}")
        self._cond = threading.Condition()
        self._next = 0  # the next number of the current range
        self._end = 0
        self._delta = 1
        self._prefetch_at = 0  # fetch the next range once _next reaches this
        self._ranges: Deque[Tuple[int, int, int]] = collections.deque()  # fetched, not started
        self._fetch: Optional[_Refill] = None
        self._closed = False

    def next(self) -> int:
        """The tag's next number; waits (until ``timeout``) for a range when none is held."""
        with self._cond:
            v = self._next
            if v < self._end:
                self._next = v + self._delta
                if v >= self._prefetch_at and self._fetch is None and not self._ranges:
                    self._start_fetch_locked(self._client._clock() + self._client.settings.timeout)
                return v
        return self._next_slow()

    def _next_slow(self) -> int:
        c = self._client
        deadline = c._clock() + c.settings.timeout
        with self._cond:
            while True:
                if self._closed:
                    raise _closed_error()
                if self._next >= self._end and self._ranges:
                    self._use_range_locked(*self._ranges.popleft())
                if self._next < self._end:
                    v = self._next
                    self._next = v + self._delta
                    if v >= self._prefetch_at and self._fetch is None and not self._ranges:
                        self._start_fetch_locked(c._clock() + c.settings.timeout)
                    return v
                fetch = self._fetch or self._start_fetch_locked(deadline)
                left = deadline - c._clock()
                if left <= 0:
                    raise FlurryError("DEADLINE_EXCEEDED", f"segment {self.tag!r}: no range within the timeout")
                self._cond.wait(left)
                if fetch.done and fetch.error is not None and self._next >= self._end and not self._ranges:
                    raise fetch.error

    def _use_range_locked(self, start: int, end: int, delta: int) -> None:
        self._next, self._end, self._delta = start, end, delta
        count = max(1, (end - start + delta - 1) // delta)
        used = int(count * self._client.settings.segment_prefetch)
        self._prefetch_at = start + used * delta

    def _start_fetch_locked(self, deadline: float) -> _Refill:
        fetch = self._fetch = _Refill()
        threading.Thread(target=self._run_fetch, args=(fetch, deadline),
                         name="flurry-segment", daemon=True).start()
        return fetch

    def _run_fetch(self, fetch: _Refill, deadline: float) -> None:
        try:
            body, _ = self._client._get(self._path, deadline)
            j = json.loads(body)
            rng = (int(j["start"]), int(j["end"]), int(j.get("delta", 1)))
            with self._cond:
                self._ranges.append(rng)
        except FlurryError as e:
            fetch.error = e
        except Exception as e:
            fetch.error = FlurryError("INTERNAL", f"segment {self.tag!r}: range fetch failed: {e!r}")
        with self._cond:
            fetch.done = True
            self._fetch = None
            self._cond.notify_all()

    def _close(self) -> None:
        with self._cond:
            self._closed = True
            self._end = 0
            self._ranges.clear()
            self._cond.notify_all()

    def _after_fork(self) -> None:
        """In a forked child (see Client._after_fork): no range, no fetch, a new lock."""
        self._cond = threading.Condition()
        self._next = self._end = self._prefetch_at = 0
        self._delta = 1
        self._ranges = collections.deque()
        self._fetch = None
