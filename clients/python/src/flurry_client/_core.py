"""The pure parts shared by Client and AsyncClient: settings, errors, retry rules, batch sizing
and decoding. Nothing here does I/O or keeps time itself; see docs/clients.md for the contract."""

from __future__ import annotations

import datetime
import json
import math
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

__all__ = ["FlurryError", "FlurrySettingsError", "Decoded", "DecodedOrder", "Layout", "Settings",
           "parse_error", "classify", "parse_retry_after", "retry_wait", "next_batch_size",
           "RetryRound", "parse_decoded_order", "read_order_answer", "decoded_order", "Redirect",
           "leader_endpoint", "parse_tso", "TSO_MAX_REDIRECTS"]


class FlurryError(Exception):
    """Every failure of the client.

    code: the canonical code name (``UNAVAILABLE``, ``INVALID_ARGUMENT``, ...); ``UNAVAILABLE``
    for a connection error, ``DEADLINE_EXCEEDED`` when the call's timeout ran out before any
    server answered. reason: the server's reason, "" when none. message: the server's message or
    the client's description. http_status: 0 when no HTTP answer came. retry_after: seconds from
    the answer's ``Retry-After``, None when it had none. endpoint: the base URL that answered
    (or was tried), "" when no endpoint was involved (bad settings, a bad argument).
    """

    def __init__(self, code: str, message: str = "", *, reason: str = "", http_status: int = 0,
                 retry_after: Optional[int] = None, endpoint: str = "") -> None:
        super().__init__(code, message)
        self.code = code
        self.reason = reason
        self.message = message
        self.http_status = http_status
        self.retry_after = retry_after
        self.endpoint = endpoint

    def __str__(self) -> str:
        what = self.code + (f" ({self.reason})" if self.reason else "")
        where = f" from {self.endpoint}" if self.endpoint else ""
        status = f" [HTTP {self.http_status}]" if self.http_status else ""
        return f"{what}{status}{where}: {self.message}"

    def __repr__(self) -> str:
        return (f"FlurryError(code={self.code!r}, reason={self.reason!r}, message={self.message!r}, "
                f"http_status={self.http_status}, retry_after={self.retry_after}, "
                f"endpoint={self.endpoint!r})")


