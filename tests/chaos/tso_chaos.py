#!/usr/bin/env python3
"""Fault runs of the timestamp oracle (issue 35, item 4): three `flurry serve --tso` on one
registry (a 3-member etcd cluster or a PostgreSQL server, started here), clients on this machine
asking for timestamps as fast as a pace allows while faults are injected one after another, and
every answer checked for linearizability at the end (chaoslib/linear.py).

Clients (threads of this process, one monotonic clock): HTTP `GET /v1/tso?count=N` on keep-alive
connections, and gRPC `flurry.v1.Tso/Stream` (one request in flight per stream), N random in
1..--max-count. A client starts at one of the three servers, follows a 307 / NOT_LEADER to the
leader and stays there until it fails (connection error, 503, another error), then goes back to
its configured endpoints. "Pinned" clients (the SIGSTOP scenario) never leave the server they were
given, so a stopped leader keeps getting requests while it is frozen. Errors are fine; a grant that
breaks the order or repeats a value is not.

Scenarios (--scenarios a,b,...; each on the cluster as the previous one left it):
  kill9               kill -9 of the oracle's leader; unavailability = first grant by another
                      server after the kill minus the kill; the leader restarted 1 s later
  sigstop             SIGSTOP of the leader for the lease TTL + 2 s (and until another server
                      granted) while pinned clients keep sending to it, and --late-clients more
                      once the new leader answered; SIGCONT: it must not answer from its stale
                      window. With --stop-lag-s and a --horizon-window-ms longer than the stop,
                      the first leader lags, so only the gate can keep it from answering
  etcd_leader_kill    kill -9 of etcd's leader, restarted 1 s later (etcd only)
  etcd_follower_kill  kill -9 of an etcd follower, restarted 1 s later (etcd only)
  registry_outage     etcd: its leader and a follower stopped (no quorum); PostgreSQL: stopped;
                      for the TTL + 2 s. No grant may be asked for (sent) later than the TTL after
                      the registry was down: the lease could have passed by then
  lagging_clock       the two followers stopped, a new server whose wall clock lags by --lag-s
                      (libfaketime; more than the window) started, the leader killed: the lagging
                      server leads next and must not hand out values below the old leader's

Negative controls: --control skip-gate|ignore-window sets FLURRY_TEST_TSO_FAULT on every server
(skip-gate: the leader answers without the lease gate; ignore-window, if the server offers it: a
new leader starts at its own clock); --control wipe-window deletes the oracle's etcd keys right
after lagging_clock's kill, so the lagging leader inherits no window. --expect-violations makes
the run pass only if the checker finds violations.

--strict-clients K (PostgreSQL only) adds K HTTP clients of a strict segment tag (created with
"strict": true, served by the oracle's leader only, the registry's PostgreSQL as its store); its
numbers are a second history, checked the same way and apart from the timestamps.

Usage: tso_chaos.py FLURRY PYTHON_STUBS --registry etcd|postgres --scenarios ... [--control F
       --expect-violations] [--keep]
Exit 0 when every check passed, 1 otherwise, 2 for a missing prerequisite. Run with
/usr/bin/python3 (Debian's python3-grpcio).
"""

import argparse
import base64
import collections
import http.client
import json
import os
import queue
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.parse

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from chaoslib import linear, nodes, procs, registries  # noqa: E402
from chaoslib import postgres as pg_mod  # noqa: E402

grpc = pb = rpc = status_pb = None
log = procs.log
NS = 1_000_000_000
STRICT_TOKEN = "tso-chaos-strict-admin-3f9c2a7e51d84b06"


def ns():
    return time.monotonic_ns()


# --- servers ------------------------------------------------------------------------------------


