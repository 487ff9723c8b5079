#!/usr/bin/env bash
# The installed tree, as its users see it: `cmake --install` of a build tree (no rebuild) into a
# temporary prefix, then
#   - the files of both components where they belong (binary, modules, man pages, docs, headers,
#     static libraries, CMake package, pkg-config files), and nothing of src/ or the server's
#     headers;
#   - every installed header compiles on its own against the install alone;
#   - the consumer program (consumer.cc) built with find_package(flurry) (CMake, Ninja) and with
#     plain c++ and pkg-config, both run, and their output checked.
# Usage: check_install.sh BUILD_DIR SOURCE_DIR MAN_PAGES(0|1)
set -euo pipefail

build=$(realpath "$1") src=$(realpath "$2") man_pages=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/flurry-package.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
need_file() {
  for f in "$@"; do [[ -f $prefix/$f ]] || fail "not installed: $f"; done
}

echo "== [${SECONDS}s] cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" ||
  { cat "$work/install.log" >&2; echo "FAIL: cmake --install" >&2; exit 1; }

# Install dirs as GNUInstallDirs chose them for this build tree (lib, or lib/<multiarch> for /usr).
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:[A-Z]*=//p' "$build/CMakeCache.txt")
[[ -n $libdir && -n $version ]] || { echo "FAIL: no CMAKE_INSTALL_LIBDIR/version in the cache" >&2; exit 1; }

echo "== [${SECONDS}s] the installed files"
# server
need_file bin/flurry lib/flurry/flurry_tls.so lib/flurry/flurry_grpc.so lib/flurry/flurry_etcd.so \
  share/doc/flurry/README.md share/doc/flurry/architecture.md share/doc/flurry/examples/flurry.toml