class FlurrySettingsError(FlurryError, ValueError):
    """A bad setting given to Client or AsyncClient (code ``INVALID_ARGUMENT``, never retried).

    A ValueError, as Python raises for a bad argument, and a FlurryError. setting: the
    setting's name (``max_age``, ``endpoints``, ...); the message starts with it."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__("INVALID_ARGUMENT", message)
        self.setting = setting


def invalid(message: str) -> FlurryError:
    return FlurryError("INVALID_ARGUMENT", message)


def bad_setting(name: str, why: str) -> FlurrySettingsError:
    return FlurrySettingsError(name, f"{name}: {why}")


# ---------------------------------------------------------------------------------------------
# Settings

DEFAULTS: Dict[str, Any] = {
    "token": None, "max_age": 1.0, "min_batch": 256, "max_batch": 16384, "low_water": 0.5,
    "timeout": 5.0, "segment_range": 1000, "segment_prefetch": 0.1,
}


@dataclass(frozen=True)
class Endpoint:
    url: str  # the base URL as given, without a trailing slash
    https: bool
    host: str
    port: int
    prefix: str  # a path prefix ("" for none)


def parse_endpoint(url: Any) -> Endpoint:
    if not isinstance(url, str) or not url:
        raise bad_setting("endpoints", f"{url!r} is not a URL")
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise bad_setting("endpoints", f"{url!r} is not an http:// or https:// URL")
    if u.query or u.fragment or u.username or u.password:
        raise bad_setting("endpoints", f"{url!r} must be a base URL (no query, fragment or user)")
    try:
        port = u.port or (443 if u.scheme == "https" else 80)
    except ValueError:
        raise bad_setting("endpoints", f"{url!r} has a bad port") from None
    return Endpoint(url.rstrip("/"), u.scheme == "https", u.hostname, port, u.path.rstrip("/"))


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise bad_setting(name, f"{value!r} is not a finite number")
    return float(value)


def _integer(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_setting(name, f"{value!r} is not an integer")
    if value < 1:
        raise bad_setting(name, f"{value} must be at least 1")
    return value


@dataclass(frozen=True)
class Settings:
    """Validated settings; durations in seconds."""
    endpoints: Tuple[Endpoint, ...]
    token: Optional[str]
    max_age: float
    min_batch: int
    max_batch: int
    low_water: float
    timeout: float
    segment_range: int
    segment_prefetch: float

    @staticmethod
    def make(endpoints: Union[str, Sequence[str]], **kw: Any) -> "Settings":
        unknown = set(kw) - set(DEFAULTS)
        if unknown:
            name = sorted(unknown)[0]
            raise bad_setting(name, f"not a setting (the settings: {', '.join(DEFAULTS)})")
        v = dict(DEFAULTS, **kw)
        if isinstance(endpoints, str):
            endpoints = [endpoints]
        if not isinstance(endpoints, (list, tuple)) or not endpoints:
            raise bad_setting("endpoints", "give at least one http:// or https:// URL")
        eps = tuple(parse_endpoint(e) for e in endpoints)
        token = v["token"]
        if token is not None and (not isinstance(token, str) or not token
                                  or any(c in token for c in "\r\n")):
            raise bad_setting("token", "must be a non-empty string on one line")
        for name in ("max_age", "timeout"):
            if _number(name, v[name]) <= 0:
                raise bad_setting(name, f"{v[name]!r} s must be more than 0")
        for name in ("low_water", "segment_prefetch"):
            x = _number(name, v[name])
            if not 0 < x < 1:
                raise bad_setting(name, f"{v[name]!r} must lie strictly between 0 and 1")
        for name in ("min_batch", "max_batch", "segment_range"):
            _integer(name, v[name])
        if v["min_batch"] > v["max_batch"]:
            raise bad_setting("min_batch", f"{v['min_batch']} is larger than max_batch ({v['max_batch']})")
        return Settings(eps, token, float(v["max_age"]), v["min_batch"], v["max_batch"],
                        float(v["low_water"]), float(v["timeout"]), v["segment_range"],
                        float(v["segment_prefetch"]))


# ---------------------------------------------------------------------------------------------
# Errors, their classification and the wait between rounds

RETRY, FAILOVER, FATAL = "retry", "failover", "fatal"


def parse_retry_after(header: Optional[str]) -> Optional[int]:
    """Delta-seconds only; any other value (an HTTP-date, a fraction, a negative) counts as 1 s."""
    if header is None:
        return None
    text = header.strip()
    if text.isdigit() and text.isascii():
        return int(text)
    return 1


def parse_error(status: int, retry_after_header: Optional[str], body: Optional[bytes],
                endpoint: str) -> FlurryError:
    """The error an answer stands for. Status 0 is a connection error (body: its description)."""
    retry_after = parse_retry_after(retry_after_header)
    if status == 0:
        text = body.decode("utf-8", "replace") if body else "connection failed"
        return FlurryError("UNAVAILABLE", text, endpoint=endpoint)
    raw = body or b""
    try:
        j = json.loads(raw)
        err = j.get("error") if isinstance(j, dict) else None
        if isinstance(err, dict) and isinstance(err.get("code"), str):
            reason = err.get("reason")
            message = err.get("message")
            return FlurryError(err["code"], message if isinstance(message, str) else "",
                               reason=reason if isinstance(reason, str) else "",
                               http_status=status, retry_after=retry_after, endpoint=endpoint)
    except ValueError:
        pass
    code = "UNAVAILABLE" if status in (502, 503, 504) else "UNKNOWN"
    start = raw[:200].decode("utf-8", "replace")
    message = f"HTTP {status}" + (f": {start}" if start else "")
    return FlurryError(code, message, http_status=status, retry_after=retry_after, endpoint=endpoint)


def classify(status: int, has_retry_after: bool) -> str:
    """The contract's table: "retry", "failover" or "fatal" for a non-2xx answer (0: no answer)."""
    if status == 0:
        return RETRY
    if status in (502, 503, 504):
        return RETRY if has_retry_after else FAILOVER
    return FATAL


def retry_wait(round_: int, retry_after: Optional[float], u: float) -> float:
    """Seconds to wait after failed round `round_` (0-based); u uniform in [0, 1)."""
    backoff = 5.0 if round_ >= 6 else min(0.1 * 2 ** round_, 5.0)
    return max(retry_after or 0.0, backoff) * (1.0 + 0.2 * u)


