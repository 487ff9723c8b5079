"""A throwaway PostgreSQL server for the integration tests (Python 3, standard library only):
initdb in the test's work directory, the server on 127.0.0.1 and a free port, stopped by PID.

    pg = Postgres(h.WORK).start()
    pg.psql("postgres", "CREATE DATABASE ids")
    url = pg.url("ids")
    pg.stop_fast()      # pg_ctl stop -m fast: an outage
    pg.restart()        # the same data directory and port again
    pg.stop()           # in a finally: before the work directory is removed
"""
import ctypes
import glob
import os
import pwd
import signal
import subprocess
import time

import harness as h


def find_bindir():
    env = os.environ.get("FLURRY_PG_BINDIR")
    if env:
        return env
    found = []
    for d in glob.glob("/usr/lib/postgresql/*/bin"):
        version = os.path.basename(os.path.dirname(d))
        if version.isdigit() and os.path.exists(os.path.join(d, "postgres")):
            found.append((int(version), d))
    h.check(found, "no /usr/lib/postgresql/<version>/bin/postgres (install the Debian package postgresql)")
    return max(found)[1]


class Postgres:
    """A throwaway PostgreSQL cluster; as the `postgres` user when run as root (PostgreSQL refuses
    root). The child drops its credentials itself and then asks for PR_SET_PDEATHSIG (a credential
    change would clear it), so the server dies with the test and the PID kept is the server's."""

    def __init__(self, root):
        self.bindir = find_bindir()
        self.dir = os.path.join(root, "pg")
        os.mkdir(self.dir, 0o700)
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "server.log")
        self.user = None
        if os.geteuid() == 0:
            self.user = pwd.getpwnam("postgres")
            os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
            # The work directory is root's and 0700: let the server reach its own directory.
            os.chmod(root, 0o711)
        self.port = None
        self.proc = None

    def _preexec(self):
        if self.user is not None:
            os.setgroups([])
            os.setgid(self.user.pw_gid)
            os.setuid(self.user.pw_uid)
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG

    def run(self, *args):
        with open(self.log, "ab") as log:
            return subprocess.run(list(args), stdout=log, stderr=subprocess.STDOUT, cwd=self.dir,
                                  preexec_fn=self._preexec, timeout=120).returncode

    def log_text(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def start(self):
        """initdb, then the server on a free port (another one when a start loses the race)."""
        rc = self.run(os.path.join(self.bindir, "initdb"), "-D", self.data, "-U", "postgres", "-A", "trust",
                      "-E", "UTF8", "--no-locale", "--no-sync")
        h.check(rc == 0, f"initdb exited {rc}: {self.log_text()[-2000:]}")
        for _ in range(5):
            if self._launch(h.free_port()):
                return self
            if "already in use" not in self.log_text():
                h.fail(f"PostgreSQL exited with {self.proc.returncode}: {self.log_text()[-2000:]}")
        h.fail("no free port for PostgreSQL after 5 attempts")

    def restart(self):
        """The server again on the same data directory and port (clients keep their URLs)."""
        h.check(self.proc is None or self.proc.poll() is not None, "PostgreSQL is still running")
        if not self._launch(self.port):
            h.fail(f"PostgreSQL exited with {self.proc.returncode} at restart: {self.log_text()[-2000:]}")
        return self

    def _launch(self, port):
        """Starts the postmaster on `port`; True once it accepts connections, False if it exited."""
        self.port = port
        log = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [os.path.join(self.bindir, "postgres"), "-D", self.data, "-k", self.dir, "-h", "127.0.0.1",
             "-p", str(self.port), "-c", "fsync=off", "-c", "full_page_writes=off"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self.dir,
            preexec_fn=self._preexec)
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None:
            if self.psql("postgres", "SELECT 1", check=False) == "1":
                return True
            time.sleep(0.05)
        if self.proc.poll() is None:
            h.fail(f"PostgreSQL did not accept connections within 60 s: {self.log_text()[-2000:]}")
        return False

    def psql(self, database, sql, check=True):
        """Runs sql as the superuser; its output (unaligned, tuples only), stripped."""
        p = subprocess.run([os.path.join(self.bindir, "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                            "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", database, "-c", sql],
                           capture_output=True, timeout=30)
        if check:
            h.check(p.returncode == 0, f"psql {sql!r}: {p.stderr.decode()[:500]}")
        return p.stdout.decode().strip() if p.returncode == 0 else None

    def url(self, database):
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def stop(self):
        """Fast shutdown (SIGINT), SIGKILL after 10 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


    def stop_fast(self):
        """`pg_ctl stop -m fast` (as an operator stops it: clients are disconnected at once), then
        reaps the postmaster."""
        rc = self.run(os.path.join(self.bindir, "pg_ctl"), "stop", "-D", self.data, "-m", "fast", "-w",
                      "-t", "30")
        h.check(rc == 0, f"pg_ctl stop exited {rc}: {self.log_text()[-2000:]}")
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            h.fail("the postmaster did not exit within 10 s of pg_ctl stop")
