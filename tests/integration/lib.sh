# shellcheck shell=bash
# Shared helpers for the bash server tests. Sourced by each test script, whose arguments are the
# flurry binary and (optionally) the C++ HTTP client. Not a test itself.
#
# After sourcing: $FLURRY and $CLIENT (absolute), $WORK a fresh directory (the current directory,
# removed on exit), and fail/check_py/start_server/stop_server/http_get/client_get are available.
# Every server started with start_server is killed by PID on exit, whatever happens.
set -euo pipefail

FLURRY=${1:?usage: $0 path/to/flurry [path/to/flurry_http_client]}
CLIENT=${2:-}
[[ -x $FLURRY ]] || {
  echo "FAIL: not an executable: $FLURRY" >&2
  exit 1
}
FLURRY=$(realpath "$FLURRY")
[[ -z $CLIENT ]] || CLIENT=$(realpath "$CLIENT")
WORK=$(mktemp -d)
SERVER_PIDS=()
declare -A SERVER_LOGS=()  # PID -> its log file
cleanup() {
  local pid
  for pid in "${SERVER_PIDS[@]}"; do
    kill -KILL "$pid" 2>/dev/null || true
  done
  for pid in "${SERVER_PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
cd "$WORK"
export LC_ALL=C
unset FAKETIME LD_PRELOAD || true
# The default data directory ($XDG_STATE_HOME/flurry) inside $WORK, never the machine's.
export XDG_STATE_HOME=$WORK/state
# Configuration must come only from what each test sets.
while read -r v; do unset "$v"; done < <(env | sed -n 's/^\(FLURRY_[A-Za-z0-9_]*\)=.*/\1/p')
# Tests running at once are separate hosts to the node-ID host guard (host_guard.h).
export FLURRY_HOST_GUARD_SCOPE=$WORK
# And they keep their host-wide records (host_dir.h) in $WORK, never among the machine's.
export FLURRY_HOST_DIR=$WORK/host
mkdir -p "$FLURRY_HOST_DIR" && chmod 1777 "$FLURRY_HOST_DIR"  # as /var/tmp
# gRPC on a port of each server's choosing: tests running at once never race for 7610.
export FLURRY_GRPC_LISTEN=127.0.0.1:0

fail() {
  echo "FAIL: $*" >&2
  local f
  for f in "$WORK"/*.log; do
    [[ -e $f ]] || continue
    echo "--- $f (last 30 lines) ---" >&2
    tail -n 30 "$f" >&2
  done
  exit 1
}

# check_py SCRIPT [ARGS...]: runs a Python check; the script sees ARGS in sys.argv[1:].
check_py() {
  local script=$1
  shift
  python3 -c "$script" "$@" || fail "python check failed (args: $*)"
}

# Servers get SIGKILL if this script dies outright (SIGKILL runs no trap).
PDEATH=()
if setpriv --pdeathsig KILL true 2>/dev/null; then
  PDEATH=(setpriv --pdeathsig KILL --)
fi

free_port() {
  python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'
}

# start_server NAME DATA_DIR [serve options...]: starts `flurry serve` on 127.0.0.1 and a free
# port (retrying when another process took the port first), waits for /readyz 200. Sets PORT and
# PID; the log is $WORK/NAME.log.
start_server() {
  local name=$1 dir=$2
  shift 2
  local attempt
  for attempt in 1 2 3 4 5; do
    PORT=$(free_port)
    "${PDEATH[@]}" "$FLURRY" serve --listen "127.0.0.1:$PORT" --data-dir "$dir" "$@" >>"$WORK/$name.log" 2>&1 &
    PID=$!
    SERVER_PIDS+=("$PID")
    SERVER_LOGS[$PID]="$WORK/$name.log"
    if wait_ready "$PORT" "$PID" 15; then
      return 0
    fi
    if ! kill -0 "$PID" 2>/dev/null && grep -qi 'in use' "$WORK/$name.log" && ((attempt < 5)); then
      continue
    fi
    fail "$name did not become ready on port $PORT"
  done
}

# wait_ready PORT PID SECONDS: polls /readyz until 200; false if the process exits or time is up.
wait_ready() {
  local port=$1 pid=$2 secs=$3 i
  for ((i = 0; i < secs * 50; i++)); do
    kill -0 "$pid" 2>/dev/null || return 1
    if [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/readyz" || true) == 200 ]]; then
      return 0
    fi
    sleep 0.02
  done
  return 1
}

# stop_server PID: SIGTERM, and the exit code must be 0 within 10 s.
stop_server() {
  local pid=$1 i
  kill -TERM "$pid"
  for ((i = 0; i < 500; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.02
  done
  kill -0 "$pid" 2>/dev/null && fail "server $pid still running 10 s after SIGTERM"
  local code=0
  wait "$pid" || code=$?
  # LeakSanitizer's own tracer crashing at exit after a clean stop (harness.py's
  # lsan_tracer_crashed says when): a sanitizer runtime fault, not flurry's.
  if [[ $code != 0 && -n ${SERVER_LOGS[$pid]:-} ]] &&
    python3 -c 'import sys; sys.dont_write_bytecode = True; sys.path.insert(0, sys.argv[1]); import harness; sys.exit(0 if harness.lsan_tracer_crashed(open(sys.argv[2], errors="replace").read()) else 1)' \
      "$(dirname "${BASH_SOURCE[0]}")" "${SERVER_LOGS[$pid]}"; then
    echo "server $pid: exit code $code from LeakSanitizer's tracer crashing after a clean stop: taken as 0" >&2
    code=0
  fi
  [[ $code == 0 ]] || fail "server $pid exited $code after SIGTERM"
}

# http_get PATH [curl options...]: curl on $PORT; body in $WORK/body, headers in $WORK/headers,
# status in $STATUS, content type in $CTYPE.
http_get() {
  local path=$1
  shift
  local out
  out=$(curl -sS --max-time 30 -D "$WORK/headers" -o "$WORK/body" -w '%{http_code} %{content_type}' "$@" \
    "http://127.0.0.1:$PORT$path") || fail "curl $path failed"
  STATUS=${out%% *}
  # shellcheck disable=SC2034 # for the test scripts
  CTYPE=${out#* }
}

# expect_status CODE PATH [curl options...]: http_get, and fail unless the status is CODE.
expect_status() {
  local code=$1 path=$2
  shift 2
  http_get "$path" "$@"
  [[ $STATUS == "$code" ]] || fail "curl $* $path: status $STATUS, expected $code; body: $(head -c 300 "$WORK/body")"
}

# client_get PATH...: the C++ client on one keep-alive connection; one JSON line per response
# ({"path","status","content_type","retry_after","keep_alive","body"}) in $WORK/client.
client_get() {
  [[ -n $CLIENT ]] || fail "the C++ HTTP client was not given"
  "$CLIENT" 127.0.0.1 "$PORT" "$@" >"$WORK/client" 2>"$WORK/client.err" ||
    fail "flurry_http_client $*: $(cat "$WORK/client.err")"
}
