#!/usr/bin/env python3
"""The etcd registry over TLS with authentication: a real etcd with client-certificate TLS, peer TLS,
`auth enable` and a role limited to the cluster's keys, and real `flurry serve` processes.

Certificates come from tests/testing/make_certs.sh. etcd runs with --cert-file/--key-file,
--client-cert-auth, --trusted-ca-file, peer TLS on an https peer URL and --auth-token-ttl=2, so
that the tokens flurry gets expire between its requests. Users (etcdctl as root): `flurry`, whose
role has readwrite on /flurry/t/ and on /flurry-cluster-names/t only, and `norole`.

1. A and B (https:// endpoint, etcd_ca_file, a client certificate without CN, etcd_user and the
   password in a 0600 file, one of them from FLURRY_ETCD_PASSWORD_FILE) get different node IDs and
   issue; their horizons reach etcd.
2. etcd drops every token (auth disable, auth enable): the servers' next horizon saves still
   succeed (the client authenticated again and repeated them).
3. A stops (SIGTERM, releasing its node ID); C takes that node ID and inherits its horizon.
   `flurry nodes list` with the same settings shows B and C live.
4. Refused at start, each naming its cause: a wrong CA, no client certificate, a client
   certificate whose CN is a user without the role and no etcd_user (PERMISSION_DENIED naming the
   certificate's user), a user without the role (PERMISSION_DENIED naming the user and the
   prefix), a wrong password, a password file others may read, an etcd whose server certificate
   expired, TLS files with a plain endpoint.
5. No password appears in any log, and --print-config shows the file's path, not the password.

Usage: etcd_tls_auth.py FLURRY
"""
import json
import os
import re
import socket
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
from etcd_registry import Etcd  # noqa: E402

TTL_MS = 3000
CLUSTER = "t"
TOKEN_TTL_S = 2
MAKE_CERTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testing", "make_certs.sh")


def password_of(user):
    return f"{user}-pw-{os.getpid()}"


class SecureEtcd(Etcd):
    """A single-member etcd with TLS (clients and peers) on 127.0.0.1, killed by PID at exit
    (alive, kill and dump_log are the plain one's)."""

    def __init__(self, name, certs, server_cert="server"):
        self.name = name
        self.certs = certs
        self.server_cert = server_cert
        self.client_port = h.free_port()
        self.peer_port = h.free_port()
        self.logpath = os.path.join(h.WORK, f"{name}.log")
        self.proc = None

    def cert(self, name):
        return os.path.join(self.certs, name)

    def start(self, timeout=30.0):
        client = f"https://127.0.0.1:{self.client_port}"
        peer = f"https://127.0.0.1:{self.peer_port}"
        server, key = self.cert(self.server_cert + ".pem"), self.cert(self.server_cert + ".key")
        ca = self.cert("ca.pem")
        cmd = [os.environ.get("FLURRY_ETCD", "etcd"), f"--name={self.name}",
               f"--data-dir={h.WORK}/{self.name}-data",
               f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
               f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
               f"--initial-cluster={self.name}={peer}", "--logger=zap", "--log-level=warn",
               f"--cert-file={server}", f"--key-file={key}", "--client-cert-auth", f"--trusted-ca-file={ca}",
               f"--peer-cert-file={self.cert('server.pem')}", f"--peer-key-file={self.cert('server.key')}",
               f"--peer-trusted-ca-file={ca}", "--peer-client-cert-auth", f"--auth-token-ttl={TOKEN_TTL_S}"]
        self.launch(cmd)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            h.check(self.proc.poll() is None, f"{self.name} exited with {self.proc.returncode} at start")
            if self.server_cert != "server":  # no client verifies it: listening is enough
                try:
                    socket.create_connection(("127.0.0.1", self.client_port), timeout=1).close()
                    return self
                except OSError:
                    pass
            elif self.etcdctl("endpoint", "health", check=False, auth=False).returncode == 0:
                return self
            time.sleep(0.1)
        h.fail(f"{self.name} did not answer within {timeout} s")

    @property
    def endpoint(self):
        return f"https://127.0.0.1:{self.client_port}"

    def etcdctl(self, *args, check=True, auth=True):
        cmd = ["etcdctl", f"--endpoints={self.endpoint}", "--command-timeout=10s",
               f"--cacert={self.cert('ca.pem')}", f"--cert={self.cert('client-root.pem')}",
               f"--key={self.cert('client-root.key')}"]
        if auth:
            cmd.append(f"--user=root:{password_of('root')}")
        p = subprocess.run(cmd + list(args), capture_output=True, timeout=30,
                           env=dict(os.environ, ETCDCTL_API="3"))
        if check:
            h.check(p.returncode == 0, f"etcdctl {' '.join(args)}: {p.stderr.decode()[:300]}")
        return p

    def secure(self):
        """Users, roles and `auth enable` (etcdctl as root; --user is ignored before auth is on)."""
        for step in (["user", "add", f"root:{password_of('root')}"], ["user", "grant-role", "root", "root"],
                     ["role", "add", "flurry"],
                     ["role", "grant-permission", "flurry", "readwrite", f"/flurry/{CLUSTER}/", "--prefix=true"],
                     ["role", "grant-permission", "flurry", "readwrite", f"/flurry-cluster-names/{CLUSTER}"],
                     ["user", "add", f"flurry:{password_of('flurry')}"], ["user", "grant-role", "flurry", "flurry"],
                     ["user", "add", f"norole:{password_of('norole')}"], ["auth", "enable"]):
            self.etcdctl(*step)
        return self

    def get(self, key):
        p = self.etcdctl("get", key, "--print-value-only")
        return p.stdout.decode().strip() or None


