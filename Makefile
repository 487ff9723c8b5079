# Two commands set everything up on a fresh Debian 12 machine (as root):
#   make run    install what is needed, build, and run flurry on its embedded default
#   make test   install what is needed, build, and run every test (release, ASan/UBSan, TSan,
#               and 30 s of libFuzzer on the parsers)
.PHONY: run test bench bench-fleet bench-tso build package deps-run deps-test format clean

JOBS ?= $(shell nproc)

deps-run:
	@tools/install-deps.sh run

deps-test:
	@tools/install-deps.sh test

build: deps-test
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)

# The service in the foreground on its embedded default: HTTP on 127.0.0.1:7609 and gRPC on
# 127.0.0.1:7610, state in the default data directory ($XDG_STATE_HOME/flurry, else
# /var/lib/flurry for root, ~/.local/state/flurry otherwise), node IDs leased from SQLite.
# Ctrl-C stops it cleanly. `make run DATA_DIR=DIR` keeps the state in DIR instead
# (flurry serve --data-dir DIR), e.g. when the default directory belongs to another registry.
# Also the Python gRPC stubs (build/server/python), for examples/grpc_ids.py.
# Only what building and running needs: the `server` preset configures no tests or benchmarks,
# so none of their packages (databases, browsers, fuzzers) are installed.
# The server's stderr is also copied to build/server/run.log (by `tee -i`, which ignores the
# Ctrl-C meant for the server and so keeps its last lines), so that a refused start can end with
# the one line that says what to do.
DATA_DIR ?=
run: SHELL := /bin/bash
run: deps-run
	cmake --preset server >/dev/null
	cmake --build --preset server -j $(JOBS) --target flurry flurry_grpc_python
	@log=build/server/run.log; \
	./build/server/apps/flurry/flurry serve $(if $(DATA_DIR),--data-dir '$(DATA_DIR)') \
	  2> >(tee -i "$$log" >&2); rc=$$?; wait $$!; \
	if ((rc != 0)) && grep -q 'belongs to the registry' "$$log"; then \
	  echo "make run: the data directory above belongs to another registry; leave it to that one and run this server on its own: make run DATA_DIR=/path/to/a/new/dir" >&2; \
	fi; \
	exit $$rc

test: deps-test
	tools/test-all.sh $(JOBS)

# Debian packages from the `server` preset (no tests), man pages included: build/packages/
# flurry_*.deb (server, CLI, systemd units, /etc/flurry/flurry.toml) and libflurry-dev_*.deb
# (headers, static libraries, CMake and pkg-config files). Install with
# `apt install ./build/packages/flurry_*.deb` (docs/operations.md, "Running under systemd").
package:
	@tools/install-deps.sh package
	cmake --preset server -DFLURRY_MAN_PAGES=ON >/dev/null
	cmake --build --preset server -j $(JOBS)
	cpack -G DEB --config build/server/CPackConfig.cmake -B build/packages
	@ls -1 $(CURDIR)/build/packages/*.deb

# Benchmarks (not tests): the generator beside a textbook snowflake, the node registries (real etcd
# and PostgreSQL) beside plain writes, then the server beside Redis, PostgreSQL and a bare gRPC
# server; ends with one table of every figure beside its reference (build/release/bench-report/).
bench: deps-test
	@tools/install-deps.sh bench
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)
	bench/run_all.sh build/release

# The fleet (bench/fleet/README.md; as root): FLEET_N real `flurry serve` processes in network
# namespaces on a 3-member etcd cluster, then the same on one PostgreSQL server; 5 minutes of
# kill -9 churn with etcd's follower and leader killed, one host cut off, IDs checked for
# duplicates. Reports in bench/fleet/results/. About 21 minutes for 1024. FLEET_ARGS are options
# of fleet.py: by default the settings the 1024 runs of bench/fleet/README.md used (spawned at
# 10/s, 20 s leases, 16 s horizon window); e.g. FLEET_N=256 FLEET_ARGS='--churn-seconds 60'.
FLEET_N ?= 1024
FLEET_ARGS ?= --start-per-s 10 --lease-ttl-ms 20000 --horizon-window-ms 16000
bench-fleet: deps-test
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS) --target flurry fleet_collect
	@mkdir -p bench/fleet/results
	@rc=0; for registry in etcd postgres; do \
	  /usr/bin/python3 bench/fleet/fleet.py -n $(FLEET_N) --registry $$registry $(FLEET_ARGS) \
	    --report bench/fleet/results/fleet-$$registry-$(FLEET_N).json >/dev/null || rc=1; \
	  cat bench/fleet/results/fleet-$$registry-$(FLEET_N).md 2>/dev/null; \
	done; exit $$rc

# The timestamp oracle under load (bench/README.md, "Timestamp oracle"): bench/tso_load's tso()
# with 1,000 callers (continuations, then threads) on one gRPC Tso.Stream, against `flurry serve
# --tso` and against a Tso server that does no work, in 3 alternating rounds of 10 s; the summary
# and its figures in bench/results/tso.md and tso.json. About 2.5 minutes.
bench-tso: deps-test
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS) --target flurry tso_load
	@mkdir -p bench/results
	TSO_RESULTS=bench/results/tso bench/tso_bench.sh build/release/apps/flurry/flurry

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf build