class Server:
    """One `flurry serve --tso` slot: fixed HTTP and gRPC ports and a data directory, kept across
    restarts (a restart is the same server coming back)."""

    def __init__(self, run, name, offset=None):
        self.run = run
        self.name = name
        self.http_port = procs.free_port()
        self.grpc_port = procs.free_port()
        self.data_dir = os.path.join(run.workdir, "servers", name)
        self.host_dir = os.path.join(run.workdir, "host-" + name)
        self.offset = offset  # libfaketime offset (seconds) or None
        self.proc = None
        self.starts = 0

    @property
    def http_addr(self):
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_addr(self):
        return f"127.0.0.1:{self.grpc_port}"

    def offset_file(self):
        return os.path.join(self.run.workdir, "faketime", f"{self.name}.offset")

    def step_clock(self, offset):
        """Moves the wall clock of this server (started under libfaketime) to real + offset s."""
        assert self.offset is not None, f"{self.name} does not run under libfaketime"
        self.offset = offset
        nodes.write_offset(self.offset_file(), offset)

    def _env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLURRY_")}
        for k in ("LD_PRELOAD", "FAKETIME", "FAKETIME_TIMESTAMP_FILE", "FAKETIME_NO_CACHE"):
            env.pop(k, None)
        env["LC_ALL"] = "C"
        # Each server plays a host of its own (chaoslib/nodes.py): its node-ID host guard and
        # host-wide records are its own.
        env["FLURRY_HOST_GUARD_SCOPE"] = self.host_dir
        env["FLURRY_HOST_DIR"] = self.host_dir
        os.makedirs(self.host_dir, exist_ok=True)
        os.chmod(self.host_dir, 0o1777)
        if self.run.args.control in ("ignore-window", "skip-gate"):
            env["FLURRY_TEST_TSO_FAULT"] = self.run.args.control
        if self.offset is not None:
            ft = self.offset_file()
            os.makedirs(os.path.dirname(ft), exist_ok=True)
            nodes.write_offset(ft, self.offset)
            env["LD_PRELOAD"] = nodes.LIBFAKETIME
            env["FAKETIME_TIMESTAMP_FILE"] = ft
            env["FAKETIME_NO_CACHE"] = "1"
            env["DONT_FAKE_MONOTONIC"] = "1"  # only the wall clock lags, as on a real host
        return env

    def start(self):
        os.makedirs(self.data_dir, exist_ok=True)
        a = self.run.args
        cmd = [a.flurry, "serve", "--listen", self.http_addr, "--grpc-listen", self.grpc_addr,
               "--data-dir", self.data_dir, "--lease-ttl-ms", str(a.ttl_ms), "--log-level", "info",
               "--horizon-window-ms", str(a.horizon_window_ms), "--tso", "--tso-advertise", "127.0.0.1"] + \
            self.run.registry.flurry_args(self.name) + self.run.segment_args()
        self.starts += 1
        self.proc = procs.Proc(f"flurry-{self.name}", cmd, os.path.join(self.run.workdir, "logs", f"{self.name}.log"),
                               env=self._env(), cwd=self.run.workdir).start()
        return self

    def alive(self):
        return self.proc is not None and self.proc.alive()

    def get(self, path, timeout=2.0):
        """(status, parsed JSON or None), or (None, None) when it does not answer."""
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=timeout)
            c.request("GET", path)
            r = c.getresponse()
            body = r.read()
            c.close()
        except (OSError, http.client.HTTPException):
            return None, None
        try:
            return r.status, json.loads(body)
        except ValueError:
            return r.status, None

    def wait_up(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"{self.name} exited ({self.proc.returncode}):\n{self.proc.log_tail()}")
            if self.get("/readyz")[0] == 200:
                return
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} not ready within {timeout} s:\n{self.proc.log_tail()}")

    def answered(self, call):
        """True if this server answered the call (its address is in the call's label)."""
        return call.who.endswith("@" + self.http_addr) or call.who.endswith("@" + self.grpc_addr)

    def start_up(self, attempts=3):
        """start() and wait_up(), again when the process exited: a start refused because the
        registry was slow to answer (UNAVAILABLE, exit 1, as a supervisor would restart it) on a
        loaded machine is not what the run is about."""
        for i in range(attempts):
            self.start()
            try:
                return self.wait_up()
            except RuntimeError:
                if self.alive() or i + 1 == attempts:
                    raise
                log(f"{self.name} exited at start ({self.proc.returncode}); starting it again")
                time.sleep(0.5)

    def leads(self):
        return self.alive() and self.get("/readyz/tso", timeout=1.0)[0] == 200

    def tso_health(self):
        st, j = self.get("/healthz")
        return j.get("tso") if isinstance(j, dict) else None


# --- clients ------------------------------------------------------------------------------------


