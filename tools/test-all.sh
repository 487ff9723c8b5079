#!/usr/bin/env bash
# `make test` after the packages: every preset built and tested, in this order:
#   release (optimised; every test, chaos, fleet and packaging included), debug (ASan+UBSan; all but
#   cli|chaos|fleet|web|package|static and the clients run by other languages' toolchains), tsan
#   (the concurrency test), fuzz (30 s of libFuzzer per target).
# Builds overlap the tests that mostly wait: the script tests (servers, chaos runs, the CLI, the
# browser) need only the `flurry` binary and two test tools, so they start as soon as those are
# built, while everything else compiles in one chain at the lowest CPU priority (nice 19): the rest
# of the release tree, the ASan tree's binary and tools, the rest of the ASan tree, then TSan's
# test and the two fuzz targets. Each stage starts once the part of that chain it needs is done
# (a marker file), so the ASan script tests run while the ASan unit-test binaries still compile.
# Those tests wait on leases, timeouts and servers starting; a runnable test takes the CPU from the
# build at once, so the tests see the machine as before. For the same reason ctest runs twice as
# many tests as there are CPUs at once (TEST_JOBS): the tests that load the machine or time
# themselves against it are RUN_SERIAL and still run alone. The exit code is the first failure's;
# a build that failed is shown and stops the run. Each stage prints its start time (seconds since
# the start) for the run's record.
# Usage: tools/test-all.sh [jobs]   (default: the number of CPUs)
set -uo pipefail
cd "$(dirname "$0")/.."
JOBS=${1:-$(nproc)}
TEST_JOBS=$((JOBS * 2))
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
# wait_for_marker FILE NAME: waits until the background build NAME wrote FILE (a part of its
# chain is done), or stops the run if that build failed before.
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
SCRIPT_TARGETS="flurry flurry_http_client flurry_grpc_python"
# What the ASan tree leaves out (the debug test preset's exclusion, CMakePresets.json): the CLI
# scripts, the chaos and fleet load runs and the browser test (release tree only), the packages
# (the installed tree), the other languages' clients (no code a sanitizer sees) and the static
# checks (the source tree only). One -LE per ctest call: ctest excludes a test only if it matches
# every -LE given (a preset's exclusion counts as one; that let fleet_etcd_64 run under ASan), so
# the debug tests are selected from the build directory, not through the preset.
DEBUG_EXCLUDED='cli|chaos|fleet|web|package|toolchain|static'
debug_tests() {  # debug_tests CTEST-ARGS...: ctest in the ASan tree, as the debug test preset
  run_tests --test-dir build/debug --output-on-failure --no-tests=error -j "$TEST_JOBS" "$@"
}
M=build/.test-all  # the background chain's markers
stage "release build (what the script tests need)"
cmake --preset release >/dev/null || exit
cmake --build --preset release -j "$JOBS" --target $SCRIPT_TARGETS flurry_client_jar \
  flurry_client_tests_jar || exit
cmake --preset debug >/dev/null || exit
cmake --preset tsan >/dev/null || exit
cmake --preset fuzz >/dev/null || exit
rm -rf "$M" && mkdir -p "$M"
# TSan and fuzz: only the targets their tests run (the fuzz tree's whole build would add the TLS
# module, the registries and the C++ client, about 550 s of CPU, for nothing the fuzz targets link).
background_build background-build \
  "cmake --build --preset release -j $JOBS && touch $M/release &&
   cmake --build --preset debug -j $JOBS --target $SCRIPT_TARGETS && touch $M/debug-script &&
   cmake --build --preset debug -j $JOBS && touch $M/debug &&
   cmake --build --preset tsan -j $JOBS --target concurrency_test &&
   cmake --build --preset fuzz -j $JOBS --target parsers_fuzz order_fuzz"
stage "release script tests (the rest of the build meanwhile)"
run_tests --preset release -j "$TEST_JOBS" -L "$SCRIPT_LABELS"
stage "waiting for the rest of the release build"
wait_for_marker "$M/release" background-build
stage "release tests of the gtest binaries and the packages"
run_tests --preset release -j "$TEST_JOBS" -LE "$SCRIPT_LABELS"
stage "waiting for the debug (ASan+UBSan) binary"
wait_for_marker "$M/debug-script" background-build
stage "debug (ASan+UBSan) script tests (the rest of the debug tree builds meanwhile)"
debug_tests -L '^server$' -LE "^($DEBUG_EXCLUDED)\$"
stage "waiting for the rest of the debug build"
wait_for_marker "$M/debug" background-build
stage "debug (ASan+UBSan) tests of the gtest binaries (tsan and fuzz build meanwhile)"
debug_tests -LE "^(server|$DEBUG_EXCLUDED)\$"
stage "waiting for the tsan and fuzz builds"
finish_build background-build

stage "tsan test"
run_tests --preset tsan -j 1
# The fuzz targets are single-threaded: one a core.
stage "fuzz targets"
run_tests --preset fuzz -j "$JOBS"
stage "done (exit $failed)"
exit "$failed"
