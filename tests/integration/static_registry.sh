#!/usr/bin/env bash
# The static registry: --node N, or --node-from-hostname (a StatefulSet pod's ordinal); one
# process per node ID on a data directory; a node ID outside the layout is refused.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

D=$WORK/data

# check_nodes NODE: every ID in $WORK/body ({"ids":[...]}) has node NODE, and they increase.
check_nodes() {
  check_py '
import json, sys
ids = [int(x) for x in json.load(open(sys.argv[1]))["ids"]]
nodes = {(i >> 12) & 1023 for i in ids}
assert nodes == {int(sys.argv[2])}, nodes
assert all(a < b for a, b in zip(ids, ids[1:]))
' "$WORK/body" "$1"
}

start_server s5 "$D" --registry static --node 5
P5=$PID
PORT5=$PORT
expect_status 200 /readyz
check_py 'import json,sys; j=json.load(open(sys.argv[1])); assert j == {"ready": True, "node": 5} or (j["ready"] is True and j["node"] == 5), j' "$WORK/body"
expect_status 200 '/v1/ids?count=1000'
check_nodes 5

# The same node ID again on the same data directory: refused (the state file is locked).
PORT=$(free_port)
code=0
timeout 20 "$FLURRY" serve --listen "127.0.0.1:$PORT" --data-dir "$D" --registry static --node 5 \
  >"$WORK/dup.log" 2>&1 || code=$?
[[ $code != 0 && $code != 124 ]] || fail "a second process as static node 5 on one data directory: exit $code (expected a refusal)"
grep -qi 'node\|lock' "$WORK/dup.log" || fail "the refusal does not say why: $(cat "$WORK/dup.log")"

# Another node ID on the same data directory is fine.
start_server s6 "$D" --registry static --node 6
expect_status 200 '/v1/ids?count=1000'
check_nodes 6
stop_server "$PID"
PORT=$PORT5
expect_status 200 '/v1/ids?count=10'
check_nodes 5
stop_server "$P5"

# Out of range for the layout (10 node bits): refused.
code=0
timeout 20 "$FLURRY" serve --listen "127.0.0.1:$(free_port)" --data-dir "$D" --registry static --node 1024 \
  >"$WORK/range.log" 2>&1 || code=$?
[[ $code == 1 || $code == 2 ]] || fail "--node 1024: exit $code, expected 1 or 2"
grep -q '1024\|node' "$WORK/range.log" || fail "--node 1024: unclear message: $(cat "$WORK/range.log")"

# --node-from-hostname: the trailing ordinal of the host name (in a UTS namespace of our own).
if unshare --uts true 2>/dev/null; then
  PORT=$(free_port)
  # shellcheck disable=SC2016 # $0 and $@ are the inner shell's
  unshare --uts sh -c 'hostname flurry-7 && exec "$0" "$@"' "$FLURRY" serve --listen "127.0.0.1:$PORT" \
    --data-dir "$D" --registry static --node-from-hostname >>"$WORK/host.log" 2>&1 &
  PID=$!
  SERVER_PIDS+=("$PID")
  wait_ready "$PORT" "$PID" 15 || fail "--node-from-hostname as flurry-7: not ready"
  expect_status 200 /readyz
  check_py 'import json,sys; j=json.load(open(sys.argv[1])); assert j["node"] == 7, j' "$WORK/body"
  expect_status 200 '/v1/ids?count=100'
  check_nodes 7
  stop_server "$PID"
  code=0
  # shellcheck disable=SC2016
  timeout 20 unshare --uts sh -c 'hostname web-server && exec "$0" "$@"' "$FLURRY" serve \
    --listen "127.0.0.1:$(free_port)" --data-dir "$D" --registry static --node-from-hostname \
    >"$WORK/badhost.log" 2>&1 || code=$?
  [[ $code == 1 || $code == 2 ]] || fail "--node-from-hostname as web-server: exit $code, expected 1 or 2"
  grep -q 'web-server\|hostname\|host name' "$WORK/badhost.log" ||
    fail "--node-from-hostname as web-server: unclear message: $(cat "$WORK/badhost.log")"
else
  echo "note: no UTS namespaces here (unshare --uts failed): --node-from-hostname not exercised"
fi

echo "ok"
