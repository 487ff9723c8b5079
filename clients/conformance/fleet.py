#!/usr/bin/env python3
"""Runs a client's test command against a real flurry fleet with fault injection.

    fleet.py --flurry path/to/flurry [--servers 2] [--tag orders]... [--layout L] -- CMD ARGS...

Starts N `flurry serve` processes on 127.0.0.1 (free ports, one temporary data directory shared
by all, so they share a SQLite node-ID registry and hold distinct node IDs, and one SQLite
segment store, so their segment ranges are disjoint), creates the tags, puts a fault-injecting
proxy in front of each server, runs CMD with the environment below, stops everything by PID and
exits with CMD's status.

Environment given to CMD:
  FLURRY_TEST_ENDPOINTS     http://127.0.0.1:P,...  the proxies, in server order (what clients use)
  FLURRY_TEST_SERVERS       http://127.0.0.1:S,...  the servers themselves (metrics, benchmarks)
  FLURRY_TEST_CONTROL       http://127.0.0.1:C      the control API below
  FLURRY_TEST_ADMIN_TOKEN   the admin token (scopes admin, orders:decode)
  FLURRY_TEST_TAGS          the tags created, separated by commas
  FLURRY_CONFORMANCE_CASES  the absolute path of cases.json

Control API (plain HTTP; every answer is JSON; i is the server's index from 0):
  POST /servers/{i}/fault?status=503&count=N[&retry_after=S][&code=C][&reason=R]
        the proxy answers the next N ID, segment or tso requests (see stats; /v1/layout and the
        other routes pass through) itself with that status and flurry's error body
        ({"error":{"code":C,"reason":R,"message":"injected by fleet.py"}}; code defaults to
        UNAVAILABLE, no reason unless given), with `Retry-After: S` when given. count=0 clears.
  POST /servers/{i}/delay?ms=M&count=N
        the proxy holds each of the next N ID, segment, tso or order-number decode requests M ms
        before forwarding it (a kill ends the hold: the held request's connection is then
        reset, as by a crashed server).
  POST /servers/{i}/kill     SIGKILL the server; its proxy resets every open connection and
                             stops listening (new connections are refused).
  POST /servers/{i}/start    start it again on the same port and data directory; answers once
                             /readyz says ready and the proxy listens again.
  GET  /servers/{i}/stats    {"ids":{"requests":n,"in_flight":k,"max_in_flight":m},
                              "segments":{...the same...},"tso":{...the same...},
                              "faulted":f,"reset":r,"other":o}
                             ID requests are /v1/ids (not /v1/ids/{id}); segment requests are
                             /v1/segments/{tag}/range and /ids; tso requests /v1/tso (a
                             follower's 307 sends the client to the leader's own address,
                             past the proxy, so only the requests before it are counted). `requests` counts every one the
                             proxy received, faulted ones included.
  POST /servers/{i}/reset    zero the stats.
  POST /servers/{i}/clock?offset=S
                             with --faketime: set server i's wall clock to the real one plus S
                             seconds (libfaketime reads the offset file at every clock read, so
                             this is a clock step while the server runs; its monotonic clock is
                             left alone, as by a real step).
  GET  /                     the endpoints, servers and tags as above.

Standard library only; runs on any Python 3.9+.
"""

import argparse
import http.client
import http.server
import json
import os
import re
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases.json")

# The server gets SIGKILL if this process dies, set by setpriv before exec (same PID).
DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "KILL", "--"]
# libfaketime from Debian's faketime package (--faketime).
LIBFAKETIME = "/usr/$LIB/faketime/libfaketimeMT.so.1"


