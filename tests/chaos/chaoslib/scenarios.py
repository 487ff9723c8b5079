"""The scenarios, one function each, run one after another on the same cluster under load.

Each one breaks something, marks the fault's begin and end on the run, waits for every node to
serve again (the recovery time) and lets the load run on for a moment. What must hold is checked
afterwards over everything collected (checker.py); a scenario only adds what the data cannot
show (a node that never served again).
"""

import random
import time

SETTLE = 1.0  # seconds of plain load after each recovery


def _pick(run, exclude=()):
    """A main process that is serving, not on a faked slot (those have their own scenarios)."""
    cands = [p for p in run.main_procs()
             if p in run.fleet.running() and p.slot.faketime_file is None and p.slot.name not in exclude]
    if not cands:
        cands = [p for p in run.main_procs() if p in run.fleet.running()]
    return run.rng.choice(cands)


def baseline(run):
    """Steady load, no fault."""
    run.sleep(run.opts.baseline_seconds)


def kill9_restart(run):
    """kill -9 of a node and its restart on the same data directory half a second later (its
    lease is still held, so it claims another node ID)."""
    victim = _pick(run)
    node = run.node_of(victim)
    run.sleep(0.5)
    run.fault_begin()
    run.fleet.kill9(victim)
    run.sleep(0.5)
    new = run.fleet.launch(victim.slot)
    run.fault_end()
    rec = run.await_recovery()
    run.note(f"{victim.label} (node {node}) killed, {new.label} on node {run.node_of(new)} "
             f"serving after {rec if rec is None else round(rec, 2)} s")
    run.sleep(SETTLE)


def _wait_renewal(run, np_, timeout=5.0):
    """Waits for a lease renewal, so the SIGSTOP does not land inside a registry operation."""
    before = run.fleet.metric(np_, "flurry_lease_renewals_total")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = run.fleet.metric(np_, "flurry_lease_renewals_total")
        if now is not None and before is not None and now > before:
            return True
        time.sleep(0.01)
    return False


def sigstop_reclaim(run):
    """SIGSTOP of a node for longer than the TTL; spares start until one has claimed its node
    ID; SIGCONT: the stopped process must notice it lost its lease and claim another node ID,
    never issuing an ID of its old node above the new owner's. The spares stop (SIGTERM) after."""
    fleet = run.fleet
    victim = _pick(run)
    node = run.node_of(victim)
    _wait_renewal(run, victim)
    run.fault_begin()
    w = fleet.sigstop(victim)
    run.sleep(run.opts.ttl_ms / 1000.0 + 1.0)
    spares, taken_by = [], None
    for i in range(run.opts.max_spares):
        sp = fleet.launch(fleet.slot(f"s{run.next_spare()}"))
        spares.append(sp)
        got = fleet.wait_ready(sp, 20)
        if got == node:
            taken_by = sp
            break
    fleet.sigcont(victim, w)
    stopped_for = time.monotonic() - w[1]
    run.fault_end()
    rec = run.await_recovery()
    run.note(f"{victim.label} (node {node}) stopped {stopped_for:.1f} s; "
             + (f"node {node} claimed by spare {taken_by.label}" if taken_by else
                f"node {node} NOT reclaimed by {len(spares)} spares ({[fleet.readyz(s)[1] for s in spares]})")
             + f"; {victim.label} now on node {run.node_of(victim)}")
    run.sleep(SETTLE)
    for sp in spares:
        fleet.terminate(sp)


def _clock_restart(run, offset, watch_seconds, end_at_launch):
    """Stops the restart slot's process cleanly and restarts it with its clock `offset` seconds
    off (the fault's end, if end_at_launch: recovery then includes a delayed start). Returns
    (new process, outcome text)."""
    fleet = run.fleet
    slot = run.clock_restart_slots[-offset]
    old = slot.current
    node = run.node_of(old)
    run.fault_begin()
    if old.proc.alive() and not old.retired:
        fleet.terminate(old)
    new = fleet.launch(slot, offset=offset, expect_exit=True)
    if end_at_launch:
        run.fault_end()
    t0 = time.monotonic()
    got = None
    while time.monotonic() < t0 + watch_seconds:
        if not new.proc.alive():
            break
        st, j = fleet.readyz(new, timeout=1.0)
        if st == 200:
            got = j.get("node")
            break
        run.sleep(0.05)
    took = time.monotonic() - t0
    if got is not None:
        outcome = f"ready on node {got} after {took:.1f} s (node {node} before)"
    elif not new.proc.alive():
        outcome = f"refused to start (exit {new.proc.returncode} after {took:.1f} s: " \
                  f"{_last_line(new.proc.log_tail(5))})"
    else:
        outcome = f"not ready after {took:.1f} s"
    return new, outcome


def _last_line(text):
    lines = [x for x in text.splitlines() if x.strip() and not x.startswith("==")]
    return lines[-1][:160] if lines else ""


