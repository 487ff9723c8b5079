#!/usr/bin/env bash
# Every benchmark of `make bench`, in one sitting, ending with one table of every figure beside its
# reference from the same run (bench/report.py; Markdown and JSON). Builds nothing.
#
# Usage: bench/run_all.sh BUILD_DIR [REPORT_DIR]
#   BUILD_DIR   a release build tree (build/release) with the benchmarks and the flurry binary
#   REPORT_DIR  where the raw figures and report.md / report.json go (default BUILD_DIR/bench-report)
# Environment: SECS, seconds per load run of the server scripts (default 10).
set -euo pipefail

BUILD=${1:?usage: $0 BUILD_DIR [REPORT_DIR]}
OUT=${2:-$BUILD/bench-report}
SECS=${SECS:-10}
HERE=$(cd "$(dirname "$0")" && pwd)
FLURRY=$BUILD/apps/flurry/flurry
mkdir -p "$OUT"
rm -f "$OUT"/*.json "$OUT"/report.md

# The machine the figures belong to.
python3 - "$OUT/machine.json" "$(git -C "$HERE" rev-parse --short HEAD 2>/dev/null || echo unknown)" <<'PY'
import json, os, platform, sys, time
cpu = "unknown"
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
json.dump({"cpu": cpu, "cpus": os.cpu_count(), "kernel": platform.release(),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": sys.argv[2]},
          open(sys.argv[1], "w"))
PY

# gbench NAME BINARY: one Google Benchmark binary, its console output shown, its JSON kept.
gbench() {
  echo "== $2"
  "$BUILD/bench/$2" --benchmark_out="$OUT/$1.json" --benchmark_out_format=json
}
gbench generator flurry_bench
gbench segment segment_bench
gbench order order_bench
gbench registry registry_bench
gbench oracle oracle_bench

echo "== flurry bench --reference (uncapped layout, 1 and 2 threads)"
UNCAPPED='time:40@1ms,node:1,seq:22;epoch=2025-01-01Z'
for threads in 1 2; do
  if "$FLURRY" bench --layout "$UNCAPPED" --threads "$threads" --seconds 3 --reference --json \
    >"$OUT/cli_bench_$threads.json"; then
    cat "$OUT/cli_bench_$threads.json"
  else  # a binary from before --reference: the report says "not measured"
    rm -f "$OUT/cli_bench_$threads.json"
    echo "flurry bench --reference failed; its rows are left out"
  fi
done

echo "== registry load"
"$HERE/registry_load.py" "$FLURRY"
echo "== server"
BENCH_REPORT_DIR=$OUT "$HERE/serve_bench.sh" "$FLURRY" "$SECS"
echo "== segment mode over HTTP"
BENCH_REPORT_DIR=$OUT "$HERE/segment_serve_bench.sh" "$FLURRY" "$SECS"
echo "== timestamp oracle (tso_load, 1,000 callers on one Tso.Stream)"
BENCH_REPORT_DIR=$OUT "$HERE/tso_bench.sh" "$FLURRY" "$SECS"

echo
python3 "$HERE/report.py" "$OUT"
echo "(also in $OUT/report.md and $OUT/report.json)"