class History:
    """Every grant (linear.Call) and every other outcome (counted by kind), from all clients."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = []
        self.outcomes = collections.Counter()
        self.bad = []  # answers that are neither a grant nor an error (always a violation)

    def grant(self, call):
        with self.lock:
            self.calls.append(call)

    def outcome(self, kind):
        with self.lock:
            self.outcomes[kind] += 1

    def malformed(self, text):
        with self.lock:
            self.bad.append(text)

    def grants_after(self, t, exclude=None):
        """Calls answered after t (ns), by servers other than `exclude` (a Server)."""
        with self.lock:
            return [c for c in self.calls if c.answered > t and not (exclude and exclude.answered(c))]


class Client(threading.Thread):
    def __init__(self, run, index, endpoints, pinned=False):
        super().__init__(name=f"{self.kind}{index}", daemon=True)
        self.harness = run
        self.index = index
        self.endpoints = list(endpoints)  # addresses of this transport, the first one first
        self.pinned = pinned
        self.rng = random.Random(run.args.seed * 1000 + index + (500 if pinned else 0))
        self.halt = threading.Event()
        self.k = 0
        self.target = None  # the leader followed to (not pinned)

    def stop(self):
        self.halt.set()

    def next_endpoint(self):
        self.target = None
        if not self.pinned:
            self.k += 1

    def addr(self):
        return self.target or self.endpoints[self.k % len(self.endpoints)]

    def pause(self):
        time.sleep(self.harness.args.pace_ms / 1000.0)

    def count(self):
        return self.rng.randint(1, self.harness.args.max_count)


class HttpClient(Client):
    kind = "http"
    path = "/v1/tso?count={n}"

    @property
    def history(self):
        return self.harness.history

    def parse(self, j, n):
        """The grants of a 200's JSON: [(first, count)]."""
        first, count = int(j["first"]), int(j["count"])
        if count != n or not isinstance(j["first"], str):
            raise ValueError("count or form")
        return [(first, count)]

    def run(self):
        h, conn, conn_addr = self.history, None, None
        timeout = 30.0 if self.pinned else 5.0
        while not self.halt.is_set():
            addr = self.addr()
            if conn_addr != addr:
                if conn:
                    conn.close()
                host, port = addr.rsplit(":", 1)
                conn, conn_addr = http.client.HTTPConnection(host, int(port), timeout=timeout), addr
            n = self.count()
            sent = ns()
            try:
                conn.request("GET", self.path.format(n=n))
                r = conn.getresponse()
                body = r.read()
            except (OSError, http.client.HTTPException) as e:
                h.outcome(f"http {type(e).__name__}")
                conn.close()
                conn, conn_addr = None, None
                self.next_endpoint()
                time.sleep(0.02)
                continue
            answered = ns()
            if r.status == 200:
                try:
                    got = self.parse(json.loads(body), n)
                except (ValueError, KeyError, TypeError):
                    h.malformed(f"{addr}: 200 {body[:200]!r} for count={n}")
                    continue
                for first, count in got:
                    h.grant(linear.Call(sent, answered, first, count, f"{self.name}@{addr}"))
                self.pause()
                continue
            try:
                err = json.loads(body).get("error", {})
            except ValueError:
                err = {}
            reason = err.get("reason") if isinstance(err, dict) else None
            h.outcome(f"http {r.status} {reason}")
            if r.status == 307 and not self.pinned:
                loc = urllib.parse.urlsplit(r.getheader("Location") or "")
                if loc.netloc:
                    self.target = loc.netloc
                    continue
            if r.will_close:
                conn.close()
                conn, conn_addr = None, None
            self.next_endpoint()
            time.sleep(0.02)
        if conn:
            conn.close()


class StrictClient(HttpClient):
    """GET /v1/segments/strict/ids?count=N on a strict segment tag (served by the oracle's leader
    only): each number is a value of its own, all with the call's interval, in the run's second
    history (a tag's numbers are a sequence apart from the timestamps)."""
    kind = "strict"
    path = "/v1/segments/strict/ids?count={n}"

    def parse(self, j, n):
        got = [int(x) for x in j["ids"] if isinstance(x, str)]
        if len(got) != n:
            raise ValueError("count or form")
        return [(v, 1) for v in got]

    @property
    def history(self):
        return self.harness.strict_history


