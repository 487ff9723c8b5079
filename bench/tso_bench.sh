#!/usr/bin/env bash
# The timestamp oracle under load (issue 35): bench/tso_load's tso() client, 1,000 concurrent callers
# on one gRPC Tso.Stream, against `flurry serve --tso` (SQLite registry, a temporary data directory)
# and, in the same run, against `tso_load floor` (the same service with no work behind it: what gRPC
# and the client allow on this machine). Callers are measured both as 1,000 threads and as 1,000
# continuations (async). Builds nothing. See bench/README.md, "Timestamp oracle".
#
# Usage: bench/tso_bench.sh path/to/flurry [seconds per run, default 10]
#
# Environment: ROUNDS, rounds of (floor, flurry) runs, alternating (default 3; the figures are the
# medians); CALLERS (default 1000); CONNECTIONS (default 1); TSO_LOAD, the client (default:
# bench/tso_load of the build tree holding the binary); BENCH_REPORT_DIR, a directory to write the
# figures to as tso.json (for bench/report.py); TSO_RESULTS, a path prefix: the summary goes to
# PREFIX.md and the figures with the machine's (CPU, load average, commit) to PREFIX.json. A binary without --tso is left out (the floor alone is measured, and the script says
# so).
set -euo pipefail

FLURRY=${1:?usage: $0 path/to/flurry [seconds]}
SECS=${2:-10}
ROUNDS=${ROUNDS:-3}
CALLERS=${CALLERS:-1000}
CONNECTIONS=${CONNECTIONS:-1}
[[ -x $FLURRY ]] || {
  echo "tso_bench: not an executable: $FLURRY" >&2
  exit 1
}
FLURRY=$(realpath "$FLURRY")
TSO_LOAD=${TSO_LOAD:-$(dirname "$FLURRY")/../../bench/tso_load}
[[ -x $TSO_LOAD ]] || {
  echo "tso_bench: $TSO_LOAD is missing (build target tso_load)" >&2
  exit 1
}
# shellcheck source=bench/load_lib.sh
source "$(dirname "$0")/load_lib.sh"
require_tools tso_bench "python3, curl" python3 curl
plain_environment

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  stop_pids
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# The floor.
"$TSO_LOAD" floor 127.0.0.1:0 >"$WORK/floor.out" 2>&1 &
FLOOR_PID=$!
PIDS+=("$FLOOR_PID")
for _ in $(seq 100); do
  grep -q '^listening' "$WORK/floor.out" && break
  sleep 0.05
done
FLOOR_PORT=$(awk '/^listening/ {print $2}' "$WORK/floor.out")
[[ -n $FLOOR_PORT ]] || {
  cat "$WORK/floor.out" >&2
  exit 1
}

# flurry serve --tso, when the binary has it (with an admin token for the segment tags below).
TARGETS=(floor)
if "$FLURRY" serve --help 2>/dev/null | grep -q -- '--tso'; then
  HTTP_PORT=$(free_port)
  GRPC_PORT=$(free_port)
  TOKEN=$(python3 -c "import secrets; print(secrets.token_hex(32))")
  (umask 077 && echo "$TOKEN" >"$WORK/token")
  "$FLURRY" serve --tso --listen "127.0.0.1:$HTTP_PORT" --grpc-listen "127.0.0.1:$GRPC_PORT" \
    --data-dir "$WORK/data" --admin-token-file "$WORK/token" >"$WORK/flurry.log" 2>&1 &
  FLURRY_PID=$!
  PIDS+=("$FLURRY_PID")
  # Ready when /readyz/tso answers 200 (the oracle grants); 404 there: a server with the oracle
  # but without its routes, measured as if it had no --tso.
  code=000
  for _ in $(seq 600); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$HTTP_PORT/readyz/tso" || true)
    [[ $code == 200 || $code == 404 ]] && break
    kill -0 "$FLURRY_PID" 2>/dev/null || {
      cat "$WORK/flurry.log" >&2
      echo "tso_bench: flurry serve --tso exited before it was ready" >&2
      exit 1
    }
    sleep 0.05
  done
  case $code in
    200) TARGETS+=(flurry) ;;
    404) echo "tso_bench: $FLURRY has --tso but serves no /readyz/tso (no Tso routes): the floor alone is measured" ;;
    *)
      cat "$WORK/flurry.log" >&2
      echo "tso_bench: /readyz/tso not 200 within 30 s (last answer $code)" >&2
      exit 1
      ;;
  esac
else
  echo "tso_bench: $FLURRY has no --tso: the floor alone is measured"
