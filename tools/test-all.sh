#!/usr/bin/env bash
# `make test` after the packages: every preset built and tested, in this order:
#   release (optimised; every test, chaos included), debug (ASan+UBSan; all but cli|chaos|web|package),
#   tsan (the concurrency test), fuzz (30 s of libFuzzer per target).
# The next preset compiles while the tests of the one before run, at the lowest CPU priority
# (nice 19): those tests mostly wait (lease expiry, timeouts, servers starting), and the idle
# cores build the next preset instead of leaving it all for afterwards. A runnable test takes the
# CPU from the build at once, so the tests see the machine as before. The exit code is the first
# failure's; a build that failed is shown and stops the run.
# Usage: tools/test-all.sh [jobs]   (default: the number of CPUs)
set -uo pipefail
cd "$(dirname "$0")/.."
JOBS=${1:-$(nproc)}
mkdir -p build

# background_build NAME ARGS...: `cmake --build` ARGS at nice 19, its output in build/NAME.log;
# its PID in BUILD_PID.
background_build() {
  local name=$1
  shift
  nice -n 19 cmake --build "$@" >"build/$name.log" 2>&1 &
  BUILD_PID=$!
}
# finish_build NAME: waits for the background build; on failure shows its log and exits.
finish_build() {
  local rc=0
  wait "$BUILD_PID" || rc=$?
  if ((rc != 0)); then
    tail -n 60 "build/$1.log"
    echo "test-all: the $1 build failed (exit $rc); full log: build/$1.log" >&2
    exit "$rc"
  fi
  tail -n 1 "build/$1.log"
}

failed=0
run_tests() {  # run_tests CTEST-ARGS...: runs ctest from the source directory; remembers a failure
  ctest "$@" || failed=$?
}

cmake --preset release >/dev/null || exit
cmake --build --preset release -j "$JOBS" || exit
cmake --preset debug >/dev/null || exit
background_build debug-build --preset debug -j "$JOBS"
run_tests --preset release -j "$JOBS"
finish_build debug-build

cmake --preset tsan >/dev/null || exit
cmake --preset fuzz >/dev/null || exit
# Both later presets, one after the other, while the ASan tests run.
nice -n 19 bash -c "cmake --build --preset tsan -j $JOBS --target concurrency_test &&
                    cmake --build --preset fuzz -j $JOBS" >build/tsan-fuzz-build.log 2>&1 &
BUILD_PID=$!
run_tests --preset debug -j "$JOBS" -LE 'cli|chaos|web|package'
finish_build tsan-fuzz-build

run_tests --preset tsan -j 1
run_tests --preset fuzz
exit "$failed"
