"""The run: the cluster (registry + fleet), scenario windows, fault timing and recovery.

A scenario is a function f(run) run inside `with run.scenario(name):`; scenario windows are
contiguous (one ends when the next begins), so every event of the run belongs to one of them.
Inside, a scenario calls run.fault_begin() and run.fault_end() around what it breaks and
run.await_recovery(): the recovery time is from fault_end until every process that should be
serving has delivered a batch after it; not recovering within the limit is a violation.
"""

import bisect
import contextlib
import time

from . import procs


class Run:
    def __init__(self, registry, fleet, opts):
        self.registry = registry
        self.fleet = fleet
        self.opts = opts
        self.windows = []  # [name, t0, t1]
        self.extra = []  # (scenario, violation text)
        self.info = {}  # scenario -> {"recovery": s, "note": text, "fault": (t0, t1)}
        self.current = None
        self.main_slots = []

    # --- time -----------------------------------------------------------------------------------

    def sleep(self, seconds):
        """Sleeps while watching for processes that exit by themselves."""
        end = time.monotonic() + seconds
        while True:
            self.fleet.poll_exits()
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(0.05, left))

    # --- scenarios ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def scenario(self, name):
        now = time.monotonic()
        if self.windows:
            self.windows[-1][2] = now
        self.windows.append([name, now, now])
        self.current = name
        self.info[name] = {"recovery": None, "note": "", "fault": None}
        procs.log(f"--- {name}")
        try:
            yield self
        finally:
            self.fleet.poll_exits()
            self.windows[-1][2] = time.monotonic()

    def close(self):
        if self.windows:
            self.windows[-1][2] = time.monotonic()

    def note(self, text):
        info = self.info[self.current]
        info["note"] = (info["note"] + "; " if info["note"] else "") + text
        procs.log(f"    {text}")

    def violation(self, text):
        self.extra.append((self.current, text))
        procs.log(f"    VIOLATION: {text}")

    def fault_begin(self):
        self.info[self.current]["fault"] = [time.monotonic(), None]

    def fault_end(self):
        f = self.info[self.current]["fault"]
        if f is None:
            f = self.info[self.current]["fault"] = [time.monotonic(), None]
        f[1] = time.monotonic()

    # --- recovery -------------------------------------------------------------------------------

    @staticmethod
    def first_ok_after(np_, t):
        best = None
        for st in np_.streams:
            i = bisect.bisect_right(st.t_recv, t)
            if i < len(st.t_recv) and (best is None or st.t_recv[i] < best):
                best = st.t_recv[i]
        return best

    def await_recovery(self, timeout=None):
        """Waits until every process that should serve has served after fault_end; records the
        recovery time (seconds) or a violation. Returns the recovery time or None."""
        timeout = timeout if timeout is not None else self.opts.recovery_timeout
        f = self.info[self.current]["fault"]
        t_end = f[1] if f and f[1] is not None else time.monotonic()
        deadline = max(time.monotonic(), t_end) + timeout
        while True:
            self.fleet.poll_exits()
            pending = [p for p in self.fleet.running() if self.first_ok_after(p, t_end) is None]
            if not pending:
                break
            if time.monotonic() >= deadline:
                why = []
                for p in pending:
                    last = [r for st in p.streams for r in st.refusals[-1:]]
                    st_, j = self.fleet.readyz(p)
                    why.append(f"{p.label} (readyz {st_} {j if isinstance(j, str) else j.get('reason')}"
                               f"{', last refusal ' + str(last[-1].reason) if last else ''})")
                self.violation(f"not every node served within {timeout:.0f} s of the fault's end: {', '.join(why)}")
                return None
            time.sleep(0.02)
        times = [self.first_ok_after(p, t_end) for p in self.fleet.running()]
        rec = max(0.0, max(times) - t_end) if times else 0.0
        self.info[self.current]["recovery"] = rec
        return rec

    # --- nodes ----------------------------------------------------------------------------------

    def main_procs(self):
        return [s.current for s in self.main_slots]

    def node_of(self, np_):
        """The node ID a process serves as (its /readyz), or None."""
        st, j = self.fleet.readyz(np_)
        return j.get("node") if st == 200 and isinstance(j, dict) else None