def secret_file(name, text, mode=0o600):
    path = os.path.join(h.WORK, name + ".txt")
    with open(path, "w") as f:
        f.write(text + "\n")
    os.chmod(path, mode)
    return path


def refused(name, args, says, env=None):
    """A server with `args` exits non-zero at start and its log holds every text of `says`."""
    s = h.Server(name, os.path.join(h.WORK, name), args, env=env).launch()
    try:
        rc = s.proc.wait(30)
    except subprocess.TimeoutExpired:
        h.fail(f"{name} was not refused within 30 s; log: {s.log_text()[-600:]}")
    h.check(rc != 0, f"{name} exited {rc}")
    for text in says:
        h.check(text in s.log_text(), f"{name}'s refusal lacks {text!r}: {s.log_text()[-800:]}")
    h.log(f"{name} refused: {[l for l in s.log_text().splitlines() if 'etcd' in l][-1][:400]}")
    return s


def main():
    h.init()
    certs = os.path.join(h.WORK, "certs")
    subprocess.run(["bash", MAKE_CERTS, certs, "root", "flurry", "norole"], check=True)
    cert = lambda name: os.path.join(certs, name)  # noqa: E731
    etcd = SecureEtcd("etcd", certs).start().secure()
    password_file = secret_file("flurry-password", password_of("flurry"))
    tls = ["--etcd-ca-file", cert("ca.pem"), "--etcd-cert-file", cert("client-nocn.pem"),
           "--etcd-key-file", cert("client-nocn.key")]
    base = ["--registry", "etcd", "--etcd-endpoints", etcd.endpoint, "--cluster", CLUSTER,
            "--lease-ttl-ms", str(TTL_MS), "--log-level", "debug"]
    args = base + tls + ["--etcd-user", "flurry", "--etcd-password-file", password_file]
    env_password = dict(os.environ, FLURRY_ETCD_PASSWORD_FILE=password_file)

    # 1. Two servers, two node IDs; one reads the password file's name from the environment.
    a = h.Server("a", os.path.join(h.WORK, "a"), args).start()
    b = h.Server("b", os.path.join(h.WORK, "b"), base + tls + ["--etcd-user", "flurry"], env=env_password).start()
    h.check(a.node != b.node, f"a and b share node {a.node}")
    ids = h.get_ids(a.port, 20_000) + h.get_ids(b.port, 20_000)
    h.wait_for(lambda: etcd.get(f"/flurry/{CLUSTER}/horizon/{a.node}") is not None, "a's horizon in etcd",
               timeout=5)

    # 2. Tokens die while the servers run: `auth disable` then `auth enable` drops every token etcd
    # gave (as a restart of etcd does), and the next horizon save is refused "invalid auth token".
    # The client authenticates again and repeats the save: the horizon keeps moving, and a stays
    # ready. (A running server uses its token every second, for the horizon saves, so it never
    # expires; etcd_secured_test covers a token that expired.)
    etcd.etcdctl("auth", "disable")
    etcd.etcdctl("auth", "enable")
    before = etcd.get(f"/flurry/{CLUSTER}/horizon/{a.node}")
    h.wait_for(lambda: etcd.get(f"/flurry/{CLUSTER}/horizon/{a.node}") != before,
               "a's horizon saved after its token went stale", timeout=5)
    more = h.get_ids(a.port, 20_000)
    h.check_increasing(more, "a after its token went stale", above=max(ids))
    ids += more
    time.sleep(1.5)  # more saves, with the new token
    h.check(h.request(a.port, "/readyz").status == 200, "a is not ready after its token went stale")
    h.check("horizon_save_failed" not in a.log_text() and "lease_suspended" not in a.log_text(),
            f"a failed a save after its token went stale: {a.log_text()[-600:]}")

    # 3. Hand-off: a releases its node ID, c takes it with a's horizon.
    last_a = max(i for i in ids if h.node_of(i) == a.node)
    rc, _ = a.stop()
    h.check(rc == 0, f"a exited {rc} after SIGTERM")
    c = h.Server("c", os.path.join(h.WORK, "c"), args).start()
    h.check(c.node == a.node, f"c got node {c.node}, not a's released node {a.node}")
    claimed = h.wait_log(c, rf"event=lease_claimed node={c.node} token=\d+ \S+ inherited=(\w+)")
    h.check(claimed.group(1) == "true", f"c did not inherit a's horizon: {claimed.group(0)}")
    ids_c = h.get_ids(c.port, 20_000)
    h.check_increasing(ids_c, "c", above=last_a)
    everything = ids + ids_c + h.get_ids(b.port, 20_000)
    h.check(len(set(everything)) == len(everything), f"{len(everything) - len(set(everything))} duplicate IDs")

    nodes_args = [a for a in base if a not in ("--log-level", "debug")] + tls + [
        "--etcd-user", "flurry", "--data-dir", os.path.join(h.WORK, "operator")]
    p = subprocess.run([h.FLURRY, "nodes", "list", "--json"] + nodes_args, capture_output=True, timeout=30,
                       env=env_password)
    h.check(p.returncode == 0, f"nodes list exited {p.returncode}: {p.stderr.decode()[:400]}")
    listed = {n["node"]: n for n in json.loads(p.stdout)["nodes"]}
    for s in (b, c):
        n = listed.get(s.node, {})
        h.check(n.get("state") == "live" and n.get("owner", "").endswith(f":{s.pid}"),
                f"nodes list shows {s.name}'s node {s.node} as {n}")

    # 4. Refusals at start, each naming its cause.
    auth = ["--etcd-user", "flurry", "--etcd-password-file", password_file]
    refused("wrong-ca", base + ["--etcd-ca-file", cert("other-ca.pem"), "--etcd-cert-file", cert("client-nocn.pem"),
                                "--etcd-key-file", cert("client-nocn.key")] + auth,
            ["certificate verify failed"])
    refused("no-client-cert", base + ["--etcd-ca-file", cert("ca.pem")] + auth, [etcd.endpoint, "certificate"])
    refused("cn-norole", base + ["--etcd-ca-file", cert("ca.pem"), "--etcd-cert-file", cert("client-norole.pem"),
                                 "--etcd-key-file", cert("client-norole.key")],
            ["PERMISSION_DENIED", 'user "norole" (the Common Name of the client certificate)'])
    norole_file = secret_file("norole-password", password_of("norole"))
    refused("norole", base + tls + ["--etcd-user", "norole", "--etcd-password-file", norole_file],
            ["PERMISSION_DENIED", 'user "norole"', f"/flurry/{CLUSTER}/"])
    wrong_file = secret_file("wrong-password", "not-the-password")
    refused("wrong-password", base + tls + ["--etcd-user", "flurry", "--etcd-password-file", wrong_file],
            ["UNAUTHENTICATED", 'etcd refused user "flurry": authentication failed'])
    open_file = secret_file("open-password", password_of("flurry"), mode=0o644)
    refused("open-password", base + tls + ["--etcd-user", "flurry", "--etcd-password-file", open_file],
            ["etcd_password_file", "chmod 600"])
    refused("plain-with-tls", ["--registry", "etcd", "--etcd-endpoints", f"127.0.0.1:{etcd.client_port}",
                               "--cluster", CLUSTER] + tls + auth,
            ["etcd_ca_file", "plain HTTP"])
    expired = SecureEtcd("etcd-expired", certs, server_cert="expired").start()
    # gRPC reports an expired server certificate as a failed verification, without the reason.
    refused("expired", ["--registry", "etcd", "--etcd-endpoints", expired.endpoint, "--cluster", CLUSTER] + tls + auth,
            ["certificate verify failed", expired.endpoint])

    # 5. No password in any log or in --print-config.
    p = subprocess.run([h.FLURRY, "serve", "--print-config"] + args, capture_output=True, timeout=30)
    h.check(p.returncode == 0, f"--print-config exited {p.returncode}: {p.stderr.decode()[:300]}")
    h.check(f"etcd_password_file = '{password_file}'" in p.stdout.decode(), "--print-config lacks the password file")
    for name in os.listdir(h.WORK):
        path = os.path.join(h.WORK, name)
        if not name.endswith(".log") or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        for user in ("flurry", "norole", "root"):
            if name.startswith("etcd"):
                continue  # etcd's own log
            h.check(password_of(user) not in text, f"{name} holds {user}'s password")
        h.check(re.search(r"not-the-password", text) is None, f"{name} holds the wrong password")
    h.check(p.stdout.decode().find(password_of("flurry")) < 0, "--print-config shows the password")

    for s in (b, c):
        rc, _ = s.stop()
        h.check(rc == 0, f"{s.name} exited {rc} after SIGTERM")


if __name__ == "__main__":
    h.run_main(main)
