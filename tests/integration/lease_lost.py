#!/usr/bin/env python3
"""A lease lost to another process (docs/design.md, "Leases, hand-off and fencing"):

A is frozen (SIGSTOP) past its lease TTL; B starts on the same data directory and claims A's
node ID, inheriting its horizon. A is resumed (SIGCONT) with requests already queued on it. Then:
  * no ID is issued twice, whatever A answered in the race after its resumption;
  * every ID A issues for that node ID after B claimed it lies below B's first ID (A is fenced at
    the horizon B inherited);
  * A soon stops being ready as that node (/readyz 503, or ready under another node ID), and
    /v1/ids on A never again returns IDs of the node B now holds above B's first ID; while A is
    not ready, /v1/ids answers 503 with Retry-After (A claims a node ID again by itself);
  * A becomes ready again by itself within a few seconds, on a node ID other than B's; its new IDs
    decode to that node, /v1/layout reports it, and IDs from A and B stay unique over a further
    100k each;
  * B is unaffected; A's clean stop does not release B's lease: a third process gets another node.

Usage: lease_lost.py FLURRY
"""
import http.client
import os
import signal
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

TTL_MS = 1500


def as_host(name):
    """The environment of a process that plays a host of its own: this test is about the registry
    fencing a process whose lease another host took over; on one host the host guard would keep
    the node ID from being taken while its holder lives (host_guard.h)."""
    return dict(os.environ, FLURRY_HOST_GUARD_SCOPE=os.path.join(h.WORK, "host-" + name))


