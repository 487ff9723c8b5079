#!/usr/bin/python3
"""The per-connection budget of gRPC streams whose client does not read.

Two connections from clients with small HTTP/2 windows (no BDP probing, 64 KiB per stream, as
a constrained client or a proxy has): on the first, 100 StreamRange(10^9) calls; on the second,
50 Stream calls whose client keeps sending NextRequest(count=1000) and reads nothing. After the
issuing settles, the server must hold at most each connection's budget (2 MiB) plus one 4 KiB
chunk or one answer per stream in flurry_grpc_stream_buffered_bytes, and have issued IDs for
nobody only as far as those windows and budgets reach (BOUND_IDS). Before the budget a
StreamRange kept a 65,536-ID chunk and a Stream up to 65,536 IDs of answers ahead per stream.

Usage: grpc_stream_budget.py FLURRY PYTHON_STUBS
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

RANGES = 100
STREAMS = 50
WINDOW = 65536
# 2 MiB per connection, plus a 4 KiB chunk per StreamRange and a 1,000-ID answer per Stream.
BOUND_BYTES = 2 * (2 << 20) + RANGES * 4096 + STREAMS * 8100
# What the windows (stream and connection) and the budgets can hold, in IDs, with room to spare.
BOUND_IDS = ((RANGES + STREAMS) * WINDOW + BOUND_BYTES) // 8 * 2
OPTIONS = [("grpc.use_local_subchannel_pool", 1), ("grpc.http2.bdp_probe", 0),
           ("grpc.http2.lookahead_bytes", WINDOW)]


def metric(port, name):
    v = h.metric(h.request(port, "/metrics").text, name)
    return -1 if v is None else int(v)


def main():
    srv, port = g.start("budget", os.path.join(h.WORK, "data"))
    base = g.issued(srv.port)
    ranges_ch = g.grpc.insecure_channel(f"127.0.0.1:{port}", options=OPTIONS)
    streams_ch = g.grpc.insecure_channel(f"127.0.0.1:{port}", options=OPTIONS)
    stop = threading.Event()

    def requests():
        while not stop.is_set():
            yield pb.NextRequest(count=1000)

    calls = [g.rpc.IdsStub(ranges_ch).StreamRange(pb.RangeRequest(count=1_000_000_000))
             for _ in range(RANGES)]
    calls += [g.rpc.IdsStub(streams_ch).Stream(requests()) for _ in range(STREAMS)]
    # Until two readings a second apart agree (the windows and budgets are full).
    last = -1
    for _ in range(60):
        time.sleep(1.0)
        now = g.issued(srv.port)
        if now == last:
            break
        last = now
    unreceived = last - base
    buffered = metric(srv.port, "flurry_grpc_stream_buffered_bytes")
    h.log(f"{RANGES} StreamRange and {STREAMS} Stream calls not read: {unreceived} IDs issued for "
          f"nobody (bound {BOUND_IDS}), {buffered} bytes buffered (bound {BOUND_BYTES})")
    h.check(unreceived == last - base and last != -1, "the issuing never settled")
    h.check(0 <= buffered <= BOUND_BYTES, f"{buffered} bytes of stream answers buffered")
    h.check(unreceived <= BOUND_IDS, f"{unreceived} IDs issued for nobody")
    stop.set()
    for c in calls:
        c.cancel()
    ranges_ch.close()
    streams_ch.close()
    h.wait_for(lambda: metric(srv.port, "flurry_grpc_streams") == 0, "the streams to end", timeout=20)
    h.check(metric(srv.port, "flurry_grpc_stream_buffered_bytes") == 0,
            "bytes still drawn on the stream budget after every stream ended")
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc} after SIGTERM")


if __name__ == "__main__":
    h.run_main(main)
