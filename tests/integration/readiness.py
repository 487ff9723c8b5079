#!/usr/bin/env python3
"""Readiness follows the lease: when the registry file is made unwritable, the lease cannot be
renewed; the server must stop issuing before the lease runs out (/v1/ids 503 with Retry-After,
never an ID), /readyz turns 503 with a reason, and both recover by themselves once the file is
writable again, as the same node and above every earlier ID.

Root ignores permission bits, so the server runs as nobody (setpriv), with its data directory
owned by nobody under a directory nobody can reach. --lease-ttl-ms 1500 keeps it short.

Usage: readiness.py FLURRY
"""
import os
import pwd
import grp
import re
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

TTL_MS = 1500


def main():
    h.init()
    if os.geteuid() == 0:
        try:
            nobody = pwd.getpwnam("nobody")
            nogroup = grp.getgrnam("nogroup").gr_gid
        except KeyError:
            h.fail("running as root and there is no user nobody / group nogroup to drop to: root ignores "
                   "permission bits, so this test cannot make the registry unwritable")
        if not shutil.which("setpriv"):
            h.fail("running as root and setpriv (util-linux) is missing: cannot run the server unprivileged")
        wrapper = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nogroup}", "--clear-groups",
                   "--pdeathsig", "KILL", "--"]
        owner = (nobody.pw_uid, nogroup)
    else:
        wrapper, owner = [], None

    # A directory the server's user can reach with the binary and its modules copied there (the
    # build tree may not be reachable), the data directory owned by the server's user.
    binary = h.binary_for_any_user("unpriv")
    base = os.path.dirname(binary)
    data = os.path.join(base, "data")
    os.mkdir(data)
    if owner:
        os.chown(data, *owner)
    p = subprocess.run(wrapper + ["sh", "-c", f"touch {data}/.probe && rm {data}/.probe && test -x {binary}"],
                       capture_output=True)
    h.check(p.returncode == 0, f"the unprivileged user cannot use {data}: {p.stderr.decode()}")
    if owner:
        p = subprocess.run(wrapper + ["sh", "-c", f"touch {base}/.x"], capture_output=True)
        h.check(p.returncode != 0, "the server's user can write where it should not: not unprivileged?")

    s = h.Server("unpriv", data, ["--lease-ttl-ms", str(TTL_MS)], wrapper=wrapper, binary=binary, cwd=base,
                 preexec=not owner)
    s.start()
    node = s.node
    db = os.path.join(data, "registry.db")
    h.check(os.path.exists(db), f"no registry database at {db}: {os.listdir(data)}")
    before = h.get_ids(s.port, 1000)
    last = before[-1]
    h.log(f"server (uid {owner[0] if owner else os.geteuid()}) ready as node {node}")

    # Make the registry unwritable.
    os.chmod(db, 0o444)
    os.chmod(data, 0o555)
    t_cut = time.monotonic()

    # While still ready, IDs may be issued (above the earlier ones); /readyz must turn 503 within
    # the TTL plus a little.
    issued_after_cut = []
    deadline = t_cut + TTL_MS / 1000 + 3.0
    r503 = None
    while time.monotonic() < deadline:
        r = h.request(s.port, "/readyz")
        if r.status == 503:
            r503 = r
            break
        h.check(r.status == 200, f"/readyz: {r}")
        r = h.request(s.port, "/v1/ids?count=10")
        if r.status == 200:
            issued_after_cut += [int(x) for x in r.json()["ids"]]
        else:
            h.check_error_body(r, 503, "/v1/ids while the lease is not being renewed")
        time.sleep(0.05)
    h.check(r503 is not None, f"/readyz still 200 {time.monotonic() - t_cut:.1f} s after registry.db was made "
            f"unwritable (TTL {TTL_MS} ms)")
    t_unready = time.monotonic() - t_cut
    j = r503.json()
    h.check(j.get("ready") is False and isinstance(j.get("reason"), str) and j["reason"],
            f"/readyz 503 without a reason: {r503.body!r}")
    h.log(f"/readyz 503 {t_unready * 1000:.0f} ms after the cut: {j['reason']}")
    h.check_increasing(issued_after_cut, "IDs issued after the cut", above=last)
    h.check(t_unready < TTL_MS / 1000 + 0.5, f"readiness turned 503 only {t_unready:.2f} s after the cut, "
            f"after the lease ({TTL_MS} ms) could have expired")

    # Not ready: no IDs, 503 with Retry-After, for as long as the file stays unwritable.
    t_end = time.monotonic() + 2.0
    while time.monotonic() < t_end:
        for path in ("/v1/ids?count=5", "/api/snowflake/get/x"):
            r = h.request(s.port, path)
            h.check_error_body(r, 503, f"{path} while the registry is unwritable")
            h.check(r.headers.get("retry-after", "").strip().isdigit(), f"{path}: 503 without Retry-After: {r.headers}")
        r = h.request(s.port, "/readyz")
        h.check(r.status == 503, f"/readyz back to 200 while the registry is still unwritable: {r}")
        time.sleep(0.1)
    h.check(h.request(s.port, "/healthz").status == 200, "/healthz while not ready (the process is alive)")
    m = h.request(s.port, "/metrics").text
    h.check(h.metric(m, "flurry_ready") == 0, "flurry_ready is not 0 while not ready")
    fails = h.metric(m, "flurry_lease_renewal_failures_total")
    if fails is None:
        fails = sum(float(x) for x in re.findall(r"^flurry_lease_renewals?_[a-z_]*fail[a-z_]*(?:\{[^}]*\})?\s+(\S+)",
                                                  m, re.M))
    h.check(fails and fails > 0, "/metrics shows no failed lease renewal")

    # Writable again: ready again by itself, the same node, IDs above everything before.
    os.chmod(data, 0o755)
    os.chmod(db, 0o644)
    t_fix = time.monotonic()
    h.wait_for(lambda: h.request(s.port, "/readyz").status == 200,
               "/readyz 200 after registry.db was made writable again", 10, period=0.05)
    h.log(f"ready again {(time.monotonic() - t_fix) * 1000:.0f} ms after the fix")
    r = h.request(s.port, "/readyz").json()
    h.check(r.get("node") == node, f"back as node {r.get('node')}, was {node}")
    after = h.get_ids(s.port, 1000)
    prev = max([last] + issued_after_cut)
    h.check_increasing(after, "IDs after the recovery", above=prev)
    h.check(all(h.node_of(i) == node for i in after), "IDs of another node after the recovery")
    h.check(h.metric(h.request(s.port, "/metrics").text, "flurry_ready") == 1, "flurry_ready is not 1 after recovery")

    rc, _ = s.stop()
    h.check(rc == 0, f"the server exited {rc} after SIGTERM")


h.run_main(main)