def main():
    h.init()
    data = os.path.join(h.WORK, "data")
    args = ["--lease-ttl-ms", str(TTL_MS)]
    a = h.Server("a", data, args, env=as_host("a")).start()
    node = a.node
    ids_a = h.get_ids(a.port, 100_000)

    # Requests sent to A while it is frozen: answered (or not) when it resumes.
    queued, qerrors = [], []

    def queue_request():
        try:
            conn = http.client.HTTPConnection("127.0.0.1", a.port, timeout=20)
            r = h.request(a.port, "/v1/ids?count=1000", conn=conn)
            queued.append(r)
        except Exception as e:  # noqa: BLE001
            qerrors.append(repr(e))

    # Freeze A right after a lease renewal completed, so that it is not frozen inside a registry
    # transaction (holding SQLite's write lock would block B's claim, not what we test).
    # At least 3 renewals first, so the counter check after the re-claim below can fail (the new
    # node's keeper starts counting at 0).
    deadline = time.monotonic() + 5
    while h.metric(h.request(a.port, "/metrics").text, "flurry_lease_renewals_total") < 2:
        h.check(time.monotonic() < deadline, "no 2 lease renewals within 5 s (every 500 ms)")
        time.sleep(0.05)
    renewals = h.metric(h.request(a.port, "/metrics").text, "flurry_lease_renewals_total")
    deadline = time.monotonic() + 5
    while h.metric(h.request(a.port, "/metrics").text, "flurry_lease_renewals_total") == renewals:
        h.check(time.monotonic() < deadline, "no lease renewal within 5 s (TTL 1500 ms: every 500 ms)")
        time.sleep(0.002)
    renewals += 1
    os.kill(a.pid, signal.SIGSTOP)
    t_stop = time.monotonic()
    threads = [threading.Thread(target=queue_request) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(TTL_MS / 1000 + 0.6)

    b = h.Server("b", data, args, env=as_host("b")).start()
    h.log(f"b: node {b.node}, {time.monotonic() - t_stop:.1f} s after a (node {node}) was frozen")
    h.check(b.node == node, f"b got node {b.node}: a's expired lease on node {node} was not taken over")
    ids_b = h.get_ids(b.port, 100_000)
    first_b = ids_b[0]
    h.check(first_b > ids_a[-1], f"b's first ID {first_b} is not above a's last {ids_a[-1]}")

    os.kill(a.pid, signal.SIGCONT)
    t_cont = time.monotonic()
    for t in threads:
        t.join(30)
    after = []  # IDs a issued after it was resumed
    for r in queued:
        if r.status == 200:
            after += [int(x) for x in r.json()["ids"]]
        else:
            h.check_error_body(r, 503, "a request queued on a while it was frozen")
            h.check(r.headers.get("retry-after", "").strip().isdigit(),
                    f"a request queued on a while it was frozen: 503 without Retry-After: {r.headers} {r.body[:200]!r}")
    h.log(f"queued requests on a: {[r.status for r in queued]}, errors {qerrors}")

    # A must stop being ready as `node` within a short time, and never come back as it.
    unready_at = None
    lease_503 = []  # reasons of the 503s /v1/ids answered on a
    deadline = t_cont + 5.0
    while time.monotonic() < deadline:
        if unready_at is not None and time.monotonic() - unready_at > 1.5:
            break  # not ready for a while, and issued nothing it should not have
        if not a.alive():
            break  # exiting on a lost lease is an acceptable way to stop issuing
        r = h.request(a.port, "/readyz")
        ready_as_node = r.status == 200 and r.json().get("node") == node
        if ready_as_node:
            h.check(unready_at is None, f"a is ready as node {node} again, which b holds")
        elif unready_at is None:
            unready_at = time.monotonic()
            h.log(f"a no longer ready as node {node} {unready_at - t_cont:.2f} s after SIGCONT: {r.body[:200]!r}")
        r = h.request(a.port, "/v1/ids?count=100")
        if r.status == 200:
            got = [int(x) for x in r.json()["ids"]]
            after += got
            h.check(unready_at is None or all(h.node_of(i) != node for i in got),
                    f"a issued IDs of node {node} after reporting itself not ready as it")
        else:
            # A claims a node ID again: retryable.
            err = h.check_error_body(r, 503, "/v1/ids on a after losing its lease")
            h.check(r.headers.get("retry-after", "").strip().isdigit(),
                    f"/v1/ids on a after losing its lease: 503 without Retry-After: {r.headers} {r.body[:200]!r}")
            lease_503.append(err.get("reason"))
        time.sleep(0.05)
    h.check(unready_at is not None or not a.alive(),
            f"a still ready as node {node} 5 s after it was resumed, with b holding that node")
    h.check(unready_at is None or unready_at - t_cont < 2.0,
            f"a stayed ready as node {node} for {unready_at - t_cont:.2f} s after it was resumed")

    stale = [i for i in after if h.node_of(i) == node and i >= first_b]
    h.check(not stale, f"a issued {len(stale)} IDs of node {node} at or above b's first ID {first_b} "
            f"after b claimed the node, e.g. {stale[:3]}")

    h.log(f"/v1/ids 503s on a: {lease_503}")

    # A recovers by itself: ready again on another node ID, soon.
    h.check(a.alive(), f"a exited ({a.proc.returncode}) instead of claiming another node ID")
    new_node, ready_at, last = None, None, None
    deadline = t_cont + 6.0
    while time.monotonic() < deadline:
        last = h.request(a.port, "/readyz")
        if last.status == 200 and last.json().get("node") != node:
            new_node, ready_at = last.json()["node"], time.monotonic()
            break
        time.sleep(0.02)
    h.check(new_node is not None, f"a not ready on another node 6 s after it was resumed: {last}")
    h.log(f"a ready again on node {new_node} {ready_at - t_cont:.2f} s after SIGCONT")
    h.check(new_node != b.node, f"a is ready on node {new_node}, which b holds")
    h.check(h.request(a.port, "/v1/layout").json().get("node") == new_node,
            f"/v1/layout on a does not report its new node {new_node}")
    h.check("event=lease_reclaimed" in a.log_text(), "a did not log event=lease_reclaimed")
    # Counters carry over to the new node ID: a Prometheus counter never goes back.
    renewals_now = h.metric(h.request(a.port, "/metrics").text, "flurry_lease_renewals_total")
    h.check(renewals_now > renewals,
            f"flurry_lease_renewals_total went from {renewals} to {renewals_now} across the re-claim")

    new_a = h.get_ids(a.port, 100_000)
    h.check_increasing(new_a, "a's IDs on its new node")
    wrong = [i for i in new_a if h.node_of(i) != new_node]
    h.check(not wrong, f"{len(wrong)} of a's new IDs are not of node {new_node}, e.g. {wrong[:3]}")

    # B is unaffected.
    more_b = h.get_ids(b.port, 100_000)
    h.check_increasing(ids_b + more_b, "b's IDs")
    h.check(all(h.node_of(i) == node for i in more_b), f"b issued IDs of a node other than {node}")
    everything = ids_a + after + ids_b + more_b + new_a
    h.check(len(set(everything)) == len(everything), f"{len(everything) - len(set(everything))} duplicate IDs")

    # A's stop must not release B's lease.
    if a.alive():
        rc, _ = a.stop()
        h.check(rc == 0, f"a exited {rc} after SIGTERM")
    c = h.Server("c", data, args, env=as_host("c")).start()
    h.check(c.node != node, f"c got node {node} while b holds it: a's stop released b's lease")
    h.check(h.request(b.port, "/readyz").status == 200, "b is not ready any more")
    for s in (b, c):
        rc, _ = s.stop()
        h.check(rc == 0, f"{s.name} exited {rc} after SIGTERM")


h.run_main(main)
