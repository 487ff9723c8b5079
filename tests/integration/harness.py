"""Shared helpers for the server integration tests (Python 3, standard library only).

A test script does

    import harness as h
    h.init()                        # argv: FLURRY [HTTP_CLIENT]; makes h.WORK, installs cleanup
    srv = h.Server("a", data_dir).start()
    ...
    h.ok()

Every server is started with PR_SET_PDEATHSIG (SIGKILL) and registered; atexit and the
SIGTERM/SIGINT/SIGHUP handlers kill (by PID) every one still running, so a failing or killed test
leaves no server behind. Servers listen on 127.0.0.1 and a free port; a start that loses the
race for the port is retried on another one.
"""

import atexit
import ctypes
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

FLURRY = None  # the flurry binary (absolute)
CLIENT = None  # the C++ HTTP client (absolute), when given
WORK = None  # a fresh directory, removed at exit (kept when FLURRY_IT_KEEP is set)
KEEP = False

_servers = []
_cleaned = False

# The flurry layout's node field: time:41, node:10, seq:12.
SEQ_BITS = 12
NODE_BITS = 10


def log(msg):
    print(msg, flush=True)


class TestFailure(Exception):
    pass


def fail(msg):
    raise TestFailure(msg)


def check(cond, msg):
    if not cond:
        fail(msg)


def node_of(id_, seq_bits=SEQ_BITS, node_bits=NODE_BITS):
    return (id_ >> seq_bits) & ((1 << node_bits) - 1)


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    # PR_SET_PDEATHSIG = 1: the server gets SIGKILL if the test process dies.
    _libc().prctl(1, signal.SIGKILL, 0, 0, 0)


# The same for a server started by Server.launch, set by setpriv before it execs the server (same
# PID) instead of by Python code between fork and exec: in a test process that runs gRPC's or its
# own threads, code run in the child after fork (ctypes, dlopen) can block for ever on a lock one
# of those threads held at the fork (grpc_tokens.py hung in subprocess.Popen now and then).
DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "KILL", "--"]


def cleanup():
    global _cleaned
    if _cleaned:
        return
    _cleaned = True
    for s in _servers:
        s.kill()
    if WORK and not KEEP:
        shutil.rmtree(WORK, ignore_errors=True)


def _on_signal(signum, _frame):
    cleanup()
    os._exit(128 + signum)


def init(need_client=False):
    """Parses argv (FLURRY [CLIENT]), makes WORK, installs the cleanup."""
    global FLURRY, CLIENT, WORK, KEEP
    KEEP = bool(os.environ.get("FLURRY_IT_KEEP"))
    if len(sys.argv) < 2:
        print(f"usage: {sys.argv[0]} path/to/flurry [path/to/flurry_http_client]", file=sys.stderr)
        sys.exit(2)
    FLURRY = os.path.realpath(sys.argv[1])
    if not os.access(FLURRY, os.X_OK):
        print(f"FAIL: not an executable: {FLURRY}", file=sys.stderr)
        sys.exit(1)
    if len(sys.argv) > 2:
        CLIENT = os.path.realpath(sys.argv[2])
    if need_client and not (CLIENT and os.access(CLIENT, os.X_OK)):
        print("FAIL: the C++ HTTP client was not given", file=sys.stderr)
        sys.exit(1)
    WORK = tempfile.mkdtemp(prefix="flurry-it-")
    os.environ.pop("FAKETIME", None)
    os.environ.pop("LD_PRELOAD", None)
    for k in list(os.environ):  # the tests set every FLURRY_* variable they want themselves
        if k.startswith("FLURRY_"):
            del os.environ[k]
    os.environ["LC_ALL"] = "C"
    # The default data directory ($XDG_STATE_HOME/flurry) inside WORK, never the machine's.
    os.environ["XDG_STATE_HOME"] = os.path.join(WORK, "state")
    # Tests running at once are separate hosts to the node-ID host guard (host_guard.h).
    os.environ["FLURRY_HOST_GUARD_SCOPE"] = WORK
    # And they keep their host-wide records (host guards, horizons, segment floors: host_dir.h) in
    # WORK, never among the machine's: a test's faked clock must not reach another test's servers.
    os.environ["FLURRY_HOST_DIR"] = os.path.join(WORK, "host")
    os.makedirs(os.environ["FLURRY_HOST_DIR"], exist_ok=True)
    os.chmod(os.environ["FLURRY_HOST_DIR"], 0o1777)  # as /var/tmp: servers run as nobody too
    # gRPC on a port of each server's choosing: tests running at once never race for 7610.
    os.environ["FLURRY_GRPC_LISTEN"] = "127.0.0.1:0"
    atexit.register(cleanup)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)


