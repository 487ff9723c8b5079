"""One small class per flurry node registry: it starts the registry's servers, gives the flurry
flags and data directories, and injects that registry's two faults:

  primary_kill(run)   etcd: kill -9 of the leader, restarted after a moment;
                      PostgreSQL: kill -9 of the postmaster and a restart (crash recovery);
                      SQLite: its write lock held for a short moment (no server to kill).
  outage(run, secs)   etcd: two of the three members (the leader among them) stopped for secs;
                      PostgreSQL: stopped (fast shutdown) for secs;
                      SQLite: its write lock held for secs.

Each fault calls run.fault_begin() when it starts hurting and run.fault_end() when the last
thing it broke is back, so the runner measures recovery from there. Faults return a short note
for the report.
"""

import os
import sqlite3
import threading
import time

from . import etcd as etcd_mod
from . import postgres as pg_mod


class Registry:
    name = "?"
    min_ttl_ms = 1000

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

    # Flags that are complete without running servers: `flurry serve ... --print-config` with
    # them tells whether this flurry has the registry at all.
    probe_args = ()

    def describe(self):
        return self.name

    def primary_kill(self, run):
        raise NotImplementedError

    def outage(self, run, seconds):
        raise NotImplementedError


class SqliteRegistry(Registry):
    """The SQLite registry shared by every process on this host (one data directory)."""

    name = "sqlite"
    probe_args = ("--registry", "sqlite")

    def __init__(self, workdir):
        super().__init__(workdir)
        self.shared = os.path.join(workdir, "sqlite-data")

    def start(self):
        os.makedirs(self.shared, exist_ok=True)
        return self

    def data_dir(self, slot):
        return self.shared

    def flurry_args(self, slot):
        return ["--registry", "sqlite"]

    def describe(self):
        return f"sqlite {self.shared}/registry.db"

    def _hold_lock(self, run, seconds):
        db = os.path.join(self.shared, "registry.db")
        held = threading.Event()
        release = threading.Event()
        err = []

        def holder():
            try:
                c = sqlite3.connect(db, timeout=10, isolation_level=None)
                c.execute("BEGIN IMMEDIATE")
                held.set()
                release.wait(seconds + 30)
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
        run.fault_begin()
        run.sleep(seconds)
        release.set()
        t.join(15)
        run.fault_end()
        return f"write lock on registry.db held {seconds:.1f} s"

    def primary_kill(self, run):
        return self._hold_lock(run, 1.0)

    def outage(self, run, seconds):
        return self._hold_lock(run, seconds)


class EtcdRegistry(Registry):
    name = "etcd"
    min_ttl_ms = 2000
    probe_args = ("--registry", "etcd", "--etcd-endpoints", "127.0.0.1:2379", "--cluster", "probe",
                  "--lease-ttl-ms", "2000")

    def __init__(self, workdir, cluster_name="chaos"):
        super().__init__(workdir)
        self.cluster = etcd_mod.EtcdCluster(workdir)
        self.cluster_name = cluster_name

    def start(self):
        self.cluster.start()
        return self

    def stop(self):
        self.cluster.stop()

    def flurry_args(self, slot):
        return ["--registry", "etcd", "--etcd-endpoints", self.cluster.endpoints, "--cluster", self.cluster_name]

    def describe(self):
        return f"etcd 3 members [{self.cluster.describe()}]"

    def primary_kill(self, run, down=1.0):
        c = self.cluster
        ld = c.leader()
        if ld is None:
            raise RuntimeError("no etcd leader")
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

    def outage(self, run, seconds):
        c = self.cluster
        ld = c.leader()
        victims = [ld] + [m for m in c.members if m is not ld][:1] if ld else c.members[:2]
        run.fault_begin()
        t0 = time.monotonic()
        hows = [c.stop_member(m, timeout=10.0) for m in victims]
        run.sleep(max(0.0, t0 + seconds - time.monotonic()))
        for m in victims:
            c.start_member(m)
        c.wait_healthy(30)
        run.fault_end()
        return (f"{' and '.join(m.name for m in victims)} stopped "
                f"({', '.join(f'{h} in {s:.1f} s' for h, s in hows)}) for {time.monotonic() - t0:.1f} s")


class PostgresRegistry(Registry):
    name = "postgres"
    probe_args = ("--registry", "postgres", "--postgres-url", "postgresql://probe@127.0.0.1:5432/probe")

    def __init__(self, workdir, database="flurry"):
        super().__init__(workdir)
        self.pg = pg_mod.Postgres(workdir)
        self.database = database

    def start(self):
        self.pg.init()
        self.pg.start()
        self.pg.psql(f"CREATE DATABASE {self.database}")
        return self

    def stop(self):
        if self.pg.proc and self.pg.proc.alive():
            self.pg.stop(timeout=5)

    def flurry_args(self, slot):
        return ["--registry", "postgres", "--postgres-url", self.pg.url(self.database)]

    def describe(self):
        return f"postgres {self.pg.url(self.database)}"

    def primary_kill(self, run, down=0.5):
        run.fault_begin()
        left = self.pg.kill9()
        run.sleep(down)
        t0 = time.monotonic()
        self.pg.start()
        run.fault_end()
        return f"postmaster killed ({left} backends outlived the wait), restarted in {time.monotonic() - t0:.1f} s"

    def outage(self, run, seconds):
        run.fault_begin()
        t0 = time.monotonic()
        how, secs = self.pg.stop()
        run.sleep(max(0.0, t0 + seconds - time.monotonic()))
        self.pg.start()
        run.fault_end()
        return f"stopped (fast shutdown {how} in {secs:.1f} s) for {time.monotonic() - t0:.1f} s"


KINDS = {"sqlite": SqliteRegistry, "etcd": EtcdRegistry, "postgres": PostgresRegistry}


def make(kind, workdir):
    return KINDS[kind](workdir)