class RetryRound:
    """The retry and failover rules of one call over the endpoints, without I/O.

    The caller asks `order()` for the endpoints to try this round, reports each failure with
    `failed()` (which raises at once for a fatal answer), and when the round is over asks
    `end_round()` for the wait before the next one (it raises the last error when every endpoint
    is out or the wait would pass the deadline)."""

    def __init__(self, count: int, first: int, deadline: float, clock: Callable[[], float],
                 rand: Callable[[], float]) -> None:
        self.count = count
        self.next_first = first  # where the next call should start
        self.deadline = deadline
        self.clock = clock
        self.rand = rand
        self.out: set = set()
        self.round = 0
        self.round_retry_after = 0.0
        self.last: Optional[FlurryError] = None

    def order(self) -> List[int]:
        start = self.next_first
        return [i % self.count for i in range(start, start + self.count) if i % self.count not in self.out]

    def check_deadline(self, endpoint: str) -> float:
        """Seconds left; raises when none are."""
        left = self.deadline - self.clock()
        if left <= 0:
            raise self.timed_out(endpoint)
        return left

    def timed_out(self, endpoint: str) -> FlurryError:
        if self.last is not None and self.last.http_status:
            return self.last
        return FlurryError("DEADLINE_EXCEEDED", "the call's timeout ran out before a server answered"
                           + (f" (last: {self.last.message})" if self.last else ""), endpoint=endpoint)

    def succeeded(self, index: int) -> None:
        self.next_first = index

    def failed(self, index: int, err: FlurryError) -> None:
        action = classify(err.http_status, err.retry_after is not None)
        self.last = err
        if action == FATAL:
            raise err
        if action == FAILOVER:
            self.out.add(index)
        else:
            self.round_retry_after = max(self.round_retry_after, float(err.retry_after or 0))
        self.next_first = (index + 1) % self.count

    def end_round(self) -> float:
        assert self.last is not None
        if len(self.out) == self.count:
            raise self.last
        wait = retry_wait(self.round, self.round_retry_after, self.rand())
        if self.clock() + wait > self.deadline:
            raise self.last
        self.round += 1
        self.round_retry_after = 0.0
        return wait


# ---------------------------------------------------------------------------------------------
# Batch sizing

