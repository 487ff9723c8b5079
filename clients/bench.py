#!/usr/bin/env python3
"""Measures the five clients in one sitting, against one server.

    clients/bench.py [--build build/release] [--duration 3] [--only go,java]

Starts one `flurry serve` (fleet.py, no proxy in the path) with a layout fast enough that the
server's own rate limit is not what is measured (time:41@1ms,node:4,seq:18: 262M IDs/s), then
runs each client's benchmark program in turn with FLURRY_BENCH_SERVER set. Each prints JSON lines
(bench "buffer": next() from the prefetch buffer at the default settings; "per_request": one
GET /v1/ids?count=1 per ID on a keep-alive connection per caller; 1 and 8 callers each). Prints
one table and writes the lines to <build>/clients-bench.jsonl.
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYOUT = "time:41@1ms,node:4,seq:18;epoch=2025-01-01Z"


def commands(build):
    """Each client's bench command (run from the repository's top directory)."""
    return {
        "python": ["/usr/bin/python3", "clients/python/bench.py"],
        "go": ["env", f"GOCACHE={build}/clients/go/gocache", f"GOPATH={build}/clients/go/gopath",
               "GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false",
               "sh", "-c", "cd clients/go && go run ./cmd/flurry-bench"],
        "typescript": ["node", f"{build}/clients/typescript/ts/dist/bench.js"],
        "java": ["java", "-cp", f"{build}/clients/java/flurry-client.jar:{build}/clients/java/flurry-client-tests.jar",
                 "dev.flurry.client.bench.Bench"],
        "cpp": [f"{build}/clients/cpp/bench/flurry_client_bench"],
    }


def inner(args):
    server = os.environ["FLURRY_TEST_SERVERS"].split(",")[0]
    build = os.path.realpath(args.build)
    cmds = commands(build)
    names = args.only.split(",") if args.only else list(cmds)
    rows = []
    for name in names:
        env = dict(os.environ, FLURRY_BENCH_SERVER=server)
        cmd = cmds[name] + ["--duration", str(args.duration)]
        print(f"bench: {name}: {' '.join(cmd)}", file=sys.stderr, flush=True)
        r = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        if r.returncode != 0:
            print(f"bench: {name} failed with exit {r.returncode}", file=sys.stderr)
            return 1
        for line in r.stdout.splitlines():
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    out = os.path.join(build, "clients-bench.jsonl")
    with open(out, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    print(f"| client | bench | callers | IDs/s | server requests per 10^6 IDs |")
    print(f"|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['client']} | {row['bench']} | {row['callers']} | {row['ids_per_s']:,.0f} | "
              f"{row['requests_per_million']:,.1f} |")
    print(f"(lines in {out})", file=sys.stderr)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--only", help="clients to run, separated by commas")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        sys.exit(inner(args))
    # The C++ bench is not part of the build's ALL (make test does not need it).
    if not args.only or "cpp" in args.only.split(","):
        subprocess.run(["cmake", "--build", args.build, "--target", "flurry_client_bench"], check=True)
    flurry = os.path.join(os.path.realpath(args.build), "apps", "flurry", "flurry")
    cmd = [sys.executable, os.path.join(ROOT, "clients", "conformance", "fleet.py"), "--flurry", flurry,
           "--servers", "1", "--layout", LAYOUT, "--", sys.executable, os.path.abspath(__file__),
           "--inner", "--build", args.build, "--duration", str(args.duration)]
    if args.only:
        cmd += ["--only", args.only]
    sys.exit(subprocess.run(cmd).returncode)


if __name__ == "__main__":
    main()
