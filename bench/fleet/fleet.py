#!/usr/bin/python3
"""A fleet of real `flurry serve` processes on a real 3-member etcd cluster (or one PostgreSQL
server), spread over network namespaces that play hosts, measured. See bench/fleet/README.md.

Run as root (network namespaces, a bridge, veth pairs). Python 3 standard library only; the IDs
are fetched and checked batch by batch by fleet_collect (bench/fleet/fleet_collect.cc).

    fleet.py --flurry build/release/apps/flurry/flurry --collector build/release/tests/integration/fleet_collect -n 64
    fleet.py --cleanup fl1a2b      # remove what a killed run left behind (namespaces, links, processes)

Every namespace, link and process the run makes is named with a per-run prefix (fl + 4 hex
digits), killed by PID and removed on exit, on an error, on SIGINT/SIGTERM and when
--max-seconds is reached. Addresses come from one private /16 (--subnet; by default the first of
10.213 ... 10.240 that the machine does not use); only addresses inside the run's own namespaces
are contacted.

Exit status: 0 when every check passed, 1 when one failed (the report says which), 2 on a
setup error.
"""
import argparse
import base64
import concurrent.futures
import ctypes
import glob
import http.client
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

LIBC = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
READY_RE = re.compile(rb"^(\S+) info flurry \S+ ready in (\d+) ms: node=(\d+) ", re.M)
# The registry's part of a start: how long the claim itself took (flurry's event=lease_claimed).
CLAIMED_RE = re.compile(rb"event=lease_claimed node=\d+ .*? claim_ms=(\d+)")
REFUSED_RE = re.compile(rb"NO_FREE_NODE\)?:? [^\n]*")
HTTP_PORT0 = 8000
PER_HOST_DEFAULT = 32


def log(msg):
    sys.stderr.write(f"[fleet {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


class SetupError(Exception):
    pass


class Deadline(BaseException):
    """--max-seconds reached (a BaseException, so that no `except Exception` swallows it)."""


def wall_ts(text):
    """2026-11-29T01:59:18.544Z -> unix seconds (float)."""
    t = time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")
    return float(__import__("calendar").timegm(t)) + int(text[20:23]) / 1000.0


def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(math.ceil(p / 100.0 * len(v))) - 1))
    return v[k]


def run(cmd, check=True, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)
    if check and p.returncode != 0:
        raise SetupError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[:400]}")
    return p


# --- the run's own resources, all removed on exit ----------------------------------------------

class Resources:
    def __init__(self, prefix):
        self.prefix = prefix
        self.namespaces = []
        self.links = []  # root-namespace links (the bridge, the bridge ends of the veth pairs)
        self.procs = []  # Popen objects

    def spawn(self, cmd, ns, log_path, user=None, env=None):
        """Starts cmd inside network namespace ns (setns in the child, before exec), its output to
        log_path; the child dies with the harness (PR_SET_PDEATHSIG, asked after the credential
        change), and is killed by PID in cleanup()."""
        nspath = f"/run/netns/{ns}"

        def pre():
            fd = os.open(nspath, os.O_RDONLY)
            if LIBC.setns(fd, CLONE_NEWNET) != 0:
                os._exit(121)
            os.close(fd)
            os.setsid()
            if user is not None:
                os.setgroups([])
                os.setgid(user[1])
                os.setuid(user[0])
            LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

        with open(log_path, "ab") as out:
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 preexec_fn=pre, env=env, close_fds=True)
        self.procs.append(p)
        return p

    def kill(self, p, sig=signal.SIGKILL):
        if p.poll() is None:
            try:
                os.kill(p.pid, sig)
            except ProcessLookupError:
                pass

    def cleanup(self):
        for p in self.procs:
            self.kill(p)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.procs = []
        cleanup_prefix(self.prefix, quiet=True)


def cleanup_prefix(prefix, quiet=False):
    """Kills (by PID) every process left in a namespace named prefix*, then deletes those
    namespaces and every link named prefix*."""
    if not re.fullmatch(r"fl[0-9a-f]{4}", prefix):
        raise SetupError(f"{prefix!r} is not a fleet prefix (fl and 4 hex digits)")
    names = [line.split()[0] for line in run(["ip", "netns", "list"]).stdout.splitlines() if line.strip()]
    ours = [n for n in names if n.startswith(prefix)]
    for ns in ours:
        for _ in range(3):
            pids = [int(x) for x in run(["ip", "netns", "pids", ns], check=False).stdout.split()]
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.3)
    for ns in ours:
        run(["ip", "netns", "del", ns], check=False)
    links = []
    for line in run(["ip", "-o", "link", "show"]).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(prefix):
            links.append(name)
    for name in links:
        run(["ip", "link", "del", name], check=False)
    if not quiet or ours or links:
        log(f"cleanup {prefix}: {len(ours)} namespaces, {len(links)} links removed")


# --- network: a bridge, one namespace per host --------------------------------------------------

class Net:
    def __init__(self, res, subnet):
        self.res = res
        self.subnet = subnet
        self.bridge = f"{res.prefix}br"

    def check_subnet_free(self):
        used = run(["ip", "-4", "-o", "addr"]).stdout + run(["ip", "-4", "route"]).stdout
        if self.subnet == "auto":
            # The first of 10.213 ... 10.240 that nothing on the machine uses (another fleet run
            # may hold one).
            for second in range(213, 241):
                if not re.search(r"\b10\." + str(second) + r"\.", used):
                    self.subnet = f"10.{second}"
                    return
            raise SetupError("10.213.0.0/16 to 10.240.0.0/16 are all in use on this machine; give one with --subnet")
        if re.search(r"\b" + re.escape(self.subnet) + r"\.", used):
            raise SetupError(f"{self.subnet}.0.0/16 is in use on this machine; pick another with --subnet")

    def up(self):
        self.check_subnet_free()
        run(["ip", "link", "add", "name", self.bridge, "type", "bridge"])
        self.res.links.append(self.bridge)
        run(["ip", "addr", "add", f"{self.subnet}.0.1/16", "dev", self.bridge])
        run(["ip", "link", "set", self.bridge, "up"])

    def add_ns(self, tag, addr):
        ns = f"{self.res.prefix}{tag}"
        outer, inner = f"{ns}a", f"{ns}b"
        run(["ip", "netns", "add", ns])
        self.res.namespaces.append(ns)
        run(["ip", "link", "add", outer, "type", "veth", "peer", "name", inner])
        self.res.links.append(outer)
        run(["ip", "link", "set", inner, "netns", ns])
        run(["ip", "link", "set", outer, "master", self.bridge, "up"])
        run(["ip", "-n", ns, "addr", "add", f"{addr}/16", "dev", inner])
        run(["ip", "-n", ns, "link", "set", inner, "up"])
        run(["ip", "-n", ns, "link", "set", "lo", "up"])
        return ns

    def cut(self, ns, down):
        """The host's cable: the bridge end of its veth pair down (the namespace keeps its address
        and its own traffic; it reaches nothing else) or up again."""
        run(["ip", "link", "set", f"{ns}a", "down" if down else "up"])


# --- HTTP helpers (the harness's own requests, all to the run's addresses) ----------------------