[[ -x $prefix/bin/flurry ]] || fail "bin/flurry is not executable"
"$prefix/bin/flurry" --version | grep -qx "flurry $version" || fail "bin/flurry --version is not 'flurry $version'"
# The installed binary finds its TLS module in ../lib/flurry (no FLURRY_MODULE_DIR): an https://
# request gets as far as connecting (to a port nothing listens on) instead of missing the module.
tls_out=$(env -u FLURRY_MODULE_DIR "$prefix/bin/flurry" segment list --server https://127.0.0.1:9 2>&1) &&
  fail "flurry segment list --server https://127.0.0.1:9 succeeded"
if ! grep -q 'connecting' <<<"$tls_out" || grep -q 'flurry_tls.so' <<<"$tls_out"; then
  fail "bin/flurry did not load lib/flurry/flurry_tls.so: $tls_out"
fi
if [[ $man_pages == 1 ]]; then
  # One page per verb `flurry --help` lists, and flurry.1.
  verbs=$("$prefix/bin/flurry" --help | sed -n '/^Subcommands:/,/^$/p' | awk 'NF && !/:$/ {print $1}')
  [[ -n $verbs ]] || fail "flurry --help lists no verbs"
  for page in flurry ${verbs//$'\n'/ }; do
    [[ $page == flurry ]] || page=flurry-$page
    f=share/man/man1/$page.1.gz
    need_file "$f"
    [[ -f $prefix/$f ]] || continue
    gzip -t "$prefix/$f" || fail "$f is not gzip"
    zcat "$prefix/$f" | grep -q "^\.TH ${page^^} \"1\"" || fail "$f has no .TH ${page^^} \"1\" header"
  done
fi
# dev
for lib in core order registry segment db tls_loader; do need_file "$libdir/libflurry_$lib.a"; done
need_file "$libdir/cmake/flurry/flurryConfig.cmake" "$libdir/cmake/flurry/flurryConfigVersion.cmake" \
  "$libdir/cmake/flurry/flurryTargets.cmake" "$libdir/pkgconfig/flurry.pc" \
  "$libdir/pkgconfig/flurry-order.pc" "$libdir/pkgconfig/flurry-client.pc" "$libdir/libflurry_client.a"
for h in "$src"/include/flurry/*.h; do need_file "include/flurry/$(basename "$h")"; done
# Not installed: the headers the libraries keep for the layers above them (src/<lib>/include/:
# core's shared helpers, db, tls, service, ops, http, app, grpc_api ...), nor the folders the
# public API had for them before.
for d in include/flurry/server include/flurry/ops include/flurry/grpc include/core include/db \
  include/tls include/service include/ops include/http include/app include/grpc_api include/order \
  include/registry include/segment; do
  [[ ! -e $prefix/$d ]] || fail "installed, but must not be: $d"
done
if grep -rIl "$src\|$build" "$prefix/$libdir/cmake" "$prefix/$libdir/pkgconfig"; then
  fail "the CMake package or the .pc files name the source or build tree (not relocatable)"
fi

echo "== [${SECONDS}s] every installed header compiles on its own"
# -I the install only: a header that includes src/'s internals or an uninstalled header fails.
# shellcheck disable=SC2016  # $1 and $2 are the inner shell's
(cd "$prefix/include/flurry" && printf '%s\0' *.h) | xargs -0 -P 2 -n 1 sh -c \
  'echo "#include <flurry/$2>" | c++ -std=c++20 -Wall -Wextra -Wpedantic -Werror -fsyntax-only \
     -I"$1/include" -x c++ - || { echo "FAIL: <flurry/$2> does not compile alone" >&2; exit 1; }' \
  sh "$prefix" || fail "installed headers that do not compile alone (above)"

run_consumer() {  # NAME BINARY: runs it on its own state directory, checks its report
  local name=$1 binary=$2 out
  mkdir -p "$work/state-$name"
  out=$(cd "$work" && env -u FLURRY_MODULE_DIR "$binary" "$work/state-$name") ||
    { fail "$name consumer exited with $?: $out"; return; }
  printf '  %s: %s\n' "$name" "${out//$'\n'/$'\n'  $name: }"
  grep -qx 'ids: 10000 unique and increasing' <<<"$out" || fail "$name consumer: no unique IDs"
  grep -qE '^decoded: node=0 time=[0-9]+ node=0 seq=[0-9]+$' <<<"$out" ||
    fail "$name consumer: no decoded ID"
  grep -qx 'segment: orders \[1000, 1100)' <<<"$out" || fail "$name consumer: no segment range"
  grep -qx 'order: 21 characters, decodes back' <<<"$out" || fail "$name consumer: no order number"
}

echo "== [${SECONDS}s] the consumer with find_package(flurry CONFIG REQUIRED)"
if cmake -S "$src/tests/package" -B "$work/cmake-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake-configure.log" 2>&1 &&
  cmake --build "$work/cmake-build" -j 2 >"$work/cmake-build.log" 2>&1; then
  found=$(sed -n 's/^flurry_DIR:PATH=//p' "$work/cmake-build/CMakeCache.txt")
  [[ $found == "$prefix/$libdir/cmake/flurry" ]] || fail "find_package found flurry in '$found'"
  run_consumer cmake "$work/cmake-build/flurry_consumer"
else
  cat "$work/cmake-configure.log" "$work/cmake-build.log" >&2 2>/dev/null || true
  fail "the consumer does not build with find_package(flurry)"
fi

echo "== [${SECONDS}s] the consumer with c++ \$(pkg-config --cflags --libs flurry-order)"
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
[[ $(pkg-config --modversion flurry) == "$version" ]] || fail "pkg-config --modversion flurry"
[[ $(pkg-config --variable=prefix flurry) == "$prefix" ]] || fail "flurry.pc's prefix is not $prefix"
mkdir -p "$work/pc-build"
# shellcheck disable=SC2046  # pkg-config's output is a list of words
if c++ -std=c++20 -O1 -Wall -Wextra -Wpedantic -Werror "$src/tests/package/consumer.cc" \
  -o "$work/pc-build/flurry_consumer" $(pkg-config --cflags --libs flurry-order); then
  run_consumer pkg-config "$work/pc-build/flurry_consumer"
else
  fail "the consumer does not build with pkg-config"
fi

echo "== [${SECONDS}s] every installed static library links into a shared object (position-independent)"
# --whole-archive takes every object in, so one compiled without -fPIC fails the link
# ("relocation ... can not be used when making a shared object").
if ! c++ -shared -o "$work/libflurry_whole.so" -Wl,--whole-archive "$prefix/$libdir"/libflurry_*.a \
  -Wl,--no-whole-archive -lsqlite3 -ldl -pthread 2>"$work/shared-link.log"; then
  head -n 5 "$work/shared-link.log" >&2
  fail "the static libraries cannot be linked into a shared library"
fi

if ((failures > 0)); then
  echo "check_install: $failures failure(s)" >&2
  exit 1
fi
echo "check_install: the installed tree is complete and usable"