class GrpcClient(Client):
    kind = "grpc"

    def run(self):
        h = self.harness.history
        while not self.halt.is_set():
            addr = self.addr()
            ch = grpc.insecure_channel(addr)
            q = queue.Queue()

            def requests():
                while True:
                    item = q.get()
                    if item is None:
                        return
                    yield item

            try:
                answers = rpc.TsoStub(ch).Stream(requests(), timeout=30.0)
                while not self.halt.is_set():
                    n = self.count()
                    sent = ns()
                    q.put(pb.TsoRequest(count=n))
                    a = next(answers)
                    answered = ns()
                    if a.count != n:
                        h.malformed(f"{addr}: stream answer count {a.count} for {n}")
                        break
                    h.grant(linear.Call(sent, answered, a.first, a.count, f"{self.name}@{addr}"))
                    self.pause()
            except grpc.RpcError as e:
                reason, leader = error_info(e)
                h.outcome(f"grpc {e.code().name} {reason}")
                if reason == "NOT_LEADER" and leader and not self.pinned:
                    self.target = leader
                else:
                    self.next_endpoint()
                    time.sleep(0.02)
            except StopIteration:
                h.outcome("grpc stream ended")
                self.next_endpoint()
            finally:
                q.put(None)
                ch.close()


def error_info(err):
    """(reason, leader_grpc) from a flurry gRPC error's google.rpc.ErrorInfo."""
    md = {k: v for k, v in (err.trailing_metadata() or ())}
    reason, leader = md.get("flurry-reason"), None
    raw = md.get("grpc-status-details-bin")
    if raw:
        try:
            for d in status_pb.Status.FromString(raw).details:
                if d.type_url.endswith("google.rpc.ErrorInfo"):
                    info = status_pb.ErrorInfo.FromString(d.value)
                    reason = info.reason or reason
                    leader = info.metadata.get("leader_grpc") or None
        except Exception:  # noqa: BLE001 - a malformed detail is only a missed redirect
            pass
    return reason, leader


# --- the run ------------------------------------------------------------------------------------