def clock_restart_5s(run):
    """A node restarted (after a clean stop) with its clock 5 s in the past: it takes its node ID
    back with a horizon ahead of its clock, so it waits (or refuses), never issuing below."""
    new, outcome = _clock_restart(run, -5, 15, end_at_launch=True)
    if not new.proc.alive():  # a refusal is allowed; bring the slot back on the right clock
        new = run.fleet.launch(new.slot, offset=0)
        run.fault_end()
    rec = run.await_recovery()
    run.note(f"clock -5 s: {outcome}; all serving after {rec if rec is None else round(rec, 2)} s")
    run.sleep(SETTLE + 2.0)
    # Back to the right clock (a step forward) before the next scenario: the SQLite registry
    # keeps lease expiries on the wall clock of one host, where a node 5 s behind loses its
    # lease to the next process that claims (safely: fenced, and the claimer inherits the
    # horizon; but that is not this scenario's subject).
    if new.proc.alive() and new.offsets and new.offsets[-1][1] != 0:
        run.fleet.step_clock(new, 0)
    run.sleep(SETTLE)


def clock_restart_1h(run):
    """A node restarted with its clock an hour in the past: with a used node ID it must refuse
    to start; then it is restarted on the right clock."""
    new, outcome = _clock_restart(run, -3600, 10, end_at_launch=False)
    if new.proc.alive():
        run.sleep(1.0)
        run.fleet.terminate(new)
    run.fleet.launch(new.slot, offset=0)
    run.fault_end()
    rec = run.await_recovery()
    run.note(f"clock -1 h: {outcome}; restarted on the right clock, all serving after "
             f"{rec if rec is None else round(rec, 2)} s")
    run.sleep(SETTLE)


def clock_step_back(run):
    """The clock of a running node steps back 2 s (its libfaketime file rewritten): more than
    max_lead, so requests wait (rollback=wait) and IDs stay above the earlier ones and within
    max_lead of its clock. Stepped forward again after a few seconds."""
    fleet = run.fleet
    np_ = run.clock_step_slot.current
    run.fault_begin()
    fleet.step_clock(np_, -2)
    run.fault_end()
    rec = run.await_recovery()
    waits = fleet.metric(np_, "flurry_rollback_events_total")
    run.sleep(3.0)
    fleet.step_clock(np_, 0)
    run.note(f"{np_.label} clock -2 s: serving again after {rec if rec is None else round(rec, 2)} s "
             f"(rollback events {waits}); stepped forward after 3 s")
    run.sleep(SETTLE)


def registry_primary_kill(run):
    """etcd: kill -9 of the leader and its restart; PostgreSQL: kill -9 and restart."""
    run.note(run.registry.primary_kill(run))
    rec = run.await_recovery()
    run.note(f"all serving {rec if rec is None else round(rec, 2)} s after the restart")
    run.sleep(SETTLE)


def registry_outage(run):
    """etcd: 2 of 3 members down; PostgreSQL: stopped; for longer than the TTL."""
    seconds = run.opts.ttl_ms / 1000.0 + run.opts.outage_extra
    run.note(run.registry.outage(run, seconds))
    rec = run.await_recovery(timeout=max(run.opts.recovery_timeout, 30))
    run.note(f"all serving {rec if rec is None else round(rec, 2)} s after it was back")
    run.sleep(SETTLE)


def registry_hang(run):
    """etcd: the leader frozen (SIGSTOP) for longer than the TTL; PostgreSQL: the whole server
    frozen as long. A hung server answers nothing and closes nothing: the nodes' registry
    clients must time out, fail over (etcd) or suspend issuing (503), never hang a request."""
    seconds = run.opts.ttl_ms / 1000.0 + run.opts.outage_extra
    run.note(run.registry.hang(run, seconds))
    rec = run.await_recovery(timeout=max(run.opts.recovery_timeout, 30))
    run.note(f"all serving {rec if rec is None else round(rec, 2)} s after the fault's end")
    run.sleep(SETTLE)


def node_restart_during_outage(run):
    """The registry goes down (as in registry_outage), then a node is killed (kill -9) and
    restarted while it is down. A start that cannot reach its registry is refused (exit 1), so
    the harness restarts it every 0.5 s, as a supervisor (systemd, Kubernetes) would, until it
    serves; the registry comes back after the TTL + outage_extra."""
    fleet = run.fleet
    seconds = run.opts.ttl_ms / 1000.0 + run.opts.outage_extra
    victim = _pick(run)
    t0 = time.monotonic()
    run.note(run.registry.outage_begin(run))
    run.sleep(0.5)
    fleet.kill9(victim)
    starts, back, cur = 0, False, None
    deadline = t0 + seconds + max(run.opts.recovery_timeout, 30)
    while time.monotonic() < deadline:
        if cur is None or not cur.proc.alive():
            cur = fleet.launch(victim.slot, expect_exit=True)
            starts += 1
        if not back and time.monotonic() >= t0 + seconds:
            run.note(run.registry.outage_end(run))
            back = True
        if back and fleet.readyz(cur, timeout=1.0)[0] == 200:
            break
        run.sleep(0.5)
    if not back:
        run.note(run.registry.outage_end(run))
    cur.expect_exit = False  # the one that serves must stay up
    rec = run.await_recovery(timeout=max(run.opts.recovery_timeout, 30))
    run.note(f"{victim.label} killed while the registry was down; {starts} starts until {cur.label} served "
             f"(node {run.node_of(cur)}); all serving {rec if rec is None else round(rec, 2)} s after the registry")
    run.sleep(SETTLE)


