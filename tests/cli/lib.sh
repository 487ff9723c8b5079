# shellcheck shell=bash
# Shared helpers for the CLI tests. Sourced by each test script, whose first argument is the
# path of the flurry binary. Not a test itself.
#
# After sourcing: $FLURRY is the binary (absolute), $WORK a fresh directory (the current
# directory, removed on exit), and run/expect_error/fail/check_py are available.
set -euo pipefail

FLURRY=${1:?usage: $0 path/to/flurry}
[[ -x $FLURRY ]] || {
  echo "FAIL: not an executable: $FLURRY" >&2
  exit 1
}
FLURRY=$(realpath "$FLURRY")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
export LC_ALL=C
unset FAKETIME LD_PRELOAD || true
# The default data directory ($XDG_STATE_HOME/flurry) inside $WORK, never the machine's.
export XDG_STATE_HOME=$WORK/state
# Tests running at once are separate hosts to the node-ID host guard (host_guard.h).
export FLURRY_HOST_GUARD_SCOPE=$WORK
# And they keep their host-wide records (host_dir.h) in $WORK, never among the machine's.
export FLURRY_HOST_DIR=$WORK/host
mkdir -p "$FLURRY_HOST_DIR" && chmod 1777 "$FLURRY_HOST_DIR"  # as /var/tmp
# gRPC on a port of each server's choosing: tests running at once never race for 7610.
export FLURRY_GRPC_LISTEN=127.0.0.1:0

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# run CODE ARGS...: runs flurry ARGS, leaving stdout in $WORK/out and stderr in $WORK/err, and
# fails unless it exited with CODE.
run() {
  local expect=$1
  shift
  local code=0
  "$FLURRY" "$@" >"$WORK/out" 2>"$WORK/err" || code=$?
  if [[ $code != "$expect" ]]; then
    fail "flurry $* exited $code, expected $expect; stdout: $(head -c 500 "$WORK/out"); stderr: $(cat "$WORK/err")"
  fi
}

# run_cmd CODE COMMAND...: like run, for any command or function (e.g. faked -10s flurry ...).
run_cmd() {
  local expect=$1
  shift
  local code=0
  "$@" >"$WORK/out" 2>"$WORK/err" || code=$?
  if [[ $code != "$expect" ]]; then
    fail "$* exited $code, expected $expect; stdout: $(head -c 500 "$WORK/out"); stderr: $(cat "$WORK/err")"
  fi
}

# check_error_output DESCRIPTION: after a failed run, stdout must be empty and stderr exactly one
# non-empty line starting with "flurry: ".
check_error_output() {
  [[ ! -s $WORK/out ]] || fail "$1: printed on stdout: $(head -c 300 "$WORK/out")"
  local lines
  lines=$(wc -l <"$WORK/err")
  [[ $lines == 1 ]] || fail "$1: expected one line on stderr, got $lines: $(cat "$WORK/err")"
  grep -q '^flurry: .\+' "$WORK/err" || fail "$1: stderr does not start with 'flurry: ': $(cat "$WORK/err")"
}

# expect_error CODE ARGS...: flurry ARGS must exit CODE with a one-line message and no output.
expect_error() {
  local code=$1
  shift
  run "$code" "$@"
  check_error_output "flurry $*"
}

# check_py SCRIPT [ARGS...]: runs a Python check; the script sees ARGS in sys.argv[1:].
check_py() {
  local script=$1
  shift
  python3 -c "$script" "$@" || fail "python check failed (args: $*)"
}
