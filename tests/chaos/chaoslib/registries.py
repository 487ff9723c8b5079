"""One small class per flurry node registry: it starts the registry's servers, gives the flurry
flags and data directories, and injects that registry's faults:

  primary_kill(run)       etcd: kill -9 of the leader, restarted after a moment;
                          PostgreSQL: kill -9 of the postmaster and a restart (crash recovery);
                          SQLite: its write lock held for a short moment (no server to kill).
  hang(run, secs)         etcd: the leader SIGSTOPped for secs (a frozen VM, a long GC pause);
                          PostgreSQL: the postmaster and every backend SIGSTOPped for secs;
                          SQLite: its write lock held for secs.
  outage_begin(run) .. outage_end(run), outage(run, secs)
                          etcd: two of the three members (the leader among them) stopped;
                          PostgreSQL: stopped (fast shutdown);
                          SQLite: its write lock held.

Each fault calls run.fault_begin() when it starts hurting and run.fault_end() when the last
thing it broke is back, so the runner measures recovery from there. Faults return a short note
for the report.
"""

import os
import signal
import sqlite3
import threading
import time
import urllib.request

from . import etcd as etcd_mod
from . import postgres as pg_mod
from . import procs


class Registry:
    name = "?"
    min_ttl_ms = 1000
    # Flags that are complete without running servers: `flurry serve ... --print-config` with
    # them tells whether this flurry has the registry at all.
    probe_args = ()

    def __init__(self, workdir):
        self.workdir = workdir

    def start(self):
        return self

    def stop(self):
        pass

    def data_dir(self, slot):
        """A node's data directory (its host-local horizon copies live there)."""
        return os.path.join(self.workdir, "nodes", slot)

    def flurry_args(self, slot):
        raise NotImplementedError

    def describe(self):
        return self.name

    def primary_kill(self, run):
        raise NotImplementedError

    def request_count(self):
        """The registry server's own count of requests served so far, and what it counts (for the
        load a fleet puts on it); (None, "") where there is no server."""
        return None, ""

    def hang(self, run, seconds):
        raise NotImplementedError

    def outage_begin(self, run):
        """Takes the registry down (calls run.fault_begin()); returns a note."""
        raise NotImplementedError

    def outage_end(self, run):
        """Brings it back and waits until it serves (calls run.fault_end()); returns a note."""
        raise NotImplementedError

    def outage(self, run, seconds):
        t0 = time.monotonic()
        a = self.outage_begin(run)
        run.sleep(max(0.0, t0 + seconds - time.monotonic()))
        b = self.outage_end(run)
        return f"{a}, for {time.monotonic() - t0:.1f} s; {b}"


class SqliteRegistry(Registry):
    """The SQLite registry shared by every process on this host (one data directory). It has no
    server: every fault is another process holding its write lock."""

    name = "sqlite"
    probe_args = ("--registry", "sqlite")

    def __init__(self, workdir):
        super().__init__(workdir)
        self.shared = os.path.join(workdir, "sqlite-data")
        self._lock = None

    def start(self):
        os.makedirs(self.shared, exist_ok=True)
        return self

    def data_dir(self, slot):
        return self.shared

    def flurry_args(self, slot):
        return ["--registry", "sqlite"]

    def describe(self):
        return f"sqlite {self.shared}/registry.db"

    def outage_begin(self, run):
        db = os.path.join(self.shared, "registry.db")
        held, release, err = threading.Event(), threading.Event(), []

        def holder():
            try:
                c = sqlite3.connect(db, timeout=10, isolation_level=None)
                c.execute("BEGIN IMMEDIATE")
                held.set()
                release.wait(600)
                c.execute("ROLLBACK")
                c.close()
            except sqlite3.Error as e:
                err.append(e)
                held.set()

        t = threading.Thread(target=holder, daemon=True)
        t.start()
        held.wait(15)
        if err:
            raise RuntimeError(f"could not lock {db}: {err[0]}")
        self._lock = (t, release, time.monotonic())
        run.fault_begin()
        return "write lock on registry.db taken"

    def outage_end(self, run):
        t, release, t0 = self._lock
        release.set()
        t.join(15)
        self._lock = None
        run.fault_end()
        return f"released after {time.monotonic() - t0:.1f} s"

    def primary_kill(self, run):
        return self.outage(run, 1.0)

    def hang(self, run, seconds):
        return self.outage(run, seconds)