def http_get(addr, port, path, timeout=5.0, method="GET", body=None):
    c = http.client.HTTPConnection(addr, port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def parse_metrics(text):
    """Prometheus text -> {name{labels}: value} for the lines of interest."""
    out = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        try:
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
        except ValueError:
            pass
    return out


def b64(s):
    return base64.b64encode(s.encode()).decode()


# --- the registries -----------------------------------------------------------------------------

class Etcd:
    def __init__(self, res, net, rundir, args):
        self.res, self.net, self.args = res, net, args
        self.members = []
        for i in range(3):
            addr = f"{net.subnet}.0.{11 + i}"
            self.members.append({"name": f"e{i}", "addr": addr, "ns": None, "proc": None,
                                 "data": os.path.join(rundir, f"etcd-e{i}"),
                                 "log": os.path.join(rundir, "logs", f"etcd-e{i}.log")})
        self.harness_ranges = 0  # Range calls this harness made (subtracted from the fleet's)

    def endpoints(self):
        return ",".join(f"{m['addr']}:2379" for m in self.members)

    def start_member(self, m):
        initial = ",".join(f"{x['name']}=http://{x['addr']}:2380" for x in self.members)
        cmd = [self.args.etcd, "--name", m["name"], "--data-dir", m["data"],
               "--listen-client-urls", f"http://{m['addr']}:2379",
               "--advertise-client-urls", f"http://{m['addr']}:2379",
               "--listen-peer-urls", f"http://{m['addr']}:2380",
               "--initial-advertise-peer-urls", f"http://{m['addr']}:2380",
               "--initial-cluster", initial, "--initial-cluster-token", self.res.prefix,
               "--initial-cluster-state", "new",
               "--heartbeat-interval", "100", "--election-timeout", "1000",
               "--auto-compaction-mode", "periodic", "--auto-compaction-retention", "10m",
               "--quota-backend-bytes", str(2 * 1024 ** 3),
               "--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn"]
        m["proc"] = self.res.spawn(cmd, m["ns"], m["log"])
        m["started"] = time.time()

    def start(self):
        for m in self.members:
            m["ns"] = self.net.add_ns(m["name"], m["addr"])
        for m in self.members:
            self.start_member(m)
        self.wait_healthy(30)

    def status(self, m, timeout=2.0):
        st, body = http_get(m["addr"], 2379, "/v3/maintenance/status", timeout=timeout, method="POST", body="{}")
        if st != 200:
            raise OSError(f"status {st}")
        return json.loads(body)

    def leader(self):
        for m in self.members:
            try:
                s = self.status(m)
                for x in self.members:
                    if x.get("id") == s.get("leader"):
                        return x
            except (OSError, ValueError):
                continue
        return None

    def wait_healthy(self, timeout):
        end = time.time() + timeout
        while time.time() < end:
            try:
                ids = {}
                leaders = set()
                for m in self.members:
                    s = self.status(m, 1.0)
                    ids[m["name"]] = s["header"]["member_id"]
                    leaders.add(s.get("leader"))
                if len(leaders) == 1 and None not in leaders and "0" not in leaders:
                    for m in self.members:
                        m["id"] = ids[m["name"]]
                    return True
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.2)
        raise SetupError("the etcd cluster did not become healthy with a leader")

    def live_nodes(self, cluster):
        """{node id: (owner value, lease)} of the keys /flurry/<cluster>/nodes/* (live leases only:
        the keys are bound to them)."""
        prefix = f"/flurry/{cluster}/nodes/"
        body = json.dumps({"key": b64(prefix), "range_end": b64(prefix[:-1] + "0")})
        last = None
        for m in self.members:
            try:
                self.harness_ranges += 1
                st, out = http_get(m["addr"], 2379, "/v3/kv/range", timeout=3.0, method="POST", body=body)
                if st != 200:
                    last = f"HTTP {st}"
                    continue
                kvs = json.loads(out).get("kvs", [])
                res = {}
                for kv in kvs:
                    k = base64.b64decode(kv["key"]).decode()
                    res[int(k[len(prefix):])] = (base64.b64decode(kv.get("value", "")).decode("utf-8", "replace"),
                                                 kv.get("lease"))
                return res
            except (OSError, ValueError) as e:
                last = str(e)
        raise OSError(f"no etcd member answered a range: {last}")

    def metrics(self):
        out = {}
        for m in self.members:
            try:
                st, body = http_get(m["addr"], 2379, "/metrics", timeout=5.0)
                if st == 200:
                    out[m["name"]] = parse_metrics(body.decode())
            except OSError:
                pass
        return out

    def pids(self):
        return [m["proc"].pid for m in self.members if m["proc"] and m["proc"].poll() is None]


class Postgres:
    def __init__(self, res, net, rundir, args):
        self.res, self.net, self.args = res, net, args
        self.addr = f"{net.subnet}.0.20"
        self.dir = os.path.join(rundir, "pg")
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(rundir, "logs", "postgres.log")
        self.sock = os.path.join(self.dir, "sock")
        self.proc = None
        bindirs = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
        if not bindirs:
            raise SetupError("no /usr/lib/postgresql/<version>/bin/postgres (install the Debian package postgresql)")
        self.bindir = os.path.dirname(bindirs[-1])
        import pwd
        pw = pwd.getpwnam("postgres")
        self.uid, self.gid = pw.pw_uid, pw.pw_gid

    def runuser(self, *cmd):
        return run(["runuser", "-u", "postgres", "--"] + list(cmd))

    def start(self, max_connections):
        self.ns = self.net.add_ns("pg", self.addr)
        os.makedirs(self.sock)
        for d in (self.dir, self.sock):
            os.chown(d, self.uid, self.gid)
        os.chmod(os.path.dirname(self.dir), 0o711)
        self.runuser(os.path.join(self.bindir, "initdb"), "-D", self.data, "-U", "postgres", "-A", "trust",
                     "-E", "UTF8", "--no-locale")
        with open(os.path.join(self.data, "pg_hba.conf"), "a") as f:
            f.write(f"host all all {self.net.subnet}.0.0/16 trust\n")
        # The server as postgres through runuser, inside the pg namespace (setns before exec).
        cmd = ["runuser", "-u", "postgres", "--", os.path.join(self.bindir, "postgres"), "-D", self.data,
               "-c", f"listen_addresses={self.addr}", "-c", "port=5432",
               "-c", f"unix_socket_directories={self.sock}", "-c", f"max_connections={max_connections}",
               "-c", "shared_buffers=256MB", "-c", "logging_collector=off"]
        self.proc = self.res.spawn(cmd, self.ns, self.log)
        end = time.time() + 60
        while time.time() < end:
            if self.psql("postgres", "SELECT 1", check=False) == "1":
                break
            if self.proc.poll() is not None:
                raise SetupError(f"PostgreSQL exited: {open(self.log).read()[-1500:]}")
            time.sleep(0.3)
        else:
            raise SetupError("PostgreSQL did not start within 60 s")
        self.psql("postgres", "CREATE DATABASE fleet")

    def postmaster_pid(self):
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                return int(f.readline())
        except (OSError, ValueError):
            return None

    def stop(self):
        pid = self.postmaster_pid()
        if pid:
            try:
                os.kill(pid, signal.SIGQUIT)  # immediate shutdown: the postmaster ends its backends
            except ProcessLookupError:
                pass
            end = time.time() + 10
            while time.time() < end and os.path.exists(f"/proc/{pid}"):
                time.sleep(0.1)

    def psql(self, db, sql, check=True):
        p = subprocess.run(["runuser", "-u", "postgres", "--", os.path.join(self.bindir, "psql"), "-h", self.sock,
                            "-d", db, "-At", "-c", sql], capture_output=True, text=True, timeout=60)
        if check and p.returncode != 0:
            raise SetupError(f"psql {sql!r}: {p.stderr.strip()[:300]}")
        return p.stdout.strip()

    def url(self):
        return f"postgresql://postgres@{self.addr}:5432/fleet"

    def live_nodes(self, cluster=None):
        out = self.psql("fleet", "SELECT node, owner FROM flurry_nodes WHERE owner IS NOT NULL AND expires_at > now()",
                        check=False)
        res = {}
        for line in out.splitlines():
            if "|" in line:
                n, o = line.split("|", 1)
                res[int(n)] = (o, None)
        return res

    def commits(self):
        v = self.psql("fleet", "SELECT xact_commit FROM pg_stat_database WHERE datname = 'fleet'", check=False)
        return int(v) if v.isdigit() else None

    def pids(self):
        pid = self.postmaster_pid()
        if not pid:
            return []
        out = [pid]
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                            out.append(int(d))
                except (OSError, ValueError, IndexError):
                    pass
        return out


# --- the flurry processes -----------------------------------------------------------------------

class Proc:
    def __init__(self, idx, host, addr, port, ns, rundir):
        self.idx, self.host, self.addr, self.port, self.ns = idx, host, addr, port, ns
        self.data = os.path.join(rundir, "data", f"p{idx}")
        self.hostdir = os.path.join(rundir, "hosts", ns)
        self.rundir = rundir
        self.gen = -1
        self.popen = None
        self.spawn_wall = None
        self.ready = None  # (ready wall time, in-process ready ms, node) of the current start
        self.claim_ms = None  # the registry's part of the current start (event=lease_claimed claim_ms)
        self.refused = None  # the refusal text of the current start, when refused
        self.log_path = None
        self.sampled = False

    def start(self, fleet):
        self.gen += 1
        self.ready = None
        self.claim_ms = None
        self.refused = None
        os.makedirs(self.data, exist_ok=True)
        os.makedirs(self.hostdir, exist_ok=True)
        self.log_path = os.path.join(self.rundir, "logs", f"p{self.idx}.{self.gen}.log")
        cmd = [fleet.args.flurry, "serve", "--listen", f"{self.addr}:{self.port}", "--grpc-listen", "",
               "--data-dir", self.data, "--host-dir", self.hostdir, "--layout", fleet.layout,
               "--lease-ttl-ms", str(fleet.args.lease_ttl_ms),
               "--horizon-window-ms", str(fleet.args.horizon_window_ms),
               "--io-threads", "1", "--max-batch", "1000000", "--log-level", "info"]
        cmd += fleet.registry_args
        self.spawn_wall = time.time()
        self.popen = fleet.res.spawn(cmd, self.ns, self.log_path)

    def poll_log(self):
        """Reads the current start's log: sets ready or refused; returns the state."""
        if self.ready or self.refused:
            return
        try:
            with open(self.log_path, "rb") as f:
                text = f.read()
        except OSError:
            return
        m = READY_RE.search(text)
        if m:
            self.ready = (wall_ts(m.group(1).decode()), int(m.group(2)), int(m.group(3)))
            c = CLAIMED_RE.search(text)
            self.claim_ms = int(c.group(1)) if c else None
            return
        if self.popen.poll() is not None:
            r = REFUSED_RE.search(text)
            self.refused = r.group(0).decode("utf-8", "replace") if r else \
                f"exit {self.popen.returncode}: " + text.decode("utf-8", "replace")[-400:]

    def alive(self):
        return self.popen is not None and self.popen.poll() is None

    def node(self):
        return self.ready[2] if self.ready else None