class Run:
    def __init__(self, args, workdir):
        self.args = args
        self.workdir = workdir
        os.makedirs(os.path.join(workdir, "logs"), exist_ok=True)
        self.registry = registries.make(args.registry, workdir)
        self.history = History()
        self.strict_history = History()  # a strict segment tag's numbers (--strict-clients)
        self.servers = []
        self.clients = []
        self.results = []  # per scenario: dict
        self.failures = []  # checks other than the checker's

    def segment_args(self):
        """With --strict-clients: the registry's PostgreSQL as the segment store, and the admin
        token that creates the strict tag."""
        if not self.args.strict_clients:
            return []
        return ["--segment-stores", self.registry.pg.url(self.registry.database),
                "--admin-token-file", self.token_file()]

    def token_file(self):
        path = os.path.join(self.workdir, "admin-token")
        if not os.path.exists(path):
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
                f.write(STRICT_TOKEN + "\n")
        return path

    def create_strict_tag(self, server):
        c = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=10)
        c.request("POST", "/v1/segments", body='{"tag":"strict","start":1000,"step":500,"strict":true}',
                  headers={"Authorization": f"Bearer {STRICT_TOKEN}", "Content-Type": "application/json"})
        r = c.getresponse()
        body = r.read()
        c.close()
        if r.status != 201 or json.loads(body).get("strict") is not True:
            raise RuntimeError(f"creating the strict tag: {r.status} {body[:300]!r}")

    # The interface chaoslib's registry faults expect of a run.
    def fault_begin(self):
        pass

    def fault_end(self):
        pass

    def sleep(self, secs):
        time.sleep(secs)

    def ttl_ns(self):
        return self.args.ttl_ms * 1_000_000

    def leader(self, timeout=30.0, among=None):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leads = [s for s in (among or self.servers) if s.leads()]
            if len(leads) == 1:
                return leads[0]
            time.sleep(0.05)
        raise RuntimeError(f"no single oracle leader within {timeout} s: "
                           + ", ".join(f"{s.name}={s.tso_health()}" for s in self.servers))

    def start_clients(self, servers, pinned=False):
        a = self.args
        out = []
        for i in range(a.http_clients):
            rot = [s.http_addr for s in servers[i % len(servers):] + servers[:i % len(servers)]]
            out.append(HttpClient(self, len(self.clients) + len(out), rot, pinned))
        for i in range(a.grpc_clients):
            rot = [s.grpc_addr for s in servers[i % len(servers):] + servers[:i % len(servers)]]
            out.append(GrpcClient(self, len(self.clients) + len(out), rot, pinned))
        for i in range(a.strict_clients):
            rot = [s.http_addr for s in servers[i % len(servers):] + servers[:i % len(servers)]]
            out.append(StrictClient(self, len(self.clients) + len(out), rot, pinned))
        for c in out:
            c.start()
        self.clients += out
        return out

    def stop_clients(self, clients):
        for c in clients:
            c.stop()
        for c in clients:
            c.join(40)

    def wait_grants(self, after, exclude=None, timeout=20.0):
        """Waits until some client got a grant answered after `after` (ns) from a server other
        than `exclude`; returns the first such answer time (ns), or None."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.history.grants_after(after, exclude)
            if got:
                return min(c.answered for c in got)
            time.sleep(0.05)
        return None

    def record(self, name, t0, t1, **notes):
        with self.history.lock:
            calls = [c for c in self.history.calls if t0 <= c.answered < t1]
        gaps = sorted(c.answered for c in calls)
        longest = max((b - a for a, b in zip([t0] + gaps, gaps + [t1])), default=t1 - t0)
        r = dict(scenario=name, secs=(t1 - t0) / NS, calls=len(calls), values=sum(c.count for c in calls),
                 longest_gap_ms=longest / 1e6, **notes)
        if self.args.strict_clients:
            with self.strict_history.lock:
                r["strict_numbers"] = sum(1 for c in self.strict_history.calls if t0 <= c.answered < t1)
        self.results.append(r)
        log(f"{name}: " + ", ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}"
                                     for k, v in r.items() if k != "scenario"))

    def fail(self, text):
        log(f"FAIL: {text}")
        self.failures.append(text)


# --- scenarios ----------------------------------------------------------------------------------


def sc_kill9(run):
    t0 = ns()
    time.sleep(2)
    ld = run.leader()
    t_kill = ns()
    ld.proc.kill()
    # An answer the killed leader wrote just before the kill can still be read after it.
    first = run.wait_grants(t_kill, exclude=ld)
    unavail = (first - t_kill) / 1e6 if first else None
    if first is None:
        run.fail("kill9: no grant within 20 s of the leader's kill")
    elif unavail > run.args.ttl_ms + run.args.kill_slack_ms:
        run.fail(f"kill9: {unavail:.0f} ms without a grant after the kill "
                 f"(bound {run.args.ttl_ms} ms TTL + {run.args.kill_slack_ms} ms)")
    new = run.leader()
    time.sleep(1)
    ld.start_up()
    time.sleep(2)
    target = run.args.ttl_ms + 1000
    run.record("kill9", t0, ns(), killed=ld.name, new_leader=new.name,
               unavailable_ms=round(unavail) if unavail is not None else None,
               target_ttl_plus_1s=f"{target} ms " + ("met" if unavail is not None and unavail <= target else "MISSED"))


def sc_sigstop(run):
    """With --stop-lag-s the first leader (s0) runs with its wall clock that far behind and a
    horizon window longer than the stop (--horizon-window-ms): when it resumes, its clock is
    still inside the window it saved, and only the gate keeps it from answering from it, below
    what the new leader (whose clock is right) answered meanwhile."""
    t0 = ns()
    ld = run.leader()
    if run.args.stop_lag_s and ld is not run.servers[0]:
        run.fail(f"sigstop: {ld.name} leads, not the lagging s0 (sigstop must come first with --stop-lag-s)")
    pinned = run.start_clients([ld], pinned=True)
    time.sleep(2)
    t_stop = ns()
    ld.proc.send(signal.SIGSTOP)
    frozen, late = [], []
    try:
        # Requests sent to the frozen leader after the new one answered: a linearizable oracle
        # owes them values above those answers, which a stale window cannot give. (The pinned
        # clients' requests in flight at the stop are concurrent with everything the new leader
        # does, so they alone could not tell.)
        new_grant = run.wait_grants(t_stop, exclude=ld, timeout=run.args.ttl_ms / 1000.0 + 10)
        if new_grant:
            late = [HttpClient(run, len(run.clients) + i, [ld.http_addr], pinned=True)
                    for i in range(run.args.late_clients)]
            late += run.start_clients([ld], pinned=True)
            for c in late[:run.args.late_clients]:
                c.start()
            run.clients += late[:run.args.late_clients]
        time.sleep(max(0.5, t_stop / NS + (run.args.ttl_ms + 2000) / 1000.0 - time.monotonic()))
        new = run.leader(among=[s for s in run.servers if s is not ld], timeout=10)
        frozen = freeze_registry(run) if run.args.freeze_registry_s > 0 else []
    finally:
        t_cont = ns()
        ld.proc.send(signal.SIGCONT)
    if frozen:
        # The resumed leader cannot hear from its registry that its lease is gone: its own
        # monotonic clock (the gate) is all that can stop it.
        time.sleep(run.args.freeze_registry_s)
        thaw_registry(run, frozen)
    if new_grant is None:
        run.fail("sigstop: no other server granted while the leader was stopped")
    time.sleep(3)
    run.stop_clients(pinned + late)
    if ld.offset:
        ld.step_clock(0)  # the rest of the run on the right clock
    t1 = ns()
    with run.history.lock:
        # Requests sent to the frozen leader while it was frozen: it reads them after SIGCONT,
        # its lease proven no more (the stop lasts longer than the TTL). A grant there is an
        # answer past the gate.
        stale = [c for c in run.history.calls if ld.answered(c) and t_stop <= c.sent <= t_cont]
    if stale and not run.args.control:
        run.fail(f"sigstop: the stopped leader granted {len(stale)} requests sent while it was stopped, "
                 f"e.g. {stale[0]!r}")
    run.record("sigstop", t0, t1, stopped=ld.name, stopped_lag_s=run.args.stop_lag_s,
               stopped_s=round((t_cont - t_stop) / NS, 2), new_leader=new.name,
               new_leader_first_grant_ms=round((new_grant - t_stop) / 1e6) if new_grant else None,
               stale_grants_of_stopped=len(stale))


def freeze_registry(run):
    """SIGSTOP of the PostgreSQL server (the postmaster, then every process it started); returns
    the PIDs, which the registry's cleanup also resumes."""
    pm = run.registry.pg.proc.pid
    pids = [pm] + pg_mod.children(pm)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            pass
    run.registry._frozen = pids
    return pids


