"""`flurry serve` processes and what the harness did to them.

A *slot* is a node's place in the cluster: its name, its data directory (kept across restarts, so
a restart finds its host-local horizon copies) and, when faked, its libfaketime offset file. Each
start of a slot is a new *process* (NodeProc), labelled slot.N, with its own load clients and
Streams.

Every fault the harness causes is written down on the process as a *fault window* (kind, from,
to), on the monotonic clock, *before* the signal is sent:

  kill   SIGKILL sent            [t, forever)
  stop   SIGSTOP .. SIGCONT      [t_stop, t_cont + STOP_GRACE]
  term   SIGTERM sent            [t, forever)
  exit   the process exited by itself (an expected refusal to start, or a crash)
         [t_exit - EXIT_LEAD, forever); an exit the harness did not expect is a violation

The checker excuses a transport error only inside a window of its process and only of the kinds
that window explains (checker.EXCUSES). Faults of the registry (etcd, PostgreSQL, SQLite lock)
open no window: a node must answer while its registry is down (503 with a reason), never drop.
"""

import http.client
import json
import os
import signal
import time

from . import load, procs

LIBFAKETIME = "/usr/$LIB/faketime/libfaketimeMT.so.1"
STOP_GRACE = 1.0  # seconds after SIGCONT in which a stopped process may still fail a request
# A process's sockets close while it exits, a moment before the reaper sees the exit: its exit
# window starts this much earlier.
EXIT_LEAD = 0.5
FOREVER = float("inf")


def libfaketime_installed():
    import glob
    return bool(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))


class Slot:
    def __init__(self, name, data_dir, faketime_file=None):
        self.name = name
        self.data_dir = data_dir
        self.faketime_file = faketime_file  # None: never under libfaketime
        self.starts = 0
        self.current = None  # the latest NodeProc

    def __repr__(self):
        return f"<slot {self.name}>"


class NodeProc:
    """One `flurry serve` process."""

    def __init__(self, slot, port, proc, offset, expect_exit):
        slot.starts += 1
        self.slot = slot
        self.label = f"{slot.name}.{slot.starts}"
        self.port = port
        self.proc = proc
        self.windows = []  # [kind, t0, t1]
        self.offsets = [(time.monotonic(), offset)] if offset is not None else []  # (t, seconds)
        self.expect_exit = expect_exit  # a refused start is a possible outcome
        self.retired = False  # we killed or terminated it: its clients stop
        self.stopped = False  # SIGSTOPped now
        self.clients = []
        self.streams = []
        self.exit_noted = False
        self.node_ids = []  # node IDs seen in /readyz (for the log)

    def __repr__(self):
        return f"<{self.label} pid {self.proc.pid} port {self.port}>"

    def finished(self):
        """True once the process is gone or being taken down by the harness: its clients stop
        after their current request."""
        return self.retired or not self.proc.alive()

    def open_window(self, kind, t1=FOREVER):
        w = [kind, time.monotonic(), t1]
        self.windows.append(w)
        return w

    def last_ok(self):
        """Monotonic time of the last batch any of its clients received, or None."""
        times = [s.last_ok for s in self.streams if s.last_ok is not None]
        return max(times) if times else None