class Fleet:
    def __init__(self, args):
        self.args = args
        self.prefix = "fl%04x" % random.randrange(0x10000)
        taken = os.listdir("/run/netns") if os.path.isdir("/run/netns") else []
        while any(n.startswith(self.prefix) for n in taken):
            self.prefix = "fl%04x" % random.randrange(0x10000)
        self.rundir = args.run_dir or tempfile.mkdtemp(prefix=f"fleet-{self.prefix}-", dir=args.work_dir)
        os.makedirs(os.path.join(self.rundir, "logs"), exist_ok=True)
        self.res = Resources(self.prefix)
        self.net = Net(self.res, args.subnet)
        self.procs = []
        self.spares = []
        self.collectors = []
        self.report = {"run": {}, "checks": {}}
        self.failures = []
        self.node_shift = None
        self.node_bits = None
        self.cluster = "fleet"
        self.mono_to_wall = time.time() - time.monotonic()
        self.kills = []  # (wall time, node) of every kill -9 of a ready process
        self.claims = []  # (spawn wall, ready wall, in-process ms, node) of every restart's claim
        self.refused_attempts = 0

    # --- helpers --------------------------------------------------------------------------------

    def check(self, name, ok, detail):
        self.report["checks"][name] = {"ok": bool(ok), "detail": detail}
        if not ok:
            self.failures.append(f"{name}: {detail}")
        log(f"check {name}: {'ok' if ok else 'FAILED'}: {detail}")

    def target(self, name, ok, detail):
        """A target of the issue (reported, not an invariant: missing it does not fail the run)."""
        self.report.setdefault("targets", {})[name] = {"met": bool(ok), "detail": detail}
        log(f"target {name}: {'met' if ok else 'NOT MET'}: {detail}")

    def host_addr(self, i):
        return f"{self.net.subnet}.{1 + i // 200}.{1 + i % 200}"

    def pmap(self, fn, items, workers=32):
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as ex:
            return list(ex.map(fn, items))

    def live_nodes(self):
        return self.registry.live_nodes(self.cluster)

    def wait_ready(self, procs, timeout, what):
        end = time.time() + timeout
        while time.time() < end:
            for p in procs:
                p.poll_log()
            if all(p.ready or p.refused for p in procs):
                break
            time.sleep(0.1)
        return [p for p in procs if p.ready], [p for p in procs if not p.ready]

    # --- layout ---------------------------------------------------------------------------------

    def choose_layout(self):
        a = self.args
        if a.layout != "auto":
            self.layout = a.layout
        else:
            bits = max(1, math.ceil(math.log2(a.n)))
            self.layout = "flurry" if bits == 10 else f"time:41@1ms,node:{bits},seq:{22 - bits};epoch=2025-01-01Z"

    def read_layout(self, p):
        st, body = http_get(p.addr, p.port, "/v1/layout")
        lay = json.loads(body)
        fields = [f for f in lay["fields"] if f["kind"] not in ("time", "seq")]
        lo = min(f["shift"] for f in fields)
        hi = max(f["shift"] + f["bits"] for f in fields)
        self.node_shift, self.node_bits = lo, hi - lo
        self.node_count = lay["node_count"]
        self.report["run"]["layout"] = lay["text"]
        self.report["run"]["node_count"] = self.node_count

    # --- collectors -----------------------------------------------------------------------------

    def start_collector(self, ns, procs, tag):
        out = os.path.join(self.rundir, f"ids-{tag}.txt")
        a = self.args
        # Each sampled process is asked for a batch every `interval` ms: --ids-per-s over the
        # whole sample (the sample's size as planned, so that the rate holds as collectors start).
        interval = int(a.batch / max(1.0, a.ids_per_s / max(1, self.planned_sample)) * 1000)
        cmd = [a.collector, str(a.max_seconds), str(a.batch), str(interval), str(self.node_shift),
               str(self.node_bits)] + [f"{p.addr}:{p.port}" for p in procs]
        # stdout to the file, stderr too (a usage error shows there).
        popen = self.res.spawn(cmd, ns, out)
        self.collectors.append({"tag": tag, "out": out, "popen": popen, "procs": procs})

    def stop_collectors(self):
        for c in self.collectors:
            self.res.kill(c["popen"], signal.SIGTERM)
        for c in self.collectors:
            try:
                c["popen"].wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.res.kill(c["popen"])

    def check_ids(self):
        batches, bad, statuses = read_batches([c["out"] for c in self.collectors])
        overlaps, total = find_overlaps(batches)
        nodes = len({b[0] for b in batches})
        secs = max(1e-9, (max((b[4] for b in batches), default=0) - min((b[4] for b in batches), default=0)) / 1000)
        self.report["ids"] = {"collected": total, "ids_per_s": round(total / secs), "batches": len(batches), "nodes_seen": nodes,
                              "batches_failing_own_check": bad, "overlapping_batches": len(overlaps),
                              "answers_by_status": {str(k): v for k, v in sorted(statuses.items())},
                              "sampled_processes": sum(len(c["procs"]) for c in self.collectors)}
        self.check("ids_no_duplicates", not overlaps and bad == 0 and total > 0,
                   f"{total:,} IDs in {len(batches):,} batches from {nodes} node IDs; "
                   f"{len(overlaps)} overlapping batch pairs, {bad} batches out of order"
                   + (f"; first overlap {overlaps[0]}" if overlaps else ""))
        return batches

    # --- phases ---------------------------------------------------------------------------------

    def setup(self):
        a = self.args
        self.net.up()
        if a.registry == "etcd":
            self.registry = Etcd(self.res, self.net, self.rundir, a)
            self.registry.start()
            self.registry_args = ["--registry", "etcd", "--etcd-endpoints", self.registry.endpoints(),
                                  "--cluster", self.cluster]
        else:
            self.registry = Postgres(self.res, self.net, self.rundir, a)
            self.registry.start(a.n + 200)
            self.registry_args = ["--registry", "postgres", "--postgres-url", self.registry.url()]
        self.hosts = []
        nhosts = math.ceil(a.n / a.per_host)
        for h in range(nhosts):
            self.hosts.append(self.net.add_ns(f"h{h}", self.host_addr(h)))
        self.spare_ns = self.net.add_ns("s", f"{self.net.subnet}.0.30")
        for i in range(a.n):
            h = i // a.per_host
            self.procs.append(Proc(i, h, self.host_addr(h), HTTP_PORT0 + i % a.per_host, self.hosts[h], self.rundir))
        self.report["run"].update({
            "registry": a.registry, "n": a.n, "hosts": nhosts, "per_host": a.per_host,
            "lease_ttl_ms": a.lease_ttl_ms, "horizon_window_ms": a.horizon_window_ms, "prefix": self.prefix,
            "run_dir": self.rundir, "subnet": f"{self.net.subnet}.0.0/16", "cores": os.cpu_count(),
            "mem_total_gib": round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2 ** 30, 1),
            "flurry_settings": "--grpc-listen '' --io-threads 1 --max-batch 1000000 --log-level info",
            "start_per_s": a.start_per_s or "all at once"})

    def start_all(self):
        """Spawns all N at once. A process that exits before it is ready (flurry's start is
        refused with a retryable error when its claim fails, e.g. UNAVAILABLE under the
        thundering herd of N claims) is started again 1 s later, as a supervisor would (systemd's
        Restart=, a pod's restart); those exits are counted and their reasons reported."""
        a = self.args
        t0 = time.time()
        for i, p in enumerate(self.procs):
            if a.start_per_s > 0:
                time.sleep(max(0.0, t0 + i / a.start_per_s - time.time()))
            p.start(self)
        spawned = time.time() - t0
        pending = list(self.procs)
        exits = {}
        retry_at = {}
        end = t0 + a.ready_timeout
        while pending and time.time() < end:
            now = time.time()
            for p in list(pending):
                if p in retry_at:
                    if now >= retry_at[p]:
                        del retry_at[p]
                        p.start(self)
                    continue
                p.poll_log()
                if p.ready:
                    pending.remove(p)
                elif p.refused:
                    reason = re.sub(r"\s+", " ", p.refused.split("flurry: ", 1)[-1])[:240]
                    reason = re.sub(r"\d+\.\d+\.\d+\.\d+:\d+ ", "", reason)
                    exits[reason] = exits.get(reason, 0) + 1
                    retry_at[p] = now + 1.0
            time.sleep(0.1)
        ready = [p for p in self.procs if p.ready]
        late = [p for p in self.procs if not p.ready]
        t_all = max((p.ready[0] for p in ready), default=t0) - t0
        n_exits = sum(exits.values())
        self.report["start"] = {"spawn_seconds": round(spawned, 2), "all_ready_seconds": round(t_all, 2),
                                "ready": len(ready), "not_ready": len(late),
                                "exits_before_ready": n_exits,
                                "processes_started_more_than_once": sum(1 for p in self.procs if p.gen > 0),
                                "exit_reasons": exits,
                                "ready_in_ms_p50": pct([p.ready[1] for p in ready], 50),
                                "ready_in_ms_p99": pct([p.ready[1] for p in ready], 99),
                                "ready_in_ms_max": max((p.ready[1] for p in ready), default=None)}
        self.check("all_ready", not late,
                   f"{len(ready)}/{a.n} ready {t_all:.1f} s after the first spawn; {n_exits} starts exited before "
                   f"ready and were started again 1 s later"
                   + (f"; not ready: {[(p.idx, p.refused) for p in late[:3]]}" if late else ""))
        if late:
            raise SetupError("not every process started")
        self.read_layout(self.procs[0])
        t_s = time.time()
        settled = self.settle(a.ready_timeout)
        at = round(t_s - t0 + settled, 2) if settled is not None else None
        self.report["start"]["all_serving_seconds"] = at
        self.check("all_serving", settled is not None,
                   f"all {a.n} answering /readyz 200 on {a.n} distinct node IDs {at} s after the first spawn "
                   f"(and for a renewal interval after)" if settled is not None else "the fleet did not settle")
        if settled is None:
            raise SetupError("the fleet did not settle")
        # The node each process serves as now (a process may have claimed again since its ready line).
        for p, st, n in self.readyz_all(self.procs):
            if st == 200 and p.ready:
                p.ready = (p.ready[0], p.ready[1], n)

    def start_collectors(self):
        a = self.args
        per = max(1, math.ceil(a.sample / len(self.hosts)))
        self.cut_host = len(self.hosts) - 1
        cut_n = sum(1 for p in self.procs if p.host == self.cut_host) if "cut" in a.faults else 0
        self.planned_sample = min(a.n, per * len(self.hosts)) + cut_n
        for h, ns in enumerate(self.hosts):
            mine = [p for p in self.procs if p.host == h]
            chosen = mine if h == self.cut_host and "cut" in a.faults else mine[:per]
            for p in chosen:
                p.sampled = True
            self.start_collector(ns, chosen, f"h{h}")
        log(f"collectors: {sum(p.sampled for p in self.procs)} sampled processes on {len(self.hosts)} hosts")

    def readyz_all(self, procs):
        """Each process's GET /readyz: (process, status, node it serves as, or None)."""
        def one(p):
            try:
                st, body = http_get(p.addr, p.port, "/readyz", timeout=5)
                return p, st, json.loads(body).get("node") if st == 200 else None
            except (OSError, ValueError):
                return p, 0, None
        return self.pmap(one, [p for p in procs if p.alive()])

    def settle(self, timeout):
        """Waits until every process answers /readyz with 200, on N distinct node IDs (a process
        whose claim took most of its lease loses it and claims again: the fleet is settled when
        that has stopped). Returns the seconds waited, or None."""
        t0 = time.time()
        hold = self.args.lease_ttl_ms / 3000 + 1  # one renewal interval and a second
        good_since = None
        while time.time() < t0 + timeout:
            rows = self.readyz_all(self.procs)
            nodes = [n for _, st, n in rows if st == 200]
            if len(nodes) == len(self.procs) and len(set(nodes)) == len(nodes):
                if good_since is None:
                    good_since = time.time()
                if time.time() - good_since >= hold:
                    return good_since - t0
            else:
                good_since = None
            time.sleep(0.5)
        return None

    def snapshot(self, what):
        nodes = self.live_nodes()
        rows = self.readyz_all(self.procs + self.spares)
        ready = [n for _, st, n in rows if st == 200]
        owners = [v[0] for v in nodes.values()]
        ok = len(nodes) == len(ready) and set(nodes) == set(ready) and len(set(owners)) == len(owners) \
            and len(set(ready)) == len(ready)
        return {"what": what, "live_keys": len(nodes), "distinct_owners": len(set(owners)),
                "processes_ready": len(ready), "matches_processes": ok}

    def flurry_counters(self, procs):
        def one(p):
            try:
                st, body = http_get(p.addr, p.port, "/metrics", timeout=10)
                m = parse_metrics(body.decode())
                return (m.get("flurry_lease_renewals_total", 0.0), m.get("flurry_horizon_saves_total", 0.0),
                        m.get("flurry_lease_renewal_failures_total", 0.0))
            except (OSError, ValueError):
                return None
        return self.pmap(one, procs)

    def cpu_seconds(self, pids):
        hz = os.sysconf("SC_CLK_TCK")
        total = 0.0
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / hz
            except (OSError, ValueError, IndexError):
                pass
        return total

    def rss(self, procs):
        rows = []
        for p in procs:
            try:
                with open(f"/proc/{p.popen.pid}/smaps_rollup") as f:
                    kv = {}
                    for line in f:
                        parts = line.split()
                        if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                            kv[parts[0][:-1]] = int(parts[1])
                rows.append(kv)
            except OSError:
                pass

        def stat(key_fn):
            v = [key_fn(r) / 1024.0 for r in rows]
            return {"mean_mib": round(sum(v) / len(v), 2), "max_mib": round(max(v), 2)} if v else None
        return {"processes": len(rows),
                "rss": stat(lambda r: r.get("Rss", 0)),
                "private": stat(lambda r: r.get("Private_Clean", 0) + r.get("Private_Dirty", 0)),
                "shared": stat(lambda r: r.get("Shared_Clean", 0) + r.get("Shared_Dirty", 0)),
                "pss": stat(lambda r: r.get("Pss", 0)),
                "sum_pss_mib": round(sum(r.get("Pss", 0) for r in rows) / 1024.0, 1)}

    def etcd_rates(self, m0, m1, seconds):
        by_method = {}
        ka_msgs = 0.0
        for name, a1 in m1.items():
            a0 = m0.get(name, {})
            for k, v in a1.items():
                if k.startswith("grpc_server_handled_total{"):
                    method = re.search(r'grpc_method="([^"]+)"', k).group(1)
                    code = re.search(r'grpc_code="([^"]+)"', k).group(1)
                    d = v - a0.get(k, 0.0)
                    if d > 0:
                        by_method.setdefault(method, {}).setdefault(code, 0.0)
                        by_method[method][code] += d
                elif k.startswith("grpc_server_msg_received_total{") and 'grpc_method="LeaseKeepAlive"' in k:
                    ka_msgs += v - a0.get(k, 0.0)
        per_method = {meth: round(sum(c.values()) / seconds, 2) for meth, c in sorted(by_method.items())}
        streams = {"LeaseKeepAlive", "Watch"}
        unary = sum(sum(c.values()) for meth, c in by_method.items() if meth not in streams)
        return per_method, unary, ka_msgs, by_method

    def fsync_mean(self, m0, m1):
        out = {}
        for name, a1 in m1.items():
            a0 = m0.get(name, {})
            k_s, k_c = "etcd_disk_wal_fsync_duration_seconds_sum", "etcd_disk_wal_fsync_duration_seconds_count"
            n = a1.get(k_c, 0) - a0.get(k_c, 0)
            out[name] = round((a1.get(k_s, 0) - a0.get(k_s, 0)) / n * 1000, 2) if n > 0 else None
        return out

    def steady(self):
        a = self.args
        snaps = [self.snapshot("steady-before")]
        reg = self.registry
        c0 = self.flurry_counters(self.procs)
        r0 = reg.harness_ranges if a.registry == "etcd" else 0
        t0 = time.monotonic()
        m0 = reg.metrics() if a.registry == "etcd" else None
        commits0 = reg.commits() if a.registry == "postgres" else None
        cpu0 = self.cpu_seconds(reg.pids())
        time.sleep(a.steady_seconds)
        m1 = reg.metrics() if a.registry == "etcd" else None
        commits1 = reg.commits() if a.registry == "postgres" else None
        cpu1 = self.cpu_seconds(reg.pids())
        secs = time.monotonic() - t0
        c1 = self.flurry_counters(self.procs)
        snaps.append(self.snapshot("steady-after"))
        pairs = [(x, y) for x, y in zip(c0, c1) if x and y]
        ren = sum(y[0] - x[0] for x, y in pairs)
        sav = sum(y[1] - x[1] for x, y in pairs)
        fails = sum(y[2] - x[2] for x, y in pairs)
        n = a.n
        out = {"seconds": round(secs, 1), "processes_read": len(pairs),
               "renewals_per_min_per_node": round(ren / len(pairs) / secs * 60, 2) if pairs else None,
               "horizon_saves_per_min_per_node": round(sav / len(pairs) / secs * 60, 2) if pairs else None,
               "renewal_failures": int(fails),
               "registry_cpu_cores": round((cpu1 - cpu0) / secs, 3)}
        if a.registry == "etcd":
            per_method, unary, ka, _ = self.etcd_rates(m0, m1, secs)
            harness = reg.harness_ranges - r0  # zero: no snapshot inside the window
            unary -= harness
            out.update({"etcd_requests_per_s": round(unary / secs, 1),
                        "etcd_requests_per_s_per_node": round(unary / secs / n, 3),
                        "etcd_keepalive_msgs_per_s": round(ka / secs, 1),
                        "etcd_keepalive_msgs_per_s_per_node": round(ka / secs / n, 3),
                        "etcd_handled_per_s_by_method": per_method,
                        "etcd_db_size_mib": {k: round(v.get("etcd_mvcc_db_total_size_in_bytes", 0) / 2 ** 20, 2)
                                             for k, v in m1.items()},
                        "etcd_db_in_use_mib": {k: round(v.get("etcd_mvcc_db_total_size_in_use_in_bytes", 0) / 2 ** 20, 2)
                                               for k, v in m1.items()},
                        "etcd_wal_fsync_mean_ms": self.fsync_mean(m0, m1)})
            self.target("etcd_requests_per_node", out["etcd_requests_per_s_per_node"] <= 0.5,
                        f"{out['etcd_requests_per_s_per_node']} requests/s per node (target <= 0.5; "
                        f"keep-alive stream messages separately: {out['etcd_keepalive_msgs_per_s_per_node']}/s)")
        else:
            out.update({"pg_commits_per_s": round((commits1 - commits0) / secs, 1) if commits0 is not None else None,
                        "pg_commits_per_s_per_node": round((commits1 - commits0) / secs / n, 3)
                        if commits0 is not None else None})
        out["flurry_memory"] = self.rss(self.procs)
        snaps.append(self.snapshot("steady-end"))
        self.report["steady"] = out
        self.report["snapshots"] = snaps
        self.check("snapshots_n_distinct", all(s["live_keys"] == n and s["matches_processes"] for s in snaps),
                   "; ".join(f"{s['what']}: {s['live_keys']} live keys, {s['distinct_owners']} owners, "
                             f"matches processes: {s['matches_processes']}" for s in snaps))

    def settle_pending(self, pending, waiting):
        """Reads the log of every started process in `pending`: a ready one is a claim (recorded),
        a refused one goes back to `waiting`."""
        for p in list(pending):
            p.poll_log()
            if p.ready:
                pending.remove(p)
                self.claims.append((p.spawn_wall, p.ready[0], p.ready[1], p.ready[2], p.claim_ms))
            elif p.refused:
                pending.remove(p)
                self.refused_attempts += 1
                waiting.append(p)

    def spawn_waiting(self, waiting, deadline):
        """Starts processes of `waiting` while the registry shows free node IDs; a start that is
        refused (another took the free ID first) goes back to waiting. Returns when all are ready
        or at deadline."""
        pending = []
        while (waiting or pending) and time.time() < deadline:
            self.settle_pending(pending, waiting)
            if waiting:
                try:
                    free = self.node_count - len(self.live_nodes()) - len(pending)
                except OSError:
                    free = 0
                while free > 0 and waiting:
                    p = waiting.pop(0)
                    p.start(self)
                    pending.append(p)
                    free -= 1
            time.sleep(0.1)
        return waiting + pending

    def refusal(self):
        """The process after the last node ID: refused with a clear reason; then serves once a
        node ID frees up (a kill -9 of one process, whose lease runs out)."""
        a = self.args
        extra = Proc(a.n, -1, f"{self.net.subnet}.0.30", HTTP_PORT0, self.spare_ns, self.rundir)
        extra.start(self)
        self.wait_ready([extra], 30, "extra")
        refused = extra.refused or ""
        ok = extra.refused is not None and "NO_FREE_NODE" in refused
        self.report["refusal"] = {"message": refused.strip()[:400]}
        self.check("extra_refused", ok, f"process {a.n + 1} on {self.node_count} node IDs: {refused.strip()[:200]!r}"
                   if extra.refused else "it was not refused")
        victim = random.choice([p for p in self.procs if not p.sampled] or self.procs)
        node = victim.node()
        t_kill = time.time()
        self.res.kill(victim.popen)
        victim.popen.wait()
        self.procs.remove(victim)
        left = self.spawn_waiting([extra], time.time() + a.lease_ttl_ms / 1000 * 3 + 10)
        self.spares.append(extra)
        served = None
        if extra.ready:
            st, _ = http_get(extra.addr, extra.port, "/v1/ids?count=1")
            served = st
        self.report["refusal"].update({"killed_node": node, "extra_node": extra.node(),
                                       "seconds_from_kill_to_serving": round(extra.ready[0] - t_kill, 2)
                                       if extra.ready else None, "refused_attempts": self.refused_attempts})
        self.check("extra_serves_after_free", not left and served == 200,
                   f"served (HTTP {served}) on node {extra.node()} "
                   f"{self.report['refusal']['seconds_from_kill_to_serving']} s after node {node}'s holder was killed")
        self.start_collector(self.spare_ns, [extra], "extra")

    def churn(self):
        """kill -9 of 5 % of the processes every 10 s, restarted as node IDs free up; the etcd
        faults (a follower, then the leader, killed and restarted) inside it."""
        a = self.args
        per_round = max(1, math.ceil(a.n * 0.05))
        self.claims = []
        self.refused_attempts = 0
        t0 = time.time()
        end = t0 + a.churn_seconds
        waiting, pending = [], []
        next_kill = t0
        faults = []
        etcd_plan = []
        if a.registry == "etcd":
            if "follower" in a.faults:
                etcd_plan.append((t0 + a.churn_seconds * 0.2, "follower"))
            if "leader" in a.faults:
                etcd_plan.append((t0 + a.churn_seconds * 0.55, "leader"))
        down = None  # (member, restart at, record)
        snaps = []
        rounds = 0
        while time.time() < end or waiting or pending:
            now = time.time()
            if now >= end + a.lease_ttl_ms / 1000 * 3 + 20:
                break
            if now < end and now >= next_kill:
                live = [p for p in self.procs if p.ready and p.alive()]
                sampled = [p for p in live if p.sampled]
                others = [p for p in live if not p.sampled]
                # Half of each round from the sampled processes (when there are others), so
                # that node IDs often pass from one sampled process to another: the duplicate
                # check then covers the hand-off.
                k_s = min(len(sampled), per_round // 2 if others else per_round)
                victims = random.sample(sampled, k_s)
                rest = [p for p in live if p not in victims]
                victims += random.sample(rest, min(len(rest), per_round - k_s))
                for v in victims:
                    self.kills.append((time.time(), v.node()))
                    self.res.kill(v.popen)
                for v in victims:
                    v.popen.wait()
                    waiting.append(v)
                rounds += 1
                next_kill += 10
            if etcd_plan and now >= etcd_plan[0][0] and down is None:
                kind = etcd_plan.pop(0)[1]
                leader = self.registry.leader()
                m = leader if kind == "leader" else next(x for x in self.registry.members if x is not leader)
                rec = {"fault": f"etcd {kind} ({m['name']}) kill -9", "at_s": round(now - t0, 1),
                       "leader_known": leader is not None}
                self.res.kill(m["proc"])
                m["proc"].wait()
                down = (m, now + a.etcd_down_seconds, rec)
                faults.append(rec)
            if down and now >= down[1]:
                m, _, rec = down
                self.registry.start_member(m)
                t_r = time.time()
                try:
                    self.registry.wait_healthy(30)
                    rec["healthy_again_s_after_restart"] = round(time.time() - t_r, 2)
                except SetupError as e:
                    rec["error"] = str(e)
                down = None
            self.settle_pending(pending, waiting)
            if waiting:
                try:
                    nodes = self.live_nodes()
                    free = self.node_count - len(nodes) - len(pending)
                    if len(snaps) < 400:
                        snaps.append((round(now - t0, 1), len(nodes)))
                except OSError:
                    free = 0
                while free > 0 and waiting:
                    p = waiting.pop(0)
                    p.start(self)
                    pending.append(p)
                    free -= 1
            time.sleep(0.1)
        if down:
            self.registry.start_member(down[0])
            self.registry.wait_healthy(30)
        lat_proc = [c[2] for c in self.claims]
        lat_claim = [c[4] for c in self.claims if c[4] is not None]
        lat_spawn = [round((c[1] - c[0]) * 1000) for c in self.claims]
        reuse = []
        for t_k, node in self.kills:
            after = [c[1] for c in self.claims if c[3] == node and c[1] > t_k]
            if after:
                reuse.append(min(after) - t_k)
        self.report["churn"] = {
            "seconds": a.churn_seconds, "rounds": rounds, "kills": len(self.kills), "per_round": per_round,
            "restarts_ready": len(self.claims), "refused_starts": self.refused_attempts,
            "still_waiting_at_end": len(waiting) + len(pending),
            "claim_ms_registry": {"p50": pct(lat_claim, 50), "p99": pct(lat_claim, 99),
                                  "max": max(lat_claim, default=None)},
            "claim_ms_in_process": {"p50": pct(lat_proc, 50), "p99": pct(lat_proc, 99), "max": max(lat_proc, default=None)},
            "claim_ms_spawn_to_ready": {"p50": pct(lat_spawn, 50), "p99": pct(lat_spawn, 99),
                                        "max": max(lat_spawn, default=None)},
            "kill_to_reuse_s": {"p50": round(pct(reuse, 50), 2) if reuse else None,
                                "p99": round(pct(reuse, 99), 2) if reuse else None,
                                "max": round(max(reuse), 2) if reuse else None, "count": len(reuse)},
            "etcd_faults": faults}
        if lat_claim:
            self.target("claim_p99_under_churn", pct(lat_claim, 99) <= 250,
                        f"claim (the registry's part, event=lease_claimed claim_ms) p99 {pct(lat_claim, 99)} ms "
                        f"over {len(lat_claim)} restarts (target <= 250 ms); the whole start, spawn to ready "
                        f"(process start, refused starts while no node ID was free, the wait for the clock), "
                        f"p99 {pct(lat_spawn, 99)} ms")
        self.check("churn_all_back", not waiting and not pending,
                   f"{len(self.claims)} restarts ready, {len(waiting) + len(pending)} not back after churn")
        if a.registry == "etcd":
            self.check("etcd_faults_recovered", all("error" not in f for f in faults),
                       "; ".join(f"{f['fault']} at {f['at_s']} s, healthy {f.get('healthy_again_s_after_restart')} s after restart"
                                 for f in faults) or "none asked")

    def cut(self):
        """One host's link down: its processes must stop issuing before their leases can be
        taken over; spares on another host take the node IDs over once they are free."""
        a = self.args
        h = self.cut_host
        ns = self.hosts[h]
        # The node each of the host's processes serves as now (it may have moved since its ready
        # line), and the registry's owner of that node: taken over = the key gone or another owner.
        mine, nodes = [], {}
        for p, st, n in self.readyz_all([p for p in self.procs if p.host == h]):
            if st == 200 and n is not None:
                p.ready = (p.ready[0], p.ready[1], n)
                mine.append(p)
                nodes[n] = p
        owner_before = {n: v[0] for n, v in self.live_nodes().items() if n in nodes}
        probe_out = os.path.join(self.rundir, "probe-cut.txt")
        probe = self.res.spawn([sys.executable, os.path.abspath(__file__), "--probe", probe_out,
                                "--probe-seconds", str(int(a.lease_ttl_ms / 1000 * 4 + 30))]
                               + [f"{p.addr}:{p.port}" for p in mine], ns, probe_out + ".log")
        spares = [Proc(a.n + 1 + i, -1, f"{self.net.subnet}.0.30", HTTP_PORT0 + 1 + i, self.spare_ns, self.rundir)
                  for i in range(len(mine))]
        self.start_collector(self.spare_ns, spares, "spares")
        time.sleep(2)
        t_cut = time.time()
        self.net.cut(ns, True)
        log(f"host {ns} cut off: {len(mine)} processes, nodes {sorted(nodes)[:8]}...")
        # Watch the registry: when does each of the cut host's node keys go?
        gone = {}  # node -> when its key first was gone or held by another owner
        new_owner = {}  # node -> when another owner first held it
        waiting = list(spares)
        pending = []
        end = t_cut + a.lease_ttl_ms / 1000 * 3 + 20
        while time.time() < end and (len(gone) < len(nodes) or waiting or pending):
            try:
                live = self.live_nodes()
                now = time.time()
                for n in nodes:
                    changed = n not in live or live[n][0] != owner_before.get(n)
                    if changed and n not in gone:
                        gone[n] = now
                    if n in live and live[n][0] != owner_before.get(n) and n not in new_owner:
                        new_owner[n] = now
                free = self.node_count - len(live) - len(pending)
            except OSError:
                free = 0
            for p in list(pending):
                p.poll_log()
                if p.ready:
                    pending.remove(p)
                elif p.refused:
                    pending.remove(p)
                    waiting.append(p)
            while free > 0 and waiting:
                p = waiting.pop(0)
                p.start(self)
                pending.append(p)
                free -= 1
            time.sleep(0.1)
        self.spares.extend(spares)
        time.sleep(1)
        self.res.kill(probe, signal.SIGTERM)
        probe.wait()
        self.net.cut(ns, False)
        # The probe's record: per process, the last 200 and the first non-200 after the cut.
        last_ok, first_stop = {}, {}
        with open(probe_out) as f:
            for line in f:
                t, i, st = line.split()
                t, i, st = float(t), int(i), int(st)
                if t < t_cut:
                    continue
                if st == 200:
                    last_ok[i] = t
                elif st in (503,) and i not in first_stop:
                    first_stop[i] = t
        rows = []
        ok = True
        for i, p in enumerate(mine):
            n = p.node()
            taken = new_owner.get(n)
            lo = last_ok.get(i, t_cut)
            row = {"node": n, "stopped_s": round(first_stop[i] - t_cut, 2) if i in first_stop else None,
                   "last_200_s": round(lo - t_cut, 2), "key_gone_s": round(gone[n] - t_cut, 2) if n in gone else None,
                   "taken_over_s": round(taken - t_cut, 2) if taken else None}
            rows.append(row)
            if i not in first_stop or n not in gone or lo >= gone[n] or (taken and lo >= taken):
                ok = False
        margins = [r["key_gone_s"] - r["last_200_s"] for r in rows if r["key_gone_s"] is not None]
        self.report["cut"] = {"host": ns, "processes": len(mine),
                              "stopped_s": {"max": max((r["stopped_s"] for r in rows if r["stopped_s"] is not None), default=None)},
                              "key_gone_s": {"min": min((r["key_gone_s"] for r in rows if r["key_gone_s"] is not None), default=None)},
                              "taken_over": sum(1 for r in rows if r["taken_over_s"] is not None),
                              "taken_over_s": {"min": min((r["taken_over_s"] for r in rows if r["taken_over_s"] is not None), default=None)},
                              "min_margin_stop_to_key_gone_s": round(min(margins), 2) if margins else None,
                              "rows": rows}
        stopped_first = sum(1 for r in rows if r["stopped_s"] is not None and r["key_gone_s"] is not None
                            and r["last_200_s"] < r["key_gone_s"])
        self.check("cut_stops_before_takeover", ok and len(gone) == len(nodes) and bool(rows),
                   f"{len(mine)} processes cut; {stopped_first} answered 503 with their last 200 before their node "
                   f"key went or changed owner (last 200 at most {max((r['last_200_s'] for r in rows), default=None)} s "
                   f"after the cut, keys gone from {self.report['cut']['key_gone_s']['min']} s); "
                   f"{self.report['cut']['taken_over']} node IDs taken over by other processes (from "
                   f"{self.report['cut']['taken_over_s']['min']} s)")

    def finish(self):
        self.stop_collectors()
        self.check_ids()
        self.report["run"]["load_avg"] = os.getloadavg()
        with open("/proc/meminfo") as f:
            mi = {l.split(":")[0]: l.split()[1] for l in f}
        self.report["run"]["mem_available_gib_at_end"] = round(int(mi["MemAvailable"]) / 2 ** 20, 1)

    def main(self):
        a = self.args
        t0 = time.time()
        self.choose_layout()
        log(f"run {self.prefix} in {self.rundir}: {a.n} processes on {a.registry}")
        self.setup()
        self.start_all()
        log(f"all {a.n} ready in {self.report['start']['all_ready_seconds']} s")
        self.start_collectors()
        time.sleep(2)
        self.steady()
        log(f"steady: {json.dumps({k: v for k, v in self.report['steady'].items() if k != 'flurry_memory'})}")
        if self.node_count == a.n:
            self.refusal()
        else:
            self.report["refusal"] = {"skipped": f"the layout has {self.node_count} node IDs for {a.n} processes"}
        if a.churn_seconds > 0:
            self.churn()
            log(f"churn: {json.dumps(self.report['churn'])}")
        if "cut" in a.faults:
            self.cut()
        self.finish()
        self.report["run"]["seconds"] = round(time.time() - t0, 1)


# --- the duplicate check ------------------------------------------------------------------------

def read_batches(paths):
    """The lines of fleet_collect's outputs: (batches, batches failing their own check, answers
    by status). A batch is (node, first, last, count, monotonic ms, file, target index)."""
    batches = []
    bad = 0
    statuses = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) != 7 or not all(x.isdigit() for x in parts):
                    continue
                t, idx, st, node, first, last, n = (int(x) for x in parts)
                statuses[st] = statuses.get(st, 0) + 1
                if st == 1:
                    bad += 1
                elif st == 200:
                    batches.append((node, first, last, n, t, path, idx))
    return batches, bad, statuses


