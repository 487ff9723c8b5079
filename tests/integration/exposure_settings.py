#!/usr/bin/env python3
"""What a server tells and follows beyond its tokens (issue 32, part 7), against the real binary:

1. No secret in any error: credentials written into etcd endpoints (flag and variable, serve and
   `flurry nodes`), into the CLI's --server URL, into segment store locations and into malformed
   PostgreSQL URLs are refused with messages that never show them.
2. /metrics names segment tags only where the scope `read` is open: with open_scopes = none the
   flurry_segment_* families are one unlabelled sample each (the sum over the tags) and no tag
   name appears anywhere in /metrics; with read open they are labelled by tag.
3. A token_file line granting a scope that open_scopes leaves open is warned about at start
   (event=token_scope_open, the scope and the open_scopes value that closes it); none when the
   scope is closed.
4. A symbolic link at a directory flurry keeps inside the data directory (local-horizons/,
   segment-floors/) stops the start, naming the link; nothing is written where it points.

Usage: exposure_settings.py FLURRY
"""
import os
import secrets
import subprocess

import harness as h

SECRET = "Sekr3tPassw0rd"
TOKEN_IDS = "ids-" + secrets.token_hex(20)  # random: low-variety tokens are refused
TOKEN_ADMIN = "admin-" + secrets.token_hex(20)


def run(args, env=None):
    p = subprocess.run([h.FLURRY] + args, capture_output=True, timeout=60,
                       env=dict(os.environ, **(env or {})))
    return p.returncode, p.stdout.decode() + p.stderr.decode()


