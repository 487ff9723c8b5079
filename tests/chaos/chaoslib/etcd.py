"""A 3-member etcd cluster on loopback: free client and peer ports, data in a temporary
directory, each member started with PR_SET_PDEATHSIG and stopped by PID (SIGTERM, then SIGKILL:
a member left without quorum can take about 8 s to stop by itself).

The leader is found through each member's gRPC gateway, POST /v3/maintenance/status (the JSON
twin of `etcdctl endpoint status -w json`): header.member_id and leader.

secure=True: TLS for clients (--client-cert-auth) and peers, certificates from
tests/testing/make_certs.sh, and `auth enable` with a user `flurry` whose role has readwrite on
one cluster's keys only (Secured.role_for); the harness's own requests (status, health, metrics)
use the CA and a client certificate without CN (etcd's gateway refuses one with a CN).
"""

import json
import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request

from . import procs

ETCD = os.environ.get("CHAOS_ETCD", "/usr/bin/etcd")
MAKE_CERTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "testing", "make_certs.sh")


class Secured:
    """The certificates, users and passwords of a secure cluster."""

    def __init__(self, workdir):
        self.certs = os.path.join(workdir, "certs")
        subprocess.run(["bash", MAKE_CERTS, self.certs, "root"], check=True)
        self.root_password = f"root-{os.getpid()}"
        self.password_file = os.path.join(workdir, "etcd-password")
        with open(self.password_file, "w") as f:
            f.write(f"flurry-{os.getpid()}\n")
        os.chmod(self.password_file, 0o600)
        self.ssl = ssl.create_default_context(cafile=self.cert("ca.pem"))
        self.ssl.load_cert_chain(self.cert("client-nocn.pem"), self.cert("client-nocn.key"))

    def cert(self, name):
        return os.path.join(self.certs, name)

    def flurry_password(self):
        with open(self.password_file) as f:
            return f.read().strip()


class Member:
    def __init__(self, name, workdir, secure=False):
        self.name = name
        self.scheme = "https" if secure else "http"
        self.client_port = procs.free_port()
        self.peer_port = procs.free_port()
        self.data_dir = os.path.join(workdir, f"etcd-{name}")
        self.logpath = os.path.join(workdir, "logs", f"etcd-{name}.log")
        self.proc = None
        self.member_id = None  # decimal string, from the status call

    @property
    def client_url(self):
        return f"{self.scheme}://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self):
        return f"{self.scheme}://127.0.0.1:{self.peer_port}"

    @property
    def endpoint(self):
        return (f"{self.scheme}://" if self.scheme == "https" else "") + f"127.0.0.1:{self.client_port}"

    def alive(self):
        return self.proc is not None and self.proc.alive()