def find_overlaps(batches):
    """Sorts batches by (node, first) and returns (pairs of batches of one node whose [first,
    last] intervals overlap, IDs in all). Each batch is strictly increasing within one node (the
    collector checks it), so no overlap means no ID twice."""
    batches.sort()
    overlaps = []
    total = 0
    hi = {}  # node -> the highest last seen so far (a batch may lie inside an earlier, longer one)
    for b in batches:
        total += b[3]
        prev = hi.get(b[0])
        if prev is not None and b[1] <= prev[2]:
            overlaps.append((prev, b))
        if prev is None or b[2] > prev[2]:
            hi[b[0]] = b
    return overlaps, total


# --- the probe: runs inside the cut host's namespace ---------------------------------------------

def probe_main(out, seconds, targets):
    """GET /v1/ids?count=1 on every target in turn, every 50 ms; writes `wall index status` on each
    change of status (0: no answer)."""
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    conns = {}
    last = {}
    end = time.time() + seconds
    with open(out, "w") as f:
        while not stop and time.time() < end:
            t_round = time.time()
            for i, t in enumerate(targets):
                addr, port = t.rsplit(":", 1)
                st = 0
                try:
                    c = conns.get(i) or http.client.HTTPConnection(addr, int(port), timeout=0.5)
                    conns[i] = c
                    c.request("GET", "/v1/ids?count=1")
                    r = c.getresponse()
                    r.read()
                    st = r.status
                except (OSError, http.client.HTTPException):
                    conns.pop(i, None)
                now = time.time()
                if st == 200 or last.get(i) != st:
                    # Every 200 is written (the last one before a stop is what the check needs).
                    f.write(f"{now:.3f} {i} {st}\n")
                last[i] = st
            f.flush()
            time.sleep(max(0.0, 0.05 - (time.time() - t_round)))


