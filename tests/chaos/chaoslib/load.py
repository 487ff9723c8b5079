"""Load clients: one thread per `flurry serve` process (more with conns_per_node), each on one
keep-alive HTTP/1.1 connection (http.client; a new one after an error or a `Connection: close`),
asking GET /v1/ids?count=BATCH as fast as it can or at most `rate` requests a second.

Everything is kept in a Stream (one per client thread, so one per process and connection
sequence): every ID (array('Q')), per batch its send and receive times on the monotonic clock
and the wall clock at receipt, every refusal (status, JSON code/reason, Retry-After) and every
transport error (kind, when the request started and when it failed). The checker
(checker.py) works on Streams only.

Transport error kinds:
  refused    connect() refused (nothing listens)
  eof        the connection closed (or reset) before any byte of the response
  truncated  the response began but was cut short (status line, headers or body)
  timeout    no complete response within the client timeout
  other      anything else at the socket level
A 200 whose body is not {"ids":[COUNT decimal strings]} is recorded as a bad response
(always a violation), never as an ID.
"""

import http.client
import json
import socket
import threading
import time
from array import array

ERROR_KINDS = ("refused", "eof", "truncated", "timeout", "other")


class Refusal:
    __slots__ = ("t_send", "t_recv", "status", "code", "reason", "retry_after", "body")

    def __init__(self, t_send, t_recv, status, code, reason, retry_after, body):
        self.t_send, self.t_recv = t_send, t_recv
        self.status, self.code, self.reason = status, code, reason
        self.retry_after, self.body = retry_after, body


class TransportError:
    __slots__ = ("t_send", "t_err", "kind", "detail")

    def __init__(self, t_send, t_err, kind, detail):
        self.t_send, self.t_err, self.kind, self.detail = t_send, t_err, kind, detail


class BadResponse:
    __slots__ = ("t_recv", "status", "detail")

    def __init__(self, t_recv, status, detail):
        self.t_recv, self.status, self.detail = t_recv, status, detail


class Stream:
    """What one client thread got from one process, in the order received."""

    def __init__(self, proc_label, client_index=0, node=None):
        self.proc_label = proc_label
        self.client_index = client_index
        self.node = node  # the nodes.NodeProc (None in tests): its fault windows
        self.ids = array("Q")
        self.batch_end = array("Q")  # ids[batch_end[i-1]:batch_end[i]] is batch i
        self.t_send = array("d")  # monotonic
        self.t_recv = array("d")  # monotonic
        self.wall_recv = array("d")  # time.time() at receipt
        self.refusals = []
        self.errors = []
        self.bad = []
        self.last_ok = None  # monotonic time of the last batch

    @property
    def label(self):
        return f"{self.proc_label}/c{self.client_index}" if self.client_index else self.proc_label

    def add_batch(self, ids, t_send, t_recv, wall_recv):
        self.ids.extend(ids)
        self.batch_end.append(len(self.ids))
        self.t_send.append(t_send)
        self.t_recv.append(t_recv)
        self.wall_recv.append(wall_recv)
        self.last_ok = t_recv

    def batches(self):
        """(start, end) index pairs of the batches."""
        start = 0
        for end in self.batch_end:
            yield start, end
            start = end


def parse_ids(body, count):
    """The IDs of a 200 body {"ids":["...",...]} as ints, or raises ValueError saying why."""
    try:
        j = json.loads(body)
    except ValueError as e:
        raise ValueError(f"not JSON: {e}") from None
    if not isinstance(j, dict) or not isinstance(j.get("ids"), list):
        raise ValueError("no \"ids\" list")
    ids = j["ids"]
    if len(ids) != count:
        raise ValueError(f"{len(ids)} IDs for count={count}")
    for s in ids:
        if not isinstance(s, str) or not s.isdigit() or not s.isascii() or (len(s) > 1 and s[0] == "0"):
            raise ValueError(f"not a decimal ID string: {s!r}")
    return [int(s) for s in ids]


