#!/usr/bin/env bash
# Load benchmark of segment mode over HTTP beside the two usual ways of handing out plain
# increasing numbers, all measured in the same run with the same load (50 connections, one
# client thread):
#   flurry  GET /v1/segments/{tag}/ids?count=1 and /range?size=1000 (wrk), the tag's counter in a
#           PostgreSQL started here;
#   pgbench SELECT nextval('...') on that same PostgreSQL (-c 50 -j 1, prepared statements), one
#           value per query and 1000 per query (FROM generate_series(1, 1000));
#   redis-benchmark INCR and INCRBY ... 1000 on a redis-server started here (-c 50, no pipelining).
# Builds nothing. See bench/README.md, section "Segment mode over HTTP".
#
# Usage: bench/segment_serve_bench.sh path/to/flurry [seconds per run, default 10]
# Environment: BENCH_REPORT_DIR, a directory to write the figures to as segment_serve.json.
# Runs as root (PostgreSQL then runs as the postgres user) or as a user that may run initdb.
set -euo pipefail

FLURRY=${1:?usage: $0 path/to/flurry [seconds]}
SECS=${2:-10}
[[ -x $FLURRY ]] || {
  echo "segment_serve_bench: not an executable: $FLURRY" >&2
  exit 1
}
FLURRY=$(realpath "$FLURRY")
# shellcheck source=bench/load_lib.sh
source "$(dirname "$0")/load_lib.sh"
PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
require_tools segment_serve_bench "wrk, redis-server, redis-tools, postgresql, python3, curl" wrk redis-server redis-benchmark redis-cli pgbench psql python3 curl "$PGBIN/initdb" "$PGBIN/pg_ctl"
plain_environment
# gRPC on a port of each server's choosing (several servers run at once).
export FLURRY_GRPC_LISTEN=127.0.0.1:0