# --- report -------------------------------------------------------------------------------------

def markdown(r):
    lines = [f"# flurry fleet: {r['run']['n']} processes on {r['run']['registry']}", ""]
    run_ = r["run"]
    lines.append(f"{run_['hosts']} hosts (network namespaces) x {run_['per_host']} processes; layout "
                 f"`{run_.get('layout')}` ({run_.get('node_count')} node IDs); lease_ttl_ms {run_['lease_ttl_ms']}, "
                 f"horizon_window_ms {run_['horizon_window_ms']}; {run_['cores']} cores, {run_['mem_total_gib']} GiB; "
                 f"run took {run_.get('seconds')} s; load average at the end {run_.get('load_avg')}.")
    lines += ["", "| check | result | detail |", "|---|---|---|"]
    for k, v in r["checks"].items():
        lines.append(f"| {k} | {'ok' if v['ok'] else '**FAILED**'} | {v['detail']} |")
    if r.get("targets"):
        lines += ["", "| target of issue 34 | met | measured |", "|---|---|---|"]
        for k, v in r["targets"].items():
            lines.append(f"| {k} | {'yes' if v['met'] else '**no**'} | {v['detail']} |")
    lines += ["", "| figure | value |", "|---|---|"]

    def row(name, val):
        lines.append(f"| {name} | {val} |")
    s = r.get("start", {})
    row("all ready lines after the first spawn (s)", s.get("all_ready_seconds"))
    row("all answering /readyz 200 on distinct node IDs (s)", s.get("all_serving_seconds"))
    row("starts that exited before ready (started again 1 s later)", s.get("exits_before_ready"))
    for reason, count in (s.get("exit_reasons") or {}).items():
        row(f"  {count} x", "`" + reason.replace("|", "\\|") + "`")
    row("ready in (ms, in-process) p50 / p99 / max", f"{s.get('ready_in_ms_p50')} / {s.get('ready_in_ms_p99')} / {s.get('ready_in_ms_max')}")
    st = r.get("steady", {})
    if "etcd_requests_per_s" in st:
        row("etcd requests/s (unary, all members)", st["etcd_requests_per_s"])
        row("etcd requests/s per node", st["etcd_requests_per_s_per_node"])
        row("etcd keep-alive messages/s (per node)", f"{st['etcd_keepalive_msgs_per_s']} ({st['etcd_keepalive_msgs_per_s_per_node']})")
        row("etcd handled/s by method", ", ".join(f"{k} {v}" for k, v in st["etcd_handled_per_s_by_method"].items()))
        row("etcd DB size (MiB, per member)", st["etcd_db_size_mib"])
    if "pg_commits_per_s" in st:
        row("PostgreSQL commits/s (per node)", f"{st['pg_commits_per_s']} ({st['pg_commits_per_s_per_node']})")
    row("registry CPU (cores, all its processes)", st.get("registry_cpu_cores"))
    row("renewals / horizon saves per minute per node", f"{st.get('renewals_per_min_per_node')} / {st.get('horizon_saves_per_min_per_node')}")
    mem = st.get("flurry_memory") or {}
    if mem.get("rss"):
        row("flurry RSS per process mean / max (MiB)", f"{mem['rss']['mean_mib']} / {mem['rss']['max_mib']}")
        row("  private / shared mean (MiB)", f"{mem['private']['mean_mib']} / {mem['shared']['mean_mib']}")
        row("  sum of PSS over the fleet (MiB)", mem["sum_pss_mib"])
    c = r.get("churn")
    if c:
        row("churn: kills / restarts ready / refused starts", f"{c['kills']} / {c['restarts_ready']} / {c['refused_starts']}")
        if c.get("claim_ms_registry"):
            row("claim ms, the registry's part (claim_ms) p50 / p99 / max", f"{c['claim_ms_registry']['p50']} / {c['claim_ms_registry']['p99']} / {c['claim_ms_registry']['max']}")
        row("claim ms in-process (\"ready in\") p50 / p99 / max", f"{c['claim_ms_in_process']['p50']} / {c['claim_ms_in_process']['p99']} / {c['claim_ms_in_process']['max']}")
        row("claim ms spawn to ready line p50 / p99 / max", f"{c['claim_ms_spawn_to_ready']['p50']} / {c['claim_ms_spawn_to_ready']['p99']} / {c['claim_ms_spawn_to_ready']['max']}")
        row("kill -9 to the node ID serving again (s) p50 / p99 / max", f"{c['kill_to_reuse_s']['p50']} / {c['kill_to_reuse_s']['p99']} / {c['kill_to_reuse_s']['max']}")
    cut = r.get("cut")
    if cut:
        row("cut host: last 503 onset max / keys gone min / taken over min (s after the cut)",
            f"{cut['stopped_s']['max']} / {cut['key_gone_s']['min']} / {cut['taken_over_s']['min']}")
    ids = r.get("ids", {})
    row("IDs collected / overlapping batches", f"{ids.get('collected', 0):,} / {ids.get('overlapping_batches')}")
    if r.get("refusal", {}).get("message"):
        row("refusal message", "`" + r["refusal"]["message"].replace("|", "\\|")[:300] + "`")
    return "\n".join(lines) + "\n"


