#!/usr/bin/env bash
# `make test` after the packages: every preset built and tested, in this order:
#   release (optimised; every test, chaos, fleet and packaging included), debug (ASan+UBSan; all but
#   cli|chaos|fleet|web|package and the clients run by other languages' toolchains), tsan (the
#   concurrency test), fuzz (30 s of libFuzzer per target).
# Builds overlap the tests that mostly wait: the script tests (servers, chaos runs, the CLI, the
# browser) need only the `flurry` binary and two test tools, so they start as soon as those are
# built, while the rest of the release tree (unit-test binaries, benchmarks) and then the next
# presets compile at the lowest CPU priority (nice 19). Those tests wait on leases, timeouts and
# servers starting; a runnable test takes the CPU from the build at once, so the tests see the
# machine as before. The exit code is the first failure's; a build that failed is shown and stops
# the run. Each stage prints its start time (seconds since the start) for the run's record.
# Usage: tools/test-all.sh [jobs]   (default: the number of CPUs)
set -uo pipefail
cd "$(dirname "$0")/.."
JOBS=${1:-$(nproc)}
mkdir -p build
START=$SECONDS
stage() { echo "test-all: +$((SECONDS - START)) s: $*"; }

# background_build NAME COMMAND: COMMAND (a shell line of builds) at nice 19, its output in
# build/NAME.log; its PID in BUILD_PID.
background_build() {
  nice -n 19 bash -c "$2" >"build/$1.log" 2>&1 &
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
# wait_for_marker FILE NAME: waits until the background build NAME wrote FILE (the first part of
# its chain is done), or stops the run if that build failed before.
wait_for_marker() {
  while [[ ! -e $1 ]]; do
    if ! kill -0 "$BUILD_PID" 2>/dev/null; then finish_build "$2"; fi
    sleep 1
  done
}

failed=0
run_tests() {  # run_tests CTEST-ARGS...: runs ctest from the source directory; remembers a failure
  ctest "$@" || failed=$?
}

# The tests that run scripts against the real binary (labels server, chaos, cli, web, and
# toolchain: the Python, Go, TypeScript and Java clients' tests) need only these targets; the
# gtest binaries (the C++ client's too), benchmarks and packaging tests need the whole tree.
# Labels are matched whole (^...$): "cli" must not select "client".
SCRIPT_LABELS='^(server|chaos|cli|web|toolchain)$'
stage "release build (what the script tests need)"
cmake --preset release >/dev/null || exit
cmake --build --preset release -j "$JOBS" --target flurry flurry_http_client flurry_grpc_python \
  flurry_client_jar flurry_client_tests_jar || exit
cmake --preset debug >/dev/null || exit
rm -f build/.release-built
background_build release-debug-build \
  "cmake --build --preset release -j $JOBS && touch build/.release-built &&
   cmake --build --preset debug -j $JOBS"
stage "release script tests (the rest of release, then debug, build meanwhile)"
run_tests --preset release -j "$JOBS" -L "$SCRIPT_LABELS"
stage "waiting for the rest of the release build"
wait_for_marker build/.release-built release-debug-build
stage "release tests of the gtest binaries and the packages"
run_tests --preset release -j "$JOBS" -LE "$SCRIPT_LABELS"
stage "waiting for the debug build"
finish_build release-debug-build

cmake --preset tsan >/dev/null || exit
cmake --preset fuzz >/dev/null || exit
# Both later presets, one after the other, while the ASan tests run: only the targets their tests
# run (the fuzz tree's whole build would add the TLS module, the registries and the C++ client,
# about 550 s of CPU taken from the ASan tests, for nothing the fuzz targets link).
background_build tsan-fuzz-build \
  "cmake --build --preset tsan -j $JOBS --target concurrency_test &&
   cmake --build --preset fuzz -j $JOBS --target parsers_fuzz order_fuzz"
stage "debug (ASan+UBSan) tests (tsan and fuzz build meanwhile)"
run_tests --preset debug -j "$JOBS" -LE '^(cli|chaos|fleet|web|package|toolchain)$'
stage "waiting for the tsan and fuzz builds"
finish_build tsan-fuzz-build

stage "tsan test"
run_tests --preset tsan -j 1
# The fuzz targets are single-threaded: one a core.
stage "fuzz targets"
run_tests --preset fuzz -j "$JOBS"
stage "done (exit $failed)"
exit "$failed"