WORK=$(mktemp -d)
chmod 755 "$WORK"
PIDS=()
as_pg() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}
cleanup() {
  stop_pids
  [[ -f $WORK/pg/postmaster.pid ]] && as_pg "$PGBIN/pg_ctl" -D "$WORK/pg" -m immediate stop >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM



# redis_run NAME COMMAND...: redis-benchmark -c 50, 1,000,000 requests; requests/s into $WORK/NAME.rps.
redis_run() {
  local name=$1
  shift
  redis-benchmark -p "$RPORT" -c 50 -n 1000000 -q "$@" 2>&1 | tr '\r' '\n' | grep -a 'requests per second' |
    tail -n 1 | sed -n 's/^[^:]*: \([0-9.]*\) requests per second.*/\1/p' >"$WORK/$name.rps"
  [[ -s $WORK/$name.rps ]] || {
    echo "segment_serve_bench: cannot parse redis-benchmark $*" >&2
    exit 1
  }
}

echo "segment_serve_bench: $(nproc) CPUs; wrk -t1 -c50 -d${SECS}s; pgbench -c50 -j1 -T${SECS} -M prepared;" \
  "redis-benchmark -c50 -n1000000"

# 1. PostgreSQL (loopback, a temporary data directory, fsync as configured by default).
PGPORT=$(free_port)
mkdir "$WORK/pg"
chown postgres: "$WORK/pg" 2>/dev/null || true
as_pg "$PGBIN/initdb" -D "$WORK/pg" -U postgres -A trust >/dev/null
as_pg "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pg/log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $PGPORT -c unix_socket_directories='' -c max_connections=200" start >/dev/null
PGURL="postgresql://postgres@127.0.0.1:$PGPORT/postgres"
psql -q "$PGURL" -c "CREATE SEQUENCE bench_seq CACHE 1" >/dev/null

# 2. redis-server (no persistence: its best case).
RPORT=$(free_port)
redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --dir "$WORK" \
  --logfile "$WORK/redis.log" &
PIDS+=($!)
for ((i = 0; i < 500; i++)); do
  [[ $(redis-cli -p "$RPORT" ping 2>/dev/null || true) == PONG ]] && break
  sleep 0.01
done

# 3. flurry serve with its segment counters in that PostgreSQL.
FPORT=$(free_port)
(umask 077 && echo "bench-token-5b1e9c3f7a2d4e6f8091a2b3" >"$WORK/token")
"$FLURRY" serve --listen "127.0.0.1:$FPORT" --data-dir "$WORK/data" --segment-stores "$PGURL" \
  --admin-token-file "$WORK/token" >"$WORK/flurry.log" 2>&1 &
PIDS+=($!)
BASE=http://127.0.0.1:$FPORT
for ((i = 0; i < 1500; i++)); do
  curl -sf "$BASE/readyz" >/dev/null 2>&1 && break
  sleep 0.02
done
for tag in single ranges; do
  curl -sf -X POST -H 'Authorization: Bearer bench-token-5b1e9c3f7a2d4e6f8091a2b3' -H 'Content-Type: application/json' \
    --data "{\"tag\":\"$tag\",\"start\":1,\"step\":1000}" "$BASE/v1/segments" >/dev/null || {
    echo "segment_serve_bench: cannot create tag $tag:" >&2
    tail -n 20 "$WORK/flurry.log" >&2
    exit 1
  }
done

echo "warm-up (2 s each)"
wrk -t1 -c50 -d2s "$BASE/v1/segments/single/ids?count=1" >/dev/null
wrk -t1 -c50 -d2s "$BASE/v1/segments/ranges/range?size=1000" >/dev/null
echo "wrk /v1/segments/single/ids?count=1"
wrk_run ids "$BASE/v1/segments/single/ids?count=1"
# pg_run NAME SQL: pgbench of one statement at 50 clients; its queries/s in $WORK/NAME.rps.
pg_run() {
  echo "$2" >"$WORK/$1.sql"
  pgbench -n -M prepared -c 50 -j 1 -T "$SECS" -f "$WORK/$1.sql" "$PGURL" >"$WORK/$1.out" 2>&1
  sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$WORK/$1.out" | head -n 1 >"$WORK/$1.rps"
  [[ -s $WORK/$1.rps ]] || {
    cat "$WORK/$1.out" >&2
    exit 1
  }
}
echo "pgbench nextval"
pg_run pg "SELECT nextval('bench_seq');"
echo "pgbench nextval, 1000 per query"
pg_run pg1000 "SELECT nextval('bench_seq') FROM generate_series(1, 1000);"
echo "wrk /v1/segments/ranges/range?size=1000"
wrk_run range "$BASE/v1/segments/ranges/range?size=1000"
echo "redis-benchmark INCR, INCRBY 1000"
redis_run incr INCR bench_counter
redis_run incrby INCRBY bench_counter 1000
curl -sf "$BASE/v1/segments/single" >"$WORK/single.json"
curl -sf "$BASE/v1/segments/ranges" >"$WORK/ranges.json"

python3 - "$WORK" <<'PY'
import json, os, sys
work = sys.argv[1]
def rd(name, ext="rps"):
    return float(open(f"{work}/{name}.{ext}").read())
ids, rng = rd("ids"), rd("range")
pg, pg1000, incr, incrby = rd("pg"), rd("pg1000"), rd("incr"), rd("incrby")
print()
print(f"{'load':<40} {'requests/s':>12} {'IDs/s':>14} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
for name, label, per in (("ids", "flurry /v1/segments/T/ids?count=1", 1), ("range", "flurry /v1/segments/T/range?size=1000", 1000)):
    r = rd(name)
    print(f"{label:<40} {r:>12,.0f} {r * per:>14,.0f} {rd(name, 'p50'):>8.3f} {rd(name, 'p99'):>8.3f} {int(rd(name, 'err')):>7}")
print(f"{'pgbench SELECT nextval (same PostgreSQL)':<40} {pg:>12,.0f} {pg:>14,.0f}")
print(f"{'pgbench nextval x1000 per query':<40} {pg1000:>12,.0f} {pg1000 * 1000:>14,.0f}")
print(f"{'redis-benchmark INCR':<40} {incr:>12,.0f} {incr:>14,.0f}")
print(f"{'redis-benchmark INCRBY 1000':<40} {incrby:>12,.0f} {incrby * 1000:>14,.0f}")
for tag in ("single", "ranges"):
    s = json.load(open(f"{work}/{tag}.json"))
    print(f"tag {tag}: step now {s['step']}, ranges fetched {s['ranges_fetched']}, waits {s['waits']}, "
          f"unavailable {s['unavailable']}, store errors {s['store_errors']}")
print()
targets = [
    ("ids?count=1 >= 1.5x pgbench nextval", f"{ids / pg:.2f}x", ids >= 1.5 * pg),
    ("range?size=1000 >= redis INCRBY (requests/s)", f"{rng / incrby:.2f}x", rng >= incrby),
]
print(f"{'target':<46} {'measured':>10}  result")
for name, got, ok in targets:
    print(f"{name:<46} {got:>10}  {'met' if ok else 'MISSED'}")
report_dir = os.environ.get("BENCH_REPORT_DIR")
if report_dir:  # the figures for bench/report.py (make bench)
    out = {"pg_nextval_qps": pg, "pg_nextval1000_qps": pg1000, "redis_incr_rps": incr,
           "redis_incrby1000_rps": incrby,
           "segment": {name: {"rps": rd(name), "p50_ms": rd(name, "p50"), "p99_ms": rd(name, "p99"),
                              "errors": int(rd(name, "err"))} for name in ("ids", "range")}}
    with open(os.path.join(report_dir, "segment_serve.json"), "w") as f:
        json.dump(out, f, indent=1)
if rd("ids", "err") or rd("range", "err"):
    print("\nwarning: some responses were errors (non-2xx or socket errors): the figures above count them")
PY
