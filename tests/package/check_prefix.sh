#!/usr/bin/env bash
# `cmake --install --prefix P` stays inside P, for each component alone (what
# `--component server` and `--component dev` install, the package-only files included: the
# systemd units, the configuration, Debian's changelog and copyright) and for the default install;
# then the C++ client as a user builds against it: a program compiled with nothing but
# `pkg-config --cflags --libs flurry-client` (PKG_CONFIG_PATH into the prefix), run against the
# installed `flurry serve`.
# Each install first goes under a DESTDIR of its own, so that a destination outside the prefix
# lands in the DESTDIR (and fails the test), never in this machine's /etc or /lib.
# Usage: check_prefix.sh BUILD_DIR SOURCE_DIR
set -euo pipefail

build=$(realpath "$1") src=$(realpath "$2")
# The helpers of the server tests (WORK, cleanup by PID, start_server/stop_server), for the
# build tree's binary; the test switches to the installed one below.
# shellcheck source=../integration/lib.sh
source "$src/tests/integration/lib.sh" "$build/apps/flurry/flurry"

libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
[[ -n $libdir ]] || fail "no CMAKE_INSTALL_LIBDIR in $build/CMakeCache.txt"

# install_contained NAME [--component C]: installs into $WORK/prefix-NAME under
# DESTDIR=$WORK/dest-NAME and fails on any file outside the prefix.
install_contained() {
  local name=$1
  shift
  local dest=$WORK/dest-$name prefix=$WORK/prefix-$name outside
  DESTDIR=$dest cmake --install "$build" --prefix "$prefix" "$@" >"$WORK/install-$name.out" 2>&1 ||
    { cat "$WORK/install-$name.out" >&2; fail "cmake --install --prefix $prefix $*"; }
  [[ -d $dest$prefix ]] || fail "$name: nothing installed into the prefix"
  outside=$(cd "$dest" && find . \( -type f -o -type l \) ! -path ".$prefix/*" | sort)
  [[ -z $outside ]] || fail "$name: installed outside the prefix $prefix: ${outside//$'\n'/ }"
  echo "  $name: $(cd "$dest$prefix" && find . \( -type f -o -type l \) | wc -l) files, all inside the prefix"
}
# need NAME FILE...: each FILE (relative to the prefix) was installed.
need() {
  local name=$1 f
  shift
  for f in "$@"; do
    [[ -f $WORK/dest-$name$WORK/prefix-$name/$f ]] || fail "$name: not installed: $f"
  done
}

echo "== [${SECONDS}s] each component into a prefix of its own"
install_contained server --component server
need server bin/flurry lib/flurry/flurry_grpc.so lib/systemd/system/flurry.service \
  lib/systemd/system/flurry@.service etc/flurry/flurry.toml share/doc/flurry/copyright \
  share/doc/flurry/changelog.Debian.gz share/doc/flurry/README.md
install_contained dev --component dev
need dev include/flurry/client.h "$libdir/libflurry_client.a" "$libdir/pkgconfig/flurry-client.pc" \
  "$libdir/cmake/flurry/flurryConfig.cmake" share/doc/libflurry-dev/copyright \
  share/flurry/proto/flurry/v1/flurry.proto share/flurry/proto/stdgrpc/health/v1/health.proto \
  share/flurry/proto/stdgrpc/reflection/v1alpha/reflection.proto
install_contained all
need all bin/flurry "$libdir/pkgconfig/flurry.pc"

echo "== [${SECONDS}s] the C++ client with c++ \$(pkg-config --cflags --libs flurry-client)"
prefix=$WORK/installed
for component in server dev; do
  cmake --install "$build" --prefix "$prefix" --component "$component" >>"$WORK/install.out" 2>&1 ||
    { cat "$WORK/install.out" >&2; fail "cmake --install --component $component --prefix $prefix"; }
done
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
[[ $(pkg-config --variable=prefix flurry-client) == "$prefix" ]] ||
  fail "flurry-client.pc's prefix is $(pkg-config --variable=prefix flurry-client), not $prefix"
flags=$(pkg-config --cflags --libs flurry-client) || fail "pkg-config --cflags --libs flurry-client"
echo "  pkg-config: $flags"
# shellcheck disable=SC2086  # pkg-config's output is a list of words
c++ -std=c++20 -O1 -Wall -Wextra -Wpedantic -Werror "$src/tests/package/client_consumer.cc" \
  -o "$WORK/client_consumer" $flags 2>"$WORK/compile.log" ||
  { cat "$WORK/compile.log" >&2; fail "the client program does not build with pkg-config alone"; }

FLURRY=$prefix/bin/flurry  # start_server's binary (lib.sh): the installed one
export FLURRY
start_server installed "$WORK/data"
node=$(curl -s "http://127.0.0.1:$PORT/readyz" | sed -n 's/.*"node":\([0-9]*\).*/\1/p')
[[ -n $node ]] || fail "no node in /readyz"
out=$("$WORK/client_consumer" "http://127.0.0.1:$PORT") || fail "the client program exited $?: $out"
printf '  %s\n' "${out//$'\n'/$'\n'  }"
grep -qx 'ids: 1000 unique and increasing' <<<"$out" || fail "the client program got no IDs"
grep -qE "^decoded: id=[0-9]+ node=$node unix_ms=[0-9]+$" <<<"$out" ||
  fail "the client program did not decode an ID of node $node"
stop_server "$PID"
echo "check_prefix: every component stays inside its prefix; the client builds with pkg-config and runs"
