#!/usr/bin/env python3
"""The /segments page in headless Chromium: starts `flurry serve` (127.0.0.1, a free port, a
temporary data directory, an admin token), creates two tags, takes a few IDs of one, then runs
segments_page.mjs (puppeteer-core) against it; stops the server midway to check that the page
reports it. The screenshot goes to the path given.

Usage: segments_page.py FLURRY NODE_DIR SCREENSHOT
  NODE_DIR: where `npm ci` installed tests/web's packages and segments_page.mjs was copied.
"""
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import harness as h  # noqa: E402

SERVED, IDLE = "web-orders", "web-invoices"


def main():
    node_dir, screenshot = sys.argv[2], sys.argv[3]
    sys.argv = sys.argv[:2]
    h.init()
    token_file = os.path.join(h.WORK, "admin-token")
    with open(os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write("web-test-token-2d7f9a1c4e6b8d03f5a7\n")
    srv = h.Server("web", os.path.join(h.WORK, "data"), args=["--admin-token-file", token_file]).start()
    auth = {"Authorization": "Bearer web-test-token-2d7f9a1c4e6b8d03f5a7", "Content-Type": "application/json"}
    for tag, step in ((SERVED, 1000), (IDLE, 50)):
        r = h.request(srv.port, "/v1/segments", method="POST", headers=auth,
                      body=json.dumps({"tag": tag, "start": 1, "step": step}).encode())
        h.check(r.status == 201, f"POST /v1/segments {tag}: {r.status} {r.text}")
    r = h.request(srv.port, f"/v1/segments/{SERVED}/ids?count=10")
    h.check(r.status == 200 and len(r.json()["ids"]) == 10, f"GET ids: {r.status} {r.text}")

    if os.path.exists(screenshot):
        os.remove(screenshot)
    p = subprocess.Popen(["node", os.path.join(node_dir, "segments_page.mjs"), f"http://127.0.0.1:{srv.port}",
                          SERVED, IDLE, screenshot], cwd=node_dir, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in p.stdout:
            h.log(f"  node: {line.rstrip()}")
            lines.append(line)
            if line.strip() == "phase1 ok":
                break
        h.check(lines and lines[-1].strip() == "phase1 ok", "the browser test failed (output above)")
        h.check(os.path.getsize(screenshot) > 10_000, f"the screenshot {screenshot} is missing or tiny")
        srv.kill()
        p.stdin.write("go\n")
        p.stdin.flush()
        rest = p.stdout.read()
        for line in rest.splitlines():
            h.log(f"  node: {line}")
        h.check(p.wait(timeout=60) == 0 and "phase2 ok" in rest, "the page did not report the stopped server")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    h.log(f"screenshot: {screenshot}")


h.run_main(main)
