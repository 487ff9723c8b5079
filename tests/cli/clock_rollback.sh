#!/usr/bin/env bash
# Runs one after the other never repeat an ID, even when the clock is set back between them
# (libfaketime). Small steps back are absorbed; large ones fail loudly under the wait policy,
# or switch clock generation under the clock policy.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

compgen -G '/usr/lib/*/faketime/libfaketimeMT.so.1' >/dev/null ||
  fail "libfaketime is not installed (Debian package faketime)"
# faked OFFSET COMMAND...: COMMAND with its wall clock moved by OFFSET ("-10s"), libfaketime
# preloaded directly. Not the `faketime` wrapper: it needs a named semaphore per PID, and one left
# in /dev/shm by an earlier run that was killed makes it refuse to start ("sem_open: File
# exists"). The MT variant serialises the clock reads of a threaded process.
faked() {
  local offset=$1
  shift
  # shellcheck disable=SC2016 # $LIB is for the dynamic loader to expand, not the shell
  LD_PRELOAD='/usr/$LIB/faketime/libfaketimeMT.so.1' FAKETIME="$offset" "$@"
}
# In sanitizer builds libfaketime is preloaded ahead of the ASan runtime; let ASan accept that.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
# Only the wall clock steps, as in a real step back (flurry next waits for the clock on the
# monotonic clock, whose timed waits libfaketime 0.9.10 hangs when it fakes that clock too).
export DONT_FAKE_MONOTONIC=1

# libfaketime's relative offsets must move the clocks the generator reads (CLOCK_REALTIME_COARSE).
real=$(date +%s%3N)
fake=$(faked '-10s' date +%s%3N)
((real - fake > 9000 && real - fake < 11000)) || fail "libfaketime at -10s: real $real, faked $fake"
# And the clock flurry reads (CLOCK_REALTIME_COARSE): an ID issued on a fresh state directory
# under faketime carries the faked time.
run_cmd 0 faked '-10s' "$FLURRY" next --state-dir "$WORK/probe"
probe=$(cat out)
real=$(date +%s%3N)
run 0 decode --json "$probe"
fake=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["unix_ms"])' out)
((real - fake > 9000 && real - fake < 11000)) ||
  fail "libfaketime does not move the clock flurry reads: real $real ms, ID time $fake ms"

# ids_check FILE COUNT [MIN]: FILE holds COUNT decimal IDs, strictly increasing, all above MIN.
ids_check() {
  check_py '
import sys
vals = [int(s) for s in open(sys.argv[1]).read().split()]
assert len(vals) == int(sys.argv[2]), (len(vals), sys.argv[2])
assert all(a < b for a, b in zip(vals, vals[1:])), "not strictly increasing"
if len(sys.argv) > 3:
    assert vals[0] > int(sys.argv[3]), ("not above the previous run", vals[0], sys.argv[3])
' "$@"
}

S=$WORK/state

# 1. A normal run.
run 0 next -n 5000 --state-dir "$S"
cp out run1
ids_check run1 5000

# 2. The clock 300 ms back (within max_lead): succeeds at once, every ID above run 1's.
run_cmd 0 faked '-0.3s' "$FLURRY" next -n 5000 --state-dir "$S"
cp out run2
ids_check run2 5000 "$(tail -n 1 run1)"

# 3. The clock 10 s back, default wait policy and max_wait (3 s): refuses at once, no IDs.
start=$(date +%s%3N)
run_cmd 1 faked '-10s' "$FLURRY" next -n 10 --state-dir "$S"
elapsed=$(($(date +%s%3N) - start))
check_error_output "next with the clock 10 s back"
if ! grep -qi 'clock' err || ! grep -qi 'behind' err; then
  fail "the message does not say the clock is behind: $(cat err)"
fi
((elapsed < 8000)) || fail "refusing took $elapsed ms"

# The same with --rollback fail.
run_cmd 1 faked '-10s' "$FLURRY" next -n 10 --rollback fail --state-dir "$S"
check_error_output "next --rollback fail with the clock 10 s back"

# 4. The clock 2 s back: within max_wait, so the wait policy waits and then succeeds.
run_cmd 0 faked '-2s' "$FLURRY" next -n 10 --state-dir "$S"
cp out run4
ids_check run4 10 "$(tail -n 1 run2)"

# 5. The failed runs did not disturb the state: a normal run continues above everything.
run 0 next -n 100 --state-dir "$S"
cp out run5
ids_check run5 100 "$(tail -n 1 run4)"
cat run1 run2 run4 run5 | sort | uniq -d >dups
[[ ! -s dups ]] || fail "duplicate IDs across runs: $(head dups)"

# 6. multiclock with --rollback clock: a 10 s step back switches clock generation instead.
M=$WORK/mstate
mc=(next --layout multiclock --rollback clock --state-dir "$M")
run 0 "${mc[@]}" -n 5000
cp out m1
ids_check m1 5000
run_cmd 0 faked '-10s' "$FLURRY" "${mc[@]}" -n 5000
cp out m2
ids_check m2 5000
run 0 "${mc[@]}" -n 5000
cp out m3
ids_check m3 5000
cat m1 m2 m3 | sort | uniq -d >dups
[[ ! -s dups ]] || fail "duplicate multiclock IDs across runs: $(head dups)"

# The step back ran under another clock generation, with the time field following the clock.
clock_of() {
  run 0 decode --layout multiclock --json "$1"
  python3 -c 'import json,sys; j = json.load(open(sys.argv[1])); print(j["clock"], j["unix_ms"])' out
}
read -r c1 t1 < <(clock_of "$(tail -n 1 m1)")
read -r c2 t2 < <(clock_of "$(head -n 1 m2)")
[[ $c1 != "$c2" ]] || fail "the -10s run kept clock generation $c1"
((t2 < t1 - 5000)) || fail "the -10s run's time field ($t2) is not behind the first run's ($t1)"

echo "ok"
