"""Child processes of the harness.

Every process is started from the main thread with PR_SET_PDEATHSIG (SIGKILL), so nothing
outlives the harness even if it is killed itself (the signal follows the parent *thread*: never
start a server from a thread that may end first). Processes are only ever signalled by the PID
we got from Popen; `cleanup()` (atexit and SIGTERM/SIGINT/SIGHUP) kills the ones still running.
"""

import atexit
import ctypes
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

_libc = ctypes.CDLL(None, use_errno=True)
_procs = []
_cleanups = []  # extra callables run at cleanup (after the processes are gone)
_cleaned = False
_used_ports = set()


def die_with_parent():
    """preexec_fn: PR_SET_PDEATHSIG = 1, SIGKILL."""
    _libc.prctl(1, signal.SIGKILL, 0, 0, 0)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_port():
    """A loopback port below the ephemeral range (so no outgoing connection takes it between
    now and the server's bind) that binds now and was not handed out before in this run."""
    lo, hi = 20000, 32000
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            elo = int(f.read().split()[0])
        hi = min(hi, elo)
    except (OSError, ValueError, IndexError):
        pass
    for _ in range(1000):
        port = random.randrange(lo, hi)
        if port in _used_ports:
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        _used_ports.add(port)
        return port
    raise RuntimeError("no free loopback port")


class Proc:
    """One child process: cmd, a log file (stdout and stderr, appended across restarts)."""

    def __init__(self, name, cmd, logpath, env=None, cwd=None):
        self.name = name
        self.cmd = list(cmd)
        self.logpath = logpath
        self.env = env
        self.cwd = cwd
        self.popen = None
        self.started_at = None  # monotonic
        self.exited_at = None  # monotonic, when first seen exited
        self.returncode = None
        self._lock = threading.Lock()

    @property
    def pid(self):
        return self.popen.pid if self.popen else None

    def start(self):
        assert threading.current_thread() is threading.main_thread(), \
            "start processes from the main thread (PR_SET_PDEATHSIG follows the thread)"
        with open(self.logpath, "ab") as logf:
            logf.write(f"== {time.strftime('%H:%M:%S')} {' '.join(self.cmd)}\n".encode())
            logf.flush()
            self.popen = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=logf,
                                          stderr=subprocess.STDOUT, env=self.env, cwd=self.cwd,
                                          preexec_fn=die_with_parent)
        self.started_at = time.monotonic()
        self.exited_at = None
        self.returncode = None
        _procs.append(self)
        # A reaper per process: the exit time is known to the millisecond (the checker excuses
        # drops of a process that exited from then on), not when someone next polls.
        threading.Thread(target=self._reap, args=(self.popen,), name=f"reap-{self.name}", daemon=True).start()
        return self

    def _reap(self, popen):
        rc = popen.wait()
        with self._lock:
            if self.popen is popen and self.exited_at is None:
                self.exited_at = time.monotonic()
                self.returncode = rc

    def poll(self):
        """The exit code, or None while it runs (thread-safe)."""
        with self._lock:
            if self.popen is None or self.exited_at is not None:
                return self.returncode
            rc = self.popen.poll()
            if rc is not None:
                self.exited_at = time.monotonic()
                self.returncode = rc
            return rc

    def alive(self):
        return self.popen is not None and self.poll() is None

    def send(self, sig):
        if self.alive():
            try:
                os.kill(self.popen.pid, sig)
            except ProcessLookupError:
                pass

    def wait(self, timeout):
        """Waits for the exit; True if it exited within timeout."""
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        self.poll()
        return True

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        """sig, then SIGKILL after timeout. Returns (how, seconds): how is 'exited' or 'killed'."""
        if not self.alive():
            return "gone", 0.0
        t0 = time.monotonic()
        self.send(sig)
        if self.wait(timeout):
            return "exited", time.monotonic() - t0
        self.kill()
        return "killed", time.monotonic() - t0

    def kill(self):
        if self.popen is not None and self.popen.poll() is None:
            try:
                os.kill(self.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            # A SIGSTOPped process dies of SIGKILL too; wait for it.
            self.wait(10)

    def log_tail(self, lines=30):
        try:
            with open(self.logpath, "rb") as f:
                f.seek(0, 2)
                size = f.tell()
                f.seek(max(0, size - 64 * 1024))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def at_cleanup(fn):
    _cleanups.append(fn)


def cleanup():
    global _cleaned
    if _cleaned:
        return
    _cleaned = True
    for p in _procs:
        try:
            if p.popen is not None and p.popen.poll() is None:
                os.kill(p.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, OSError):
            pass
    for p in _procs:
        try:
            if p.popen is not None:
                p.popen.wait(10)
        except (subprocess.TimeoutExpired, OSError):
            pass
    for fn in reversed(_cleanups):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - best effort at exit
            print(f"cleanup: {e!r}", file=sys.stderr)


def _on_signal(signum, _frame):
    cleanup()
    os._exit(128 + signum)


def install_cleanup():
    atexit.register(cleanup)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)


def remove_tree(path):
    shutil.rmtree(path, ignore_errors=True)
