#!/usr/bin/env python3
"""systemd's readiness protocol (Type=notify, sd_notify(3)): this script plays the service manager
with an AF_UNIX datagram socket named by NOTIFY_SOCKET, as systemd does, and watches `flurry serve`.

1. A fresh server: STATUS=starting first, then READY=1, and at that moment /readyz answers 200
   and the SQLite lease row of its node is held by it; the STATUS= beside READY=1 names the node
   and the registry; libsystemd is mapped (it is opened because NOTIFY_SOCKET is set).
2. Its clock stepped back 3.5 s (libfaketime reading an offset file): a STATUS= "not ready:
   CLOCK_BEHIND" while /readyz says 503, and no second READY=1.
3. SIGTERM while a request waits for that clock (so the drain lasts): STOPPING=1 arrives while the
   lease row is still held, and after the exit (0) the row is released.
4. A restart on the same data directory with the clock 4-5.5 s behind the horizon the first left:
   the start waits for the clock holding the lease (event=start_delayed), and meanwhile no READY=1
   is sent and /readyz answers no 200; once the clock is put right READY=1 arrives and /readyz
   answers 200 at that moment, on the same node.
5. NOTIFY_SOCKET=@name (the abstract namespace): READY=1 and STOPPING=1 arrive there. This server
   also reads its admin token as systemd hands a credential over: a file of mode 0440 in
   $CREDENTIALS_DIRECTORY (a directory closed to others), accepted there only.
6. NOTIFY_SOCKET unset, and set but empty: the server starts, serves and stops; nothing arrives on
   either socket and libsystemd is not mapped (nothing is loaded for it).

Usage: sd_notify.py FLURRY
"""
import os
import signal
import socket
import sqlite3
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

ARGS = ["--grpc-listen", "", "--io-threads", "1"]


class Manager:
    """The service manager's end of NOTIFY_SOCKET: every datagram, in order, with its arrival time."""

    def __init__(self, address):
        self.address = address
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(address)
        self.messages = []  # (monotonic time, text)
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        while True:
            data = self.sock.recv(65536)
            with self.cond:
                self.messages.append((time.monotonic(), data.decode("utf-8", "replace")))
                self.cond.notify_all()

    def flush(self):
        """Returns once every datagram sent so far has been read: one of our own is sent behind
        them (a datagram socket keeps their order) and awaited; it is not kept."""
        since = self.count()
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as client:
            client.sendto(b"FLUSH=1", self.address)
        at, _ = self.wait_for("FLUSH=1", since=since, timeout=10)
        with self.cond:
            del self.messages[at]

    def count(self):
        with self.cond:
            return len(self.messages)

    def texts(self, since=0):
        with self.cond:
            return [text for _, text in self.messages[since:]]

    def wait_for(self, variable, since=0, timeout=15.0):
        """Waits for a datagram after the first `since` carrying the line `variable` (e.g.
        "READY=1", or a prefix ending in "=" such as "STATUS="); returns (index, text)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for i in range(since, len(self.messages)):
                    text = self.messages[i][1]
                    if any(line == variable or (variable.endswith("=") and line.startswith(variable))
                           for line in text.split("\n")):
                        return i, text
                left = deadline - time.monotonic()
                if left <= 0:
                    h.fail(f"no {variable} within {timeout} s; received {self.texts(since)}")
                self.cond.wait(left)


def lines(texts, variable):
    return [line for text in texts for line in text.split("\n") if line.startswith(variable)]


def status_of(text):
    found = lines([text], "STATUS=")
    return found[0][len("STATUS="):] if found else None


def lease_owner(data, node):
    """The owner of `node`'s row in the SQLite registry (None when released)."""
    db = sqlite3.connect(f"file:{os.path.join(data, 'registry.db')}?mode=ro", uri=True, timeout=5)
    try:
        row = db.execute("SELECT owner FROM nodes WHERE node = ?", (node,)).fetchone()
    finally:
        db.close()
    h.check(row is not None, f"no registry row for node {node}")
    return row[0]


def held_by(srv, data, node):
    owner = lease_owner(data, node)
    return owner is not None and owner.endswith(f":{srv.pid}")


def libsystemd_mapped(pid):
    with open(f"/proc/{pid}/maps") as f:
        return any("/libsystemd.so" in line for line in f)