fi

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
echo "tso_bench: $(nproc) CPUs, $CALLERS callers on $CONNECTIONS connection(s), ${SECS}s a run, $ROUNDS rounds; load average $(cut -d' ' -f1-3 /proc/loadavg)"
FAILED=0
for ((round = 1; round <= ROUNDS; round++)); do
  for target in "${TARGETS[@]}"; do
    if [[ $target == floor ]]; then port=$FLOOR_PORT pid=$FLOOR_PID; else port=$GRPC_PORT pid=$FLURRY_PID; fi
    for mode in async threads; do
      before=$(cpu_ticks "$pid")
      if ! "$TSO_LOAD" "$mode" "127.0.0.1:$port" --seconds "$SECS" --callers "$CALLERS" \
        --connections "$CONNECTIONS" >"$WORK/run.out" 2>"$WORK/run.err"; then
        FAILED=1
        cat "$WORK/run.err" >&2
      fi
      line=$(cat "$WORK/run.out")
      echo "$target round=$round $line server_ticks=$(($(cpu_ticks "$pid") - before))" | tee -a "$WORK/runs.txt"
    done
  done
done

# Strict and non-strict segment tags (numbers/s over HTTP, one number a request).
: >"$WORK/segments.txt"
if [[ ${TARGETS[*]} == *flurry* ]] && command -v wrk >/dev/null; then
  BASE=http://127.0.0.1:$HTTP_PORT
  for tag in strict plain; do
    curl -sf -X POST -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
      --data "{\"tag\":\"$tag\",\"start\":1,\"step\":1000$([[ $tag == strict ]] && echo ',"strict":true')}" \
      "$BASE/v1/segments" >/dev/null || echo "tso_bench: cannot create segment tag $tag" >&2
  done
  if curl -sf "$BASE/v1/segments/strict" | grep -q '"strict": *true'; then
    wrk -t1 -c50 -d2s "$BASE/v1/segments/strict/ids?count=1" >/dev/null
    wrk -t1 -c50 -d2s "$BASE/v1/segments/plain/ids?count=1" >/dev/null
    for ((round = 1; round <= ROUNDS; round++)); do
      for tag in strict plain; do
        wrk_run "seg-$tag" "$BASE/v1/segments/$tag/ids?count=1"
        echo "segment-$tag round=$round rps=$(cat "$WORK/seg-$tag.rps") p50_ms=$(cat "$WORK/seg-$tag.p50") p99_ms=$(cat "$WORK/seg-$tag.p99") errors=$(cat "$WORK/seg-$tag.err")" |
          tee -a "$WORK/segments.txt"
        [[ $(cat "$WORK/seg-$tag.err") == 0 ]] || FAILED=1
      done
    done
  else
    echo "tso_bench: this flurry serve does not keep a tag's strict flag: strict segment tags not measured"
  fi
fi

python3 - "$WORK/runs.txt" "$(getconf CLK_TCK)" "${BENCH_REPORT_DIR:-}" "${TSO_RESULTS:-}" \
  "$SECS" "$LOAD_BEFORE" "$(cut -d' ' -f1-3 /proc/loadavg)" \
  "$(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  "$WORK/segments.txt" <<'EOF'
import json, os, platform, statistics, sys, time
runs_file, tck, report_dir, results, secs, load_before, load_after, commit, seg_file = sys.argv[1:10]
tck = float(tck)
runs = {}
for line in open(runs_file):
    target, *pairs = line.split()
    kv = dict(p.split("=", 1) for p in pairs)
    runs.setdefault((target, kv["mode"]), []).append(kv)

def med(rs, key):
    return statistics.median(float(r[key]) for r in rs)

rows, out = [], {}
for (target, mode), rs in sorted(runs.items()):
    cpu_per_1000 = statistics.median(
        float(r["server_ticks"]) / tck / max(1.0, float(r["values"])) * 1e9 for r in rs)  # us / 1000
    client_cpu_per_1000 = statistics.median(
        float(r["client_cpu_s"]) / max(1.0, float(r["values"])) * 1e9 for r in rs)
    switches_per_call = statistics.median(
        float(r["switches"]) / max(1.0, float(r["values"])) for r in rs)
    fig = {"rate": med(rs, "rate"), "batch_rate": med(rs, "batch_rate"),
           "mean_batch": med(rs, "mean_batch"), "p50_us": med(rs, "p50_us"),
           "p99_us": med(rs, "p99_us"), "p999_us": med(rs, "p999_us"),
           "server_cpu_us_per_1000": cpu_per_1000, "client_cpu_us_per_1000": client_cpu_per_1000,
           "client_switches_per_call": switches_per_call,
           "calls": sum(int(r["calls"]) for r in rs), "values": sum(int(r["values"]) for r in rs),
           "repeats": sum(int(r["repeats"]) for r in rs),
           "order_violations": sum(int(r["order_violations"]) for r in rs),
           "stale": sum(int(r["stale"]) for r in rs), "errors": sum(int(r["errors"]) for r in rs),
           "rounds": len(rs), "callers": int(rs[0]["callers"]),
           "connections": int(rs[0]["connections"]), "all_ok": all(r["ok"] == "1" for r in rs)}
    out.setdefault(target, {})[mode] = fig