class EtcdRegistry(Registry):
    name = "etcd"
    min_ttl_ms = 2000
    probe_args = ("--registry", "etcd", "--etcd-endpoints", "127.0.0.1:2379", "--cluster", "probe",
                  "--lease-ttl-ms", "2000")

    def __init__(self, workdir, cluster_name="chaos"):
        super().__init__(workdir)
        self.cluster = etcd_mod.EtcdCluster(workdir)
        self.cluster_name = cluster_name
        self._down = []

    def start(self):
        self.cluster.start()
        return self

    def stop(self):
        self.cluster.stop()

    def flurry_args(self, slot):
        return ["--registry", "etcd", "--etcd-endpoints", self.cluster.endpoints, "--cluster", self.cluster_name]

    def describe(self):
        return f"etcd 3 members [{self.cluster.describe()}]"

    def request_count(self):
        total = 0.0
        for m in self.cluster.members:
            if not m.alive():
                continue
            with self.cluster.urlopen(m.client_url + "/metrics", 5) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("grpc_server_handled_total{"):
                        total += float(line.rsplit(" ", 1)[1])
        return total, "gRPC calls over all members"

    def _leader(self):
        ld = self.cluster.leader()
        if ld is None:
            raise RuntimeError(f"no etcd leader: {self.cluster.describe()}")
        return ld

    def primary_kill(self, run, down=1.0):
        c = self.cluster
        ld = self._leader()
        run.fault_begin()
        c.kill_member(ld)
        t_kill = time.monotonic()
        new = c.leader(timeout=15)
        t_new = time.monotonic()
        run.sleep(max(0.0, t_kill + down - time.monotonic()))
        c.start_member(ld)
        c.wait_healthy(30)
        run.fault_end()
        return (f"leader {ld.name} killed; {new.name if new else 'no one'} leader after "
                f"{t_new - t_kill:.1f} s; {ld.name} restarted")

    def hang(self, run, seconds):
        c = self.cluster
        ld = self._leader()
        run.fault_begin()
        ld.proc.send(signal.SIGSTOP)
        t0 = time.monotonic()
        try:
            new = c.leader(timeout=seconds, exclude=(ld,))  # the others elect one meanwhile
            t_new = time.monotonic()
            run.sleep(max(0.0, t0 + seconds - time.monotonic()))
        finally:
            ld.proc.send(signal.SIGCONT)
        c.wait_healthy(30)
        run.fault_end()
        return (f"leader {ld.name} frozen (SIGSTOP) {time.monotonic() - t0:.1f} s; "
                + (f"{new.name} leader after {t_new - t0:.1f} s" if new else "no new leader meanwhile"))

    def outage_begin(self, run):
        c = self.cluster
        ld = c.leader()
        victims = ([ld] + [m for m in c.members if m is not ld][:1]) if ld else c.members[:2]
        run.fault_begin()
        hows = [c.stop_member(m, timeout=10.0) for m in victims]
        self._down = victims
        return (f"{' and '.join(m.name for m in victims)} stopped "
                f"({', '.join(f'{h} in {s:.1f} s' for h, s in hows)})")

    def outage_end(self, run):
        c = self.cluster
        t0 = time.monotonic()
        for m in self._down:
            c.start_member(m)
        c.wait_healthy(30)
        run.fault_end()
        names = " and ".join(m.name for m in self._down)
        self._down = []
        return f"{names} started, healthy after {time.monotonic() - t0:.1f} s"


