#!/usr/bin/env bash
# Installs the Debian 12 packages flurry needs to build, run and test. Idempotent and quick
# when everything is present: apt is only touched when a package is missing.
# Usage: tools/install-deps.sh [run|test|bench|package]
#   run: build and run; test: also the test tools; bench: the load tools and Redis (reference);
#   package: build and run, and what building the Debian packages needs (make package)
set -euo pipefail

mode=${1:-test}
packages=(
  build-essential cmake ninja-build pkg-config
  libcli11-dev nlohmann-json3-dev
  libboost-dev libspdlog-dev libtomlplusplus-dev libsqlite3-dev libpq-dev libssl-dev
  libsystemd-dev  # sd_notify's header (src/app/notifier.cc); libsystemd0 is opened at run time
  # gRPC (src/grpc): the library, protoc and its C++ and Python plugins (code generated at build)
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  # etcd's own protocol definitions (rpc.proto, kv.proto, auth.proto): the etcd client's gRPC code
  golang-etcd-server-dev
)
case $mode in
  run) ;;
  # cpack's DEB generator: dpkg-shlibdeps (dpkg-dev) and file; help2man: the man pages.
  package) packages+=(dpkg-dev file help2man) ;;
  test)
    packages+=(googletest libgtest-dev libgmock-dev libbenchmark-dev faketime python3 python3-yaml curl)
    packages+=(python3-grpcio python3-protobuf)  # the gRPC tests' client (tests/integration/grpc_*.py)
    packages+=(python3-venv python3-pip)  # clients/python/tests/install_check.sh: the README's pip install
    packages+=(clang libclang-rt-14-dev)  # libFuzzer
    packages+=(postgresql)  # a real server for the PostgreSQL registry's tests
    packages+=(openssl)  # tests/testing/make_certs.sh: the TLS tests' certificates (PostgreSQL's too)
    packages+=(iproute2)  # ip netns: host_records.py's two network namespaces sharing a host directory
    packages+=(etcd-server etcd-client)  # the etcd registry's tests run a real etcd
    packages+=(chromium)  # the console's browser test (tests/web), headless
    # The package tests (tests/deb): cpack's tools as for `make package`, lintian, systemd-analyze
    # (systemd) and /bin/kill (procps), which the units' verification needs; strace: the system
    # calls the server makes, against the unit's filter.
    packages+=(dpkg-dev file help2man lintian systemd procps strace)
    # The client libraries' toolchains and test runners (clients/): pytest, Go 1.19, JDK 17 with
    # JUnit 5's console launcher; Node.js below also runs the TypeScript client's tests.
    packages+=(python3-pytest golang-go openjdk-17-jdk-headless junit5)
    # Node.js and npm for puppeteer-core, from Debian unless the machine has its own already.
    command -v node >/dev/null || packages+=(nodejs)
    command -v npm >/dev/null || packages+=(npm)
    ;;
  bench) packages=(wrk redis-server redis-tools python3 curl postgresql) ;;  # postgresql: pgbench
  *)
    echo "install-deps: unknown mode '$mode' (run, test, bench or package)" >&2
    exit 2
    ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}; run as root or install them" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt_opts=(-o DPkg::Lock::Timeout=600 -q -y --no-install-recommends)
apt-get "${apt_opts[@]}" update >/dev/null
apt-get "${apt_opts[@]}" install "${missing[@]}" >/dev/null
