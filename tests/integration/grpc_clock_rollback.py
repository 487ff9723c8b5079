#!/usr/bin/env python3
"""gRPC with the wall clock stepped back while it serves (libfaketime, a step the running server
sees at once): never a duplicate, never an ID below an earlier one, never silent.

1. Clock +0: unary Next and a Stream issue IDs.
2. Clock 2 s back (within max_lead + max_wait: the default `wait` policy waits it out): calls
   keep succeeding, late (the generator's blocking path, reached over gRPC through the
   operations layer's deferral to the generator pool), or fail UNAVAILABLE with a flurry-reason.
   At least one call made during the step must succeed: waiting is the documented behaviour.
3. Clock 30 s back (beyond max_wait): calls fail with a flurry-reason and issue nothing below the
   earlier IDs.
4. Clock +0 again: calls succeed, above every earlier ID.
Every ID from every call, unary and Stream, is unique; the unary calls, made one after another,
give strictly increasing IDs.

Usage: grpc_clock_rollback.py FLURRY PYTHON_STUBS
"""
import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpclib as g  # noqa: E402

h = g.init()
pb = g.pb


def main():
    offset_file = os.path.join(h.WORK, "clock.offset")
    env = h.faked_clock_env(offset_file, "+0")
    srv, port = g.start("rollback", os.path.join(h.WORK, "data"), env=env)
    ids = g.ids(port)

    unary = []    # (phase, ids) of each successful unary call, in call order
    refused = []  # (phase, code, reason) of each failed call
    phase = ["before"]

    def call_next():
        try:
            r = ids.Next(pb.NextRequest(count=100), timeout=10)
            unary.append((phase[0], list(r.ids)))
        except g.grpc.RpcError as err:
            reason = g.trailers(err).get("flurry-reason", "")
            h.check(reason != "", f"a refusal without flurry-reason: {err.code()} {err.details()}")
            h.check(err.code() in (g.grpc.StatusCode.UNAVAILABLE,
                                   g.grpc.StatusCode.FAILED_PRECONDITION),
                    f"refused with {err.code()} ({reason}): {err.details()}")
            refused.append((phase[0], err.code(), reason))

    # A Stream of count=10 requests running through every phase.
    streamed = []
    stop = threading.Event()

    def requests():
        while not stop.is_set():
            yield pb.NextRequest(count=10)
            time.sleep(0.01)

    def stream():
        try:
            for r in ids.Stream(requests()):
                streamed.extend(r.ids)
        except g.grpc.RpcError as err:  # a refusal ends the stream: its IDs before it stand
            h.check(g.trailers(err).get("flurry-reason", "") != "",
                    f"the Stream ended without flurry-reason: {err.code()} {err.details()}")

    streamer = threading.Thread(target=stream)
    streamer.start()

    def run_phase(name, offset, seconds):
        phase[0] = name
        h.set_fake_offset(offset_file, f"{offset:+d}")
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            call_next()
            time.sleep(0.02)

    run_phase("before", 0, 1.0)
    run_phase("back2", -2, 3.0)
    run_phase("back30", -30, 1.5)
    run_phase("after", 0, 2.0)
    stop.set()
    streamer.join(timeout=30)
    h.check(not streamer.is_alive(), "the Stream did not end")

    def count(name):
        return sum(1 for p, _ in unary if p == name)
    h.log(f"unary calls answered: before {count('before')}, 2 s back {count('back2')}, "
          f"30 s back {count('back30')}, after {count('after')}; refused {len(refused)} "
          f"({sorted(set(r for _, _, r in refused))}); streamed {len(streamed)} IDs")
    h.check(count("before") > 0 and count("after") > 0, "no IDs before or after the steps")
    h.check(count("back2") > 0, "no call succeeded while the clock was 2 s back (should wait)")
    h.check(any(p == "back30" for p, _, _ in refused), "30 s back: no call was refused")
    flat = [i for _, batch in unary for i in batch]
    h.check_increasing(flat, "unary Next across the clock steps")
    every = flat + list(streamed)
    h.check(len(set(every)) == len(every), "an ID was issued twice across the clock steps")
    h.check(len(streamed) > 0, "the Stream issued nothing")
    h.check_increasing(streamed, "Stream across the clock steps")
    srv.stop()


h.run_main(main)
