#!/usr/bin/env bash
# `flurry nodes list` and `flurry nodes release ID [--force]` against registries that running
# servers use: what is shown, what is refused while a lease is live, and that a forced release
# fences the holder out (it claims a node ID again) while the horizon stays with the node ID.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

D=$WORK/data

# nodes CODE ARGS...: flurry nodes ARGS must exit CODE; stdout in $WORK/out, stderr in $WORK/err.
nodes() {
  local expect=$1 code=0
  shift
  "$FLURRY" nodes "$@" >"$WORK/out" 2>"$WORK/err" || code=$?
  [[ $code == "$expect" ]] || fail "flurry nodes $* exited $code, expected $expect: $(cat "$WORK/out" "$WORK/err")"
}

# An empty registry.
nodes 0 list --data-dir "$D"
grep -q 'no node ID was ever claimed' "$WORK/out" || fail "empty registry: $(cat "$WORK/out")"

start_server a "$D" --lease-ttl-ms 3000
PA=$PID
expect_status 200 '/v1/ids?count=10'
nodes 0 list --data-dir "$D" --json
check_py '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["layout"].startswith("time:41@1ms,node:10,seq:12"), j
(n,) = j["nodes"]
assert n["node"] == 0 and n["state"] == "live", n
assert n["owner"].endswith(":" + sys.argv[2]), (n, sys.argv[2])
assert n["token"] >= 1 and n["lease_expires"].endswith("Z"), n
assert n["horizon"]["time"].endswith("Z") and n["horizon"]["generation"] == 0, n
' "$WORK/out" "$PA"
nodes 0 list --data-dir "$D"
grep -q "^0  *live  *[^ ]*:$PA " "$WORK/out" || fail "table: $(cat "$WORK/out")"

# Refused while live; unknown node IDs and bad arguments are errors that say what is wrong.
nodes 1 release 0 --data-dir "$D"
grep -q 'LEASE_LIVE' "$WORK/err" || fail "release of a live node: $(cat "$WORK/err")"
grep -q ":$PA" "$WORK/err" || fail "the refusal does not name the holder: $(cat "$WORK/err")"
nodes 1 release 9 --data-dir "$D"
grep -q 'NOT_FOUND' "$WORK/err" || fail "release of an unknown node: $(cat "$WORK/err")"
nodes 2 release abc --data-dir "$D"
grep -q '"abc" is not a whole number' "$WORK/err" || fail "bad ID: $(cat "$WORK/err")"
nodes 2 release 0 --data-dir "$D" --registry nosuch
grep -q 'registry' "$WORK/err" || fail "bad registry: $(cat "$WORK/err")"

# By force: the server is fenced out, claims a node ID again (node 0, free now) with a greater
# token, and serves IDs above everything it issued before.
expect_status 200 '/v1/ids?count=1000'
BEFORE=$(python3 -c 'import json,sys; print(max(int(x) for x in json.load(open(sys.argv[1]))["ids"]))' "$WORK/body")
nodes 0 list --data-dir "$D" --json
T1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["nodes"][0]["token"])' "$WORK/out")
nodes 0 release 0 --force --data-dir "$D"
grep -q 'released by force' "$WORK/out" || fail "forced release: $(cat "$WORK/out")"
for ((i = 0; i < 100; i++)); do
  grep -q 'event=lease_reclaimed' "$WORK/a.log" && break
  sleep 0.1
done
grep -q 'event=lease_reclaimed' "$WORK/a.log" || fail "the fenced server did not claim again"
for ((i = 0; i < 100; i++)); do
  code=$(curl -s -o "$WORK/body" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/ids?count=10") || true
  [[ $code == 200 ]] && break
  sleep 0.1
done
[[ $code == 200 ]] || fail "no IDs after the reclaim (HTTP $code)"
check_py '
import json, sys
ids = [int(x) for x in json.load(open(sys.argv[1]))["ids"]]
assert min(ids) > int(sys.argv[2]), (min(ids), sys.argv[2])
' "$WORK/body" "$BEFORE"
nodes 0 list --data-dir "$D" --json
check_py '
import json, sys
(n,) = json.load(open(sys.argv[1]))["nodes"]
assert n["state"] == "live" and n["token"] > int(sys.argv[2]), (n, sys.argv[2])
' "$WORK/out" "$T1"
stop_server "$PA"
nodes 0 list --data-dir "$D"
grep -q '^0  *free ' "$WORK/out" || fail "after a clean stop: $(cat "$WORK/out")"
nodes 0 release 0 --data-dir "$D"

# The static registry: the node is listed; while its process runs, even --force is refused.
S=$WORK/static
start_server s "$S" --registry static --node 3
PS=$PID
expect_status 200 '/v1/ids?count=10'
nodes 0 list --data-dir "$S" --registry static --node 3
grep -q "^3  *live  *[^ ]*:$PS " "$WORK/out" || fail "static table: $(cat "$WORK/out")"
nodes 1 release 3 --force --data-dir "$S" --registry static --node 3
grep -q 'LEASE_LIVE.*stop that process' "$WORK/err" || fail "static forced release: $(cat "$WORK/err")"
stop_server "$PS"
nodes 0 release 3 --data-dir "$S" --registry static --node 3
echo "PASS"