def churn(run):
    """churn_nodes extra nodes started and stopped at random (kill -9 or SIGTERM) for
    churn_seconds, about churn_ops operations a second; then all of them stopped."""
    fleet = run.fleet
    n, seconds, ops = run.opts.churn_nodes, run.opts.churn_seconds, run.opts.churn_ops
    rng = random.Random(run.rng.random())
    slots = [fleet.slot(f"c{i}") for i in range(n)]
    saved_rate = fleet.rate
    fleet.rate = run.opts.churn_rate
    counts = {"start": 0, "kill9": 0, "term": 0}
    # The load the churning fleet puts on the registry server, by the server's own count.
    requests0, counted_as = run.registry.request_count()
    t_start = time.monotonic()
    node_seconds = 0.0  # the number of live nodes, integrated over time
    run.fault_begin()
    end = time.monotonic() + seconds
    # Half of them at once, then random toggles.
    for s in slots[: n // 2]:
        fleet.launch(s)
        counts["start"] += 1
    try:
        while time.monotonic() < end:
            s = rng.choice(slots)
            cur = s.current
            if cur is not None and not cur.retired and cur.proc.alive():
                if rng.random() < 0.5:
                    fleet.kill9(cur)
                    counts["kill9"] += 1
                else:
                    fleet.terminate(cur)
                    counts["term"] += 1
            else:
                fleet.launch(s)
                counts["start"] += 1
            pause = rng.expovariate(ops)
            node_seconds += len(fleet.running()) * pause
            run.sleep(pause)
    finally:
        fleet.rate = saved_rate
    elapsed = time.monotonic() - t_start
    requests1, _ = run.registry.request_count()
    alive = [s.current for s in slots if s.current is not None and not s.current.retired and s.current.proc.alive()]
    for p in alive:
        fleet.terminate(p)
    run.fault_end()
    rec = run.await_recovery()
    served = sum(1 for s in slots for p in fleet.procs if p.slot is s and any(len(st.ids) for st in p.streams))
    run.note(f"{n} slots, {counts['start']} starts, {counts['kill9']} kill -9, {counts['term']} SIGTERM, "
             f"{served} of those processes served; main nodes serving {rec if rec is None else round(rec, 2)} s after")
    if requests0 is not None and elapsed > 0 and node_seconds > 0:
        per_s = (requests1 - requests0) / elapsed
        nodes = node_seconds / elapsed
        run.note(f"registry load: {per_s:.0f} {counted_as}/s with {nodes:.1f} nodes alive on average "
                 f"({per_s * 60 / nodes:.0f} per node per minute, claims and releases included)")
    run.sleep(SETTLE)


def negative_control_twins(run):
    """NOT a fault flurry must survive: two extra processes on the static registry with the same
    node ID (each its own data directory, so nothing stops them) issue the same IDs. The run
    must find duplicates (chaos.py --expect-duplicates); it shows the checker works end to end."""
    fleet = run.fleet
    twins = []
    for name in ("t0", "t1"):
        slot = fleet.slot(name)
        slot.data_dir = slot.data_dir + "-" + name  # never shared, even on the SQLite registry
        twins.append(fleet.launch(slot, registry_args=["--registry", "static", "--node", "1000"], rate=0))
    run.fault_begin()
    run.sleep(run.opts.baseline_seconds)
    for t in twins:
        fleet.terminate(t)
    run.fault_end()
    run.await_recovery()
    run.note("two static processes as node 1000 at full speed for "
             f"{run.opts.baseline_seconds:.0f} s")


ALL = [
    ("baseline", baseline),
    ("kill9_restart", kill9_restart),
    ("sigstop_reclaim", sigstop_reclaim),
    ("clock_restart_5s", clock_restart_5s),
    ("clock_restart_1h", clock_restart_1h),
    ("clock_step_back_2s", clock_step_back),
    ("registry_primary_kill", registry_primary_kill),
    ("registry_outage", registry_outage),
    ("registry_hang", registry_hang),
    ("node_restart_during_outage", node_restart_during_outage),
    ("churn", churn),
]
# Selectable with --scenarios, never part of "all".
EXTRA = [("negative_control_twins", negative_control_twins)]