def readyz(srv, timeout=5.0):
    return h.request(srv.port, "/readyz", timeout=timeout)


def check_ready_now(srv, data, what):
    """What must hold the moment READY=1 arrived: /readyz 200 and the lease row held."""
    try:
        r = readyz(srv)
    except OSError as e:
        h.fail(f"{what}: READY=1 arrived but /readyz does not answer: {e!r}")
    h.check(r.status == 200, f"{what}: READY=1 arrived but /readyz answers {r}")
    node = r.json()["node"]
    h.check(held_by(srv, data, node), f"{what}: READY=1 arrived but node {node}'s lease row is "
            f"held by {lease_owner(data, node)!r}, not by PID {srv.pid}")
    return node


def rollback_waits(srv):
    return h.metric(h.request(srv.port, "/metrics").text, "flurry_rollback_events_total",
                    {"outcome": "wait"}) or 0


def main():
    h.init()
    h.check_libfaketime()
    path = os.path.join(h.WORK, "notify")
    manager = Manager(path)
    data = os.path.join(h.WORK, "data")
    offset = os.path.join(h.WORK, "clock-offset")

    # 1. READY=1 once ready, with /readyz 200 and the lease held at that moment.
    env = h.faked_clock_env(offset, "+0")
    env["NOTIFY_SOCKET"] = path
    first = h.Server("first", data, ARGS, env=env).launch()
    ready_at, ready_text = manager.wait_for("READY=1")
    node = check_ready_now(first, data, "first start")
    before = manager.texts()[:ready_at]
    h.check(lines(before, "STATUS=starting"), f"no STATUS=starting before READY=1: {before}")
    h.check(not lines(before, "READY=1"), f"READY=1 twice: {manager.texts()}")
    status = status_of(ready_text)
    h.check(status is not None and f"node {node}," in status and "registry sqlite:" in status
            and status.endswith(": ready"), f"STATUS= beside READY=1 lacks the node {node}: {ready_text!r}")
    h.check(libsystemd_mapped(first.pid), "NOTIFY_SOCKET set, yet libsystemd is not mapped")
    ids = h.get_ids(first.port, 1000)
    h.log(f"first: READY=1 with /readyz 200 and the lease of node {node} held; STATUS={status!r}")

    # 2. The clock steps back: STATUS= says why the server is not ready, /readyz says 503.
    mark = manager.count()
    h.set_fake_offset(offset, "-3.5")
    _, text = manager.wait_for("STATUS=", since=mark, timeout=5)
    status = status_of(text)
    h.check(status.startswith(f"node {node}, registry sqlite:") and ": not ready: CLOCK_BEHIND " in status,
            f"clock behind: STATUS={status!r}")
    r = readyz(first)
    h.check(r.status == 503 and r.json().get("reason") == "CLOCK_BEHIND", f"clock behind: /readyz {r}")
    h.check(not lines(manager.texts(mark), "READY=1"), f"READY=1 again while not ready: {manager.texts(mark)}")
    h.log(f"clock behind: STATUS={status!r}, /readyz 503")

    # 3. SIGTERM while a request waits for the clock (up to about 2.5 s, so the drain waits for it):
    # STOPPING=1 comes while the lease is still held; the exit releases it.
    waits = rollback_waits(first)
    pending = {}
    waiter = threading.Thread(target=lambda: pending.update(r=h.request(first.port, "/v1/ids?count=1", timeout=20)))
    waiter.start()
    h.wait_for(lambda: rollback_waits(first) > waits, "a request waiting for the clock", timeout=5)
    mark = manager.count()
    os.kill(first.pid, signal.SIGTERM)
    _, text = manager.wait_for("STOPPING=1", since=mark, timeout=5)
    h.check(held_by(first, data, node), f"STOPPING=1 arrived after the lease was released "
            f"(owner {lease_owner(data, node)!r})")
    h.check(f"releasing node {node}" in (status_of(text) or ""), f"STOPPING=1 without saying what: {text!r}")
    rc = first.proc.wait(15)
    waiter.join(20)
    h.check(rc == 0, f"first: exit {rc} after SIGTERM")
    h.check(lease_owner(data, node) is None, f"after the exit node {node} is still held by {lease_owner(data, node)!r}")
    got = pending.get("r")
    h.check(got is not None and got.status in (200, 503), f"the request waiting for the clock: {got}")
    if got.status == 200:
        ids += [int(x) for x in got.json()["ids"]]
    h.log(f"SIGTERM: STOPPING=1 while node {node} was held ({text!r}); released at the exit")

    # 4. A start that waits for the clock: the lease is held, no READY=1, /readyz no 200.
    mark = manager.count()
    # The horizon left lies 2.5-4 s after the first's last ID: 4-5.5 s ahead of this clock, which
    # the start waits out (at most horizon_window + max_lead + max_wait, 6 s).
    h.set_fake_offset(offset, "-8")
    second = h.Server("second", data, ARGS, env=env).launch()
    h.wait_log(second, r"event=start_delayed", timeout=10)
    h.check(held_by(second, data, node), f"the delayed start does not hold node {node}: {lease_owner(data, node)!r}")
    try:
        r = readyz(second, timeout=0.3)
        h.check(r.status != 200, f"/readyz 200 while the start waits for the clock: {r}")
    except (OSError, TimeoutError):
        pass  # the front ends start once the service has: no answer yet
    h.check(not lines(manager.texts(mark), "READY=1"),
            f"READY=1 while the start waits for the clock: {manager.texts(mark)}")
    h.check(lines(manager.texts(mark), "STATUS=starting"), f"no STATUS=starting: {manager.texts(mark)}")
    h.set_fake_offset(offset, "+0")
    manager.wait_for("READY=1", since=mark, timeout=10)
    h.check(check_ready_now(second, data, "delayed start") == node, "the delayed start took another node")
    later = h.get_ids(second.port, 10)
    h.check(min(later) > max(ids), "IDs after the delayed start not above the earlier ones")
    h.check(second.stop()[0] == 0, "second: exit code")
    h.log("delayed start: no READY=1 while it waited for the clock, READY=1 with /readyz 200 after")

    # 5. The abstract namespace.
    name = f"flurry-sd-notify-{os.getpid()}-{time.monotonic_ns()}"
    abstract = Manager("\0" + name)
    credentials = os.path.join(h.WORK, "credentials")
    os.mkdir(credentials)
    token = os.path.join(credentials, "admin-token")
    with open(token, "w") as f:
        f.write("credential-token-0123456789abcdef0123456789\n")
    os.chmod(token, 0o440)  # what stat() shows of systemd's 0400 file with the service user's ACL
    os.chmod(credentials, 0o550)
    env = dict(os.environ, NOTIFY_SOCKET="@" + name, CREDENTIALS_DIRECTORY=credentials)
    third = h.Server("abstract", os.path.join(h.WORK, "abstract"), ARGS + ["--admin-token-file", token],
                     env=env).launch()
    abstract.wait_for("READY=1")
    check_ready_now(third, os.path.join(h.WORK, "abstract"), "abstract socket")
    h.check("segment_tag_creation=enabled" in third.log_text(),
            f"the admin token from $CREDENTIALS_DIRECTORY was not taken: {third.log_text()[-500:]}")
    os.kill(third.pid, signal.SIGTERM)
    abstract.wait_for("STOPPING=1", timeout=10)
    h.check(third.proc.wait(15) == 0, "abstract: exit code")
    h.log(f"NOTIFY_SOCKET=@{name}: READY=1 and STOPPING=1 arrived")

    # 6. Without NOTIFY_SOCKET (unset, or empty): nothing sent, nothing loaded.
    marks = (manager.count(), abstract.count())
    for label, value in (("unset", None), ("empty", "")):
        env = dict(os.environ)
        env.pop("NOTIFY_SOCKET", None)
        if value is not None:
            env["NOTIFY_SOCKET"] = value
        srv = h.Server(f"plain_{label}", os.path.join(h.WORK, f"plain_{label}"), ARGS, env=env).start()
        h.check(not libsystemd_mapped(srv.pid), f"NOTIFY_SOCKET {label}, yet libsystemd is mapped")
        h.get_ids(srv.port, 10)
        h.check(srv.stop()[0] == 0, f"NOTIFY_SOCKET {label}: exit code")
    manager.flush()
    abstract.flush()
    h.check((manager.count(), abstract.count()) == marks,
            f"NOTIFY_SOCKET unset or empty, yet received {manager.texts(marks[0])} {abstract.texts(marks[1])}")
    h.log("NOTIFY_SOCKET unset or empty: nothing sent, libsystemd not mapped")


h.run_main(main)
