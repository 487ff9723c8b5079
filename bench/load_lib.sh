# Shared by the load scripts of bench/ (sourced, not run): stopping the processes started, a free
# loopback port and one wrk run parsed into files. The caller sets WORK (a scratch directory),
# SECS (seconds per run) and PIDS (the processes it started).

# require_tools SCRIPT PACKAGES TOOL...: exits naming the first missing tool and the Debian
# packages that bring the tools (PACKAGES, one text).
require_tools() {
  local script=$1 packages=$2 tool
  shift 2
  for tool in "$@"; do
    command -v "$tool" >/dev/null || {
      echo "$script: $tool is missing (Debian packages: $packages)" >&2
      exit 1
    }
  done
}

# plain_environment: the C locale, no libfaketime and none of the caller's FLURRY_* settings, so
# that every server a script starts runs on the options it is given and nothing else.
plain_environment() {
  export LC_ALL=C
  unset FAKETIME LD_PRELOAD || true
  while read -r v; do unset "$v"; done < <(env | sed -n 's/^\(FLURRY_[A-Za-z0-9_]*\)=.*/\1/p')
}

# stop_pids: SIGTERM to every PID in the array PIDS, up to 5 s for each to exit, then SIGKILL.
stop_pids() {
  local pid i
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    for ((i = 0; i < 250; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.02
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
}

free_port() {
  python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'
}

# wrk_run NAME URL: wrk -t1 -c50 -d${SECS}s --latency; leaves rps, p50, p99 (ms) and errors
# (non-2xx responses plus socket errors) in $WORK/NAME.{rps,p50,p99,err}.
wrk_run() {
  local name=$1 url=$2
  wrk -t1 -c50 -d"${SECS}s" --latency "$url" >"$WORK/$name.wrk" 2>&1 || {
    cat "$WORK/$name.wrk" >&2
    exit 1
  }
  python3 - "$WORK/$name.wrk" "$WORK/$name" <<'PY'
import re, sys
text, out = open(sys.argv[1]).read(), sys.argv[2]
def ms(v, unit):
    return float(v) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[unit]
rps = re.search(r"Requests/sec:\s*([\d.]+)", text)
lat = dict((p, ms(v, u)) for p, v, u in re.findall(r"^\s*(50|99)(?:\.0+)?%\s+([\d.]+)(us|ms|s|m)\s*$", text, re.M))
non2xx = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", text)
sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
if not rps or "50" not in lat or "99" not in lat:
    sys.exit("cannot parse wrk output:\n" + text)
errors = (int(non2xx.group(1)) if non2xx else 0) + (sum(map(int, sock.groups())) if sock else 0)
for ext, v in (("rps", rps.group(1)), ("p50", lat["50"]), ("p99", lat["99"]), ("err", errors)):
    open(f"{out}.{ext}", "w").write(f"{v}\n")
PY
}
