#!/usr/bin/env python3
"""Strict segment tags across three servers (docs/segments.md, "Strict tags"): a real PostgreSQL
(pglib.py) holds the node IDs, the timestamp oracle's lease and the segment store; three
`flurry serve --tso` processes with data directories of their own, as on three hosts.

1. A tag created with "strict": true (through a follower: creating needs no leader) is stored
   strict (flurry_segment_strict) and listed so.
2. Only the oracle's leader answers it: its numbers, in batches and as ranges, strictly increase;
   each follower answers 307 to the leader's address (Location: the same path and query there),
   with a NOT_LEADER error body naming the leader. Following the redirect gives numbers too.
3. The leader is frozen (SIGSTOP) past its lease: one of the others leads and answers above
   every number answered before. The frozen one is resumed (SIGCONT) with its buffers full of
   numbers below those: it answers none of them (it redirects to the new leader).
4. The new leader is killed (SIGKILL: no release). Until its lease runs out nobody answers; then
   one of the two others leads (the resumed one may win, with the buffers of its earlier term)
   and every number it answers is above every number answered before. The time from the kill to
   the first answer is at most the lease TTL plus a second; the follower left redirects to the
   new leader.
5. A tag that is not strict is served by every server as before.

Usage: strict_tags_postgres.py FLURRY
"""
import json
import os
import re
import signal
import sys
import time
import urllib.parse

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
from pglib import Postgres  # noqa: E402

TTL_MS = 2000
TOKEN = "strict-segment-token-7d1e0b5c9a3f42e8b6"


def main():
    h.init()
    pg = Postgres(h.WORK)
    try:
        run(pg)
    finally:
        pg.stop()  # before run_main removes the work directory


def ids(port, count, path="strict", timeout=15):
    """(status, [ids] or None, Response) of GET /v1/segments/<path>/ids?count=N."""
    r = h.request(port, f"/v1/segments/{path}/ids?count={count}", timeout=timeout)
    if r.status != 200:
        return r.status, None, r
    got = r.json()["ids"]
    h.check(len(got) == count and all(isinstance(x, str) and x.isdigit() for x in got),
            f"port {port}: bad body {r.body[:200]!r}")
    return 200, [int(x) for x in got], r


def leader_of(servers):
    """The one server whose log says it leads the oracle now (the last tso event of each)."""
    leading = []
    for s in servers:
        events = re.findall(r"event=(tso_leader|tso_follower|tso_term_ended)", s.log_text())
        if events and events[-1] == "tso_leader":
            leading.append(s)
    return leading[0] if len(leading) == 1 else None


def host_env(name):
    """The environment of a server on a host of its own: its own host directory (host_dir.h), so
    that a frozen server's locks there (segment floors) hold up nobody else, as on three hosts."""
    env = dict(os.environ)
    env["FLURRY_HOST_DIR"] = os.path.join(h.WORK, f"host-{name}")
    env["FLURRY_HOST_GUARD_SCOPE"] = os.path.join(h.WORK, f"host-{name}")
    os.makedirs(env["FLURRY_HOST_DIR"], exist_ok=True)
    return env


def redirects(server, leader):
    """Whether `server` answers the strict tag with a redirect to `leader` (a follower learns of
    a new leader at its next look at the registry)."""
    r = h.request(server.port, "/v1/segments/strict/ids?count=1")
    return r.status == 307 and r.headers.get("location", "").startswith(
        f"http://127.0.0.1:{leader.port}/")


def check_redirect(follower, leader, what):
    r = h.request(follower.port, "/v1/segments/strict/ids?count=3")
    h.check(r.status == 307, f"{what}: {follower.name} answered {r}, not 307")
    location = r.headers.get("location", "")
    want = f"http://127.0.0.1:{leader.port}/v1/segments/strict/ids?count=3"
    h.check(location == want, f"{what}: Location {location!r}, not {want!r}")
    err = json.loads(r.body)
    h.check(err.get("error", {}).get("reason") == "NOT_LEADER",
            f"{what}: the 307's body has no NOT_LEADER: {r.body[:300]!r}")
    h.check(err.get("error", {}).get("leader", {}).get("http") == f"127.0.0.1:{leader.port}",
            f"{what}: the 307's body does not name the leader: {r.body[:300]!r}")
    # The client follows: the leader answers the same path and query.
    u = urllib.parse.urlsplit(location)
    r2 = h.request(u.port, f"{u.path}?{u.query}")
    h.check(r2.status == 200, f"{what}: following the redirect gave {r2}")
    return [int(x) for x in r2.json()["ids"]]


def await_leader(candidates, answered, since, what):
    """Asks every candidate until one answers the strict tag; checks the answer is above every
    number in `answered` and that the others only refuse meanwhile (307 or 503). Returns (the
    server that answered, its numbers)."""
    refused = 0
    while True:
        h.check(time.monotonic() - since < 30, f"no server answers the strict tag 30 s after {what}")
        for s in candidates:
            status, got, r = ids(s.port, 5)
            if status == 200:
                h.log(f"{s.name} answered {time.monotonic() - since:.2f} s after {what} "
                      f"({refused} refusals meanwhile)")
                h.check(min(got) > max(answered),
                        f"{s.name} answered {min(got)} after {what}, not above {max(answered)} "
                        "answered before")
                return s, got
            refused += 1
            h.check(status in (307, 503), f"{s.name} after {what}: {r}")
        time.sleep(0.02)


