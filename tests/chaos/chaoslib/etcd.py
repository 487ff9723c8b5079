"""A 3-member etcd cluster on loopback: free client and peer ports, data in a temporary
directory, each member started with PR_SET_PDEATHSIG and stopped by PID (SIGTERM, then SIGKILL:
a member left without quorum can take about 8 s to stop by itself).

The leader is found through each member's gRPC gateway, POST /v3/maintenance/status (the JSON
twin of `etcdctl endpoint status -w json`): header.member_id and leader.
"""

import json
import os
import signal
import time
import urllib.error
import urllib.request

from . import procs

ETCD = os.environ.get("CHAOS_ETCD", "/usr/bin/etcd")


class Member:
    def __init__(self, name, workdir):
        self.name = name
        self.client_port = procs.free_port()
        self.peer_port = procs.free_port()
        self.data_dir = os.path.join(workdir, f"etcd-{name}")
        self.logpath = os.path.join(workdir, "logs", f"etcd-{name}.log")
        self.proc = None
        self.member_id = None  # decimal string, from the status call

    @property
    def client_url(self):
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self):
        return f"http://127.0.0.1:{self.peer_port}"

    @property
    def endpoint(self):
        return f"127.0.0.1:{self.client_port}"

    def alive(self):
        return self.proc is not None and self.proc.alive()


class EtcdCluster:
    def __init__(self, workdir, size=3, token=None):
        self.workdir = workdir
        os.makedirs(os.path.join(workdir, "logs"), exist_ok=True)
        self.members = [Member(f"m{i}", workdir) for i in range(size)]
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
                "--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn"]

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
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    def status(self, m, timeout=2.0):
        """The member's /v3/maintenance/status answer (member_id and leader as decimal strings)."""
        return self._post(m, "/v3/maintenance/status", {}, timeout)

    def healthy(self, m, timeout=2.0):
        """True if the member answers /health with health true (it has a leader and can serve)."""
        try:
            with urllib.request.urlopen(m.client_url + "/health", timeout=timeout) as r:
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