def private_file(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
    return path


def no_secret_in_errors():
    data = os.path.join(h.WORK, "secrets")
    pw = private_file(os.path.join(h.WORK, "etcd-password"), "x\n")
    cases = []
    for ep in (f"http://root:{SECRET}@127.0.0.1:2379", f"https://root:{SECRET}@127.0.0.1:2379",
               f"root:{SECRET}@127.0.0.1:2379", f"127.0.0.1:2379,http://u:{SECRET}@127.0.0.1:2380",
               f"http://u:{SECRET}@127.0.0.1:2379,,127.0.0.1:2380",
               f"http://127.0.0.1:2379/?password={SECRET}", f"etcd://u:{SECRET}@127.0.0.1:2379"):
        etcd = ["--registry", "etcd", "--etcd-user", "root", "--etcd-password-file", pw]
        cases.append((f"serve --etcd-endpoints {ep}",
                      ["serve", "--data-dir", data, "--etcd-endpoints", ep] + etcd, None))
        cases.append((f"FLURRY_ETCD_ENDPOINTS={ep}", ["serve", "--data-dir", data] + etcd,
                      {"FLURRY_ETCD_ENDPOINTS": ep}))
        cases.append((f"nodes list --etcd-endpoints {ep}",
                      ["nodes", "list", "--data-dir", data, "--etcd-endpoints", ep] + etcd, None))
    for server in (f"http://u:{SECRET}@127.0.0.1:1", f"https://u:{SECRET}@127.0.0.1:1/",
                   f"http://127.0.0.1:1/?token={SECRET}"):
        cases.append((f"segment list --server {server}", ["segment", "list", "--server", server], None))
    for store in (f"mysql://u:{SECRET}@127.0.0.1/ids", f"postgresql://u:{SECRET}@127.0.0.1:99999/ids",
                  f"postgresql://u:{SECRET}@[::1/ids", f"sqlite, redis://:{SECRET}@127.0.0.1:6379"):
        cases.append((f"--segment-stores {store}",
                      ["serve", "--data-dir", data, "--segment-stores", store], None))
    for url in (f"postgresql://u:{SECRET}@127.0.0.1:99999/ids", f"postgresql://u:{SECRET}@[::1/ids",
                f"host=127.0.0.1 password={SECRET} port=abc", f"postgresql://u:{SECRET}@127.0.0.1/ids?x=1&&",
                f"host=127.0.0.1 password='{SECRET}"):
        cases.append((f"--postgres-url {url}",
                      ["serve", "--data-dir", data, "--registry", "postgres", "--postgres-url", url], None))
    for what, args, env in cases:
        rc, out = run(args, env)
        h.check(rc != 0, f"{what}: accepted (exit 0): {out}")
        h.check(out.strip() != "", f"{what}: refused without a message")
        h.check(SECRET not in out, f"{what}: the message shows the password: {out}")
    rc, out = run(["serve", "--data-dir", data, "--registry", "etcd", "--etcd-endpoints",
                   f"http://root:{SECRET}@127.0.0.1:2379"])
    h.check("etcd_password_file" in out and "***@127.0.0.1:2379" in out,
            f"the etcd refusal does not say where the password goes: {out}")
    h.log(f"{len(cases)} refusals of settings holding a password: none shows it")


def metrics_follow_open_scopes():
    tokens = private_file(os.path.join(h.WORK, "tokens"),
                          f"{TOKEN_IDS} ids\n{TOKEN_ADMIN} admin\n")
    auth_ids = {"Authorization": f"Bearer {TOKEN_IDS}"}
    auth_admin = {"Authorization": f"Bearer {TOKEN_ADMIN}", "Content-Type": "application/json"}
    results = {}
    for name, scopes in (("closed", "none"), ("open", "ids,read")):
        srv = h.Server(f"metrics-{name}", os.path.join(h.WORK, f"metrics-{name}"),
                       args=["--segment-stores", "sqlite", "--token-file", tokens,
                             "--open-scopes", scopes]).start()
        for tag, n in (("secret-orders", 7), ("payroll-runs", 5)):
            r = h.request(srv.port, "/v1/segments", method="POST", headers=auth_admin,
                          body=f'{{"tag":"{tag}","step":100}}')
            h.check(r.status == 201, f"{name}: creating {tag}: {r}")
            r = h.request(srv.port, f"/v1/segments/{tag}/ids?count={n}", headers=auth_ids)
            h.check(r.status == 200, f"{name}: {tag} IDs: {r}")
        r = h.request(srv.port, "/metrics")
        h.check(r.status == 200, f"{name}: /metrics without a token: {r}")
        results[name] = (srv, r.text)
    closed_srv, closed = results["closed"]
    for tag in ("secret-orders", "payroll-runs"):
        h.check(tag not in closed, f"open_scopes = none: /metrics names the tag {tag}")
    h.check('tag="' not in closed, "open_scopes = none: /metrics has a tag label")
    h.check(h.metric(closed, "flurry_segment_ids_issued_total") == 12,
            "open_scopes = none: flurry_segment_ids_issued_total is not the sum over the tags (12)")
    h.check(h.metric(closed, "flurry_segment_ranges_fetched_total") >= 2,
            "open_scopes = none: no aggregated flurry_segment_ranges_fetched_total")
    h.check(h.metric(closed, "flurry_segment_step") is None,
            "open_scopes = none: flurry_segment_step (meaningless as a sum) is shown")
    _, opened = results["open"]
    h.check(h.metric(opened, "flurry_segment_ids_issued_total", {"tag": "secret-orders"}) == 7 and
            h.metric(opened, "flurry_segment_ids_issued_total", {"tag": "payroll-runs"}) == 5,
            "read open: /metrics does not give the IDs issued by tag")
    h.log("/metrics: tag labels only with read open, sums without")

    # The token file grants ids: open on the second server, closed on the first.
    m = h.wait_log(results["open"][0], r"event=token_scope_open scopes=ids .*")
    h.check("--open-scopes read" in m.group(0) and "FLURRY_OPEN_SCOPES=read" in m.group(0),
            f"the warning does not say how to close the scope: {m.group(0)}")
    h.check(TOKEN_IDS not in m.group(0), "the warning names a token")
    h.check("token_scope_open" not in closed_srv.log_text(),
            "a warning about an open scope on a server with every scope closed")
    for srv, _ in results.values():
        rc, _ = srv.stop()
        h.check(rc == 0, f"{srv.name}: exit code {rc}")
    h.log("a token granting an open scope is warned about at start, with the way to close it")


def symlinked_dirs_refused():
    for sub, args in (("local-horizons", []), ("segment-floors", ["--segment-stores", "sqlite"])):
        data = os.path.join(h.WORK, f"linked-{sub}")
        target = os.path.join(h.WORK, f"target-{sub}")
        os.makedirs(data, mode=0o700)
        os.makedirs(target, mode=0o700)
        link = os.path.join(data, sub)
        os.symlink(target, link)
        srv = h.Server(f"linked-{sub}", data, args=args).launch()
        try:
            rc = srv.proc.wait(30)
        except subprocess.TimeoutExpired:
            rc = None
        out = srv.log_text()
        h.check(rc is not None and rc != 0, f"{sub} a symbolic link: the server started (exit {rc})")
        h.check(link in out and "symbolic link" in out, f"{sub}: the refusal does not name the link: {out}")
        h.check(os.listdir(target) == [], f"{sub}: files written where the link points: {os.listdir(target)}")
    h.log("symbolic links at local-horizons/ and segment-floors/ stop the start, nothing written through them")


def main():
    h.init()
    no_secret_in_errors()
    metrics_follow_open_scopes()
    symlinked_dirs_refused()


h.run_main(main)