def run(pg):
    pg.start()
    pg.psql("postgres", "CREATE DATABASE ids")
    url = pg.url("ids")
    token_file = os.path.join(h.WORK, "token")
    with open(os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(TOKEN + "\n")
    args = ["--registry", "postgres", "--postgres-url", url, "--lease-ttl-ms", str(TTL_MS),
            "--segment-stores", url, "--admin-token-file", token_file, "--tso"]
    servers = [h.Server(n, os.path.join(h.WORK, f"data-{n}"), args=args, env=host_env(n))
               for n in "abc"]
    for s in servers:
        s.start()
    h.wait_for(lambda: leader_of(servers) is not None, "one of a, b and c leading the oracle")
    leader = leader_of(servers)
    followers = [s for s in servers if s is not leader]
    h.log(f"{leader.name} leads; followers {[s.name for s in followers]}")

    # 1. Create through a follower.
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    r = h.request(followers[0].port, "/v1/segments", method="POST", headers=auth,
                  body='{"tag":"strict","start":1000,"step":50,"strict":true}')
    h.check(r.status == 201 and r.json().get("strict") is True, f"create the strict tag: {r}")
    r = h.request(followers[1].port, "/v1/segments", method="POST", headers=auth,
                  body='{"tag":"plain","start":1,"step":50}')
    h.check(r.status == 201 and r.json().get("strict") is False, f"create the plain tag: {r}")
    h.check(pg.psql("ids", "SELECT string_agg(biz_tag, ',') FROM flurry_segment_strict") == "strict",
            "the strict tag is not a row of flurry_segment_strict")
    listed = {t["tag"]: t["strict"] for t in h.request(leader.port, "/v1/segments").json()["tags"]}
    h.check(listed == {"plain": False, "strict": True}, f"GET /v1/segments: {listed}")

    # 2. The leader's numbers increase; the followers redirect to it.
    answered = []
    for n in (1, 7, 30, 3, 120, 1):
        status, got, r = ids(leader.port, n)
        h.check(status == 200, f"the leader {leader.name}: {r}")
        h.check_increasing(got, f"a batch of {n} from the leader",
                           above=answered[-1] if answered else None)
        answered += got
    r = h.request(leader.port, "/v1/segments/strict/range?size=10")
    h.check(r.status == 200, f"a range from the leader: {r}")
    start, end = int(r.json()["start"]), int(r.json()["end"])
    h.check(start > answered[-1] and end == start + 10, f"range {start}..{end} after {answered[-1]}")
    answered += list(range(start, end))
    for f in followers:
        got = check_redirect(f, leader, f"{f.name} before the freeze")
        h.check_increasing(got, "numbers through a redirect", above=answered[-1])
        answered += got
    h.check(len(set(answered)) == len(answered), "a number was answered twice")

    # 3. Freeze the leader past its lease; another takes over above everything answered.
    os.kill(leader.pid, signal.SIGSTOP)
    frozen_at = time.monotonic()
    new_leader, first = await_leader(followers, answered, frozen_at, "the leader was frozen")
    answered += first
    others = [s for s in servers if s is not new_leader]
    os.kill(leader.pid, signal.SIGCONT)
    # Resumed with the buffers of its term: it hands out none of them.
    status, got, r = ids(leader.port, 3)
    h.check(status in (307, 503), f"{leader.name} resumed after its lease ran out answered {r}")
    third = [s for s in others if s is not leader][0]
    h.wait_for(lambda: redirects(leader, new_leader) and redirects(third, new_leader),
               f"{leader.name} and {third.name} redirecting to {new_leader.name}")
    for f in (leader, third):
        got = check_redirect(f, new_leader, f"{f.name} after the freeze")
        h.check_increasing(got, "numbers through a redirect", above=answered[-1])
        answered += got

    # 4. Kill the new leader: one of the others (the resumed one too) takes over above everything.
    new_leader.kill()
    killed_at = time.monotonic()
    last_leader, first = await_leader(others, answered, killed_at, "the leader was killed")
    took = time.monotonic() - killed_at
    h.check(took <= TTL_MS / 1000 + 1.0, f"the failover took {took:.2f} s, more than the lease "
                                         f"TTL ({TTL_MS} ms) + 1 s")
    answered += first
    for n in (2, 50, 9):
        status, got, r = ids(last_leader.port, n)
        h.check(status == 200, f"the new leader {last_leader.name}: {r}")
        h.check_increasing(got, "a batch from the new leader", above=answered[-1])
        answered += got
    other = [s for s in others if s is not last_leader][0]
    h.wait_for(lambda: redirects(other, last_leader), f"{other.name} redirecting to the new leader")
    answered += check_redirect(other, last_leader, f"{other.name} after the kill")
    h.check(len(set(answered)) == len(answered), "a number was answered twice")
    h.check(answered == sorted(answered), "the numbers answered do not increase in the order "
                                          "they were answered")
    h.log(f"{len(answered)} numbers answered, strictly increasing across a freeze and a kill")
    if last_leader is leader:
        # The first leader leads again: the buffers of its first term were dropped, not served.
        state = h.request(leader.port, "/v1/segments/strict").json()
        h.check(state.get("stale_term_ids", 0) > 0 and state.get("term", 0) >= 3,
                f"{leader.name} leads again without having dropped its earlier term's buffers: "
                f"{state}")

    # 5. A tag that is not strict: every server serves it.
    for s in (last_leader, other):
        status, got, r = ids(s.port, 5, path="plain")
        h.check(status == 200, f"{s.name} serving the plain tag: {r}")
    for s in (last_leader, other):
        rc, _ = s.stop()
        h.check(rc == 0, f"{s.name} exited {rc} after SIGTERM")


if __name__ == "__main__":
    h.run_main(main)
