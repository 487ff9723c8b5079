"""One PostgreSQL 15 server for the harness, run as the `postgres` user (PostgreSQL refuses
root): `setpriv --reuid=postgres --regid=postgres --init-groups --pdeathsig SIGKILL` execs the
server itself, so the PID we keep is the postmaster's and it dies with the harness.

Data in a temporary directory owned by postgres, trust authentication on 127.0.0.1 only, a free
port, its Unix socket in the same directory (never /var/run/postgresql). Faults: `kill9()` (the
postmaster by PID; its backends notice the postmaster's death and exit by themselves, and the
restart waits for them, since a new postmaster refuses to start while old backends still hold
the shared memory) and `stop()` (fast shutdown, SIGINT: SIGTERM would wait for every client
to disconnect), each followed by `start()`, which runs crash recovery if needed.
"""

import os
import pwd
import signal
import socket
import subprocess
import time

from . import procs

PG_BIN = os.environ.get("CHAOS_PG_BIN", "/usr/lib/postgresql/15/bin")
PG_USER = "postgres"


def _as_postgres(cmd):
    return ["setpriv", f"--reuid={PG_USER}", f"--regid={PG_USER}", "--init-groups",
            "--pdeathsig", "SIGKILL"] + cmd


def children(pid):
    """PIDs of the direct children of pid (from /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError):
            continue
        if ppid == pid:
            out.append(int(d))
    return out


def _pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return stat[stat.rindex(")") + 2] != "Z"
    except OSError:
        return False


class Postgres:
    def __init__(self, workdir, port=None):
        self.dir = os.path.join(workdir, "postgres")
        self.data = os.path.join(self.dir, "data")
        self.port = port or procs.free_port()
        self.logpath = os.path.join(workdir, "logs", "postgres.log")
        os.makedirs(os.path.dirname(self.logpath), exist_ok=True)
        self.proc = None
        self.database = "postgres"  # the maintenance database: pg_isready, CREATE DATABASE

    def url(self, database):
        return f"postgresql://{PG_USER}@127.0.0.1:{self.port}/{database}"

    def init(self):
        pw = pwd.getpwnam(PG_USER)
        # The postgres user must reach its directory: every parent at least o+x.
        d = os.path.dirname(self.dir)
        while d not in ("/", ""):
            st = os.stat(d)
            if not st.st_mode & 0o001:
                os.chmod(d, st.st_mode | 0o001)
            d = os.path.dirname(d)
        os.makedirs(self.dir, exist_ok=True)
        os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        with open(self.logpath, "ab") as logf:
            p = subprocess.run(_as_postgres([os.path.join(PG_BIN, "initdb"), "-D", self.data, "-U", PG_USER,
                                             "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"]),
                               stdout=logf, stderr=subprocess.STDOUT, cwd=self.dir,
                               preexec_fn=procs.die_with_parent)
        if p.returncode != 0:
            raise RuntimeError(f"initdb failed ({p.returncode}); see {self.logpath}")
        return self

    def _cmd(self):
        return _as_postgres([os.path.join(PG_BIN, "postgres"), "-D", self.data, "-p", str(self.port),
                             "-k", self.dir, "-c", "listen_addresses=127.0.0.1",
                             "-c", "max_connections=300", "-c", "shared_buffers=32MB",
                             "-c", "logging_collector=off", "-c", "log_min_messages=warning",
                             # The harness kills processes, never the machine: the OS keeps every
                             # write, fsync would only add seconds to each crash recovery (it
                             # syncs the whole data directory first) on this shared disk.
                             "-c", "fsync=off"])

    def start(self, timeout=30.0):
        """Starts the server (crash recovery if it was killed) and waits until it accepts
        connections. A start refused because the old backends still hold the shared memory is
        retried until timeout."""
        deadline = time.monotonic() + timeout
        while True:
            self.proc = procs.Proc("postgres", self._cmd(), self.logpath, cwd=self.dir).start()
            while time.monotonic() < deadline:
                if not self.proc.alive():
                    break
                if self.ready():
                    return time.monotonic()
                time.sleep(0.05)
            if self.proc.alive():
                raise RuntimeError(f"postgres not ready within {timeout} s:\n{self.proc.log_tail()}")
            if time.monotonic() >= deadline:
                raise RuntimeError(f"postgres exited ({self.proc.returncode}) at start:\n{self.proc.log_tail()}")
            time.sleep(0.2)

    def ready(self):
        """True when pg_isready says the server accepts connections."""
        p = subprocess.run([os.path.join(PG_BIN, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port),
                            "-U", PG_USER, "-d", self.database, "-t", "1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return p.returncode == 0

    def backends(self):
        return children(self.proc.pid) if self.proc and self.proc.alive() else []

    def kill9(self, wait_backends=15.0):
        """SIGKILL to the postmaster; waits (up to wait_backends s) for its backends to exit
        by themselves. Returns how many were still there after the wait."""
        kids = self.backends()
        self.proc.kill()
        deadline = time.monotonic() + wait_backends
        while time.monotonic() < deadline:
            kids = [k for k in kids if _pid_alive(k)]
            if not kids:
                return 0
            time.sleep(0.05)
        return len(kids)

    def stop(self, timeout=15.0):
        """Fast shutdown (SIGINT), SIGKILL after timeout; returns (how, seconds)."""
        if not self.proc:
            return "gone", 0.0
        return self.proc.stop(signal.SIGINT, timeout)

    def psql(self, sql, database=None):
        p = subprocess.run(_as_postgres([os.path.join(PG_BIN, "psql"), "-X", "-q", "-A", "-t",
                                         "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(self.port),
                                         "-U", PG_USER, "-d", database or self.database, "-c", sql]),
                           capture_output=True, text=True, cwd=self.dir)
        if p.returncode != 0:
            raise RuntimeError(f"psql: {p.stderr.strip()}")
        return p.stdout

    def accepts_tcp(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            return True
        except OSError:
            return False
