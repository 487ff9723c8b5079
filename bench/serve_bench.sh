#!/usr/bin/env bash
# Load benchmark of `flurry serve` beside a Debian redis-server measured in the same run with the
# same load settings (50 connections, one client thread). Builds nothing. See bench/README.md,
# section "Server". The gRPC API is measured in the same run with bench/grpc_load (unary Next at
# 50 calls in flight, a Stream of count=1 messages, StreamRange on the wide layout) when the
# binary serves gRPC (an older one does not: then HTTP only, gRPC off).
#
# Usage: bench/serve_bench.sh path/to/flurry [seconds per wrk run, default 10]
#
# Environment: WIDE_LAYOUT, the layout of the second server used for the batch figures beyond the
# default layout's rate limit (default time:41@1ms,node:4,seq:18;epoch=2025-01-01Z); SERVE_ARGS,
# extra `flurry serve` options for every server started (split on spaces, e.g. "--io-threads 1");
# BENCH_REPORT_DIR, a directory to write the figures to as serve.json (for bench/report.py);
# GRPC_LOAD, the load client (default: bench/grpc_load of the build tree holding the binary);
# GRPC_FLOOR, the bare gRPC server measured beside flurry's gRPC figures (default: bench/grpc_floor
# of the same build tree): the same methods with no work behind them, gRPC's own ceiling here;
# HTTP_BODY_BENCH, the in-process figures printed beside count=1000 on the wide layout (default:
# bench/http_body_bench of the same build tree; skipped when missing); HTTP_FLOOR, the HTTP server
# with no work behind it measured beside count=1 (default: bench/http_floor of the same build tree;
# skipped when missing).
set -euo pipefail

FLURRY=${1:?usage: $0 path/to/flurry [seconds]}
SECS=${2:-10}
WIDE_LAYOUT=${WIDE_LAYOUT:-'time:41@1ms,node:4,seq:18;epoch=2025-01-01Z'}
read -r -a SERVE_ARGS <<<"${SERVE_ARGS:-}"
[[ -x $FLURRY ]] || {
  echo "serve_bench: not an executable: $FLURRY" >&2
  exit 1
}
FLURRY=$(realpath "$FLURRY")
GRPC_LOAD=${GRPC_LOAD:-$(dirname "$FLURRY")/../../bench/grpc_load}
GRPC_FLOOR=${GRPC_FLOOR:-$(dirname "$FLURRY")/../../bench/grpc_floor}
HTTP_BODY_BENCH=${HTTP_BODY_BENCH:-$(dirname "$FLURRY")/../../bench/http_body_bench}
HTTP_FLOOR=${HTTP_FLOOR:-$(dirname "$FLURRY")/../../bench/http_floor}
GRPC=0
if "$FLURRY" serve --help 2>/dev/null | grep -q -- --grpc-listen; then
  for tool in "$GRPC_LOAD" "$GRPC_FLOOR"; do
    [[ -x $tool ]] || {
      echo "serve_bench: $FLURRY serves gRPC but $tool is missing (build targets grpc_load, grpc_floor)" >&2
      exit 1
    }
  done
  GRPC=1
fi
# shellcheck source=bench/load_lib.sh
source "$(dirname "$0")/load_lib.sh"
require_tools serve_bench "wrk, redis-server, redis-tools, python3, curl" wrk redis-server redis-benchmark python3 curl
plain_environment
# gRPC (when served) on a port of each server's choosing unless given (grpc_args).
((GRPC)) && export FLURRY_GRPC_LISTEN=127.0.0.1:0
# grpc_args PORT: the options that put a server's gRPC on PORT (none without gRPC).
grpc_args() { ((GRPC)) && echo "--grpc-listen 127.0.0.1:$1" || true; }

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  stop_pids
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM


# start_flurry DATA_DIR PORT [serve options...]: starts the server from Python, which polls
# /readyz in a tight loop (over TLS, unverified, when the options have --tls-cert-file); prints
# "PID MS" (MS from just before the fork to the first 200).
start_flurry() {
  local dir=$1 port=$2
  shift 2
  python3 - "$FLURRY" "$dir" "$port" "$WORK/flurry.log" "${SERVE_ARGS[@]}" "$@" <<'EOF'
import socket, ssl, subprocess, sys, time
flurry, data, port, logpath, extra = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5:]
tls = None
if "--tls-cert-file" in extra:
    tls = ssl.create_default_context()
    tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE
log = open(logpath, "ab")
t0 = time.monotonic()
p = subprocess.Popen([flurry, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", data, *extra],
                     stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
while True:
    if p.poll() is not None:
        sys.exit(f"flurry serve exited with {p.returncode} before it was ready (see its log)")
    if time.monotonic() - t0 > 30:
        p.kill()
        sys.exit("flurry serve not ready within 30 s")
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        if tls:
            s = tls.wrap_socket(s)
        s.sendall(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        head = s.recv(64)
        s.close()
        if head.startswith(b"HTTP/1.1 200"):
            break
    except OSError:
        pass
print(p.pid, f"{(time.monotonic() - t0) * 1000:.1f}")
EOF
}

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
# cpu_ticks PID: the user and system CPU time the process has used, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# wrk_cpu NAME PID URL: wrk_run, and the server's CPU ticks during it in $WORK/NAME.cpu.
wrk_cpu() {
  local before
  before=$(cpu_ticks "$2")
  wrk_run "$1" "$3"
  echo $(($(cpu_ticks "$2") - before)) >"$WORK/$1.cpu"
}


echo "serve_bench: $(nproc) CPUs, wrk -t1 -c50 -d${SECS}s --latency; redis-benchmark -t incr -c 50 -n 1000000"
echo "flurry: $FLURRY ${SERVE_ARGS[*]}"

# 1. Time to ready, five fresh starts (a new data directory each: the SQLite file is created too).
READY=()
for i in 1 2 3 4 5; do
  read -r pid ms < <(start_flurry "$WORK/ready$i" "$(free_port)")
  PIDS+=("$pid")
  READY+=("$ms")
  kill -TERM "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
done
READY_MED=$(printf '%s\n' "${READY[@]}" | sort -n | sed -n 3p)
READY_MAX=$(printf '%s\n' "${READY[@]}" | sort -n | tail -n 1)
echo "time to ready (ms): ${READY[*]}"
# Idle RSS without gRPC (--grpc-listen ''; the default serves it), 1 s after ready. 0 for a binary
# without gRPC: then the figure of step 2 is the one.
RSS_NOGRPC=0
if ((GRPC)); then
  read -r pid _ < <(start_flurry "$WORK/nogrpc" "$(free_port)" --grpc-listen '')
  PIDS+=("$pid")
  sleep 1
  RSS_NOGRPC=$(rss_kb "$pid")
  kill -TERM "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
fi

# 2. The server on its defaults (layout flurry), and redis-server.
FPORT=$(free_port)
FGPORT=$(free_port)
# shellcheck disable=SC2046
read -r FPID _ < <(start_flurry "$WORK/data" "$FPORT" $(grpc_args "$FGPORT"))
PIDS+=("$FPID")
RPORT=$(free_port)
redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --dir "$WORK" \
  --logfile "$WORK/redis.log" &
RPID=$!
PIDS+=("$RPID")
for ((i = 0; i < 500; i++)); do
  [[ $(redis-cli -p "$RPORT" ping 2>/dev/null || true) == PONG ]] && break
  sleep 0.01
done
[[ $(redis-cli -p "$RPORT" ping) == PONG ]] || {
  echo "serve_bench: redis-server did not start" >&2
  exit 1
}
sleep 1
RSS_IDLE=$(rss_kb "$FPID")
BASE=http://127.0.0.1:$FPORT
curl -sf "$BASE/v1/ids?count=1" >/dev/null

echo "warm-up (2 s)"
wrk -t1 -c50 -d2s "$BASE/v1/ids?count=1" >/dev/null
echo "wrk /v1/ids?count=1"
wrk_cpu c1 "$FPID" "$BASE/v1/ids?count=1"
echo "redis-benchmark INCR"
redis-benchmark -p "$RPORT" -t incr -c 50 -n 1000000 -q 2>&1 | tr '\r' '\n' | grep -a 'INCR:' | tail -n 1 >"$WORK/redis.out"
REDIS_RPS=$(sed -n 's/^INCR: \([0-9.]*\) requests per second.*/\1/p' "$WORK/redis.out")
[[ -n $REDIS_RPS ]] || {
  echo "serve_bench: cannot parse redis-benchmark output: $(cat "$WORK/redis.out")" >&2
  exit 1
}
# HTTPS (tls_cert_file): the same count=1 load over TLS (wrk keeps its 50 connections: one
# handshake each, then TLS records), on a second server with a certificate from
# tests/testing/make_certs.sh. Skipped for a binary without TLS settings.
TLS=0
if "$FLURRY" serve --help 2>/dev/null | grep -q -- --tls-cert-file; then
  TLS=1
  bash "$(dirname "$0")/../tests/testing/make_certs.sh" "$WORK/certs"
  TPORT=$(free_port)
  # shellcheck disable=SC2046
  read -r TPID _ < <(start_flurry "$WORK/tls" "$TPORT" $(grpc_args "$(free_port)") \
    --tls-cert-file "$WORK/certs/server.pem" --tls-key-file "$WORK/certs/server.key")
  PIDS+=("$TPID")
  wrk -t1 -c50 -d2s "https://127.0.0.1:$TPORT/v1/ids?count=1" >/dev/null
  echo "wrk https /v1/ids?count=1"
  wrk_cpu tls1 "$TPID" "https://127.0.0.1:$TPORT/v1/ids?count=1"
  kill -TERM "$TPID"
fi
# The HTTP reference: the same wrk load on a server that answers the bytes of a count=1 response
# and does nothing else: the ceiling of wrk and loopback TCP on this machine.
if [[ -x $HTTP_FLOOR ]]; then
  HFPORT=$(free_port)
  "$HTTP_FLOOR" "$HFPORT" >"$WORK/http_floor.out" &
  HFPID=$!
  PIDS+=("$HFPID")
  for ((i = 0; i < 500; i++)); do
    grep -q '^listening' "$WORK/http_floor.out" && break
    sleep 0.01
  done
  echo "wrk on http_floor (HTTP with no work behind it)"
  wrk -t1 -c50 -d2s "http://127.0.0.1:$HFPORT/v1/ids?count=1" >/dev/null
  wrk_cpu hfloor "$HFPID" "http://127.0.0.1:$HFPORT/v1/ids?count=1"
  kill -TERM "$HFPID"
fi
# grpc_run NAME MODE PORT ARGS...: one grpc_load run; its key=value line in $WORK/NAME.grpc.
grpc_run() {
  local name=$1
  shift
  "$GRPC_LOAD" "$@" >"$WORK/$name.grpc" || {
    echo "serve_bench: grpc_load $* failed: $(cat "$WORK/$name.grpc")" >&2
    exit 1
  }
  cat "$WORK/$name.grpc"
}
if ((GRPC)); then
  echo "grpc_load unary Next(count=1), 50 calls in flight"
  "$GRPC_LOAD" unary "127.0.0.1:$FGPORT" 2 50 >/dev/null  # warm-up
  grpc_run g_unary unary "127.0.0.1:$FGPORT" "$SECS" 50
  echo "grpc_load Stream, count=1 messages, one connection"
  grpc_run g_stream stream "127.0.0.1:$FGPORT" "$SECS" 256
  # The reference: the same two loads on a gRPC server that does nothing, and its idle RSS.
  FLOOR_PORT=$(free_port)
  "$GRPC_FLOOR" "127.0.0.1:$FLOOR_PORT" >"$WORK/floor.out" &
  FLOOR_PID=$!
  PIDS+=("$FLOOR_PID")
  for ((i = 0; i < 500; i++)); do
    grep -q '^listening' "$WORK/floor.out" && break
    sleep 0.01
  done
  sleep 1
  RSS_FLOOR=$(rss_kb "$FLOOR_PID")
  echo "grpc_load unary and Stream on grpc_floor (gRPC with no work behind it)"
  "$GRPC_LOAD" unary "127.0.0.1:$FLOOR_PORT" 2 50 >/dev/null  # warm-up
  grpc_run f_unary unary "127.0.0.1:$FLOOR_PORT" "$SECS" 50
  grpc_run f_stream stream "127.0.0.1:$FLOOR_PORT" "$SECS" 256
  kill -TERM "$FLOOR_PID"
fi
echo "wrk /v1/ids?count=100"
wrk_run c100 "$BASE/v1/ids?count=100"
echo "wrk /v1/ids?count=1000"
wrk_run c1000 "$BASE/v1/ids?count=1000"
sleep 1
RSS_LOAD=$(rss_kb "$FPID")

# 3. The batch figures again on a layout whose rate limit is far above them.
WPORT=$(free_port)
WGPORT=$(free_port)
# shellcheck disable=SC2046
read -r WPID _ < <(start_flurry "$WORK/wide" "$WPORT" --layout "$WIDE_LAYOUT" $(grpc_args "$WGPORT"))
PIDS+=("$WPID")
WBASE=http://127.0.0.1:$WPORT
wrk -t1 -c50 -d2s "$WBASE/v1/ids?count=1000" >/dev/null
echo "wrk /v1/ids?count=100 ($WIDE_LAYOUT)"
wrk_run w100 "$WBASE/v1/ids?count=100"
echo "wrk /v1/ids?count=1000 ($WIDE_LAYOUT)"
wrk_cpu w1000 "$WPID" "$WBASE/v1/ids?count=1000"
if [[ -x $HTTP_BODY_BENCH ]]; then
  echo "http_body_bench (in process, $WIDE_LAYOUT)"
  "$HTTP_BODY_BENCH" --benchmark_filter='BM_NextBatch1000' --benchmark_min_time=1 \
    --benchmark_format=json >"$WORK/body.json" 2>/dev/null || rm -f "$WORK/body.json"
fi
if ((GRPC)); then
  echo "grpc_load StreamRange, 2*10^8 IDs ($WIDE_LAYOUT)"
  "$GRPC_LOAD" range "127.0.0.1:$WGPORT" 10000000 >/dev/null  # warm-up
  grpc_run g_range range "127.0.0.1:$WGPORT" 200000000
fi
RATE=$(curl -sf "$BASE/v1/layout" | python3 -c 'import sys,re; t=sys.stdin.read(); m=re.search(r"\"rate[_a-z]*\"\s*:\s*\"?([0-9.e+]+)", t); print(m.group(1) if m else "?")')

python3 - "$WORK" "$REDIS_RPS" "$RSS_IDLE" "$RSS_LOAD" "$READY_MED" "$READY_MAX" "$WIDE_LAYOUT" "$RATE" "$GRPC" "${RSS_FLOOR:-0}" "$(getconf CLK_TCK)" "$SECS" "$RSS_NOGRPC" "$TLS" <<'EOF'
import json, os, sys
work, redis, rss_idle, rss_load, ready_med, ready_max, wide, rate, grpc, rss_floor, tck, secs, rss_nogrpc, tls = sys.argv[1:]
rss_nogrpc = int(rss_nogrpc) / 1024
def grpc_result(name):
    return dict(kv.split("=", 1) for kv in open(f"{work}/{name}.grpc").read().split())
def rd(name, ext):
    return float(open(f"{work}/{name}.{ext}").read())
redis, rss_idle, rss_load = float(redis), int(rss_idle) / 1024, int(rss_load) / 1024
ready_med, ready_max = float(ready_med), float(ready_max)
rows = []
for name, label, count in (("c1", "/v1/ids?count=1", 1), ("c100", "/v1/ids?count=100", 100),
                           ("c1000", "/v1/ids?count=1000", 1000), ("w100", "count=100, wide layout", 100),
                           ("w1000", "count=1000, wide layout", 1000)):
    rps = rd(name, "rps")
    rows.append((label, rps, rps * count, rd(name, "p50"), rd(name, "p99"), int(rd(name, "err"))))
print()
print(f"{'load':<28} {'requests/s':>12} {'IDs/s':>14} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
for label, rps, ids, p50, p99, err in rows:
    print(f"{label:<28} {rps:>12,.0f} {ids:>14,.0f} {p50:>8.3f} {p99:>8.3f} {err:>7}")
if tls == "1":
    print(f"{'https count=1 (keep-alive)':<28} {rd('tls1', 'rps'):>12,.0f} {rd('tls1', 'rps'):>14,.0f} "
          f"{rd('tls1', 'p50'):>8.3f} {rd('tls1', 'p99'):>8.3f} {int(rd('tls1', 'err')):>7}")
print(f"{'redis INCR (redis-benchmark)':<28} {redis:>12,.0f}")
hfloor = os.path.exists(f"{work}/hfloor.rps")
if hfloor:
    print(f"{'http_floor (no work), count=1':<28} {rd('hfloor', 'rps'):>12,.0f} {'':>14} "
          f"{rd('hfloor', 'p50'):>8.3f} {rd('hfloor', 'p99'):>8.3f} {int(rd('hfloor', 'err')):>7}")
if grpc == "1":
    gu, gs, gr = grpc_result("g_unary"), grpc_result("g_stream"), grpc_result("g_range")
    print(f"{'gRPC Next(count=1), 50 calls':<28} {float(gu['rate']):>12,.0f} {float(gu['rate']):>14,.0f} "
          f"{int(gu['p50_us']) / 1000:>8.3f} {int(gu['p99_us']) / 1000:>8.3f} {gu['errors']:>7}")
    print(f"{'gRPC Stream, count=1 msgs':<28} {float(gs['rate']):>12,.0f} {float(gs['rate']):>14,.0f} "
          f"{'':>8} {'':>8} {gs['errors']:>7}")
    print(f"{'gRPC StreamRange, wide':<28} {'':>12} {float(gr['rate']):>14,.0f} {'':>8} {'':>8} {gr['errors']:>7}")
    fu, fs = grpc_result("f_unary"), grpc_result("f_stream")
    print(f"{'grpc_floor Next(count=1)':<28} {float(fu['rate']):>12,.0f} {float(fu['rate']):>14,.0f} "
          f"{int(fu['p50_us']) / 1000:>8.3f} {int(fu['p99_us']) / 1000:>8.3f} {fu['errors']:>7}")
    print(f"{'grpc_floor Stream, count=1':<28} {float(fs['rate']):>12,.0f} {float(fs['rate']):>14,.0f} "
          f"{'':>8} {'':>8} {fs['errors']:>7}")
    print(f"gRPC beside grpc_floor: unary {float(gu['rate']) / float(fu['rate']):.2f}x, "
          f"Stream {float(gs['rate']) / float(fs['rate']):.2f}x; grpc_floor idle RSS {int(rss_floor) / 1024:.1f} MiB")
if rss_nogrpc:
    print(f"idle RSS with --grpc-listen '': {rss_nogrpc:.1f} MiB")
print(f"idle RSS{' (gRPC on)' if grpc == '1' else ''} {rss_idle:.1f} MiB after start, {rss_load:.1f} MiB after the load; "
      f"ready after {ready_med:.1f} ms (median of 5; max {ready_max:.1f})")
print(f"default layout rate limit: {rate} IDs/s per node; wide layout: {wide}")
# The server's CPU per request: what is left to cut on the server's side (wrk -t1 is one CPU).
for name, label in ((("c1", "count=1"), ("w1000", "count=1000, wide")) + ((("hfloor", "http_floor"),) if hfloor else ())
                    + ((("tls1", "https count=1"),) if tls == "1" else ())):
    cpu_s = rd(name, "cpu") / float(tck)
    requests = rd(name, "rps") * float(secs)
    print(f"server CPU, {label}: {cpu_s / requests * 1e6:.2f} us a request, "
          f"{cpu_s / float(secs) * 100:.0f}% of one CPU")
if hfloor:
    print(f"count=1 beside http_floor: {rows[0][1] / rd('hfloor', 'rps'):.2f}x; http_floor beside redis INCR: "
          f"{rd('hfloor', 'rps') / redis:.2f}x (the most any server reaches against redis-benchmark here)")
if tls == "1":
    print(f"https count=1 beside http count=1: {rd('tls1', 'rps') / rows[0][1]:.2f}x requests/s, "
          f"p99 {rd('tls1', 'p99'):.3f} ms against {rows[0][4]:.3f} ms")
if os.path.exists(f"{work}/body.json"):
    bench = {b["name"]: b for b in json.load(open(f"{work}/body.json"))["benchmarks"]}
    issue = bench.get("BM_NextBatch1000/real_time", {}).get("items_per_second", 0)
    both = bench.get("BM_NextBatch1000_WriteBody/real_time", {}).get("items_per_second", 0)
    if issue and both:
        print(f"in process, wide layout, 1 thread: next_batch(1000) {issue / 1e6:.1f}M IDs/s, "
              f"with the JSON body written {both / 1e6:.1f}M IDs/s; HTTP count=1000 (wide) is "
              f"{rows[4][2] / both * 100:.0f}% of the latter")
print()
c1 = rows[0]
best1000 = max(rows[2][2], rows[4][2])
targets = [
    ("count=1 >= 2x redis INCR", f"{c1[1] / redis:.2f}x", c1[1] >= 2 * redis),
    ("count=1000 >= 10M IDs/s (default layout)", f"{rows[2][2] / 1e6:.2f}M", rows[2][2] >= 10e6),
    ("count=1000 >= 10M IDs/s (wide layout)", f"{rows[4][2] / 1e6:.2f}M", rows[4][2] >= 10e6),
    ("p99 <= 1 ms (count=1, 50 connections)", f"{c1[4]:.3f} ms", c1[4] <= 1.0),
    ("idle RSS <= 10 MB" + (" (gRPC on)" if grpc == "1" else ""), f"{rss_idle:.1f} MiB",
     rss_idle * 1.048576 <= 10),
    ("ready < 100 ms", f"{ready_med:.1f} ms", ready_med < 100),
]
if tls == "1":
    targets.append(("https count=1 >= 80% of http count=1", f"{rd('tls1', 'rps') / c1[1] * 100:.0f}%",
                    rd("tls1", "rps") >= 0.8 * c1[1]))
if rss_nogrpc:
    targets.append(("idle RSS <= 10 MB (gRPC off)", f"{rss_nogrpc:.1f} MiB", rss_nogrpc * 1.048576 <= 10))
if grpc == "1":
    targets += [
        ("gRPC Next(count=1) >= 50k RPC/s", f"{float(gu['rate']) / 1e3:.1f}k", float(gu["rate"]) >= 50e3),
        ("gRPC Next(count=1) p99 <= 2 ms", f"{int(gu['p99_us']) / 1000:.3f} ms", int(gu["p99_us"]) <= 2000),
        ("gRPC Stream count=1 >= 300k IDs/s", f"{float(gs['rate']) / 1e3:.1f}k", float(gs["rate"]) >= 300e3),
        ("gRPC StreamRange >= 40M IDs/s (wide)", f"{float(gr['rate']) / 1e6:.1f}M", float(gr["rate"]) >= 40e6),
        ("gRPC IDs checked (unique, increasing)", "yes" if all(r["ids_ok"] == "1" for r in (gu, gs, gr)) else "NO",
         all(r["ids_ok"] == "1" for r in (gu, gs, gr))),
    ]
print(f"{'target':<42} {'measured':>12}  result")
for name, got, ok in targets:
    print(f"{name:<42} {got:>12}  {'met' if ok else 'MISSED'}")
report_dir = os.environ.get("BENCH_REPORT_DIR")
if report_dir:  # the figures for bench/report.py (make bench)
    out = {"redis_incr_rps": redis, "rss_idle_mib": rss_idle, "rss_load_mib": rss_load,
           "rss_idle_nogrpc_mib": rss_nogrpc or None,
           "ready_ms": ready_med, "http": {label: {"rps": rps, "ids_per_second": ids, "p50_ms": p50,
                                                   "p99_ms": p99, "errors": err}
                                           for label, rps, ids, p50, p99, err in rows}}
    if hfloor:
        out["http_floor"] = {"rps": rd("hfloor", "rps"), "p99_ms": rd("hfloor", "p99")}
    if tls == "1":
        out["https_count1"] = {"rps": rd("tls1", "rps"), "p50_ms": rd("tls1", "p50"),
                               "p99_ms": rd("tls1", "p99"), "errors": int(rd("tls1", "err")),
                               "ratio_to_http": rd("tls1", "rps") / c1[1]}
    for name in ("c1", "w1000") + (("hfloor",) if hfloor else ()):
        out.setdefault("server_cpu_us_per_request", {})[name] = (
            rd(name, "cpu") / float(tck) / (rd(name, "rps") * float(secs)) * 1e6)
    if grpc == "1":
        out["grpc"] = {"unary": gu, "stream": gs, "range": gr, "floor_unary": fu, "floor_stream": fs,
                       "floor_rss_idle_mib": int(rss_floor) / 1024}
    with open(os.path.join(report_dir, "serve.json"), "w") as f:
        json.dump(out, f, indent=1)
if any(r[5] for r in rows) or (tls == "1" and rd("tls1", "err")):
    print("\nwarning: some responses were errors (non-2xx or socket errors): the figures above count them")
EOF
