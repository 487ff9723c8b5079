#!/usr/bin/env python3
"""A restart with the clock set back (libfaketime): never a duplicate, never an ID below the
node's earlier ones, never silent.

The documented behaviour (src/service/include/service/service.h): at start, a clock behind the
inherited horizon by at most horizon_window + max_lead (2 s + 1 s, what a crash costs) is waited
out by every policy; beyond that `wait` waits while the gap is at most horizon_window + max_lead +
max_wait (6 s) and refuses beyond, `fail` refuses, `clock` switches clock generation.

1. Default policy (wait), after a clean stop (a tight horizon):
   a. clock 10 s back: the start is refused (exit != 0, a message about the clock);
   b. clock 4 s back: the start is delayed until IDs can be above the old ones (/readyz never
      200 and no ID earlier than that; any 503 has a reason / Retry-After), then IDs above every
      earlier one.
   Whatever happens, every ID is above the earlier ones and within max_lead of the faked clock.
2. --rollback fail, the clock 10 s behind the previous run's: refused.
3. The multiclock layout with --rollback clock, clock 10 s back: ready at once, in another clock
   generation, the time field following the faked clock, no duplicate.

libfaketime is preloaded directly (what the faketime wrapper does, minus its fork), so the PID we
signal is the server's; only the wall clock is moved (DONT_FAKE_MONOTONIC=1), as by a real step.

Usage: clock_rollback.py FLURRY
"""
import json
import os
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

MAX_LEAD_MS = 1000
SLACK_MS = 250


def cli_decode(id_, layout="flurry"):
    p = subprocess.run([h.FLURRY, "decode", "--layout", layout, "--json", str(id_)], capture_output=True)
    h.check(p.returncode == 0, f"flurry decode {id_}: {p.stderr.decode()}")
    return json.loads(p.stdout)


def now_ms():
    return time.time() * 1000


def check_faketime():
    h.check_libfaketime()
    # The clock flurry reads moves: an ID issued under -10s carries the faked time.
    p = subprocess.run([h.FLURRY, "next", "--state-dir", os.path.join(h.WORK, "probe")], capture_output=True,
                       env=h.fixed_offset_env("-10s"))
    h.check(p.returncode == 0, f"flurry next under libfaketime: {p.stderr.decode()}")
    lag = now_ms() - cli_decode(int(p.stdout))["unix_ms"]
    h.check(9000 < lag < 11000, f"libfaketime does not move the clock flurry reads (lag {lag:.0f} ms)")


def watch(s, offset_ms, max_old, node, seconds, want_ready):
    """Launches s (a server whose clock is offset_ms behind) and watches it for up to `seconds`.
    Every ID it gives must be above max_old (for `node`) and within max_lead of its faked clock;
    /readyz 200 only once the faked clock is within max_lead of max_old's time; 503s carry a
    reason and Retry-After. Returns (outcome, ids, reasons): outcome "refused" (exited non-zero,
    the log saying why), "ready" (gave IDs; only when want_ready) or "unready"."""
    old_ms = cli_decode(max_old)["unix_ms"]
    reasons = []
    s.launch()
    s.wait_http()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not s.alive():
            rc = s.proc.returncode
            h.check(rc != 0, f"{s.name} exited 0 by itself")
            log = s.log_text()
            h.check(re.search(r"clock", log, re.I),
                    f"{s.name} refused to start (exit {rc}) without a word about the clock: {log[-500:]}")
            return "refused", None, reasons
        try:
            r = h.request(s.port, "/readyz", timeout=5)
            t = now_ms()
            if r.status == 200:
                fake = t - offset_ms
                h.check(fake >= old_ms - MAX_LEAD_MS - SLACK_MS,
                        f"{s.name}: /readyz 200 while its clock ({fake:.0f}) is {old_ms - fake:.0f} ms behind the "
                        f"last ID issued before ({old_ms}), more than max_lead")
            else:
                h.check(r.status == 503, f"{s.name} /readyz: {r}")
                j = r.json()
                h.check(j.get("ready") is False and isinstance(j.get("reason"), str) and j["reason"],
                        f"{s.name} /readyz 503 without a reason: {r.body!r}")
                reasons.append(j["reason"])
            r = h.request(s.port, "/v1/ids?count=100", timeout=10)
            t = now_ms()
            if r.status == 200:
                ids = [int(x) for x in r.json()["ids"]]
                for i in ids:
                    if h.node_of(i) == node:
                        h.check(i > max_old, f"{s.name} issued {i}, not above the last ID before the restart {max_old}")
                ms = cli_decode(ids[-1])["unix_ms"]
                h.check(ms <= t - offset_ms + MAX_LEAD_MS + SLACK_MS,
                        f"{s.name}: ID time {ms} is {ms - (t - offset_ms):.0f} ms ahead of its clock "
                        f"(max_lead {MAX_LEAD_MS})")
                h.check(want_ready, f"{s.name} issued IDs within {seconds} s: {ids[:3]}")
                return "ready", ids, reasons
            h.check_error_body(r, 503, f"{s.name} /v1/ids while the clock is behind")
            h.check(r.headers.get("retry-after", "").strip().isdigit(),
                    f"{s.name} 503 without Retry-After: {r.headers}")
        except OSError as e:
            h.check(not s.alive(), f"{s.name}: {e!r}")
        time.sleep(0.1)
    return "unready", None, reasons


