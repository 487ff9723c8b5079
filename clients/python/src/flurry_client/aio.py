"""The asyncio client: AsyncClient and its AsyncSegment handles, over a minimal HTTP/1.1 client
on asyncio streams (keep-alive, Content-Length or chunked answers)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import ssl
import time
import urllib.parse
import weakref
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Tuple, Union, overload

from ._core import (TSO_MAX_REDIRECTS, Buffer, Decoded, DecodedOrder, Endpoint, FlurryError, Layout,
                    Redirect, RetryRound, Settings, decoded_order, invalid, leader_endpoint,
                    next_batch_size, parse_error, parse_ids, parse_tso, read_order_answer,
                    retry_wait)

_Conn = Tuple[asyncio.StreamReader, asyncio.StreamWriter]


def _closed_error() -> FlurryError:
    return FlurryError("CANCELLED", "the client is closed")


# Fork (docs/clients.md, "Fork"): as for Client (client.py), every live AsyncClient in a forked
# child drops the IDs and ranges it holds, its refills in flight and its connections, so the
# child, in an event loop of its own, never hands out a number the parent may hand out.
_live: "weakref.WeakSet[AsyncClient]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for client in list(_live):
        client._after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


class _HttpError(Exception):
    """A broken answer: the connection is unusable."""


async def _read_answer(reader: asyncio.StreamReader) -> Tuple[int, Dict[str, str], bytes]:
    line = await reader.readline()
    if not line:
        raise ConnectionResetError("the server closed the connection")
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/"):
        raise _HttpError(f"bad status line {line[:80]!r}")
    status = int(parts[1])
    headers: Dict[str, str] = {}
    while True:
        h = await reader.readline()
        if h in (b"\r\n", b"\n"):
            break
        if not h:
            raise ConnectionResetError("the connection ended inside the header")
        name, _, value = h.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                break
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
        body = b"".join(chunks)
    elif "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    else:
        body = await reader.read()
        headers["connection"] = "close"
    return status, headers, body


class _Refill:
    __slots__ = ("event", "error")

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.error: Optional[FlurryError] = None


class _TsoWaiter:
    """One tso() caller: queued until a request takes it; `future` gets its value or error."""
    __slots__ = ("taken", "future")

    def __init__(self, future: "asyncio.Future[int]") -> None:
        self.taken = False
        self.future = future


class AsyncClient:
    """A flurry client for asyncio, with the settings and behaviour of Client. Use it from one
    event loop; ``async with AsyncClient(...) as c:`` or ``await c.close()``. One refill task
    at a time; callers that find the buffer empty await it (until ``timeout``). ``clock``,
    ``sleep`` and ``rand`` replace time.monotonic, asyncio.sleep and random.random (tests)."""

    def __init__(self, endpoints: Union[str, Sequence[str]], *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Optional[Callable[[float], Awaitable[Any]]] = None,
                 rand: Callable[[], float] = random.random, **settings: Any) -> None:
        self.settings = Settings.make(endpoints, **settings)
        s = self.settings
        self._clock = clock
        self._sleep = sleep or asyncio.sleep
        self._rand = rand
        # The configured endpoints, then the timestamp oracle leaders tso() was sent to.
        self._eps: List[Endpoint] = list(s.endpoints)
        self._idle: List[List[_Conn]] = [[] for _ in s.endpoints]
        self._endpoint = 0
        self._layout: Optional[Layout] = None
        self._layout_task: Optional[asyncio.Future] = None
        self._headers = f"Authorization: Bearer {s.token}\r\n" if s.token else ""
        self._segments: Dict[str, AsyncSegment] = {}
        self._tasks: set = set()  # refills and range fetches in flight (close() cancels them)
        self._closed = False
        self._closing: Optional[asyncio.Future] = None  # done once closed (see _unless_closed)
        self._buf = Buffer(s.low_water)
        self._refill: Optional[_Refill] = None
        # tso(): callers not yet in a request, whether the task sending them runs, and the
        # leader that last answered (an index of _eps; None: ask the configured endpoints).
        self._tso_queue: List[_TsoWaiter] = []
        self._tso_busy = False
        self._tso_leader: Optional[int] = None
        _live.add(self)

    # -- public API -----------------------------------------------------------------------------

    @overload
    async def next(self) -> int: ...

    @overload
    async def next(self, n: int) -> List[int]: ...

    async def next(self, n: Optional[int] = None) -> Union[int, List[int]]:
        """``await next()``: one ID; ``await next(n)``: a list of n increasing IDs (see Client)."""
        if n is not None:
            return await self._next_many(n)
        buf = self._buf
        pos = buf.pos
        if pos < buf.trigger and self._clock() < buf.expires:
            buf.pos = pos + 1
            return buf.ids[pos]
        return await self._next_slow()

    async def tso(self) -> int:
        """``await tso()``: a timestamp from the cluster's timestamp oracle, strictly greater
        than every timestamp any client got before this call began (see Client.tso): callers
        share one request in flight, a caller arriving during one waits for the next, nothing
        is prefetched."""
        if self._closed:
            raise _closed_error()
        me = _TsoWaiter(asyncio.get_running_loop().create_future())
        self._tso_queue.append(me)
        if not self._tso_busy:
            self._tso_busy = True
            self._spawn(self._tso_run())
        try:
            done, _ = await asyncio.wait((me.future,), timeout=self.settings.timeout)
        finally:
            if not me.future.done() and not me.taken:
                self._tso_queue.remove(me)  # timed out or cancelled before a request took it
        if not done:
            raise FlurryError("DEADLINE_EXCEEDED", "no timestamp within the timeout: the tso "
                              "request in flight has not answered")
        return me.future.result()

    async def _tso_run(self) -> None:
        """Sends the queued callers' requests one at a time (up to max_batch callers each)
        until none is queued."""
        try:
            while self._tso_queue and not self._closed:
                batch = self._tso_queue[:self.settings.max_batch]
                del self._tso_queue[:len(batch)]
                for w in batch:
                    w.taken = True
                first, error = 0, None
                try:
                    first = await self._tso_fetch(len(batch), self._clock() + self.settings.timeout)
                except FlurryError as e:
                    error = e
                except asyncio.CancelledError:
                    error = _closed_error()
                except Exception as e:  # a bug: hand it to the callers, typed
                    error = FlurryError("INTERNAL", f"tso request failed: {e!r}")
                for k, w in enumerate(batch):
                    if not w.future.done():
                        if error is not None:
                            w.future.set_exception(error)
                        else:
                            w.future.set_result(first + k)
                if error is not None and error.code == "CANCELLED":
                    break
        finally:
            self._tso_busy = False

    async def _tso_fetch(self, count: int, deadline: float) -> int:
        """GET /v1/tso?count=`count` to the leader last seen, else to the configured endpoints
        (with the contract's retries), following 307s to the leader; the first timestamp. A
        leader that failed in this call is asked again only after the wait between retry rounds
        (see Client._tso_fetch)."""
        path = f"/v1/tso?count={count}"
        last: Optional[FlurryError] = None
        failed: Dict[int, FlurryError] = {}  # leaders that failed in this call, with the error
        hops = rounds = 0
        while True:
            leader = self._tso_leader
            if leader is None:
                try:
                    body, _ = await self._get(path, deadline, follow=True)
                    return parse_tso(body, count, self._eps[self._endpoint].url)
                except Redirect as r:
                    last = r.error
                    leader = self._tso_leader_index(r.location, r.error)
                if leader in failed:
                    wait = retry_wait(rounds, None, self._rand())
                    rounds += 1
                    if self._clock() + wait > deadline:
                        raise failed[leader]
                    await self._unless_closed(self._sleep(wait), None)
                else:
                    hops += 1
                    if hops > TSO_MAX_REDIRECTS:
                        raise last
                self._tso_leader = leader
                continue
            url = self._eps[leader].url
            left = deadline - self._clock()
            if left <= 0:
                raise last or FlurryError("DEADLINE_EXCEEDED", "the call's timeout ran out before "
                                          "the leader answered", endpoint=url)
            try:
                status, retry_after, body, _, location = await self._unless_closed(
                    self._once(leader, path, self._headers), left)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, _HttpError,
                    ValueError) as e:
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
        if ep not in self._eps:
            self._eps.append(ep)
            self._idle.append([])
        return self._eps.index(ep)

    def segment(self, tag: str) -> "AsyncSegment":
        """The handle of segment tag `tag` (the same object for the same tag)."""
        if not isinstance(tag, str) or not tag:
            raise invalid(f"segment tag {tag!r}: give a non-empty name")
        seg = self._segments.get(tag)
        if seg is None:
            seg = self._segments[tag] = AsyncSegment(self, tag)
        return seg

    async def layout(self) -> Layout:
        """The server's layout, read once (concurrent callers share the one request)."""
        if self._layout is not None:
            return self._layout
        if self._layout_task is None:
            self._layout_task = asyncio.ensure_future(
                self._get("/v1/layout", self._clock() + self.settings.timeout))
        task = self._layout_task
        try:
            body, _ = await asyncio.shield(task)
        except BaseException as e:
            if task.done() and self._layout_task is task:
                self._layout_task = None  # the next call asks again
            if isinstance(e, asyncio.CancelledError) and task.cancelled() and self._closed:
                raise _closed_error() from None  # close() cancelled the request, not our caller
            raise
        if self._layout is None:
            self._layout = Layout(json.loads(body))
        return self._layout

    async def decode(self, id: Union[int, str]) -> Decoded:
        """Decodes an ID locally; INVALID_ARGUMENT for a bad ID, CANCELLED on a closed client."""
        if self._closed:
            raise _closed_error()
        return (await self.layout()).decode(id)

    async def decode_order(self, code: str, token: Optional[str] = None,
                           tag: Optional[str] = None) -> DecodedOrder:
        """The server's decode of an order number as a DecodedOrder (see Client.decode_order;
        needs scope orders:decode)."""
        path = "/v1/order-numbers/" + urllib.parse.quote(code, safe="")
        if tag is not None:
            path += "?tag=" + urllib.parse.quote(tag, safe="")
        body, _ = await self._get(path, self._clock() + self.settings.timeout, token)
        j = read_order_answer(body)
        return decoded_order(j, body, await self.layout() if j["source"] == "snowflake" else None)

    async def close(self) -> None:
        """Cancels refills, wakes waiters (CANCELLED) and closes connections. Idempotent."""
        self._closed = True
        if self._closing is not None and not self._closing.done():
            self._closing.set_result(None)  # ends every request and retry wait in flight
        self._buf.close()
        if self._refill is not None:
            self._refill.error = _closed_error()
            self._refill.event.set()
        for seg in self._segments.values():
            seg._close()
        queued, self._tso_queue = self._tso_queue, []
        for w in queued:
            if not w.future.done():
                w.future.set_exception(_closed_error())
        for t in list(self._tasks):
            t.cancel()
        if self._layout_task is not None and not self._layout_task.done():
            self._layout_task.cancel()
        for conns in self._idle:
            for _, w in conns:
                w.close()
            conns.clear()

    def _after_fork(self) -> None:
        """Runs in a forked child: drops the buffer, the ranges, the tasks and connections of the
        parent's event loop (a task that still finishes in the child, because the fork came
        from inside a running loop, delivers into the dropped buffer, never the new one). Idle
        connections are forgotten, not closed: closing would remove their sockets from the
        parent's loop's epoll set, which the child shares; the child's copies of the sockets
        are closed when the objects are collected."""
        buf = self._buf = Buffer(self.settings.low_water)
        if self._closed:
            buf.close()
        self._refill = None
        self._tasks = set()
        self._layout_task = None
        self._closing = None  # of the parent's loop
        self._idle = [[] for _ in self._eps]
        self._tso_queue = []  # the parent's callers and sending task are not in the child
        self._tso_busy = False
        for seg in self._segments.values():
            seg._after_fork()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # -- the buffer -----------------------------------------------------------------------------

    async def _next_slow(self) -> int:
        deadline = self._clock() + self.settings.timeout
        buf = self._buf
        while True:
            if self._closed:
                raise _closed_error()
            if buf.fresh(self._clock()):
                id = buf.take()
                self._maybe_refill()
                return id
            refill = self._refill or self._start_refill(deadline)
            left = deadline - self._clock()
            if left <= 0:
                raise FlurryError("DEADLINE_EXCEEDED", "no fresh ID within the timeout: the "
                                  "refill in flight has not answered")
            try:
                await asyncio.wait_for(refill.event.wait(), left)
            except asyncio.TimeoutError:
                continue  # the loop raises DEADLINE_EXCEEDED unless an ID came meanwhile
            if refill.error is not None and not buf.fresh(self._clock()):
                raise refill.error

    def _maybe_refill(self) -> None:
        if self._buf.refill_due():
            self._start_refill(self._clock() + self.settings.timeout)
        else:
            self._buf.set_trigger()

    def _start_refill(self, deadline: float) -> _Refill:
        refill = self._refill = _Refill()
        expired = self._buf.begin_refill()
        self._spawn(self._run_refill(refill, deadline, expired))
        return refill

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_refill(self, refill: _Refill, deadline: float, expired: bool) -> None:
        s = self.settings
        buf = self._buf  # a fork meanwhile replaces it: the IDs then go to the dropped one
        size, ids, expires = None, None, 0.0
        try:
            server_max = (await self.layout()).max_batch
            size = next_batch_size(buf.batch, expired, s.min_batch, s.max_batch, server_max)
            body, sent = await self._get(f"/v1/ids?count={size}&format=text", deadline)
            ids, expires = parse_ids(body), sent + s.max_age
        except FlurryError as e:
            refill.error = e
        except asyncio.CancelledError:
            refill.error = _closed_error()
        except Exception as e:  # a garbled answer or a bug: hand it to the waiters, typed
            refill.error = FlurryError("INTERNAL", f"refill failed: {e!r}")
        if self._refill is refill:
            self._refill = None
        buf.end_refill(size, ids, expires, self._clock())
        refill.event.set()

    async def _next_many(self, n: int) -> List[int]:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise invalid(f"next(n): n = {n!r} must be an integer of at least 1")
        layout = await self.layout()
        if n > layout.max_batch:
            raise invalid(f"next(n): n = {n} is larger than the server's max_batch ({layout.max_batch})")
        if self._closed:
            raise _closed_error()
        out = self._buf.take_many(n, self._clock())
        if out is not None:
            self._maybe_refill()
            return out
        body, _ = await self._get(f"/v1/ids?count={n}&format=text", self._clock() + self.settings.timeout)
        return parse_ids(body)

    # -- HTTP with retries ------------------------------------------------------------------------

    async def _get(self, path: str, deadline: float, token: Optional[str] = None,
                   follow: bool = False) -> Tuple[bytes, float]:
        """GET with the contract's retries and failover; (body, monotonic time it was sent).
        With `follow`, a 307 with a Location raises Redirect (tso() goes to the leader)."""
        eps = self.settings.endpoints
        rr = RetryRound(len(eps), self._endpoint, deadline, self._clock, self._rand)
        headers = f"Authorization: Bearer {token}\r\n" if token else self._headers
        try:
            while True:
                for i in rr.order():
                    if self._closed:
                        raise _closed_error()
                    left = rr.check_deadline(eps[i].url)
                    try:
                        status, retry_after, body, sent, location = await self._unless_closed(
                            self._once(i, path, headers), left)
                    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, _HttpError,
                            ValueError) as e:
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
                await self._unless_closed(self._sleep(rr.end_round()), None)
        finally:
            self._endpoint = rr.next_first

    async def _unless_closed(self, aw: Awaitable[Any], timeout: Optional[float]) -> Any:
        """Awaits `aw`; CANCELLED at once when close() runs meanwhile (`aw` is then cancelled),
        asyncio.TimeoutError after `timeout` seconds (None: no limit)."""
        if self._closed:
            raise _closed_error()
        loop = asyncio.get_running_loop()
        if self._closing is None or self._closing.get_loop() is not loop:
            self._closing = loop.create_future()
        inner = asyncio.ensure_future(aw)
        try:
            done, _ = await asyncio.wait((inner, self._closing), timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            inner.cancel()  # our caller was cancelled
            raise
        if inner in done:
            return inner.result()
        inner.cancel()
        if self._closed:
            raise _closed_error()
        raise asyncio.TimeoutError()

    async def _connect(self, ep: Endpoint) -> _Conn:
        ctx = ssl.create_default_context() if ep.https else None
        return await asyncio.open_connection(ep.host, ep.port, ssl=ctx)

    async def _once(self, i: int, path: str,
                    headers: str) -> Tuple[int, Optional[str], bytes, float, Optional[str]]:
        """One GET to endpoint `i` of _eps: (status, Retry-After, body, monotonic time it was
        sent, Location)."""
        ep = self._eps[i]
        request = (f"GET {ep.prefix}{path} HTTP/1.1\r\nHost: {ep.host}:{ep.port}\r\n"
                   f"{headers}\r\n").encode("latin-1")
        for attempt in (0, 1):
            reused = bool(self._idle[i])
            reader, writer = self._idle[i].pop() if reused else await self._connect(ep)
            sent = self._clock()
            try:
                writer.write(request)
                await writer.drain()
                status, h, body = await _read_answer(reader)
            except (ConnectionResetError, BrokenPipeError, asyncio.IncompleteReadError):
                writer.close()
                if reused and attempt == 0:
                    continue  # the server closed the idle keep-alive connection: a fresh one
                raise
            except BaseException:
                writer.close()
                raise
            if h.get("connection", "").lower() == "close" or self._closed:
                writer.close()
            else:
                self._idle[i].append((reader, writer))
            return status, h.get("retry-after"), body, sent, h.get("location")
        raise AssertionError("unreachable")


class AsyncSegment:
    """A segment tag's numbers from ranges the client holds (see Segment); for one event loop."""

    def __init__(self, client: AsyncClient, tag: str) -> None:
        self._client = client
        self.tag = tag
        self._path = (f"/v1/segments/{urllib.parse.quote(tag, safe='')}/range"
                      f"?size={client.settings.segment_range}")
        self._next = 0
        self._end = 0
        self._delta = 1
        self._prefetch_at = 0
        self._ranges: List[Tuple[int, int, int]] = []
        self._fetch: Optional[_Refill] = None
        self._closed = False

    async def next(self) -> int:
        """The tag's next number; awaits a range (until ``timeout``) when none is held."""
        v = self._next
        if v < self._end:
            self._next = v + self._delta
            if v >= self._prefetch_at and self._fetch is None and not self._ranges:
                self._start_fetch(self._client._clock() + self._client.settings.timeout)
            return v
        return await self._next_slow()

    async def _next_slow(self) -> int:
        c = self._client
        deadline = c._clock() + c.settings.timeout
        while True:
            if self._closed:
                raise _closed_error()
            if self._next >= self._end and self._ranges:
                self._use_range(*self._ranges.pop(0))
            if self._next < self._end:
                return await self.next()
            fetch = self._fetch or self._start_fetch(deadline)
            left = deadline - c._clock()
            if left <= 0:
                raise FlurryError("DEADLINE_EXCEEDED", f"segment {self.tag!r}: no range within the timeout")
            try:
                await asyncio.wait_for(fetch.event.wait(), left)
            except asyncio.TimeoutError:
                continue
            if fetch.error is not None and self._next >= self._end and not self._ranges:
                raise fetch.error

    def _use_range(self, start: int, end: int, delta: int) -> None:
        self._next, self._end, self._delta = start, end, delta
        count = max(1, (end - start + delta - 1) // delta)
        self._prefetch_at = start + int(count * self._client.settings.segment_prefetch) * delta

    def _start_fetch(self, deadline: float) -> _Refill:
        fetch = self._fetch = _Refill()
        self._client._spawn(self._run_fetch(fetch, deadline))
        return fetch

    async def _run_fetch(self, fetch: _Refill, deadline: float) -> None:
        ranges = self._ranges  # a fork meanwhile replaces it (see AsyncClient._after_fork)
        try:
            body, _ = await self._client._get(self._path, deadline)
            j = json.loads(body)
            ranges.append((int(j["start"]), int(j["end"]), int(j.get("delta", 1))))
        except FlurryError as e:
            fetch.error = e
        except asyncio.CancelledError:
            fetch.error = _closed_error()
        except Exception as e:
            fetch.error = FlurryError("INTERNAL", f"segment {self.tag!r}: range fetch failed: {e!r}")
        if self._fetch is fetch:
            self._fetch = None
        fetch.event.set()

    def _close(self) -> None:
        self._closed = True
        self._end = 0
        self._ranges.clear()
        if self._fetch is not None:
            self._fetch.error = _closed_error()
            self._fetch.event.set()

    def _after_fork(self) -> None:
        """In a forked child (see AsyncClient._after_fork): no range, no fetch."""
        self._next = self._end = self._prefetch_at = 0
        self._delta = 1
        self._ranges = []
        self._fetch = None