def run_main(fn):
    """Runs fn(); prints 'ok' or the failure (and the servers' last log lines), exits 0 or 1."""
    try:
        fn()
    except TestFailure as e:
        print(f"FAIL: {e}", file=sys.stderr, flush=True)
        for s in _servers:
            s.dump_log()
        cleanup()
        sys.exit(1)
    except Exception:
        import traceback

        traceback.print_exc()
        print("FAIL: unexpected exception", file=sys.stderr, flush=True)
        for s in _servers:
            s.dump_log()
        cleanup()
        sys.exit(1)
    cleanup()
    print("ok", flush=True)
    sys.exit(0)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# --- HTTP ----------------------------------------------------------------------------------------


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # lower-case name -> value
        self.body = body  # bytes

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            fail(f"not JSON (status {self.status}): {self.body[:300]!r}")

    def __repr__(self):
        return f"<{self.status} {self.headers.get('content-type', '')} {self.body[:300]!r}>"


def request(port, path, method="GET", headers=None, body=None, timeout=10.0, conn=None):
    """One request; a fresh connection unless conn (an http.client.HTTPConnection) is given."""
    own = conn is None
    if own:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
    finally:
        if own:
            conn.close()


def get_ids(port, count, conn=None, timeout=30.0, **params):
    """GET /v1/ids?count=N; fails unless 200 with count decimal IDs; returns them as ints."""
    q = f"count={count}" + "".join(f"&{k}={v}" for k, v in params.items())
    r = request(port, f"/v1/ids?{q}", conn=conn, timeout=timeout)
    check(r.status == 200, f"GET /v1/ids?{q}: expected 200, got {r}")
    j = r.json()
    ids = j.get("ids") if isinstance(j, dict) else None
    check(isinstance(ids, list) and len(ids) == count, f"GET /v1/ids?{q}: bad body {r.body[:300]!r}")
    check(all(isinstance(x, str) and x.isdigit() for x in ids), f"IDs are not decimal strings: {ids[:5]}")
    return [int(x) for x in ids]


def check_increasing(ids, what, above=None):
    check(all(a < b for a, b in zip(ids, ids[1:])), f"{what}: IDs not strictly increasing")
    if above is not None and ids:
        check(ids[0] > above, f"{what}: first ID {ids[0]} not above {above}")


def check_error_body(r, status, what, code=None, reason=None):
    """r must be `status` with {"error":{"code":..., "message":...}}; returns the error object.
    With `code`, error.code must be that canonical code name; with `reason`, error.reason must be
    that reason ("" for none: the field is left out when it says no more than the code)."""
    check(r.status == status, f"{what}: expected {status}, got {r}")
    try:
        j = json.loads(r.body)
    except ValueError:
        fail(f"{what}: error body is not JSON: {r.body[:300]!r}")
    err = j.get("error") if isinstance(j, dict) else None
    check(
        isinstance(err, dict) and isinstance(err.get("code"), str) and err["code"]
        and isinstance(err.get("message"), str) and err["message"],
        f"{what}: error body lacks error.code/error.message: {r.body[:300]!r}",
    )
    if code is not None:
        check(err["code"] == code, f"{what}: error.code {err['code']!r}, not {code!r}: {r.body[:300]!r}")
    if reason is not None:
        got = err.get("reason", "")
        check(got == reason, f"{what}: error.reason {got!r}, not {reason!r}: {r.body[:300]!r}")
    return err