def main():
    h.init()
    check_faketime()

    # 1. Default policy, clock 10 s back after a clean stop.
    data = os.path.join(h.WORK, "data")
    a = h.Server("a", data).start()
    ids_a = h.get_ids(a.port, 100_000) + h.get_ids(a.port, 100_000) + h.get_ids(a.port, 10)
    max_a = ids_a[-1]
    rc, _ = a.stop()
    h.check(rc == 0, f"a exited {rc} after SIGTERM")

    # 1a. 10 s back: more than horizon_window + max_lead + max_wait (6 s), so the documented
    #     behaviour of `wait` is to refuse the start, saying so.
    b = h.Server("b", data, env=h.fixed_offset_env("-10s"))
    outcome, _, reasons = watch(b, 10_000, max_a, a.node, 16, want_ready=True)
    h.log(f"clock 10 s back, policy wait: {outcome}; /readyz reasons meanwhile: {sorted(set(reasons))}")
    h.check(outcome == "refused", f"clock 10 s back, policy wait: expected a refused start (the gap exceeds "
            f"horizon_window + max_lead + max_wait = 6 s), got {outcome}; reasons: {set(reasons)}")

    # 1b. 4 s back: within 6 s, so the start is delayed until IDs can be above the old ones.
    b2 = h.Server("b2", data, env=h.fixed_offset_env("-4s"))
    t0 = time.monotonic()
    outcome, ids_b, reasons = watch(b2, 4_000, max_a, a.node, 16, want_ready=True)
    h.log(f"clock 4 s back, policy wait: {outcome} after {time.monotonic() - t0:.1f} s; "
          f"/readyz reasons meanwhile: {sorted(set(reasons))}")
    h.check(outcome == "ready", f"clock 4 s back, policy wait: expected a delayed start, got {outcome}")
    h.check(re.search(r"clock", b2.log_text(), re.I) or any(re.search(r"clock", x, re.I) for x in reasons),
            "b2 was delayed without a word about the clock (log or /readyz reason)")
    more = h.get_ids(b2.port, 1000)
    h.check_increasing(ids_b + more, "b2's IDs", above=max_a)
    rc, _ = b2.stop()
    h.check(rc == 0, f"b2 exited {rc} after SIGTERM")
    prev_max, prev_offset = more[-1], 4_000

    # 2. --rollback fail, the clock 10 s behind the previous run's.
    offset = prev_offset + 10_000
    c = h.Server("c", data, ["--rollback", "fail"], env=h.fixed_offset_env(f"-{offset // 1000}s"))
    outcome, _, reasons = watch(c, offset, prev_max, a.node, 3, want_ready=False)
    h.log(f"clock 10 s behind the last run, policy fail: {outcome}; reasons: {sorted(set(reasons))}")
    h.check(outcome == "refused", f"clock 10 s back, policy fail: expected a refused start (the gap exceeds "
            f"horizon_window + max_lead = 3 s), got {outcome}; reasons: {set(reasons)}")

    # 3. multiclock, --rollback clock: another clock generation at once.
    mdata = os.path.join(h.WORK, "mdata")
    margs = ["--layout", "multiclock", "--rollback", "clock"]
    m1 = h.Server("m1", mdata, margs).start()
    ids_m1 = h.get_ids(m1.port, 100_000)
    j1 = h.request(m1.port, f"/v1/ids/{ids_m1[-1]}").json()
    rc, _ = m1.stop()
    h.check(rc == 0, f"m1 exited {rc} after SIGTERM")
    m2 = h.Server("m2", mdata, margs, env=h.fixed_offset_env("-10s")).start(timeout=10)
    ids_m2 = h.get_ids(m2.port, 100_000)
    h.check_increasing(ids_m2, "m2's IDs")
    h.check(not set(ids_m1) & set(ids_m2), "multiclock: duplicates across the clock step")
    j2 = h.request(m2.port, f"/v1/ids/{ids_m2[0]}").json()
    h.check(j1["fields"]["clock"] != j2["fields"]["clock"],
            f"multiclock: the same clock generation {j1['fields']['clock']} after the step back")
    h.check(abs(j2["unix_ms"] - (now_ms() - 10_000)) < 2000,
            f"multiclock: the time field ({j2['unix_ms']}) does not follow the faked clock")
    rc, _ = m2.stop()
    h.check(rc == 0, f"m2 exited {rc} after SIGTERM")


h.run_main(main)