lines = ["| server | callers | timestamps/s | batches/s | mean batch | p50 ms | p99 ms | p99.9 ms "
         "| CPU us / 1000, server / client | client switches / call | values checked | repeats "
         "| order / stale | errors |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
for target in ("flurry", "floor"):
    for mode in ("async", "threads"):
        f = out.get(target, {}).get(mode)
        if not f:
            continue
        name = "`flurry serve --tso`" if target == "flurry" else "floor (`tso_load floor`)"
        lines.append(
            f"| {name} | {f['callers']:,} {mode} | {f['rate']:,.0f} | {f['batch_rate']:,.0f} "
            f"| {f['mean_batch']:.1f} | {f['p50_us'] / 1000:.2f} | {f['p99_us'] / 1000:.2f} "
            f"| {f['p999_us'] / 1000:.2f} | {f['server_cpu_us_per_1000']:.0f} / "
            f"{f['client_cpu_us_per_1000']:.0f} | {f['client_switches_per_call']:.2f} | {f['values']:,} "
            f"| {f['repeats']} | {f['order_violations']} / {f['stale']} | {f['errors']} |")
for mode in ("async", "threads"):
    fl, fr = out.get("flurry", {}).get(mode), out.get("floor", {}).get(mode)
    if fl and fr:
        lines.append(f"\n{mode}: flurry / floor = {fl['rate'] / fr['rate']:.2f}x timestamps/s")
    if fl:
        met = fl["rate"] >= 1e6 and fl["p99_us"] <= 5000
        lines.append(f"{mode}: target >= 1M timestamps/s with p99 <= 5 ms: "
                     f"{'met' if met else 'MISSED'} ({fl['rate'] / 1e6:.2f}M/s, p99 "
                     f"{fl['p99_us'] / 1000:.2f} ms)")
segs = {}
for line in open(seg_file):
    name, *pairs = line.split()
    segs.setdefault(name.split("-", 1)[1], []).append(dict(p.split("=", 1) for p in pairs))
if segs:
    lines += ["", "| segment tag (one server) | numbers/s (`ids?count=1`, wrk -t1 -c50) | p50 ms "
              "| p99 ms | errors |", "|---|---|---|---|---|"]
    for tag in ("strict", "plain"):
        rs = segs.get(tag)
        if not rs:
            continue
        f = {k: statistics.median(float(r[k]) for r in rs) for k in ("rps", "p50_ms", "p99_ms")}
        f["errors"] = sum(int(r["errors"]) for r in rs)
        f["rounds"] = len(rs)
        out.setdefault("segments", {})[tag] = f
        label = "strict (`\"strict\": true`)" if tag == "strict" else "non-strict"
        lines.append(f"| {label} | {f['rps']:,.0f} | {f['p50_ms']:.2f} | {f['p99_ms']:.2f} "
                     f"| {f['errors']} |")
    sg = out.get("segments", {})
    if "strict" in sg and "plain" in sg:
        lines.append(f"\nstrict / non-strict = {sg['strict']['rps'] / sg['plain']['rps']:.2f}x numbers/s")
text = "\n".join(lines)
print(text)
if results:
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "unknown")
    machine = {"cpu": cpu, "cpus": os.cpu_count(), "kernel": platform.release(),
               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit,
               "load_average_before": load_before, "load_average_after": load_after,
               "seconds_per_run": float(secs)}
    head = (f"# Timestamp oracle under load (bench/tso_bench.sh)\n\n"
            f"{machine['date']}, commit {commit}, {cpu}, {machine['cpus']} CPUs, kernel "
            f"{machine['kernel']}; {secs} s a run after 1 s of warm-up, medians of the rounds "
            f"(values checked, repeats and errors: sums); load average {load_before} before, "
            f"{load_after} after.\n\n")
    raw = "".join(open(runs_file).readlines() + open(seg_file).readlines())
    open(results + ".md", "w").write(head + text + "\n\nEach run as measured:\n\n```\n" + raw +
                                     "```\n")
    with open(results + ".json", "w") as f:
        json.dump({"machine": machine, "figures": out}, f, indent=1)
if report_dir:
    with open(os.path.join(report_dir, "tso.json"), "w") as f:
        json.dump(out, f, indent=1)
EOF
if ((FAILED)); then
  echo "tso_bench: a run failed or a check did not hold (see above)" >&2
  exit 1
fi
