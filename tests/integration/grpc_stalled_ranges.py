#!/usr/bin/python3
"""StreamRange calls whose client never reads, against the real `flurry serve`.

CONNECTIONS connections (each a channel of its own) open STREAMS StreamRange(10^9) calls each
and read none of them, for HOLD seconds. Meanwhile another client asks HTTP for one ID every
20 ms. The server must:

  * keep its resident memory (VmRSS of /proc/PID/status) within RSS_BOUND of what it used
    before the streams (the chunks a stalled stream pins are small and drawn on a budget per
    connection and per server, flurry_grpc_stream_buffered_bytes);
  * answer HTTP count=1 with a p99 under P99_BOUND (the streams take only the rate left over and
    never queue on the generator's thread);
  * issue IDs for the streams only as the transport takes them: the count issued that nobody
    received (flurry_ids_issued_total against what the clients read: nothing) is logged; it is
    what the clients' HTTP/2 receive windows accept (gRPC's client grows them to megabytes per
    stream on loopback), held in the client's memory, not the server's;
  * give the memory back once the client has gone: the buffered bytes back to 0, no streams
    running, and RSS down again.

Before the budget each stream issued at least one 512 KiB chunk and held it twice: about
1.25 MiB per stream (a GiB for 800 streams), and the HTTP call waited seconds behind the
streams' chunks on the generator's thread.

Usage: grpc_stalled_ranges.py FLURRY PYTHON_STUBS
"""
import os
import statistics
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpclib as g  # noqa: E402
import memlib  # noqa: E402

h = g.init()
pb = g.pb

CONNECTIONS = 8
STREAMS = 100  # grpc_max_concurrent_streams' default
HOLD = 20.0  # seconds the streams stay open and unread
RSS_BOUND = 256 << 20
P99_BOUND = 0.100


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    h.fail(f"no VmRSS in /proc/{pid}/status")


def gauge(port, name):
    """The metric's value; -1 when /metrics has none (a server before the stream budget)."""
    v = h.metric(h.request(port, "/metrics").text, name)
    return -1 if v is None else int(v)


def main():
    # Under ASan (the debug preset) a small quarantine, so that RSS measures what the server
    # holds, not what ASan keeps of freed memory (memlib.lean_env).
    srv, port = g.start("stalled", os.path.join(h.WORK, "data"), env=memlib.lean_env())
    h.get_ids(srv.port, 10)
    time.sleep(0.5)
    rss0 = rss(srv.pid)
    issued0 = g.issued(srv.port)
    h.log(f"before: RSS {rss0 / 2**20:.1f} MiB, {issued0} IDs issued")

    # The HTTP client: count=1 every 20 ms on one keep-alive connection, from the start of the
    # streams to their end.
    latencies = []
    failures = []
    stop = threading.Event()

    def http_client():
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                conn.request("GET", "/v1/ids?count=1")
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    failures.append(r.status)
            except OSError as e:
                failures.append(repr(e))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
            latencies.append(time.monotonic() - t0)
            time.sleep(0.02)
        conn.close()

    channels = []
    calls = []
    for _ in range(CONNECTIONS):
        # A channel of its own per connection (not gRPC's shared subchannel).
        ch = g.grpc.insecure_channel(f"127.0.0.1:{port}",
                                     options=[("grpc.use_local_subchannel_pool", 1)])
        stub = g.rpc.IdsStub(ch)
        channels.append(ch)
        for _ in range(STREAMS):
            calls.append(stub.StreamRange(pb.RangeRequest(count=1_000_000_000)))
    client = threading.Thread(target=http_client, daemon=True)
    client.start()
    peak = rss0
    buffered_peak = 0
    t_end = time.monotonic() + HOLD
    while time.monotonic() < t_end:
        h.check(srv.alive(), f"the server exited ({srv.proc.returncode})")
        peak = max(peak, rss(srv.pid))
        buffered_peak = max(buffered_peak, gauge(srv.port, "flurry_grpc_stream_buffered_bytes"))
        time.sleep(0.25)
    running = gauge(srv.port, "flurry_grpc_streams")
    unreceived = g.issued(srv.port) - issued0 - len(latencies)
    stop.set()
    client.join()

    lat = sorted(latencies)
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    h.log(f"{CONNECTIONS} x {STREAMS} stalled StreamRange for {HOLD:.0f} s: RSS {rss0 / 2**20:.1f} -> "
          f"peak {peak / 2**20:.1f} MiB (+{(peak - rss0) / 2**20:.1f}), buffered peak "
          f"{buffered_peak / 2**20:.1f} MiB, {running} streams running, {unreceived} IDs issued "
          f"and not received")
    h.log(f"HTTP count=1 during the stall: {len(lat)} calls, median "
          f"{statistics.median(lat) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, max "
          f"{lat[-1] * 1000:.1f} ms, {len(failures)} failed")
    h.check(not failures, f"HTTP count=1 failed during the stall: {failures[:5]}")
    h.check(peak - rss0 <= RSS_BOUND,
            f"RSS grew by {(peak - rss0) / 2**20:.1f} MiB under stalled streams (bound "
            f"{RSS_BOUND / 2**20:.0f} MiB)")
    h.check(p99 < P99_BOUND, f"HTTP count=1 p99 {p99 * 1000:.1f} ms during the stall")
    h.check(running == CONNECTIONS * STREAMS,
            f"{running} StreamRange calls running, expected {CONNECTIONS * STREAMS}")

    # The client goes away: every stream ends, the budget and the memory come back.
    for c in calls:
        c.cancel()
    for ch in channels:
        ch.close()
    calls.clear()
    h.wait_for(lambda: gauge(srv.port, "flurry_grpc_streams") == 0,
               "the streams to end after the client closed", timeout=20)
    h.check(gauge(srv.port, "flurry_grpc_stream_buffered_bytes") == 0,
            "bytes still drawn on the stream budget after every stream ended")
    time.sleep(1.0)  # the watcher trims malloc's free lists within 200 ms of the last stream
    after = rss(srv.pid)
    h.log(f"after the client went: RSS {after / 2**20:.1f} MiB")
    # glibc's malloc gives the freed memory back (malloc_trim); ASan's allocator keeps what it
    # mapped for reuse, so under ASan only "not above the peak" holds.
    with open(f"/proc/{srv.pid}/maps") as f:
        asan = "libasan" in f.read()
    bound = (peak - rss0) if asan else max(64 << 20, (peak - rss0) // 2)
    h.check(after - rss0 <= bound,
            f"RSS {after / 2**20:.1f} MiB after the client went, {rss0 / 2**20:.1f} before")

    ids = h.get_ids(srv.port, 1000)
    h.check_increasing(ids, "after the streams")
    rc, _ = srv.stop()
    h.check(rc == 0, f"exit code {rc} after SIGTERM")


if __name__ == "__main__":
    h.run_main(main)