def thaw_registry(run, pids):
    run.registry._thaw()


def sc_etcd_leader_kill(run):
    t0 = ns()
    time.sleep(1)
    note = run.registry.primary_kill(run)
    time.sleep(2)
    run.record("etcd_leader_kill", t0, ns(), note=note)


def sc_etcd_follower_kill(run):
    t0 = ns()
    time.sleep(1)
    c = run.registry.cluster
    ld = c.leader()
    victim = next(m for m in c.members if m is not ld and m.alive())
    c.kill_member(victim)
    time.sleep(1)
    c.start_member(victim)
    c.wait_healthy(30)
    time.sleep(2)
    run.record("etcd_follower_kill", t0, ns(), killed=victim.name)


def sc_registry_outage(run):
    t0 = ns()
    time.sleep(1)
    note = run.registry.outage_begin(run)
    t_down = ns()  # the registry cannot renew any lease from here on (no quorum / stopped)
    time.sleep((run.args.ttl_ms + 2000) / 1000.0)
    t_up0 = ns()
    note += "; " + run.registry.outage_end(run)
    with run.history.lock:
        late = [c for c in run.history.calls if t_down + run.ttl_ns() < c.sent < t_up0]
        during = [c.sent for c in run.history.calls if t_down <= c.sent < t_up0]
    if late:
        run.fail(f"registry_outage: {len(late)} grants asked for more than the TTL after the registry "
                 f"went down, e.g. {late[0]!r}")
    back = run.wait_grants(ns(), timeout=30.0)
    if back is None:
        run.fail("registry_outage: no grant within 30 s of the registry's return")
    time.sleep(1)
    run.record("registry_outage", t0, ns(), note=note, grants_after_ttl=len(late),
               last_grant_sent_after_down_ms=round((max(during) - t_down) / 1e6) if during else None,
               recovery_s=round((back - t_up0) / NS, 2) if back else None)


def sc_lagging_clock(run):
    t0 = ns()
    ld = run.leader()
    others = [s for s in run.servers if s is not ld]
    for s in others:
        s.proc.stop(signal.SIGTERM, 15)
    lag = Server(run, "lag", offset=-run.args.lag_s)
    run.servers.append(lag)
    lag.start_up()
    lag_clients = run.start_clients([lag])
    time.sleep(2)
    t_kill = ns()
    ld.proc.kill()
    wiped = wipe_window(run) if run.args.control == "wipe-window" else None
    first = run.wait_grants(t_kill, exclude=ld, timeout=run.args.ttl_ms / 1000.0 + 8)
    time.sleep(3)
    run.stop_clients(lag_clients)
    with run.history.lock:
        by_lag = sum(1 for c in run.history.calls if lag.answered(c))
    run.record("lagging_clock", t0, ns(), killed=ld.name, lag_s=run.args.lag_s, lagging_role=lag.tso_health(),
               **({"window_keys_deleted": wiped} if wiped is not None else {}),
               grants_by_lagging=by_lag,
               first_grant_after_kill_ms=round((first - t_kill) / 1e6) if first else None)