class Fleet:
    """Starts, signals and restarts `flurry serve` processes; each gets its load clients."""

    def __init__(self, flurry, workdir, registry, batch, rate, timeout, ttl_ms, max_lead_ms, log_level="info",
                 conns_per_node=1, extra_args=()):
        self.flurry = flurry
        self.workdir = workdir
        self.registry = registry
        self.batch = batch
        self.rate = rate
        self.timeout = timeout
        self.ttl_ms = ttl_ms
        self.max_lead_ms = max_lead_ms
        self.log_level = log_level
        self.conns_per_node = conns_per_node
        self.extra_args = list(extra_args)
        self.slots = {}
        self.procs = []  # every NodeProc ever started, in order
        self.streams = []  # every Stream, in order
        self.logdir = os.path.join(workdir, "logs")
        os.makedirs(self.logdir, exist_ok=True)
        self.notes = []  # (t, text): unexpected exits etc., for the checker and the report

    # --- slots and processes --------------------------------------------------------------------

    def slot(self, name, faked=False):
        if name not in self.slots:
            ft = os.path.join(self.workdir, "faketime", f"{name}.offset") if faked else None
            if ft:
                os.makedirs(os.path.dirname(ft), exist_ok=True)
                write_offset(ft, 0)
            self.slots[name] = Slot(name, self.registry.data_dir(name), ft)
        return self.slots[name]

    def _env(self, slot, offset):
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLURRY_")}
        for k in ("LD_PRELOAD", "FAKETIME", "FAKETIME_TIMESTAMP_FILE", "FAKETIME_NO_CACHE"):
            env.pop(k, None)
        env["LC_ALL"] = "C"
        # Each slot plays a host of its own (its own data directory, its own clock): the node-ID
        # host guard (host_guard.h) is per host, so it is scoped to the slot and the run.
        env["FLURRY_HOST_GUARD_SCOPE"] = os.path.join(self.workdir, "host-" + slot.name)
        # Its host-wide records (host_dir.h) too: a host's own directory, shared by the slot's
        # restarts, never by another slot (whose clock may be faked elsewhere).
        env["FLURRY_HOST_DIR"] = os.path.join(self.workdir, "host-" + slot.name)
        os.makedirs(env["FLURRY_HOST_DIR"], exist_ok=True)
        os.chmod(env["FLURRY_HOST_DIR"], 0o1777)
        # gRPC on a port of each node's choosing (the nodes run at once on one machine).
        env["FLURRY_GRPC_LISTEN"] = "127.0.0.1:0"
        if offset is not None:
            if slot.faketime_file is None:
                raise ValueError(f"slot {slot.name} is not faked")
            write_offset(slot.faketime_file, offset)
            env["LD_PRELOAD"] = LIBFAKETIME
            env["FAKETIME_TIMESTAMP_FILE"] = slot.faketime_file
            # Read the file at every clock read: a step while the process runs is seen at once.
            env["FAKETIME_NO_CACHE"] = "1"
            # Only the wall clock steps (as a real step does); libfaketime's monotonic clock also
            # hangs timed condition-variable waits (see docs/operations.md, Known limits).
            env["DONT_FAKE_MONOTONIC"] = "1"
        return env

    def launch(self, slot, offset=None, expect_exit=False, clients=True, registry_args=None, rate=None):
        """Starts a process on the slot (not waiting for it) and its load clients. registry_args
        replaces the registry's flags (the negative control's static twins); rate, the clients'."""
        if offset is None and slot.faketime_file is not None:
            offset = 0  # a faked slot always runs under libfaketime, so its clock can step later
        port = procs.free_port()
        os.makedirs(slot.data_dir, exist_ok=True)
        cmd = [self.flurry, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", slot.data_dir,
               "--lease-ttl-ms", str(self.ttl_ms), "--max-lead-ms", str(self.max_lead_ms),
               "--log-level", self.log_level] + \
            (self.registry.flurry_args(slot.name) if registry_args is None else list(registry_args)) + self.extra_args
        p = procs.Proc(f"flurry-{slot.name}", cmd, os.path.join(self.logdir, f"{slot.name}.log"),
                       env=self._env(slot, offset), cwd=self.workdir)
        p.start()
        np_ = NodeProc(slot, port, p, offset, expect_exit)
        slot.current = np_
        self.procs.append(np_)
        if clients:
            for i in range(self.conns_per_node):
                st = load.Stream(np_.label, i, np_)
                c = load.Client(np_, st, self.batch, self.rate if rate is None else rate, self.timeout)
                np_.streams.append(st)
                np_.clients.append(c)
                self.streams.append(st)
                c.start()
        return np_

    def running(self):
        """Processes that should be serving: alive, not retired, not SIGSTOPped."""
        return [p for p in self.procs if not p.retired and not p.stopped and p.proc.alive()]

    # --- faults ---------------------------------------------------------------------------------

    def kill9(self, np_):
        np_.open_window("kill")
        np_.retired = True
        np_.proc.kill()

    def terminate(self, np_, timeout=15.0):
        """SIGTERM (a clean stop that drains and releases the lease); SIGKILL after timeout.
        Returns (how, seconds)."""
        np_.open_window("term")
        np_.retired = True
        how, secs = np_.proc.stop(signal.SIGTERM, timeout)
        if how == "killed":
            self.notes.append((time.monotonic(), f"{np_.label} did not exit within {timeout} s of SIGTERM"))
        return how, secs

    def sigstop(self, np_):
        w = np_.open_window("stop")
        np_.stopped = True
        np_.proc.send(signal.SIGSTOP)
        return w

    def sigcont(self, np_, w):
        w[2] = time.monotonic() + STOP_GRACE
        np_.proc.send(signal.SIGCONT)
        np_.stopped = False

    def step_clock(self, np_, offset):
        """Moves a faked process's clock to real + offset seconds (while it runs)."""
        assert np_.slot.faketime_file, f"{np_.label} is not under libfaketime"
        np_.offsets.append((time.monotonic(), offset))
        write_offset(np_.slot.faketime_file, offset)

    def stop_clients(self, np_):
        for c in np_.clients:
            c.stop()

    def poll_exits(self):
        """Notes processes that exited without being told to (opens their exit window)."""
        for p in self.procs:
            if p.exit_noted or p.retired:
                continue
            rc = p.proc.poll()
            if rc is not None:
                p.exit_noted = True
                p.windows.append(["exit", p.proc.exited_at - EXIT_LEAD, FOREVER])
                if not p.expect_exit:
                    self.notes.append((p.proc.exited_at, f"{p.label} exited by itself with {rc}:\n"
                                       f"{p.proc.log_tail(15)}"))

    def stop_all(self):
        self.poll_exits()
        for p in self.procs:
            for c in p.clients:
                c.stop()
        for p in self.procs:
            if p.proc.alive():
                p.retired = True
                p.open_window("term")
                if p.stopped:
                    p.proc.send(signal.SIGCONT)
                p.proc.send(signal.SIGTERM)
        for p in self.procs:
            if p.proc.popen and not p.proc.wait(10):
                p.proc.kill()
        for p in self.procs:
            for c in p.clients:
                c.join(self.timeout + 5)

    # --- probes (not recorded: the harness's own view) ------------------------------------------

    def readyz(self, np_, timeout=2.0):
        """(status, JSON) of /readyz, or (None, error text)."""
        try:
            c = http.client.HTTPConnection("127.0.0.1", np_.port, timeout=timeout)
            c.request("GET", "/readyz")
            r = c.getresponse()
            body = r.read()
            c.close()
            return r.status, json.loads(body)
        except (OSError, http.client.HTTPException, ValueError) as e:
            return None, repr(e)

    def get_json(self, np_, path, timeout=5.0):
        c = http.client.HTTPConnection("127.0.0.1", np_.port, timeout=timeout)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, json.loads(r.read())
        finally:
            c.close()

    def metric(self, np_, name, timeout=2.0):
        """A metric's value (sum over labels) from /metrics, or None."""
        try:
            c = http.client.HTTPConnection("127.0.0.1", np_.port, timeout=timeout)
            c.request("GET", "/metrics")
            text = c.getresponse().read().decode()
            c.close()
        except (OSError, http.client.HTTPException):
            return None
        total, found = 0.0, False
        for line in text.splitlines():
            if line.startswith(name) and (line[len(name)] in " {"):
                total += float(line.rsplit(" ", 1)[1])
                found = True
        return total if found else None

    def wait_ready(self, np_, timeout=20.0):
        """Waits for /readyz 200; returns the node ID, or None (timeout or exit)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not np_.proc.alive():
                return None
            st, j = self.readyz(np_)
            if st == 200 and isinstance(j, dict):
                np_.node_ids.append(j.get("node"))
                return j.get("node")
            time.sleep(0.05)
        return None


def write_offset(path, seconds):
    """libfaketime's relative offset syntax: "+0", "-5", "-3600"."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{seconds:+g}\n")
    os.replace(tmp, path)