def summary(paths):
    """One Markdown table of several runs' reports (the curve from 64 to 1024), one column a run."""
    runs = []
    for path in paths:
        with open(path) as f:
            runs.append(json.load(f))
    runs.sort(key=lambda r: (r["run"]["registry"], r["run"]["n"]))

    def g(r, *keys):
        v = r
        for k in keys:
            if not isinstance(v, dict) or k not in v:
                return "-"
            v = v[k]
        return "-" if v is None else v
    rows = [
        ("processes (hosts)", lambda r: f"{r['run']['n']} ({r['run']['hosts']})"),
        ("checks passed", lambda r: "all" if r.get("ok") else "FAILED: " + "; ".join(r.get("failures", []))[:120]),
        ("all ready lines / all serving (s)", lambda r: f"{g(r, 'start', 'all_ready_seconds')} / {g(r, 'start', 'all_serving_seconds')}"),
        ("starts exited before ready", lambda r: g(r, "start", "exits_before_ready")),
        ("registry requests/s, per node", lambda r: f"{g(r, 'steady', 'etcd_requests_per_s')}, {g(r, 'steady', 'etcd_requests_per_s_per_node')}"
         if "etcd_requests_per_s" in r.get("steady", {}) else f"{g(r, 'steady', 'pg_commits_per_s')}, {g(r, 'steady', 'pg_commits_per_s_per_node')} commits"),
        ("etcd keep-alive msgs/s per node", lambda r: g(r, "steady", "etcd_keepalive_msgs_per_s_per_node")),
        ("registry CPU (cores)", lambda r: g(r, "steady", "registry_cpu_cores")),
        ("etcd DB size (MiB)", lambda r: max(g(r, "steady", "etcd_db_size_mib").values()) if isinstance(g(r, "steady", "etcd_db_size_mib"), dict) else "-"),
        ("etcd WAL fsync mean (ms)", lambda r: max((v for v in g(r, "steady", "etcd_wal_fsync_mean_ms").values() if v is not None), default="-")
         if isinstance(g(r, "steady", "etcd_wal_fsync_mean_ms"), dict) else "-"),
        ("renewals / horizon saves per min per node", lambda r: f"{g(r, 'steady', 'renewals_per_min_per_node')} / {g(r, 'steady', 'horizon_saves_per_min_per_node')}"),
        ("RSS / private / shared per process (MiB, mean)", lambda r: f"{g(r, 'steady', 'flurry_memory', 'rss', 'mean_mib')} / "
         f"{g(r, 'steady', 'flurry_memory', 'private', 'mean_mib')} / {g(r, 'steady', 'flurry_memory', 'shared', 'mean_mib')}"),
        ("fleet PSS (MiB)", lambda r: g(r, "steady", "flurry_memory", "sum_pss_mib")),
        ("churn kills / refused starts", lambda r: f"{g(r, 'churn', 'kills')} / {g(r, 'churn', 'refused_starts')}"),
        ("claim ms, the registry's part (claim_ms) p50 / p99 / max",
         lambda r: f"{g(r, 'churn', 'claim_ms_registry', 'p50')} / {g(r, 'churn', 'claim_ms_registry', 'p99')} / "
         f"{g(r, 'churn', 'claim_ms_registry', 'max')}"),
        ("claim spawn-to-ready ms p50 / p99 / max", lambda r: f"{g(r, 'churn', 'claim_ms_spawn_to_ready', 'p50')} / "
         f"{g(r, 'churn', 'claim_ms_spawn_to_ready', 'p99')} / {g(r, 'churn', 'claim_ms_spawn_to_ready', 'max')}"),
        ("claim in-process ms p50 / p99 / max", lambda r: f"{g(r, 'churn', 'claim_ms_in_process', 'p50')} / "
         f"{g(r, 'churn', 'claim_ms_in_process', 'p99')} / {g(r, 'churn', 'claim_ms_in_process', 'max')}"),
        ("kill to reuse s p50 / p99 / max", lambda r: f"{g(r, 'churn', 'kill_to_reuse_s', 'p50')} / "
         f"{g(r, 'churn', 'kill_to_reuse_s', 'p99')} / {g(r, 'churn', 'kill_to_reuse_s', 'max')}"),
        ("etcd faults (healthy again s)", lambda r: ", ".join(f"{f['fault'].split(' (')[0].replace('etcd ', '')} "
                                                         f"{f.get('healthy_again_s_after_restart')}" for f in g(r, "churn", "etcd_faults"))
         if isinstance(g(r, "churn", "etcd_faults"), list) and g(r, "churn", "etcd_faults") else "-"),
        ("cut: last 200 max / key gone min / taken over min (s)", lambda r: f"{max((x['last_200_s'] for x in g(r, 'cut', 'rows')), default='-') if isinstance(g(r, 'cut', 'rows'), list) else '-'} / "
         f"{g(r, 'cut', 'key_gone_s', 'min')} / {g(r, 'cut', 'taken_over_s', 'min')}"),
        ("refusal, then serving after (s)", lambda r: f"{'NO_FREE_NODE' if 'NO_FREE_NODE' in str(g(r, 'refusal', 'message')) else '-'}, "
         f"{g(r, 'refusal', 'seconds_from_kill_to_serving')}"),
        ("IDs collected / overlaps", lambda r: f"{g(r, 'ids', 'collected'):,} / {g(r, 'ids', 'overlapping_batches')}"
         if isinstance(g(r, "ids", "collected"), int) else "-"),
        ("sampled processes", lambda r: g(r, "ids", "sampled_processes")),
        ("MemAvailable at the end (GiB)", lambda r: g(r, "run", "mem_available_gib_at_end")),
        ("run time (s)", lambda r: g(r, "run", "seconds")),
    ]
    out = ["| figure | " + " | ".join(f"{r['run']['registry']} {r['run']['n']}" for r in runs) + " |",
           "|---|" + "---|" * len(runs)]
    for name, fn in rows:
        out.append(f"| {name} | " + " | ".join(str(fn(r)) for r in runs) + " |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=64, help="flurry processes (default 64)")
    ap.add_argument("--registry", choices=("etcd", "postgres"), default="etcd")
    ap.add_argument("--flurry", default="build/release/apps/flurry/flurry")
    ap.add_argument("--collector", default="build/release/tests/integration/fleet_collect")
    ap.add_argument("--etcd", default="/usr/bin/etcd")
    ap.add_argument("--per-host", type=int, default=PER_HOST_DEFAULT, help="processes per host namespace (32)")
    ap.add_argument("--layout", default="auto", help="auto: the fewest node bits that hold N (N fills it when a power of 2)")
    ap.add_argument("--lease-ttl-ms", type=int, default=10000)
    ap.add_argument("--horizon-window-ms", type=int, default=8000)
    ap.add_argument("--steady-seconds", type=float, default=60)
    ap.add_argument("--churn-seconds", type=float, default=300)
    ap.add_argument("--etcd-down-seconds", type=float, default=10)
    ap.add_argument("--faults", default="follower,leader,cut", help="any of follower, leader, cut (comma-separated)")
    ap.add_argument("--sample", type=int, default=64, help="processes whose IDs are collected (at least)")
    ap.add_argument("--batch", type=int, default=20000, help="IDs per collector request (20000)")
    ap.add_argument("--ids-per-s", type=float, default=2e6,
                    help="IDs per second the collectors ask for over the whole sample (2,000,000)")
    ap.add_argument("--start-per-s", type=float, default=0,
                    help="spawn this many processes a second at the start (0: all at once, the default)")
    ap.add_argument("--ready-timeout", type=float, default=300)
    ap.add_argument("--max-seconds", type=int, default=1800, help="the whole run's bound (then clean up, exit 1)")
    ap.add_argument("--subnet", default="auto",
                    help="the private /16, as its first two octets (auto: the first of 10.213 to 10.240 not in use)")
    ap.add_argument("--work-dir", default="/var/tmp")
    ap.add_argument("--run-dir", default=None)
    ap.add_argument("--report", default=None, help="also write the JSON report here")
    ap.add_argument("--remove-run-dir-if-ok", action="store_true",
                    help="delete the run directory (logs, collected batches) when every check passed")
    ap.add_argument("--cleanup", metavar="PREFIX", help="remove a killed run's leftovers and exit")
    ap.add_argument("--summary", nargs="+", metavar="REPORT.json", help="print one table of several reports and exit")
    ap.add_argument("--probe", help=argparse.SUPPRESS)
    ap.add_argument("--probe-seconds", type=float, default=120, help=argparse.SUPPRESS)
    ap.add_argument("targets", nargs="*", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.summary:
        sys.stdout.write(summary(a.summary))
        return 0
    if a.probe:
        probe_main(a.probe, a.probe_seconds, a.targets)
        return 0
    if os.geteuid() != 0:
        sys.stderr.write("fleet.py: FAILED: needs root (network namespaces, a bridge and veth pairs); "
                         "run it as root, e.g. sudo /usr/bin/python3 bench/fleet/fleet.py\n")
        return 2
    for tool in ("ip",):
        if not shutil.which(tool):
            sys.stderr.write(f"fleet.py: FAILED: {tool} not found (install iproute2)\n")
            return 2
    if a.cleanup:
        cleanup_prefix(a.cleanup)
        return 0
    a.faults = {f.strip() for f in a.faults.split(",") if f.strip()}
    for path, what in ((a.flurry, "--flurry"), (a.collector, "--collector"), (a.etcd, "--etcd")):
        if a.registry == "postgres" and what == "--etcd":
            continue
        if not os.access(path, os.X_OK):
            sys.stderr.write(f"fleet.py: FAILED: {what} {path} is not an executable (build it first)\n")
            return 2
    a.flurry, a.collector = os.path.abspath(a.flurry), os.path.abspath(a.collector)
    fleet = Fleet(a)

    def on_signal(signum, _frame):
        raise SystemExit(f"signal {signum}")

    def on_alarm(_signum, _frame):
        raise Deadline()
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(a.max_seconds)
    rc = 0
    try:
        fleet.main()
    except Deadline:
        fleet.failures.append(f"--max-seconds {a.max_seconds} reached")
        rc = 1
    except SetupError as e:
        fleet.failures.append(f"setup: {e}")
        rc = 2
    except SystemExit as e:
        fleet.failures.append(f"stopped: {e}")
        rc = 1
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            if a.registry == "postgres" and isinstance(getattr(fleet, "registry", None), Postgres):
                for p in fleet.procs + fleet.spares:
                    if p.popen:
                        fleet.res.kill(p.popen)
                fleet.registry.stop()
        finally:
            fleet.res.cleanup()
            for d in glob.glob(os.path.join(fleet.rundir, "etcd-e*")) + [os.path.join(fleet.rundir, "pg", "data"),
                                                                        os.path.join(fleet.rundir, "data")]:
                shutil.rmtree(d, ignore_errors=True)
    fleet.report["failures"] = fleet.failures
    fleet.report["ok"] = not fleet.failures
    if rc == 0 and fleet.failures:
        rc = 1
    text = json.dumps(fleet.report, indent=1)
    md = markdown(fleet.report) if "start" in fleet.report else "# fleet run failed\n\n" + "\n".join(fleet.failures) + "\n"
    with open(os.path.join(fleet.rundir, "report.json"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(fleet.rundir, "report.md"), "w") as f:
        f.write(md)
    if a.report:
        with open(a.report, "w") as f:
            f.write(text + "\n")
        with open(os.path.splitext(a.report)[0] + ".md", "w") as f:
            f.write(md)
    print(text)
    print(md)
    log(f"{'ok' if rc == 0 else 'FAILED'}: report in {fleet.rundir}/report.json and report.md"
        + ("" if rc == 0 else ": " + "; ".join(fleet.failures)))
    if rc == 0 and a.remove_run_dir_if_ok and a.run_dir is None:
        shutil.rmtree(fleet.rundir, ignore_errors=True)
        log(f"removed {fleet.rundir} (the report is above)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
