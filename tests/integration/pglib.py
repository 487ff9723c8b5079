"""A throwaway PostgreSQL server for the integration tests (Python 3, standard library only):
initdb in the test's work directory, the server on 127.0.0.1 and a free port, stopped by PID.

    pg = Postgres(h.WORK).start()
    pg.psql("postgres", "CREATE DATABASE ids")
    url = pg.url("ids")
    pg.stop_fast()      # pg_ctl stop -m fast: an outage
    pg.restart()        # the same data directory and port again
    pg.stop()           # in a finally: before the work directory is removed

TLS mode (Postgres(h.WORK, tls=True)): certificates from tests/testing/make_certs.sh in pg/certs,
ssl=on with the server's key a copy owned by the server's user (0600), and a pg_hba.conf without
any `host` line (plain TCP refused): `hostssl ... cert` for role "flurry" (its client certificate,
CN=flurry) and `hostssl ... scram-sha-256` for role "flurry_pw" (password PASSWORD_USER_PASSWORD).
pg.url("ids") is then role flurry over sslmode=verify-full with the test CA and its certificate;
databases made with pg.create_database("ids") belong to flurry (flurry_pw is its member, and
its sessions act as flurry). The
script's own psql goes over the Unix socket.
"""
import ctypes
import glob
import os
import pwd
import shutil
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


MAKE_CERTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testing", "make_certs.sh")
PASSWORD_USER_PASSWORD = "pw-Fl0rry-s3cret"


class Postgres:
    """A throwaway PostgreSQL cluster; as the `postgres` user when run as root (PostgreSQL refuses
    root). The child drops its credentials itself and then asks for PR_SET_PDEATHSIG (a credential
    change would clear it), so the server dies with the test and the PID kept is the server's."""

    def __init__(self, root, tls=False):
        self.tls = tls
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
        self.certs = os.path.join(self.dir, "certs")
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
        if self.tls:
            self._set_up_tls()
        for _ in range(5):
            if self._launch(h.free_port()):
                if self.tls:
                    self.psql("postgres", "CREATE ROLE flurry LOGIN")
                    self.psql("postgres", "CREATE ROLE flurry_pw LOGIN IN ROLE flurry PASSWORD "
                                          f"'{PASSWORD_USER_PASSWORD}'")
                    # Its sessions act as flurry, so that what either role creates both may use.
                    self.psql("postgres", "ALTER ROLE flurry_pw SET role = 'flurry'")
                return self
            if "already in use" not in self.log_text():
                h.fail(f"PostgreSQL exited with {self.proc.returncode}: {self.log_text()[-2000:]}")
        h.fail("no free port for PostgreSQL after 5 attempts")

    def _set_up_tls(self):
        p = subprocess.run(["bash", MAKE_CERTS, self.certs, "flurry", "flurry_pw"], capture_output=True,
                           timeout=120)
        h.check(p.returncode == 0, f"make_certs.sh: {p.stderr.decode()[-2000:]}")
        for name in ("server.pem", "server.key", "wronghost.pem", "wronghost.key", "ca.pem"):
            to = os.path.join(self.data, name)
            shutil.copyfile(os.path.join(self.certs, name), to)
            os.chmod(to, 0o600)
            if self.user is not None:
                os.chown(to, self.user.pw_uid, self.user.pw_gid)
        with open(os.path.join(self.data, "pg_hba.conf"), "w") as f:
            f.write("local all all trust\n"
                    "hostssl all flurry 127.0.0.1/32 cert\n"
                    "hostssl all flurry ::1/128 cert\n"
                    "hostssl all flurry_pw 127.0.0.1/32 scram-sha-256\n"
                    "hostssl all flurry_pw ::1/128 scram-sha-256\n")
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write("ssl = on\nssl_cert_file = 'server.pem'\nssl_key_file = 'server.key'\n"
                    "ssl_ca_file = 'ca.pem'\n")

    def create_database(self, name):
        """A new database; in TLS mode owned by role flurry."""
        self.psql("postgres", f"CREATE DATABASE {name}" + (" OWNER flurry" if self.tls else ""))

    def tls_query(self, client="flurry"):
        """sslmode=verify-full with the test CA, and the client certificate of `client` if any."""
        q = f"sslmode=verify-full&sslrootcert={self.certs}/ca.pem"
        if client:
            q += f"&sslcert={self.certs}/client-{client}.pem&sslkey={self.certs}/client-{client}.key"
        return q

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
                            "-h", self.dir if self.tls else "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                            "-d", database, "-c", sql],
                           capture_output=True, timeout=30)
        if check:
            h.check(p.returncode == 0, f"psql {sql!r}: {p.stderr.decode()[:500]}")
        return p.stdout.decode().strip() if p.returncode == 0 else None

    def url(self, database):
        if self.tls:
            return f"postgresql://flurry@127.0.0.1:{self.port}/{database}?{self.tls_query()}"
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