def wipe_window(run):
    """The negative control wipe-window: every key of the oracle's scope in etcd deleted (its
    lease and its saved window, what an operator's `etcdctl del --prefix` would do), so the next
    leader inherits nothing and starts at its own clock. Returns how many keys went."""
    c = run.registry.cluster
    prefix = f"/flurry/{run.registry.cluster_name}/tso/".encode()
    end = prefix[:-1] + bytes([prefix[-1] + 1])
    body = {"key": base64.b64encode(prefix).decode(), "range_end": base64.b64encode(end).decode()}
    for m in c.members:
        if m.alive():
            return int(c._post(m, "/v3/kv/deleterange", body, timeout=5.0).get("deleted", 0))
    raise RuntimeError("no etcd member to delete the oracle's keys")


SCENARIOS = {"kill9": sc_kill9, "sigstop": sc_sigstop, "etcd_leader_kill": sc_etcd_leader_kill,
             "etcd_follower_kill": sc_etcd_follower_kill, "registry_outage": sc_registry_outage,
             "lagging_clock": sc_lagging_clock}
ETCD_ONLY = {"etcd_leader_kill", "etcd_follower_kill"}


def main():
    global grpc, pb, rpc, status_pb
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("flurry")
    ap.add_argument("stubs", help="the gRPC Python stubs generated at build time (build/.../python)")
    ap.add_argument("--registry", choices=("etcd", "postgres"), default="etcd")
    ap.add_argument("--scenarios", default="kill9,sigstop,etcd_leader_kill,etcd_follower_kill")
    ap.add_argument("--control", choices=("ignore-window", "skip-gate", "wipe-window"), default=None,
                    help="a negative control: FLURRY_TEST_TSO_FAULT=ignore-window or skip-gate on every server, "
                         "or wipe-window (lagging_clock on etcd: the oracle's keys deleted after the leader's kill)")
    ap.add_argument("--expect-violations", action="store_true")
    ap.add_argument("--ttl-ms", type=int, default=2000, help="lease TTL (etcd's minimum is 2000)")
    ap.add_argument("--kill-slack-ms", type=int, default=2000,
                    help="unavailability after a kill -9 allowed beyond the TTL: the followers' poll (500 ms), "
                         "etcd's expiry sweep (500 ms) and a claim on a loaded machine; issue 35's target, "
                         "TTL + 1 s, is reported beside the measure")
    ap.add_argument("--horizon-window-ms", type=int, default=2000, help="the servers' --horizon-window-ms")
    ap.add_argument("--stop-lag-s", type=float, default=0.0,
                    help="sigstop: the stopped leader's wall clock lags this much (with a window longer than the stop)")
    ap.add_argument("--freeze-registry-s", type=float, default=0.0,
                    help="sigstop on PostgreSQL: the registry frozen (SIGSTOP) from just before the leader's "
                         "SIGCONT for this long, so nothing but the gate can tell the resumed leader to stop")
    ap.add_argument("--lag-s", type=float, default=3.0, help="lagging_clock: how far the new leader's clock lags")
    ap.add_argument("--late-clients", type=int, default=24,
                    help="sigstop: extra HTTP clients pinned to the frozen leader once the new one answered")
    ap.add_argument("--http-clients", type=int, default=6)
    ap.add_argument("--grpc-clients", type=int, default=3)
    ap.add_argument("--strict-clients", type=int, default=0,
                    help="HTTP clients of a strict segment tag (--registry postgres: its store), checked apart")
    ap.add_argument("--max-count", type=int, default=8)
    ap.add_argument("--pace-ms", type=float, default=2.0, help="pause of each client after a grant")
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    names = [s for s in args.scenarios.split(",") if s]
    for s in names:
        if s not in SCENARIOS:
            ap.error(f"unknown scenario {s}")
        if s in ETCD_ONLY and args.registry != "etcd":
            ap.error(f"{s} needs --registry etcd")
    if args.freeze_registry_s and args.registry != "postgres":
        ap.error("--freeze-registry-s needs --registry postgres")
    if args.strict_clients and args.registry != "postgres":
        ap.error("--strict-clients needs --registry postgres (the segment store)")
    if args.control == "wipe-window" and (args.registry != "etcd" or "lagging_clock" not in names):
        ap.error("--control wipe-window is for lagging_clock on etcd")
    if args.stop_lag_s and names[0] != "sigstop":
        ap.error("--stop-lag-s is for sigstop as the first scenario")
    if "lagging_clock" in names[:-1]:
        ap.error("lagging_clock leaves one server running: it must come last")
    args.flurry = os.path.realpath(args.flurry)
    sys.path.insert(0, os.path.realpath(args.stubs))
    try:
        import grpc as grpc_module
        from flurry.v1 import flurry_pb2, flurry_pb2_grpc
        from stdgrpc.rpc import status_pb2
    except ImportError as e:
        print(f"SKIP: gRPC for Python or the stubs are missing ({e}); run with /usr/bin/python3", file=sys.stderr)
        return 2
    grpc, pb, rpc, status_pb = grpc_module, flurry_pb2, flurry_pb2_grpc, status_pb2
    if ("lagging_clock" in names or args.stop_lag_s) and not nodes.libfaketime_installed():
        print("SKIP: libfaketime is not installed (Debian package faketime)", file=sys.stderr)
        return 2

    procs.install_cleanup()
    workdir = tempfile.mkdtemp(prefix="tso-chaos-")
    os.chmod(workdir, 0o755)
    ok = False
    try:
        run = Run(args, workdir)
        log(f"work directory {workdir}; registry {args.registry}; control {args.control}")
        run.registry.start()
        run.servers = [Server(run, f"s{i}", offset=-args.stop_lag_s if i == 0 and args.stop_lag_s else None)
                       for i in range(3)]
        if args.stop_lag_s:  # s0 leads first, alone (sc_sigstop)
            run.servers[0].start_up()
            run.leader(among=run.servers[:1])
        for s in run.servers:
            if s.proc is None:
                s.start_up()
        run.leader()
        if args.strict_clients:
            run.create_strict_tag(run.servers[1])
        run.start_clients(run.servers[:3])
        for name in names:
            log(f"scenario {name}")
            SCENARIOS[name](run)
        run.stop_clients(run.clients)
        ok = report(run)
    finally:
        procs.cleanup()
        if ok and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"work directory kept: {workdir}")
    return 0 if ok else 1