class PostgresRegistry(Registry):
    name = "postgres"
    probe_args = ("--registry", "postgres", "--postgres-url", "postgresql://probe@127.0.0.1:5432/probe")

    def __init__(self, workdir, database="flurry"):
        super().__init__(workdir)
        self.pg = pg_mod.Postgres(workdir)
        self.database = database
        self._frozen = []
        procs.at_cleanup(self._thaw)

    def start(self):
        self.pg.init()
        self.pg.start()
        self.pg.psql(f"CREATE DATABASE {self.database}")
        return self

    def stop(self):
        self._thaw()
        if self.pg.proc and self.pg.proc.alive():
            self.pg.stop(timeout=5)

    def flurry_args(self, slot):
        return ["--registry", "postgres", "--postgres-url", self.pg.url(self.database)]

    def describe(self):
        return f"postgres {self.pg.url(self.database)}"

    def request_count(self):
        out = self.pg.psql(f"SELECT xact_commit FROM pg_stat_database WHERE datname = '{self.database}'",
                           database="postgres")
        return float(out.strip()), "committed transactions"

    def primary_kill(self, run, down=0.5):
        run.fault_begin()
        left = self.pg.kill9()
        run.sleep(down)
        t0 = time.monotonic()
        self.pg.start()
        run.fault_end()
        return f"postmaster killed ({left} backends outlived the wait), restarted in {time.monotonic() - t0:.1f} s"

    def _thaw(self):
        for pid in self._frozen:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self._frozen = []

    def hang(self, run, seconds):
        """The whole server frozen: the postmaster first (so it starts nothing new), then every
        process it started (backends, checkpointer, WAL writer, ...), all by PID."""
        run.fault_begin()
        pm = self.pg.proc.pid
        os.kill(pm, signal.SIGSTOP)
        self._frozen = [pm]
        for pid in pg_mod.children(pm):
            try:
                os.kill(pid, signal.SIGSTOP)
                self._frozen.append(pid)
            except ProcessLookupError:
                pass
        n = len(self._frozen)
        t0 = time.monotonic()
        try:
            run.sleep(seconds)
        finally:
            self._thaw()
        ok = self.pg.ready()
        run.fault_end()
        return f"postmaster and {n - 1} server processes frozen (SIGSTOP) {time.monotonic() - t0:.1f} s" + \
            ("" if ok else "; not ready at once after SIGCONT")

    def outage_begin(self, run):
        run.fault_begin()
        how, secs = self.pg.stop()
        return f"stopped (fast shutdown {how} in {secs:.1f} s)"

    def outage_end(self, run):
        t0 = time.monotonic()
        self.pg.start()
        run.fault_end()
        return f"started, ready after {time.monotonic() - t0:.1f} s"


class EtcdTlsAuthRegistry(EtcdRegistry):
    """The etcd cluster with TLS (client certificates, peers) and authentication: flurry connects
    over https:// as user `flurry`, whose role covers its cluster's keys only."""
    name = "etcd-tls-auth"
    probe_args = ("--registry", "etcd", "--etcd-endpoints", "https://127.0.0.1:2379", "--cluster", "probe",
                  "--lease-ttl-ms", "2000", "--etcd-ca-file", "/nonexistent/ca.pem", "--etcd-user", "flurry",
                  "--etcd-password-file", "/nonexistent/password")

    def __init__(self, workdir, cluster_name="chaos"):
        Registry.__init__(self, workdir)
        self.cluster = etcd_mod.EtcdCluster(workdir, secure=True)
        self.cluster_name = cluster_name
        self._down = []

    def start(self):
        self.cluster.start()
        self.cluster.enable_auth(self.cluster_name)
        return self

    def flurry_args(self, slot):
        s = self.cluster.secured
        return super().flurry_args(slot) + [
            "--etcd-ca-file", s.cert("ca.pem"), "--etcd-cert-file", s.cert("client-nocn.pem"),
            "--etcd-key-file", s.cert("client-nocn.key"), "--etcd-user", "flurry",
            "--etcd-password-file", s.password_file]

    def describe(self):
        return f"etcd 3 members, TLS + auth [{self.cluster.describe()}]"


KINDS = {"sqlite": SqliteRegistry, "etcd": EtcdRegistry, "etcd-tls-auth": EtcdTlsAuthRegistry,
         "postgres": PostgresRegistry}


def make(kind, workdir):
    return KINDS[kind](workdir)
