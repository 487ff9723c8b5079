#!/usr/bin/env python3
"""The console (/console) in headless Chromium, against real `flurry serve` processes: this script
starts and stops the servers, console.mjs (puppeteer-core) drives the browser and asks for each
server-side step on its stdout ("@STEP ..."), which this script answers on its stdin.

  A  SQLite data dir D, an admin token, an order key file, --lease-ttl-ms 2000; two tags created
     over HTTP, one described with `<img src=x onerror=alert(1)>` and non-ASCII text; IDs taken.
  B  the same data dir: a second node ID. SIGKILLed when the page has shown both (@kill-b).
  C  the same data dir under libfaketime: its wall clock steps back 2 s (@step-c) and some IDs
     are taken from it; its /v1/events must hold a clock_step event.
  A is stopped at the end (@stop-a): the page must say stale.

Usage: console.py FLURRY NODE_DIR SCREENSHOT_DIR
  NODE_DIR: where `npm ci` installed tests/web's packages and console.mjs was copied.
"""
import json
import os
import shutil
import signal
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import harness as h  # noqa: E402

TOKEN = "web-console-token-5c2e8a1f7d3b9e60a4c8"
KEY = "2b7e151628aed2a6abf7158809cf4f3c"
SERVED, IDLE = "web-orders", "web-invoices"
XSS = "<img src=x onerror=alert(1)> Bestellungen \u2013 \u6ce8\u6587 \u2713"


def private_file(path, text):
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(text)
    return path


def main():
    node_dir, shots = os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    sys.argv = sys.argv[:2]
    h.init()
    h.check_libfaketime()
    token_file = private_file(os.path.join(h.WORK, "admin-token"), TOKEN + "\n")
    keys = private_file(os.path.join(h.WORK, "order-keys"), f"1 = {KEY}\n")
    data = os.path.join(h.WORK, "data")
    a = h.Server("a", data, args=["--admin-token-file", token_file, "--order-key-file", keys,
                                  "--lease-ttl-ms", "2000"]).start()
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    for tag, step, description in ((SERVED, 1000, XSS), (IDLE, 50, "invoices")):
        r = h.request(a.port, "/v1/segments", method="POST", headers=auth,
                      body=json.dumps({"tag": tag, "start": 1, "step": step, "description": description}).encode())
        h.check(r.status == 201, f"POST /v1/segments {tag}: {r.status} {r.text}")
    r = h.request(a.port, f"/v1/segments/{SERVED}/ids?count=10")
    h.check(r.status == 200 and len(r.json()["ids"]) == 10, f"GET ids: {r.status} {r.text}")
    h.get_ids(a.port, 100)
    # B's lease outlives its process by up to 3 s: long enough to see it count down.
    b = h.Server("b", data, args=["--lease-ttl-ms", "3000"]).start()
    h.check(a.node != b.node, f"A and B share node {a.node}")
    clock_file = os.path.join(h.WORK, "c-clock")
    c = h.Server("c", data, env=h.faked_clock_env(clock_file, "+0")).start()

    shutil.rmtree(shots, ignore_errors=True)
    os.makedirs(shots)
    config = {"a": f"http://127.0.0.1:{a.port}", "c": f"http://127.0.0.1:{c.port}", "token": TOKEN,
              "node_a": a.node, "node_b": b.node, "served": SERVED, "idle": IDLE, "xss": XSS,
              "screenshots": shots}

    def kill_b():
        b.kill()

    def step_c():
        # The wall clock of C steps back 2 s; the monitor sees it within 250 ms, IDs wait it out.
        h.set_fake_offset(clock_file, "-2")
        h.get_ids(c.port, 5)

        def stepped():
            r = h.request(c.port, "/v1/events")
            return r.status == 200 and [e for e in r.json()["events"] if e["kind"] == "clock_step"]
        events = h.wait_for(stepped, "a clock_step event in C's /v1/events", timeout=10)
        h.log(f"C's clock_step: {events[0]['message']}")

    def stop_a():
        rc, _ = a.stop(signal.SIGTERM)
        h.check(rc == 0, f"A exited with {rc}")

    steps = {"kill-b": kill_b, "step-c": step_c, "stop-a": stop_a}
    p = subprocess.Popen(["node", os.path.join(node_dir, "console.mjs"), json.dumps(config)], cwd=node_dir,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        done = False
        for line in p.stdout:
            line = line.rstrip()
            h.log(f"  node: {line}")
            if line.startswith("@"):
                steps[line[1:].split()[0]]()
                p.stdin.write("go\n")
                p.stdin.flush()
            elif line == "console ok":
                done = True
        h.check(p.wait(timeout=60) == 0 and done, "the browser test failed (output above)")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    for name in sorted(os.listdir(shots)):
        path = os.path.join(shots, name)
        h.check(os.path.getsize(path) > 5_000, f"the screenshot {path} is tiny")
        h.log(f"screenshot: {path}")


h.run_main(main)
