#!/usr/bin/env python3
"""A revoked etcd lease stops issuing within a round trip, not at the next renewal.

A server on `--registry etcd` with a 30 s lease (renewals every 10 s) serves one keep-alive client
that asks for one ID at a time. Its etcd lease is revoked (`etcdctl lease revoke`, as an operator
or a fencing script would): etcd deletes the node key, the server's watch sees the delete and the
lease keeper suspends issuing. Every request sent more than BOUND_MS after the revocation returned
must be refused (503, LEASE_LOST or RECLAIMING_NODE) until the server has claimed a node ID again, and the reason
must say the watch saw it (a renewal could not
have come that soon in most runs, and would say otherwise). The server then claims a node ID again
and serves. The time from the revocation to the first refusal is printed.

Usage: etcd_watch_revoke.py FLURRY
"""
import base64
import http.client
import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
from etcd_registry import Etcd  # noqa: E402

CLUSTER = "revoke"
TTL_MS = 30000
# The target is 100 ms; the bound allows for a loaded 2-core machine (the print shows the figure).
BOUND_MS = 500


def lease_of(etcd, key):
    j = etcd.post("/v3/kv/range", {"key": base64.b64encode(key.encode()).decode()})
    kvs = j.get("kvs", [])
    h.check(kvs, f"no key {key}")
    return int(kvs[0]["lease"])


def main():
    h.init()
    etcd = Etcd().start()
    args = ["--registry", "etcd", "--etcd-endpoints", etcd.endpoint, "--cluster", CLUSTER,
            "--lease-ttl-ms", str(TTL_MS)]
    s = h.Server("server", os.path.join(h.WORK, "server"), args).start()
    node = s.node
    lease = lease_of(etcd, f"/flurry/{CLUSTER}/nodes/{node}")
    answers = []  # (sent at, status, reason)
    stop = threading.Event()

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
        while not stop.is_set():
            sent = time.monotonic()
            r = h.request(s.port, "/v1/ids?count=1", conn=conn)
            reason = r.json().get("error", {}).get("reason") if r.status != 200 else None
            answers.append((sent, r.status, reason, r.body))
            if r.status != 200:
                time.sleep(0.002)
        conn.close()

    t = threading.Thread(target=client)
    t.start()
    time.sleep(1.0)
    revoking = time.monotonic()
    etcd.post("/v3/lease/revoke", {"ID": str(lease)})
    revoked = time.monotonic()
    time.sleep(1.0)
    stop.set()
    t.join(30)
    # (A request sent just before the revocation returned may be refused already.)
    before = [a for a in answers if a[0] < revoking - 0.2]
    h.check(before and all(a[1] == 200 for a in before),
            f"the server did not serve before the revocation: {sorted(set((a[1], a[2]) for a in before))}")
    refused = [a for a in answers if a[1] != 200]
    h.check(refused, "no request was refused after the revocation")
    first = refused[0]
    # One client, one request at a time: every request between the revocation and the first
    # refusal was answered under the revoked lease (later ones may come from a new claim).
    h.check(first[0] - revoked <= BOUND_MS / 1000,
            f"IDs were still issued {(first[0] - revoked) * 1000:.0f} ms after the lease was revoked "
            f"(bound {BOUND_MS} ms)")
    h.check(first[1] == 503 and first[2] in ("LEASE_LOST", "RECLAIMING_NODE"),
            f"refused with {first[1]} {first[2]}: {first[3]!r}")
    h.check("seen by the watch" in str(first[3]),
            f"the refusal does not say the watch saw the loss: {first[3]!r}")
    issued = [a[3] for a in answers if a[1] == 200]
    h.check(len(set(issued)) == len(issued), "an ID was issued twice")
    h.log(f"lease {lease} of node {node} revoked: the first refused request was sent "
          f"{(first[0] - revoking) * 1000:.1f} ms after the revocation was sent and "
          f"{(first[0] - revoked) * 1000:.1f} ms after etcd answered it; {len(answers)} requests")
    ready = s.wait_ready(30)
    h.check(h.get_ids(s.port, 10), "no IDs after the server claimed a node ID again")
    h.log(f"serving again as node {ready['node']}")
    rc, _ = s.stop()
    h.check(rc == 0, f"exit code {rc} after SIGTERM")


if __name__ == "__main__":
    h.run_main(main)