class EtcdCluster:
    def __init__(self, workdir, size=3, token=None, secure=False):
        self.workdir = workdir
        os.makedirs(os.path.join(workdir, "logs"), exist_ok=True)
        self.secured = Secured(workdir) if secure else None
        self.members = [Member(f"m{i}", workdir, secure) for i in range(size)]
        self.token = token or f"flurry-chaos-{os.getpid()}"

    # --- processes ------------------------------------------------------------------------------

    def _cmd(self, m):
        initial = ",".join(f"{x.name}={x.peer_url}" for x in self.members)
        return [ETCD, "--name", m.name, "--data-dir", m.data_dir,
                "--listen-client-urls", m.client_url, "--advertise-client-urls", m.client_url,
                "--listen-peer-urls", m.peer_url, "--initial-advertise-peer-urls", m.peer_url,
                "--initial-cluster", initial, "--initial-cluster-token", self.token,
                "--initial-cluster-state", "new",
                "--heartbeat-interval", "100", "--election-timeout", "1000",
                "--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn"] + self._tls_args()

    def _tls_args(self):
        if self.secured is None:
            return []
        c = self.secured.cert
        return ["--cert-file", c("server.pem"), "--key-file", c("server.key"), "--client-cert-auth",
                "--trusted-ca-file", c("ca.pem"), "--peer-cert-file", c("server.pem"),
                "--peer-key-file", c("server.key"), "--peer-trusted-ca-file", c("ca.pem"),
                "--peer-client-cert-auth", "--auth-token-ttl", "2"]

    def etcdctl(self, *args):
        """etcdctl as root against every member (root's password is ignored before auth enable)."""
        c = self.secured.cert
        cmd = ["etcdctl", f"--endpoints={','.join(m.client_url for m in self.members)}",
               "--command-timeout=10s", f"--cacert={c('ca.pem')}", f"--cert={c('client-root.pem')}",
               f"--key={c('client-root.key')}", f"--user=root:{self.secured.root_password}"] + list(args)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=dict(os.environ, ETCDCTL_API="3"))
        if p.returncode != 0:
            raise RuntimeError(f"etcdctl {' '.join(args)}: {p.stderr.strip()[:300]}")

    def enable_auth(self, cluster_name):
        """Users root and flurry (readwrite on /flurry/<cluster_name>/ and its name's reservation)."""
        pw = self.secured.flurry_password()
        for step in (["user", "add", f"root:{self.secured.root_password}"], ["user", "grant-role", "root", "root"],
                     ["role", "add", "flurry"],
                     ["role", "grant-permission", "flurry", "readwrite", f"/flurry/{cluster_name}/", "--prefix=true"],
                     ["role", "grant-permission", "flurry", "readwrite",
                      f"/flurry-cluster-names/{cluster_name.lower()}"],
                     ["user", "add", f"flurry:{pw}"], ["user", "grant-role", "flurry", "flurry"], ["auth", "enable"]):
            self.etcdctl(*step)

    def urlopen(self, req, timeout):
        return urllib.request.urlopen(req, timeout=timeout, context=self.secured.ssl if self.secured else None)

    def start_member(self, m):
        """Starts (or restarts, on its data directory) one member; does not wait."""
        assert not m.alive(), f"etcd {m.name} is running"
        m.proc = procs.Proc(f"etcd-{m.name}", self._cmd(m), m.logpath).start()
        return m

    def start(self, timeout=30.0):
        for m in self.members:
            self.start_member(m)
        self.wait_healthy(timeout)
        for m in self.members:
            m.member_id = self.status(m)["header"]["member_id"]
        return self

    def stop_member(self, m, timeout=10.0):
        """SIGTERM, SIGKILL after timeout; returns (how, seconds)."""
        return m.proc.stop(signal.SIGTERM, timeout) if m.proc else ("gone", 0.0)

    def kill_member(self, m):
        m.proc.kill()

    def stop(self, timeout=3.0):
        """Stops every member (SIGTERM, SIGKILL after timeout: the data is thrown away anyway,
        and the last member without quorum would take seconds)."""
        for m in self.members:
            if m.alive():
                m.proc.send(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for m in self.members:
            if m.proc and not m.proc.wait(max(0.0, deadline - time.monotonic())):
                m.proc.kill()

    # --- state ----------------------------------------------------------------------------------

    @property
    def endpoints(self):
        return ",".join(m.endpoint for m in self.members)

    def _post(self, m, path, body, timeout=2.0):
        req = urllib.request.Request(m.client_url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        with self.urlopen(req, timeout) as r:
            return json.loads(r.read())

    def status(self, m, timeout=2.0):
        """The member's /v3/maintenance/status answer (member_id and leader as decimal strings)."""
        return self._post(m, "/v3/maintenance/status", {}, timeout)

    def healthy(self, m, timeout=2.0):
        """True if the member answers /health with health true (it has a leader and can serve)."""
        try:
            with self.urlopen(m.client_url + "/health", timeout) as r:
                return json.loads(r.read()).get("health") in ("true", True)
        except (OSError, ValueError, urllib.error.URLError):
            return False

    def leader(self, timeout=10.0, exclude=()):
        """The member every running member (but those excluded: a frozen one) agrees is the
        leader; None on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            seen = set()
            for m in self.members:
                if not m.alive() or m in exclude:
                    continue
                try:
                    st = self.status(m, timeout=1.0)
                except (OSError, ValueError, urllib.error.URLError):
                    seen.add(None)
                    continue
                seen.add(st.get("leader"))
            if len(seen) == 1:
                lid = seen.pop()
                for m in self.members:
                    if lid is not None and m.member_id == lid and m.alive() and m not in exclude:
                        return m
            time.sleep(0.05)
        return None

    def wait_healthy(self, timeout=30.0, members=None):
        """Waits until every running member (or the given ones) reports health; raises on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            ms = [m for m in (members or self.members) if m.alive()]
            dead = [m for m in (members or self.members) if m.proc and not m.alive()]
            if dead:
                raise RuntimeError(f"etcd {dead[0].name} exited ({dead[0].proc.returncode}):\n"
                                   f"{dead[0].proc.log_tail()}")
            if ms and all(self.healthy(m, timeout=1.0) for m in ms):
                return time.monotonic()
            if time.monotonic() >= deadline:
                raise RuntimeError(f"etcd not healthy within {timeout} s")
            time.sleep(0.05)

    def describe(self):
        ld = self.leader(timeout=2.0)
        return ", ".join(f"{m.name}:{m.client_port}{'*' if m is ld else ''}{'' if m.alive() else '(down)'}"
                         for m in self.members)