def next_batch_size(previous: Optional[int], expired: bool, min_batch: int, max_batch: int,
                    server_max_batch: int) -> int:
    """The size of the next refill: min_batch first, then double after a batch ran low, halve
    after IDs were dropped for age (dropping wins), within min_batch..min(max_batch, server's)."""
    hi = min(max_batch, server_max_batch)
    lo = min(min_batch, hi)
    if previous is None:
        return lo
    if expired:
        return max(previous // 2, lo)
    return min(previous * 2, hi)


# ---------------------------------------------------------------------------------------------
# Decode

_MAX_NS = 2 ** 63 - 1
_UNIX = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


@dataclass(frozen=True)
class Decoded:
    """An ID's fields, as the server's GET /v1/ids/{id} gives them.

    time: ISO-8601 UTC text with milliseconds; time_ns: nanoseconds since the Unix epoch
    (saturated at 2^63 - 1); unix_ms: whole milliseconds; ticks: the time field; node: the node
    fields together, the first most significant; clock: None in layouts without a clock field;
    fields: every field by name in the layout's order."""
    id: int
    time: str
    time_ns: int
    unix_ms: int
    ticks: int
    node: int
    seq: int
    clock: Optional[int]
    fields: Mapping[str, int] = field(hash=False)  # the other fields make the hash


def format_ms(unix_ms: int) -> str:
    t = _UNIX + datetime.timedelta(milliseconds=unix_ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{unix_ms % 1000:03d}Z"


class Layout:
    """A server's layout from GET /v1/layout; decodes IDs locally, exactly as the server does."""

    def __init__(self, j: Mapping[str, Any]) -> None:
        self.json = dict(j)
        self.bits: int = int(j["bits"])
        self.fields: List[Tuple[str, int, int, str]] = [
            (f["name"], int(f["bits"]), int(f["shift"]), f["kind"]) for f in j["fields"]]
        self.epoch_unix_ms: int = int(j["epoch_unix_ms"])
        self.unit_ns: int = int(j["unit_ns"])
        self.max_batch: int = int(j.get("max_batch") or 100000)
        self.has_clock = any(k == "clock" for _, _, _, k in self.fields)

    def decode(self, id: Union[int, str]) -> Decoded:
        """Raises FlurryError INVALID_ARGUMENT for text that is not plain decimal digits, a number
        of 2^64 or more, or bits set above the layout's."""
        if isinstance(id, str):
            if not (id.isascii() and id.isdigit()) or len(id.lstrip("0")) > 20:
                raise invalid(f"ID {id!r}: not a decimal number below 2^64")
            value = int(id)
        elif isinstance(id, int) and not isinstance(id, bool):
            value = id
        else:
            raise invalid(f"ID {id!r}: give an int or decimal text")
        if value < 0 or value >= 1 << 64:
            raise invalid(f"ID {id!r}: not a number below 2^64")
        if value >> self.bits:
            raise invalid(f"ID {id!r}: has bits set above the layout's {self.bits}")
        fields: Dict[str, int] = {}
        ticks = node = seq = 0
        clock: Optional[int] = None
        for name, bits, shift, kind in self.fields:
            v = (value >> shift) & ((1 << bits) - 1)
            fields[name] = v
            if kind == "time":
                ticks = v
            elif kind == "node":
                node = (node << bits) | v
            elif kind == "seq":
                seq = v
            elif kind == "clock":
                clock = v if clock is None else (clock << bits) | v
        ns = min(self.epoch_unix_ms * 1_000_000 + ticks * self.unit_ns, _MAX_NS)
        unix_ms = ns // 1_000_000
        return Decoded(value, format_ms(unix_ms), ns, unix_ms, ticks, node, seq, clock, fields)


@dataclass(frozen=True)
class DecodedOrder:
    """The server's decode of an order number (GET /v1/order-numbers/{code}).

    source: ``"snowflake"`` (the number stands for a snowflake ID; ``decoded`` holds its fields
    and time, as ``decode(id)`` gives them, and ``tag`` is None) or ``"segment"`` (it stands for
    segment tag ``tag``'s number ``id``; ``decoded`` is None). order_number: the number as the
    server read it; key_version: the version of the key that decodes it."""
    order_number: str
    key_version: str
    source: str
    id: int
    tag: Optional[str]
    decoded: Optional[Decoded]


def _bad_order_answer(why: str, body: bytes) -> FlurryError:
    return FlurryError("UNKNOWN", f"an order-number answer {why}: {body[:200].decode('utf-8', 'replace')!r}")


def read_order_answer(body: bytes) -> Dict[str, Any]:
    """The fields of a GET /v1/order-numbers/{code} answer, checked (FlurryError UNKNOWN quoting
    an answer that does not fit); `source` is then "snowflake" or "segment" (with its tag)."""
    try:
        j = json.loads(body)
    except ValueError:
        raise _bad_order_answer("that is not JSON", body) from None
    if not isinstance(j, dict):
        raise _bad_order_answer("that is not a JSON object", body)
    for key in ("order_number", "key_version", "source", "id"):
        if not isinstance(j.get(key), str):
            raise _bad_order_answer(f"without {key!r} as text", body)
    text = j["id"]
    if not (text.isascii() and text.isdigit()) or int(text) >= 1 << 64:
        raise _bad_order_answer("whose id is not a decimal number below 2^64", body)
    if j["source"] == "segment":
        tag = j.get("tag")
        if not isinstance(tag, str) or not tag:
            raise _bad_order_answer("of a segment number without its tag", body)
    elif j["source"] != "snowflake":
        raise _bad_order_answer("whose source is neither snowflake nor segment", body)
    return j


def decoded_order(j: Mapping[str, Any], body: bytes, layout: Optional["Layout"]) -> DecodedOrder:
    """The DecodedOrder of an answer read_order_answer passed; `layout` decodes a snowflake
    number's ID (it may be None for a segment number)."""
    id = int(j["id"])
    if j["source"] == "segment":
        return DecodedOrder(j["order_number"], j["key_version"], "segment", id, j["tag"], None)
    assert layout is not None
    try:
        decoded = layout.decode(id)
    except FlurryError as e:
        raise _bad_order_answer(f"whose id the layout cannot have made ({e.message})", body) from None
    return DecodedOrder(j["order_number"], j["key_version"], "snowflake", id, None, decoded)


def parse_decoded_order(body: bytes, layout: Callable[[], "Layout"]) -> DecodedOrder:
    """read_order_answer, then decoded_order; ``layout`` is called for a snowflake number only."""
    j = read_order_answer(body)
    return decoded_order(j, body, layout() if j["source"] == "snowflake" else None)


def parse_ids(body: bytes) -> List[int]:
    """A format=text answer: one decimal ID per line."""
    return list(map(int, body.split()))


# ---------------------------------------------------------------------------------------------
# tso(): the timestamp oracle (GET /v1/tso?count=N). The batching itself lives in each client.

# Redirects one tso() request follows before it gives up with the last answer's error (a
# leader change in the middle of a call takes one or two).
TSO_MAX_REDIRECTS = 4


class Redirect(Exception):
    """A 307 with a Location from a configured endpoint (only for a request that follows them):
    `location` is the header, `error` the typed NOT_LEADER error of the answer's body."""

    def __init__(self, location: str, error: FlurryError) -> None:
        super().__init__(location)
        self.location = location
        self.error = error


def leader_endpoint(location: str) -> Optional[Endpoint]:
    """The leader's base URL (scheme://host:port) from a 307's Location, None when it is not an
    absolute http:// or https:// URL."""
    u = urllib.parse.urlsplit(location)
    try:
        return parse_endpoint(f"{u.scheme}://{u.netloc}")
    except FlurryError:
        return None


def parse_tso(body: bytes, count: int, endpoint: str) -> int:
    """The first timestamp of a GET /v1/tso?count=N answer ({"first":"<decimal>","count":N});
    FlurryError UNKNOWN quoting an answer that does not fit (or grants another count)."""
    try:
        j = json.loads(body)
        first = j["first"]
        if isinstance(first, str) and first.isascii() and first.isdigit() and j["count"] == count:
            value = int(first)
            if value + count <= 1 << 64:
                return value
    except (ValueError, TypeError, KeyError):
        pass
    return _bad_tso_answer(body, count, endpoint)


def _bad_tso_answer(body: bytes, count: int, endpoint: str) -> int:
    raise FlurryError("UNKNOWN", f"a tso answer that does not fit a request for {count}: "
                      f"{body[:200].decode('utf-8', 'replace')!r}", endpoint=endpoint)


# ---------------------------------------------------------------------------------------------
# The prefetch buffer's bookkeeping (the caller holds its lock, or runs on one event loop)

class Buffer:
    """Batches of IDs with the monotonic time each expires at. The current batch is
    ``ids[pos:end]``, fresh while the clock reads less than ``expires``; later batches wait in
    ``later``. A caller may take ``ids[pos]`` without more checks while ``pos < trigger`` and the
    clock reads less than ``expires``: ``trigger`` is the end of the batch or, when no refill
    runs, the position from which a refill is due (so one compare covers both)."""

    def __init__(self, low_water: float) -> None:
        self.low_water = low_water
        self.ids: List[int] = []
        self.pos = 0
        self.end = 0
        self.expires = -math.inf
        self.trigger = 0
        self.later: List[Tuple[List[int], float]] = []
        self.refilling = False
        self.batch: Optional[int] = None  # the size the last refill asked for
        self.dropped = False  # IDs dropped for age since the last refill began
        self.closed = False

    def fresh(self, now: float) -> bool:
        """Drops expired batches whole; True when the current batch has a fresh ID."""
        while True:
            if self.pos < self.end and now < self.expires:
                return True
            if self.pos < self.end:
                self.dropped = True
            if not self.later:
                self.ids, self.pos, self.end, self.expires = [], 0, 0, -math.inf
                self.set_trigger()
                return False
            self.ids, self.expires = self.later.pop(0)
            self.pos, self.end = 0, len(self.ids)
            self.set_trigger()

    def remaining(self) -> int:
        return self.end - self.pos + sum(len(ids) for ids, _ in self.later)

    def set_trigger(self) -> None:
        if self.closed:
            self.trigger = 0
        elif self.refilling or self.batch is None:
            self.trigger = self.end
        else:
            # Remaining after taking position p is (end - p - 1) + later: due once that is below
            # low_water x batch, i.e. once p > x.
            later = sum(len(ids) for ids, _ in self.later)
            x = self.end - 1 + later - self.low_water * self.batch
            self.trigger = min(self.end, max(self.pos, math.floor(x) + 1))

    def refill_due(self) -> bool:
        return not self.refilling and not self.closed and \
            (self.batch is None or self.remaining() < self.low_water * self.batch)

    def take(self) -> int:
        """One ID; call only after fresh() said True."""
        pos = self.pos
        self.pos = pos + 1
        return self.ids[pos]

    def take_many(self, n: int, now: float) -> Optional[List[int]]:
        """n increasing IDs when the buffer holds that many fresh ones, else None."""
        if not self.fresh(now) or self.remaining() < n or any(now >= e for _, e in self.later):
            return None
        out: List[int] = []
        while len(out) < n:
            take = min(n - len(out), self.end - self.pos)
            out.extend(self.ids[self.pos:self.pos + take])
            self.pos += take
            if len(out) < n:
                self.fresh(now)
        self.set_trigger()
        out.sort()  # batches from two servers need not be in order
        return out

    def begin_refill(self) -> bool:
        """Marks a refill in flight; returns whether IDs were dropped for age since the last."""
        self.refilling = True
        self.trigger = self.end
        expired, self.dropped = self.dropped, False
        return expired

    def end_refill(self, size: Optional[int], ids: Optional[List[int]], expires: float,
                   now: float) -> None:
        self.refilling = False
        if ids is not None and not self.closed:
            self.batch = size
            self.later.append((ids, expires))
        if self.pos >= self.end:
            self.fresh(now)
        self.set_trigger()

    def close(self) -> None:
        self.closed = True
        self.ids, self.pos, self.end, self.later = [], 0, 0, []
        self.trigger = 0