def report(run):
    h = run.history
    res = linear.check(h.calls)
    print()
    print(f"{'scenario':<20} {'secs':>5} {'calls':>8} {'values':>9} {'gap ms':>7}  notes")
    for r in run.results:
        extra = {k: v for k, v in r.items() if k not in ("scenario", "secs", "calls", "values", "longest_gap_ms")}
        print(f"{r['scenario']:<20} {r['secs']:5.1f} {r['calls']:8d} {r['values']:9d} {r['longest_gap_ms']:7.0f}  "
              + ", ".join(f"{k}={v}" for k, v in extra.items()))
    print()
    print(f"checker: {res.summary()}")
    for e in res.examples:
        print(f"  {e}")
    print("other outcomes: " + ", ".join(f"{k}: {v}" for k, v in sorted(h.outcomes.items())))
    for b in h.bad[:10]:
        print(f"  malformed answer: {b}")
    print(json.dumps({"calls": res.calls, "values": res.values, "violations": res.violations,
                      "repeats": res.repeats, "order_violations": res.order_violations,
                      "malformed": len(h.bad), "scenarios": run.results}, default=str))
    strict = None
    if run.args.strict_clients:
        sh = run.strict_history
        strict = linear.check(sh.calls)
        print(f"strict tag: {strict.summary()}")
        for e in strict.examples:
            print(f"  {e}")
        print("strict tag's other outcomes: " + ", ".join(f"{k}: {v}" for k, v in sorted(sh.outcomes.items())))
        for b in sh.bad[:10]:
            print(f"  malformed answer: {b}")
    if run.args.expect_violations:
        ok = res.violations > 0 and (strict is None or strict.violations > 0)
        print(f"negative control {run.args.control}: {'CAUGHT' if ok else 'NOT CAUGHT'} "
              f"({res.violations} violations" + (f", strict tag {strict.violations}" if strict else "") + ")")
        return ok
    ok = res.ok and not h.bad and not run.failures and res.calls > 0
    if strict is not None:
        ok = ok and strict.ok and not run.strict_history.bad and strict.calls > 0
    for f in run.failures:
        print(f"FAIL: {f}")
    print("PASS" if ok else "FAIL")
    return ok


if __name__ == "__main__":
    sys.exit(main())
