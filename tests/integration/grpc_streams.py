#!/usr/bin/python3
"""gRPC streams of the real `flurry serve` under load and misuse:

  * 10^6 IDs through one Ids.Stream (1,000 requests of 1,000), no duplicates, increasing;
  * a client that never reads a StreamRange of 10^8 IDs: issuing stops after a bounded number
    (flow control holds it back; nothing is buffered without bound);
  * a cancelled StreamRange issues no more: the server's flurry_ids_issued_total stops growing,
    a bounded distance above what the client received.

Usage: grpc_streams.py FLURRY PYTHON_STUBS
"""
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpclib as g  # noqa: E402

h = g.init()
pb = g.pb
# What may be issued beyond what a client took: the chunk being written, the one queued in the
# transport and HTTP/2's flow-control windows (a few MB): far below this.
UNREAD_BOUND = 4_000_000


def settled(http_port, what, period=0.5, rounds=20):
    """Polls flurry_ids_issued_total until two readings `period` apart agree; returns it."""
    last = g.issued(http_port)
    for _ in range(rounds):
        time.sleep(period)
        now = g.issued(http_port)
        if now == last:
            return now
        last = now
    h.fail(f"{what}: the server keeps issuing ({last} IDs and counting)")


def main():
    # A wide sequence field (seq:18), so that 10^8 IDs are not held back by the rate limit.
    srv, port = g.start("streams", os.path.join(h.WORK, "data"),
                        ["--layout", "time:41@1ms,node:4,seq:18;epoch=2025-01-01Z",
                         "--grpc-max-range", "100000000"])
    ids = g.ids(port)

    def requests():
        for _ in range(1000):
            yield pb.NextRequest(count=1000)
    got = []
    t0 = time.monotonic()
    for r in ids.Stream(requests()):
        h.check(len(r.ids) == 1000, f"a Stream response of {len(r.ids)} IDs")
        got.extend(r.ids)
    h.log(f"Stream: {len(got)} IDs in {time.monotonic() - t0:.1f} s")
    h.check(len(got) == 1_000_000, f"Stream gave {len(got)} IDs")
    h.check(len(set(got)) == len(got), "Stream gave an ID twice")
    h.check_increasing(got, "Stream")

    # A reader that takes one chunk and then nothing: issuing stops, bounded.
    base = g.issued(srv.port)
    call = ids.StreamRange(pb.RangeRequest(count=100_000_000))
    first = g.unpack(next(call).ids)
    h.check(first[0] > got[-1], "StreamRange went below the Stream's IDs")
    stalled = settled(srv.port, "a reader that stopped reading") - base
    h.log(f"a reader that stopped after {len(first)} IDs: {stalled} issued")
    h.check(len(first) <= stalled <= UNREAD_BOUND,
            f"{stalled} IDs issued for a reader that took {len(first)}")
    call.cancel()

    # Cancelled while reading: no more IDs after the cancel.
    base = g.issued(srv.port)
    call = ids.StreamRange(pb.RangeRequest(count=100_000_000))
    received = 0
    prev = 0
    for chunk in call:
        batch = g.unpack(chunk.ids)
        h.check(batch[0] > prev, "StreamRange chunks out of order")
        prev = batch[-1]
        received += len(batch)
        if received >= 2_000_000:
            break
    call.cancel()
    after = settled(srv.port, "a cancelled StreamRange") - base
    h.log(f"cancelled after {received} IDs received: {after} issued")
    h.check(received <= after <= received + UNREAD_BOUND,
            f"a cancelled StreamRange: {after} IDs issued, {received} received")
    h.check(after < 100_000_000, "the cancelled StreamRange ran to its end")
    # The server is fine afterwards, and above everything it issued.
    later = ids.Next(pb.NextRequest(count=1)).ids[0]
    h.check(later > prev, f"Next after the cancel: {later} not above {prev}")
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc}")


h.run_main(main)
