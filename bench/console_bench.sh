#!/usr/bin/env bash
# What the console costs the server, measured in one run on one `flurry serve` (SQLite registry,
# a temporary data directory, loopback): each of the console's read routes under wrk (50
# connections, one client thread) beside /healthz, the cheapest route, as the reference; and
# /v1/ids?count=1 alone, then again while ten consoles poll (each reading /v1/nodes, /v1/status
# and /v1/events?since= every 2 s, as the page does). See bench/README.md, section "Console".
#
# Usage: bench/console_bench.sh path/to/flurry [seconds per wrk run, default 10]
set -euo pipefail

FLURRY=${1:?usage: $0 path/to/flurry [seconds]}
SECS=${2:-10}
[[ -x $FLURRY ]] || {
  echo "console_bench: not an executable: $FLURRY" >&2
  exit 1
}
# shellcheck source=bench/load_lib.sh
source "$(dirname "$0")/load_lib.sh"
require_tools console_bench "wrk, python3, curl" wrk python3 curl
plain_environment

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  stop_pids
  rm -rf "$WORK"
}
trap cleanup EXIT

PORT=$(free_port)
"$FLURRY" serve --listen "127.0.0.1:$PORT" --data-dir "$WORK/data" --log-level warn \
  >"$WORK/serve.log" 2>&1 &
PIDS+=($!)
BASE="http://127.0.0.1:$PORT"
for ((i = 0; i < 250; i++)); do
  curl -fs "$BASE/readyz" >/dev/null 2>&1 && break
  sleep 0.04
done
curl -fs "$BASE/readyz" >/dev/null || {
  cat "$WORK/serve.log" >&2
  exit 1
}

# consoles N: N pollers reading what the page reads every 2 s, until killed.
consoles() {
  local n=$1 i
  for ((i = 0; i < n; i++)); do
    (
      while :; do
        curl -fs "$BASE/v1/nodes" "$BASE/v1/status" "$BASE/v1/events?since=0" >/dev/null || true
        sleep 2
      done
    ) &
    PIDS+=($!)
  done
}

echo "console_bench: $(nproc) CPUs, ${SECS} s per run, 50 connections"
wrk_run healthz "$BASE/healthz"
wrk_run layout "$BASE/v1/layout"
wrk_run status "$BASE/v1/status"
wrk_run events "$BASE/v1/events"
wrk_run nodes "$BASE/v1/nodes"
wrk_run ids "$BASE/v1/ids?count=1"
before=${#PIDS[@]}
consoles 10
wrk_run ids_consoles "$BASE/v1/ids?count=1"
for pid in "${PIDS[@]:$before}"; do kill "$pid" 2>/dev/null || true; done

python3 - "$WORK" <<'PY'
import sys
work = sys.argv[1]
def fig(name, ext):
    return float(open(f"{work}/{name}.{ext}").read())
rows = [("GET /healthz (reference)", "healthz", "healthz"),
        ("GET /v1/layout", "layout", "healthz"),
        ("GET /v1/status", "status", "healthz"),
        ("GET /v1/events", "events", "healthz"),
        ("GET /v1/nodes (reads the registry)", "nodes", "healthz"),
        ("GET /v1/ids?count=1 (reference)", "ids", "ids"),
        ("GET /v1/ids?count=1, 10 consoles open", "ids_consoles", "ids")]
print(f"{'route':42} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'vs ref':>7}")
for label, name, ref in rows:
    rps = fig(name, "rps")
    print(f"{label:42} {rps:>10.0f} {fig(name, 'p50'):>8.2f} {fig(name, 'p99'):>8.2f} "
          f"{fig(name, 'err'):>7.0f} {rps / fig(ref, 'rps'):>6.2f}x")
PY