def parse_refusal(body):
    """(code, reason) from an error body {"error":{"code":..,"reason":..,"message":..}}; None for a
    missing part; raises ValueError when the body is not such JSON."""
    j = json.loads(body)
    err = j.get("error") if isinstance(j, dict) else None
    if not isinstance(err, dict):
        raise ValueError("no \"error\" object")
    code, reason = err.get("code"), err.get("reason")
    return (code if isinstance(code, str) and code else None,
            reason if isinstance(reason, str) and reason else None)


class Client(threading.Thread):
    """Loads one process until it is gone (killed, stopped, exited) or stop() is called."""

    def __init__(self, node, stream, batch, rate, timeout, refusal_pause=0.05, error_pause=0.05):
        super().__init__(name=f"client-{stream.label}", daemon=True)
        self.node = node
        self.stream = stream
        self.batch = batch
        self.rate = rate  # requests a second at most; 0: as fast as it can
        self.timeout = timeout
        self.refusal_pause = refusal_pause
        self.error_pause = error_pause
        self._halt = threading.Event()
        self.path = f"/v1/ids?count={batch}"

    def stop(self):
        self._halt.set()

    def _connect(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.node.port, timeout=self.timeout)
        conn.connect()
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def _wait_listening(self):
        """Until the process accepts connections (refusals before that are not errors: the
        process has not opened its port yet). False if it is gone or we are stopped first."""
        while not self._halt.is_set():
            if self.node.finished():
                return False
            try:
                socket.create_connection(("127.0.0.1", self.node.port), timeout=1.0).close()
                return True
            except OSError:
                time.sleep(0.02)
        return False

    def run(self):
        if not self._wait_listening():
            return
        st = self.stream
        conn = None
        interval = 1.0 / self.rate if self.rate else 0.0
        next_at = time.monotonic()
        while not self._halt.is_set():
            if interval:
                now = time.monotonic()
                if now < next_at:
                    if self._halt.wait(next_at - now):
                        break
                next_at = max(next_at + interval, time.monotonic() - interval)
            t_send = time.monotonic()
            began = False
            try:
                if conn is None:
                    conn = self._connect()
                conn.request("GET", self.path)
                r = conn.getresponse()
                began = True
                body = r.read()
                if r.length not in (None, 0):
                    raise http.client.IncompleteRead(body, r.length)
            except Exception as e:  # noqa: BLE001 - every failure is data
                t_err = time.monotonic()
                st.errors.append(TransportError(t_send, t_err, _classify(e, began), f"{type(e).__name__}: {e}"[:200]))
                if conn is not None:
                    conn.close()
                    conn = None
                if self.node.finished():
                    break
                self._halt.wait(self.error_pause)
                continue
            t_recv = time.monotonic()
            wall = time.time()
            if r.status == 200:
                try:
                    ids = parse_ids(body, self.batch)
                except ValueError as e:
                    st.bad.append(BadResponse(t_recv, r.status, f"{e}: {body[:200]!r}"))
                else:
                    st.add_batch(ids, t_send, t_recv, wall)
            else:
                try:
                    code, reason = parse_refusal(body)
                except ValueError:
                    code, reason = None, None
                st.refusals.append(Refusal(t_send, t_recv, r.status, code, reason, r.getheader("Retry-After"),
                                           body[:300]))
            if r.will_close:
                conn.close()
                conn = None
            if r.status != 200:
                self._halt.wait(self.refusal_pause)
        if conn is not None:
            conn.close()


def _classify(e, began):
    if isinstance(e, ConnectionRefusedError):
        return "refused"
    if isinstance(e, (socket.timeout, TimeoutError)):
        return "timeout"
    if isinstance(e, http.client.IncompleteRead):
        return "truncated"
    if isinstance(e, http.client.RemoteDisconnected):
        return "eof"  # closed before the status line
    if isinstance(e, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
        return "truncated" if began else "eof"
    if isinstance(e, http.client.HTTPException):
        return "truncated" if began else "other"
    return "other"