def log(msg):
    print(f"fleet: {msg}", file=sys.stderr, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http_request(port, path, method="GET", headers=None, body=None, timeout=10.0):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


class Server:
    """One `flurry serve` on 127.0.0.1; restartable on the same port."""

    def __init__(self, flurry, name, work, data_dir, args, faketime=False):
        self.flurry = flurry
        self.name = name
        self.work = work
        self.data_dir = data_dir
        self.args = list(args)
        self.port = None
        self.proc = None
        self.logpath = os.path.join(work, f"{name}.log")
        self.clock_file = None
        if faketime:
            self.clock_file = os.path.join(work, f"{name}.clock")
            self.set_clock_offset(0)

    def set_clock_offset(self, seconds):
        """libfaketime's relative offset ("+0", "-2"), replaced atomically."""
        tmp = self.clock_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{float(seconds):+g}\n")
        os.replace(tmp, self.clock_file)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def environment(self):
        if self.clock_file is None:
            return None  # this process's own
        env = dict(os.environ, LD_PRELOAD=LIBFAKETIME, FAKETIME_TIMESTAMP_FILE=self.clock_file,
                   FAKETIME_NO_CACHE="1", DONT_FAKE_MONOTONIC="1")
        env.pop("FAKETIME", None)
        return env

    def start(self, port=None, timeout=20.0):
        for attempt in range(5):
            self.port = port or free_port()
            cmd = DIE_WITH_PARENT + [self.flurry, "serve", "--listen", f"127.0.0.1:{self.port}",
                                     "--data-dir", self.data_dir] + self.args
            with open(self.logpath, "ab") as logf:
                logf.write(f"== {' '.join(cmd)}\n".encode())
                logf.flush()
                self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf,
                                             stderr=subprocess.STDOUT, cwd=self.work, env=self.environment())
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.alive():
                try:
                    status, _, _ = http_request(self.port, "/readyz", timeout=2)
                    if status == 200:
                        return self
                except (OSError, http.client.HTTPException):
                    pass
                time.sleep(0.02)
            if self.alive():
                self.kill()
                raise RuntimeError(f"{self.name}: not ready within {timeout} s; see {self.logpath}")
            if port is None and "Address already in use" in self.log_text():
                continue  # lost the race for a free port: try another
            if port is not None and "Address already in use" in self.log_text() and attempt < 4:
                time.sleep(0.5)  # the old socket of a killed server may linger briefly
                continue
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode} at start:\n"
                               + self.log_text()[-2000:])
        raise RuntimeError(f"{self.name}: could not bind a port")

    def log_text(self):
        try:
            with open(self.logpath, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


def _route_kind(path):
    p = path.split("?", 1)[0]
    if p == "/v1/ids":
        return "ids"
    if re.fullmatch(r"/v1/segments/[^/]+/(range|ids)", p):
        return "segments"
    if p == "/v1/tso":
        return "tso"
    return "other"


def _reset_socket(sock):
    """Closes with RST, as a crashed peer's kernel would."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class Proxy:
    """An HTTP/1.1 proxy in front of one server that can answer errors, hold requests and play
    a killed server. One thread per client connection; one upstream connection per client
    connection (clients do not pipeline)."""

    def __init__(self, server):
        self.server = server
        self.port = free_port()
        self.lock = threading.Lock()
        self.listener = None
        self.conns = set()
        self.dead = threading.Event()
        self.fault = None  # (status, retry_after, code, reason, count)
        self.delay = None  # (ms, count)
        self.reset_stats()

    def reset_stats(self):
        with self.lock:
            self.stats = {"ids": {"requests": 0, "in_flight": 0, "max_in_flight": 0},
                          "segments": {"requests": 0, "in_flight": 0, "max_in_flight": 0},
                          "tso": {"requests": 0, "in_flight": 0, "max_in_flight": 0},
                          "faulted": 0, "reset": 0, "other": 0}

    def listen(self):
        for _ in range(50):
            try:
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", self.port))
                s.listen(256)
                break
            except OSError:
                s.close()
                time.sleep(0.1)
        else:
            raise RuntimeError(f"proxy: cannot listen on {self.port} again")
        self.listener = s
        self.dead.clear()
        threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def play_dead(self):
        self.dead.set()
        with self.lock:
            listener, self.listener = self.listener, None
            conns = list(self.conns)
            self.conns.clear()
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        for c in conns:
            _reset_socket(c)

    def _accept(self, listener):
        while True:
            try:
                c, _ = listener.accept()
            except OSError:
                return
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                if self.dead.is_set():
                    _reset_socket(c)
                    continue
                self.conns.add(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _take_fault(self):
        with self.lock:
            if self.fault and self.fault[4] > 0:
                status, retry_after, code, reason, count = self.fault
                self.fault = (status, retry_after, code, reason, count - 1)
                self.stats["faulted"] += 1
                return status, retry_after, code, reason
        return None

    def _take_delay(self):
        with self.lock:
            if self.delay and self.delay[1] > 0:
                ms, count = self.delay
                self.delay = (ms, count - 1)
                return ms
        return 0

    def _serve(self, c):
        upstream = None
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = c.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                method, target, _version = lines[0].split(" ", 2)
                headers = []
                length = 0
                close = False
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    value = value.strip()
                    headers.append((name, value))
                    if name.lower() == "content-length":
                        length = int(value)
                    if name.lower() == "connection" and value.lower() == "close":
                        close = True
                while len(buf) < length:
                    chunk = c.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                body, buf = buf[:length], buf[length:]
                kind = _route_kind(target)
                with self.lock:
                    if kind == "other":
                        self.stats["other"] += 1
                    else:
                        self.stats[kind]["requests"] += 1
                fault = self._take_fault() if kind != "other" else None
                if fault:
                    status, retry_after, code, reason = fault
                    err = {"code": code, "message": "injected by fleet.py"}
                    if reason:
                        err["reason"] = reason
                    payload = json.dumps({"error": err}).encode()
                    extra = f"Retry-After: {retry_after}\r\n" if retry_after is not None else ""
                    c.sendall((f"HTTP/1.1 {status} {http.client.responses.get(status, 'Error')}\r\n"
                               f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
                               f"{extra}\r\n").encode() + payload)
                    continue
                if kind != "other":
                    with self.lock:
                        st = self.stats[kind]
                        st["in_flight"] += 1
                        st["max_in_flight"] = max(st["max_in_flight"], st["in_flight"])
                try:
                    # Held: ID and segment requests, and order-number decodes (the clients'
                    # close tests hold one); never /v1/layout or /metrics.
                    held = kind != "other" or target.startswith("/v1/order-numbers/")
                    ms = self._take_delay() if held else 0
                    if ms and self.dead.wait(ms / 1000.0):
                        raise ConnectionResetError("killed while the request was held")
                    if self.dead.is_set():
                        raise ConnectionResetError("server killed")
                    if upstream is None:
                        upstream = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=60)
                    upstream.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
                    for name, value in headers:
                        if name.lower() not in ("connection", "keep-alive", "content-length"):
                            upstream.putheader(name, value)
                    if body or method in ("POST", "PUT"):
                        upstream.putheader("Content-Length", str(len(body)))
                    upstream.endheaders(body if body else None)
                    r = upstream.getresponse()
                    data = r.read()
                    if self.dead.is_set():
                        raise ConnectionResetError("server killed")
                finally:
                    if kind != "other":
                        with self.lock:
                            self.stats[kind]["in_flight"] -= 1
                out = [f"HTTP/1.1 {r.status} {r.reason}\r\n"]
                for name, value in r.getheaders():
                    if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                        out.append(f"{name}: {value}\r\n")
                if method == "HEAD":
                    out.append("\r\n")
                    c.sendall("".join(out).encode("latin-1"))
                else:
                    out.append(f"Content-Length: {len(data)}\r\n\r\n")
                    c.sendall("".join(out).encode("latin-1") + data)
                if close:
                    return
        except (OSError, http.client.HTTPException, ValueError):
            with self.lock:
                self.stats["reset"] += 1
            _reset_socket(c)
            c = None
        finally:
            if upstream is not None:
                upstream.close()
            if c is not None:
                with self.lock:
                    self.conns.discard(c)
                try:
                    c.close()
                except OSError:
                    pass


class Fleet:
    def __init__(self, flurry, servers, tags, layout, extra_args, faketime=False):
        self.work = tempfile.mkdtemp(prefix="flurry-fleet-")
        self.token = secrets.token_hex(32)
        token_file = os.path.join(self.work, "admin-token")
        with open(token_file, "w") as f:
            f.write(self.token + "\n")
        os.chmod(token_file, 0o600)
        data = os.path.join(self.work, "data")
        os.makedirs(data)
        args = ["--grpc-listen", "", "--log-level", "warn",
                "--segment-stores", "sqlite:" + os.path.join(self.work, "segments.db"),
                "--admin-token-file", token_file, "--layout", layout] + list(extra_args)
        self.servers = [Server(flurry, f"server{i}", self.work, data, args, faketime)
                        for i in range(servers)]
        self.proxies = []
        self.tags = list(tags)
        self.control = None
        self.jobs = []  # (fn, box, done) for the main thread

    def start(self):
        for s in self.servers:
            s.start()
            p = Proxy(s)
            p.listen()
            self.proxies.append(p)
        for tag in self.tags:
            body = json.dumps({"tag": tag, "start": 1, "step": 1000,
                               "description": "created by fleet.py"}).encode()
            status, _, data = http_request(self.servers[0].port, "/v1/segments", "POST",
                                           {"Authorization": f"Bearer {self.token}",
                                            "Content-Type": "application/json"}, body)
            if status != 201:
                raise RuntimeError(f"creating tag {tag}: {status} {data[:300]!r}")
        self.control = ControlServer(self)
        return self

    def restart(self, i):
        server, proxy = self.servers[i], self.proxies[i]
        if not server.alive():
            server.start(port=server.port)
        if proxy.listener is None:
            proxy.listen()

    def on_main_thread(self, fn):
        """Runs fn on the main thread (which waits for the test command) and returns its result."""
        done = threading.Event()
        box = {}
        self.jobs.append((fn, box, done))
        done.wait()
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def run_jobs(self):
        while self.jobs:
            fn, box, done = self.jobs.pop(0)
            try:
                box["value"] = fn()
            except Exception as e:  # handed to the control request that asked
                box["error"] = e
            done.set()

    def env(self):
        return {
            "FLURRY_TEST_ENDPOINTS": ",".join(f"http://127.0.0.1:{p.port}" for p in self.proxies),
            "FLURRY_TEST_SERVERS": ",".join(f"http://127.0.0.1:{s.port}" for s in self.servers),
            "FLURRY_TEST_CONTROL": f"http://127.0.0.1:{self.control.port}",
            "FLURRY_TEST_ADMIN_TOKEN": self.token,
            "FLURRY_TEST_TAGS": ",".join(self.tags),
            "FLURRY_CONFORMANCE_CASES": CASES,
        }

    def stop(self, keep=False):
        if self.control:
            self.control.close()
        for p in self.proxies:
            p.play_dead()
        for s in self.servers:
            s.stop()
        if keep:
            log(f"kept {self.work}")
        else:
            shutil.rmtree(self.work, ignore_errors=True)


class ControlServer:
    def __init__(self, fleet):
        handler = self._handler(fleet)
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    @staticmethod
    def _handler(fleet):
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_):
                pass

            def _answer(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _route(self, method):
                u = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(u.query))
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                if u.path == "/" and method == "GET":
                    return self._answer(200, fleet.env())
                m = re.fullmatch(r"/servers/(\d+)/(fault|delay|kill|start|stats|reset|clock)", u.path)
                if not m or int(m.group(1)) >= len(fleet.servers):
                    return self._answer(404, {"error": f"no such control route: {method} {u.path}"})
                i, verb = int(m.group(1)), m.group(2)
                proxy, server = fleet.proxies[i], fleet.servers[i]
                try:
                    if verb == "stats" and method == "GET":
                        with proxy.lock:
                            return self._answer(200, json.loads(json.dumps(proxy.stats)))
                    if method != "POST":
                        return self._answer(405, {"error": f"{verb} takes POST"})
                    if verb == "fault":
                        ra = q.get("retry_after")
                        proxy.fault = (int(q.get("status", "503")), ra, q.get("code", "UNAVAILABLE"),
                                       q.get("reason"), int(q.get("count", "1")))
                    elif verb == "delay":
                        proxy.delay = (int(q["ms"]), int(q.get("count", "1")))
                    elif verb == "kill":
                        proxy.play_dead()
                        server.kill()
                    elif verb == "start":
                        # On the main thread: the server's parent-death signal follows the thread
                        # that started it, and this request's thread ends with the request.
                        fleet.on_main_thread(lambda: fleet.restart(i))
                    elif verb == "reset":
                        proxy.reset_stats()
                    elif verb == "clock":
                        if server.clock_file is None:
                            return self._answer(400, {"error": "the fleet was started without --faketime"})
                        server.set_clock_offset(float(q["offset"]))
                    return self._answer(200, {"ok": True})
                except (KeyError, ValueError, RuntimeError, OSError) as e:
                    return self._answer(400, {"error": str(e)})

            def do_GET(self):
                self._route("GET")

            def do_POST(self):
                self._route("POST")

        return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flurry", required=True, help="the flurry binary")
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--tag", action="append", default=[], help="a segment tag to create")
    ap.add_argument("--layout", default="flurry")
    ap.add_argument("--server-arg", action="append", default=[], help="an extra `flurry serve` argument")
    ap.add_argument("--faketime", action="store_true",
                    help="run the servers under libfaketime, so that POST /servers/i/clock steps their clocks")
    ap.add_argument("--cwd", help="directory to run CMD in")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("give the command to run after --")
    flurry = os.path.realpath(a.flurry)
    if not os.access(flurry, os.X_OK):
        ap.error(f"not an executable: {flurry}")
    # Settings come from the command line only; the test's servers are a host of their own to
    # the node-ID host guard, whatever else runs on this machine.
    for k in list(os.environ):
        if k.startswith("FLURRY_"):
            del os.environ[k]
    fleet = Fleet(flurry, a.servers, a.tag, a.layout, a.server_arg, a.faketime)
    os.environ["FLURRY_HOST_GUARD_SCOPE"] = fleet.work
    os.environ["FLURRY_HOST_DIR"] = os.path.join(fleet.work, "host")  # host_dir.h
    os.makedirs(os.environ["FLURRY_HOST_DIR"], exist_ok=True)
    os.chmod(os.environ["FLURRY_HOST_DIR"], 0o1777)
    os.environ["XDG_STATE_HOME"] = os.path.join(fleet.work, "state")
    child = None

    def on_signal(signum, _frame):
        if child is not None and child.poll() is None:
            child.kill()
        fleet.stop(a.keep)
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    rc = 1
    try:
        fleet.start()
        env = dict(os.environ)
        env.update(fleet.env())
        log(" ".join(f"{k}={v}" for k, v in fleet.env().items() if k != "FLURRY_TEST_ADMIN_TOKEN"))
        child = subprocess.Popen(cmd, env=env, cwd=a.cwd)
        while True:
            try:
                rc = child.wait(0.01)
                break
            except subprocess.TimeoutExpired:
                fleet.run_jobs()
        if rc != 0:
            for s in fleet.servers:
                log(f"--- {s.name} log (end) ---\n" + s.log_text()[-3000:])
    finally:
        fleet.stop(a.keep)
    sys.exit(rc)


if __name__ == "__main__":
    main()