def curl(port, path, method=None, extra=()):
    """curl the path; returns Response (headers from the last response)."""
    hdr = os.path.join(WORK, "curl-headers")
    body = os.path.join(WORK, "curl-body")
    cmd = ["curl", "-sS", "--max-time", "30", "-D", hdr, "-o", body]
    if method:
        cmd += ["-X", method]
    cmd += list(extra) + [f"http://127.0.0.1:{port}{path}"]
    p = subprocess.run(cmd, capture_output=True)
    check(p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.decode()[:300]}")
    status, headers = 0, {}
    with open(hdr, "rb") as f:
        for line in f.read().decode("latin-1").splitlines():
            m = re.match(r"HTTP/\S+ (\d+)", line)
            if m:
                status, headers = int(m.group(1)), {}
            elif ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
    with open(body, "rb") as f:
        data = f.read()
    return Response(status, headers, data)


def cpp_client(port, paths, method=None):
    """Runs the C++ client on one keep-alive connection; returns a Response per path."""
    check(CLIENT is not None, "the C++ client was not given")
    cmd = [CLIENT] + (["-X", method] if method else []) + ["127.0.0.1", str(port)] + list(paths)
    p = subprocess.run(cmd, capture_output=True, timeout=60)
    check(p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.decode()[:300]}")
    out = []
    for line in p.stdout.decode().splitlines():
        j = json.loads(line)
        headers = {"content-type": j["content_type"]}
        if j["retry_after"]:
            headers["retry-after"] = j["retry_after"]
        out.append(Response(j["status"], headers, j["body"].encode()))
    check(len(out) == len(paths), f"C++ client: {len(out)} responses for {len(paths)} requests")
    return out


def metric(text, name, labels=None):
    """Sum of the samples of a Prometheus metric whose labels include `labels`; None if absent."""
    total, found = 0.0, False
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)", line)
        if not m or m.group(1) != name:
            continue
        lab = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if labels and any(lab.get(k) != v for k, v in labels.items()):
            continue
        total += float(m.group(4))
        found = True
    return total if found else None


# --- servers -------------------------------------------------------------------------------------


def binary_for_any_user(name="any-user"):
    """A copy of the flurry binary with its modules (which it loads from beside itself) in
    WORK/name, a directory every user can reach, for a server run as another user (setpriv): the
    build tree may lie where only root can go, such as a clone in /root (mode 0700). WORK is
    opened to others (mkdtemp makes it 0700). Returns the copy's path."""
    base = os.path.join(WORK, name)
    os.makedirs(base, exist_ok=True)
    os.chmod(WORK, 0o755)
    os.chmod(base, 0o755)
    built = os.path.dirname(FLURRY)
    for file in ["flurry"] + sorted(f for f in os.listdir(built) if f.startswith("flurry_") and f.endswith(".so")):
        shutil.copy2(os.path.join(built, file) if file != "flurry" else FLURRY, os.path.join(base, file))
        os.chmod(os.path.join(base, file), 0o755)
    return os.path.join(base, "flurry")


_BIND_RACE = re.compile(r"already in use|eaddrinuse|address in use", re.I)


def lsan_tracer_crashed(log_text):
    """Whether a sanitizer build's process ended in LeakSanitizer's own fatal error: its tracer
    thread, which stops every thread to scan for leaks at exit, crashed ("Tracer caught signal 11
    ... LeakSanitizer has encountered a fatal error"), now and then on this platform. The process
    had stopped cleanly (event=stopped logged) and no sanitizer reported anything: a leak report,
    an ASan error or a UBSan runtime error still fails the test."""
    tail = log_text[-4000:]
    return ("Tracer caught signal" in tail and "LeakSanitizer has encountered a fatal error" in tail
            and "event=stopped" in tail and "detected memory leaks" not in log_text
            and "ERROR: AddressSanitizer" not in log_text and "runtime error:" not in log_text)


