#!/usr/bin/env python3
"""Waits in the generator never hold up other connections.

1. Clock wait: the server runs under libfaketime with --rollback wait --max-wait-ms 3000; its
   clock is stepped back 3 s while it runs, so the next /v1/ids waits about 2 s for the clock to
   come back within max_lead. While that request waits, /healthz, /readyz and /metrics on new
   connections (spread over every I/O thread) answer within 200 ms; then the waiting request
   succeeds with IDs above the earlier ones.
2. A SIGTERM while a request waits: the request is answered, the server exits 0 and releases its
   lease.
3. Throttling: layout time:41@1s,node:10,seq:12 (4096 IDs a second, max_batch 8192). A second
   batch of 8192 has to wait for the rate limit; /healthz answers at once meanwhile, and the batch
   then arrives in full, above the first.

Before the fix the wait slept on the I/O thread of the waiting request, so every connection on
that thread waited with it (/healthz took 2.2 s).

Usage: blocking_waits.py FLURRY
"""
import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

FAST_S = 0.2
PROBES = ["/healthz", "/readyz", "/metrics"] * 3  # fresh connections: round-robin over I/O threads


class Waiter(threading.Thread):
    """One request in the background; .response, .error and .seconds when done."""

    def __init__(self, port, path):
        super().__init__(daemon=True)
        self.port, self.path = port, path
        self.response = self.error = None
        self.seconds = None
        self.started_at = None

    def run(self):
        self.started_at = time.monotonic()
        try:
            self.response = h.request(self.port, self.path, timeout=30)
        except Exception as e:  # noqa: BLE001
            self.error = e
        self.seconds = time.monotonic() - self.started_at


def probe_while(waiter, port, what):
    """Runs the probes while `waiter` is in flight; each must answer within FAST_S."""
    slow = []
    for path in PROBES:
        r, took = h.timed_request(port, path, timeout=10)
        h.check(r.status in (200, 503), f"{path} during {what}: {r}")
        if path == "/healthz":
            h.check(r.status == 200, f"/healthz during {what}: {r}")
        if took >= FAST_S:
            slow.append(f"{path} {took * 1000:.0f} ms")
    h.check(not slow, f"during {what} other connections waited: {', '.join(slow)}")
    h.check(waiter.is_alive(), f"the request waiting for {what} finished before the probes did "
            f"({waiter.seconds} s): the test did not test anything")
    h.log(f"during {what}: {len(PROBES)} probes on new connections, each under {FAST_S * 1000:.0f} ms")


def clock_wait():
    h.check_libfaketime()
    offset_file = os.path.join(h.WORK, "faketime-offset")
    env = h.faked_clock_env(offset_file, "+0")
    data = os.path.join(h.WORK, "clock")
    srv = h.Server("clock", data, ["--rollback", "wait", "--max-wait-ms", "3000"], env=env).start()
    port = srv.port

    for round_ in range(2):
        h.set_fake_offset(offset_file, "+0")  # (round 2: forward again, IDs go on from there)
        before = h.get_ids(port, 1000)
        h.set_fake_offset(offset_file, "-3")  # 3 s back: a wait of about 3 s - max_lead (1 s)
        waiter = Waiter(port, "/v1/ids?count=100")
        waiter.start()
        time.sleep(0.15)
        if round_ == 0:
            probe_while(waiter, port, "a clock step back")
            waiter.join(15)
            h.check(not waiter.is_alive(), "the waiting request did not finish within 15 s")
            h.check(waiter.error is None, f"the waiting request failed: {waiter.error!r}")
            r = waiter.response
            h.check(r.status == 200, f"the waiting request: expected 200 after the wait, got {r}")
            ids = [int(x) for x in r.json()["ids"]]
            h.check(len(ids) == 100, f"the waiting request: {len(ids)} IDs")
            h.check_increasing(ids, "after the clock wait", above=before[-1])
            h.log(f"the request waited {waiter.seconds:.2f} s for the clock, then got IDs above the earlier ones")
            h.check(waiter.seconds > 0.8, f"the request took only {waiter.seconds:.2f} s: no clock wait happened")
            r = h.request(port, "/metrics")
            waits = h.metric(r.text, "flurry_rollback_events_total", {"outcome": "wait"})
            h.check(waits is not None and waits >= 1, f"flurry_rollback_events_total{{outcome=\"wait\"}} is {waits}")
            after = h.get_ids(port, 10)
            h.check_increasing(ids + after, "after the clock wait")
        else:
            # 2. SIGTERM while a request waits for the clock: it is answered, the server exits 0.
            h.check(waiter.is_alive(), "the second waiting request finished at once")
            rc, took = srv.stop()
            waiter.join(15)
            h.check(not waiter.is_alive(), "the waiting request did not finish")
            h.check(waiter.error is None, f"the waiting request during shutdown failed: {waiter.error!r}")
            r = waiter.response
            h.check(r.status in (200, 503), f"the waiting request during shutdown: {r}")
            if r.status == 200:
                h.check_increasing([int(x) for x in r.json()["ids"]], "during shutdown", above=before[-1])
            h.check(rc == 0, f"exit code {rc} after SIGTERM with a request waiting")
            h.check("event=lease_released" in srv.log_text(), "no event=lease_released after SIGTERM")
            h.log(f"SIGTERM with a request waiting: answered {r.status}, exit 0 in {took:.2f} s, lease released")


def throttling():
    layout = "time:41@1s,node:10,seq:12;epoch=2025-01-01Z"
    srv = h.Server("throttle", os.path.join(h.WORK, "throttle"), ["--layout", layout]).start()
    port = srv.port
    r = h.request(port, "/v1/layout")
    max_batch = r.json()["max_batch"]
    h.check(max_batch == 8192, f"max_batch {max_batch} for {layout}, expected 8192")
    first = h.get_ids(port, max_batch)
    waiter = Waiter(port, f"/v1/ids?count={max_batch}")
    waiter.start()
    time.sleep(0.15)
    probe_while(waiter, port, "throttling")
    waiter.join(15)
    h.check(not waiter.is_alive() and waiter.error is None, f"the throttled request: {waiter.error!r}")
    r = waiter.response
    h.check(r.status == 200, f"the throttled request: {r}")
    ids = [int(x) for x in r.json()["ids"]]
    h.check(len(ids) == max_batch, f"the throttled request: {len(ids)} IDs")
    h.check_increasing(first + ids, "the throttled batch")
    h.log(f"the throttled request waited {waiter.seconds:.2f} s, then got all {max_batch} IDs")
    h.check(waiter.seconds > 0.5, f"the second batch took only {waiter.seconds:.2f} s: it was not throttled")
    waits = h.metric(h.request(port, "/metrics").text, "flurry_throttle_waits_total")
    h.check(waits is not None and waits >= 1, f"flurry_throttle_waits_total {waits}")
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc}")


def main():
    h.init()
    clock_wait()
    throttling()


h.run_main(main)