class Server:
    """One `flurry serve` process on 127.0.0.1 and a free port."""

    def __init__(self, name, data_dir, args=(), env=None, wrapper=(), binary=None, cwd=None,
                 preexec=True):
        self.name = name
        self.data_dir = data_dir
        self.args = list(args)
        self.env = dict(os.environ) if env is None else env
        self.wrapper = list(wrapper)
        self.binary = binary or FLURRY
        self.cwd = cwd or WORK
        self.preexec = preexec
        self.proc = None
        self.port = None
        self.logpath = os.path.join(WORK, f"{name}.log")
        self.started_at = None
        self.exit_elapsed = None

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def launch(self, port=None):
        """Starts the process (does not wait)."""
        self.port = port or free_port()
        cmd = self.wrapper + [self.binary, "serve", "--listen", f"127.0.0.1:{self.port}",
                              "--data-dir", self.data_dir] + self.args
        logf = open(self.logpath, "ab")
        logf.write(f"== {' '.join(cmd)}\n".encode())
        logf.flush()
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen((DIE_WITH_PARENT if self.preexec else []) + cmd, stdin=subprocess.DEVNULL,
                                     stdout=logf, stderr=subprocess.STDOUT, env=self.env, cwd=self.cwd)
        logf.close()
        _servers.append(self)
        return self

    def log_text(self):
        try:
            with open(self.logpath, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def dump_log(self, lines=40):
        text = self.log_text().splitlines()
        print(f"--- {self.name} log (last {lines} lines of {len(text)}) ---", file=sys.stderr)
        for line in text[-lines:]:
            print(f"  {line}", file=sys.stderr)
        sys.stderr.flush()

    def wait_http(self, timeout=15.0):
        """Waits until /healthz answers; False if the process exited first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                return False
            try:
                request(self.port, "/healthz", timeout=2)
                return True
            except (OSError, http.client.HTTPException):
                time.sleep(0.01)
        fail(f"{self.name}: no HTTP answer on port {self.port} within {timeout} s")

    def wait_ready(self, timeout=15.0):
        """Waits for /readyz 200; returns its JSON."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            check(self.alive(), f"{self.name} exited with {self.proc.returncode} before it was ready")
            try:
                r = request(self.port, "/readyz", timeout=2)
                last = r
                if r.status == 200:
                    j = r.json()
                    check(j.get("ready") is True and isinstance(j.get("node"), int),
                          f"{self.name}: /readyz 200 with body {r.body!r}")
                    return j
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.01)
        fail(f"{self.name}: not ready within {timeout} s (last /readyz: {last})")

    def start(self, ready=True, timeout=15.0, attempts=5):
        """Launches on a free port (retrying a lost bind race) and waits for /readyz 200."""
        for attempt in range(attempts):
            self.launch()
            if self.wait_http(timeout):
                break
            self.proc.wait()
            if attempt + 1 < attempts and _BIND_RACE.search(self.log_text()):
                log(f"{self.name}: port {self.port} was taken, retrying")
                continue
            fail(f"{self.name} exited with {self.proc.returncode} at start")
        self.ready = self.wait_ready(timeout) if ready else None
        self.ready_at = time.monotonic()
        return self

    @property
    def node(self):
        return self.ready["node"]

    def stop(self, sig=signal.SIGTERM, timeout=15.0):
        """Sends sig; returns (exit code, seconds until exit). Kills with SIGKILL after timeout."""
        if not self.alive():
            return self.proc.returncode, 0.0
        t0 = time.monotonic()
        os.kill(self.proc.pid, sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            fail(f"{self.name} did not exit within {timeout} s of signal {sig}")
        self.exit_elapsed = time.monotonic() - t0
        if rc != 0 and lsan_tracer_crashed(self.log_text()):
            log(f"{self.name}: exit code {rc} from LeakSanitizer's own tracer crashing at exit, after a "
                "clean stop (a sanitizer runtime fault, not flurry's): taken as 0, this process's leak "
                "check is lost")
            rc = 0
        return rc, self.exit_elapsed

    def kill(self):
        """SIGKILL by PID and reap; no-op when already gone."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass


def refused_start(server, what, timeout=30):
    """Launches `server` and expects it to exit 1 at start (a refusal); returns (its log, exit code
    checked). Fails when it is still running after `timeout` s (it was not refused)."""
    server.launch()
    try:
        rc = server.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        server.kill()
        fail(f"{what}: the server started (still running after {timeout} s) instead of being refused")
    log = server.log_text()
    check(rc == 1, f"{what}: exited {rc}, expected a refusal (1): {log[-600:]}")
    return log


# --- raw sockets ---------------------------------------------------------------------------------
# For requests http.client will not send (bad framing, Expect, HEAD without Content-Length, no
# Host) and for watching exactly what comes back on one connection.

_raw_leftover = {}  # socket -> bytes read past the previous response (pipelining)


def raw_connect(port, timeout=10.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def raw_read_response(sock, timeout=10.0, head=False):
    """Reads one response (a 1xx interim one too) from sock; returns Response (with .version and
    .raw_head added) or None when the server closed or reset the connection before a response
    began. `head`: the response answers a HEAD request (no body whatever the headers say). A body
    without Content-Length (other than for HEAD and 1xx) is read to the end of the stream. Fails
    on a timeout or a response cut short."""
    sock.settimeout(timeout)
    buf = _raw_leftover.pop(sock, b"")
    try:
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                check(not buf, f"connection closed in the middle of a response head: {buf[:200]!r}")
                return None
            buf += chunk
        raw_head, body = buf.split(b"\r\n\r\n", 1)
        lines = raw_head.decode("latin-1").split("\r\n")
        m = re.match(r"HTTP/(1\.[01]) (\d{3})", lines[0])
        check(m is not None, f"bad status line {lines[0]!r}")
        status = int(m.group(2))
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        if head or status // 100 == 1:
            n = 0
        elif "content-length" in headers:
            n = int(headers["content-length"])
        else:
            n = None
        while n is None or len(body) < n:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        if n is not None:
            check(len(body) >= n, f"response body cut short: {len(body)} of {n} bytes")
            _raw_leftover[sock] = body[n:]
            body = body[:n]
        r = Response(status, headers, body)
        r.version = m.group(1)
        r.raw_head = raw_head
        return r
    except ConnectionResetError:
        check(not buf, f"connection reset in the middle of a response: {buf[:200]!r}")
        return None
    except socket.timeout:
        fail(f"no response within {timeout} s (got {buf[:200]!r})")


def raw_closed_by_peer(sock, timeout):
    """True if the server closes the connection (EOF or reset) within timeout seconds; bytes
    that arrive meanwhile fail the check (nothing more was to be sent)."""
    sock.settimeout(timeout)
    extra = _raw_leftover.pop(sock, b"")
    check(not extra, f"unexpected bytes after the last response: {extra[:200]!r}")
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
            fail(f"unexpected bytes after the last response: {data[:200]!r}")
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def timed_request(port, path, method="GET", timeout=10.0):
    """request() on a fresh connection; returns (Response, seconds it took)."""
    t0 = time.monotonic()
    r = request(port, path, method=method, timeout=timeout)
    return r, time.monotonic() - t0


# --- the fleet as a server shows it -------------------------------------------------------------


def check_nodes_route(server, listed=None, static=False):
    """GET /v1/nodes on `server`: its own row is live and marked this_process (the only one so
    marked), with a lease that runs out in the future (never, for a static node). With `listed`
    (`flurry nodes list --json`'s nodes by node ID, read just before), the route lists the same node
    IDs with the same states, owners and tokens. Returns the route's nodes by node ID."""
    r = request(server.port, "/v1/nodes")
    check(r.status == 200, f"{server.name}: GET /v1/nodes: {r.status} {r.text[:300]}")
    body = r.json()
    nodes = {n["node"]: n for n in body["nodes"]}
    mine = [n for n in body["nodes"] if n["this_process"]]
    check(len(mine) == 1 and mine[0]["node"] == server.node == body["this_node"]
          and mine[0]["token"] == body["this_token"] and mine[0]["state"] == "live"
          and mine[0]["owner"].endswith(f":{server.pid}"),
          f"{server.name} (node {server.node}, pid {server.pid}): /v1/nodes marks {mine} as this process")
    remaining = mine[0]["lease_remaining_ms"]
    check(remaining is None if static else isinstance(remaining, int) and remaining > 0,
          f"{server.name}: its lease's remaining time in /v1/nodes is {remaining}")
    if listed is not None:
        check(sorted(nodes) == sorted(listed), f"/v1/nodes lists {sorted(nodes)}, nodes list {sorted(listed)}")
        for node, n in listed.items():
            got = {k: nodes[node][k] for k in ("state", "owner", "token")}
            want = {k: n[k] for k in ("state", "owner", "token")}
            check(got == want, f"node {node}: /v1/nodes says {got}, nodes list {want}")
    return nodes


# --- libfaketime with a clock that moves while the server runs -----------------------------------

# The variant for threaded programs: it serialises the clock reads of a process's threads. The
# plain libfaketime.so.1, with FAKETIME_NO_CACHE and several threads reading the clock, now and
# then hands one of them the real time for a moment: a clock step no real clock makes.
LIBFAKETIME = "/usr/$LIB/faketime/libfaketimeMT.so.1"


def check_libfaketime():
    p = subprocess.run(["sh", "-c", "ls /usr/lib/*/faketime/libfaketimeMT.so.1"], capture_output=True)
    if p.returncode != 0:
        fail("libfaketime is not installed (Debian package faketime)")


def _preload_env(env):
    env["LD_PRELOAD"] = LIBFAKETIME
    # A clock step moves the wall clock, not CLOCK_MONOTONIC. Faking the monotonic clock as well
    # (libfaketime's default) also makes libfaketime 0.9.10 hang timed waits on condition
    # variables: not what the tests are about.
    env["DONT_FAKE_MONOTONIC"] = "1"
    # In sanitizer builds libfaketime is preloaded ahead of the ASan runtime; let ASan accept it.
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":" if env.get("ASAN_OPTIONS") else "") + \
        "verify_asan_link_order=0"
    return env


def fixed_offset_env(offset):
    """The environment for a process whose wall clock is the real one moved by `offset`
    (libfaketime's syntax: "-10s", "+1h") for its whole life."""
    env = _preload_env(dict(os.environ))
    env.pop("FAKETIME_TIMESTAMP_FILE", None)
    env["FAKETIME"] = offset
    return env


def set_fake_offset(path, offset):
    """Writes the offset (libfaketime syntax: "+0", "-3", "-2.5") a faked_clock_env process reads."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{offset}\n")
    os.replace(tmp, path)


def faked_clock_env(path, offset="+0"):
    """The environment for a process whose wall clock is the real one moved by the offset in the
    file `path` (set_fake_offset), read again at every clock read: a clock step while it runs.
    The monotonic clock is left alone, as by a real step (and libfaketime 0.9.10 hangs timed
    condition-variable waits otherwise)."""
    set_fake_offset(path, offset)
    env = _preload_env(dict(os.environ))
    env.pop("FAKETIME", None)
    env["FAKETIME_TIMESTAMP_FILE"] = path
    env["FAKETIME_NO_CACHE"] = "1"
    return env


def wait_for(cond, what, timeout=30.0, period=0.02):
    """Polls cond() until it returns something true and returns that; fails naming `what` after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(period)
    fail(f"timed out after {timeout} s waiting for {what}")


# --- logs ----------------------------------------------------------------------------------------


def wait_log(server, pattern, timeout=5.0):
    """Waits until the server's log matches the regex; returns the match (fails on timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        m = re.search(pattern, server.log_text())
        if m:
            return m
        if time.monotonic() >= deadline:
            fail(f"{server.name}: no log line matching {pattern!r} within {timeout} s")
        time.sleep(0.02)
