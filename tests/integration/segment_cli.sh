#!/usr/bin/env bash
# `flurry segment create|list|show|next --server` against running servers: the admin token (401
# without one or with a wrong one, 403 when the server has no admin_token_file, the file named by
# --admin-token-file or FLURRY_ADMIN_TOKEN_FILE), the server's error messages shown, and that the
# CLI in store mode on the server's own store and the server never hand out the same ID.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

D=$WORK/data
umask 077  # token files readable by their owner only, as flurry requires
printf '  s3cret-token-for-the-test-4f8a2c6e9b1d \n' >"$WORK/token"
printf 'not-the-token-but-one-of-the-right-length\n' >"$WORK/wrong"

# seg CODE ARGS...: flurry segment ARGS must exit CODE; stdout in $WORK/out, stderr in $WORK/err.
seg() {
  local expect=$1 code=0
  shift
  "$FLURRY" segment "$@" >"$WORK/out" 2>"$WORK/err" || code=$?
  [[ $code == "$expect" ]] || fail "flurry segment $* exited $code, expected $expect: $(cat "$WORK/out" "$WORK/err")"
  if [[ $expect != 0 ]]; then
    [[ ! -s $WORK/out ]] || fail "flurry segment $*: printed on stdout: $(cat "$WORK/out")"
    [[ $(wc -l <"$WORK/err") == 1 ]] || fail "flurry segment $*: not one line on stderr: $(cat "$WORK/err")"
  fi
  return 0
}

start_server a "$D" --admin-token-file "$WORK/token"
S=http://127.0.0.1:$PORT

# create: 401 without a token and with a wrong one; both say what to do.
seg 1 create orders --server "$S" --start 100 --step 1000
grep -q '401' "$WORK/err" && grep -q -- '--admin-token-file' "$WORK/err" || fail "no token: $(cat "$WORK/err")"
seg 1 create orders --server "$S" --admin-token-file "$WORK/wrong"
grep -q '401' "$WORK/err" && grep -q 'UNAUTHENTICATED' "$WORK/err" || fail "wrong token: $(cat "$WORK/err")"
grep -q "$WORK/wrong" "$WORK/err" || fail "the refusal does not name the token file: $(cat "$WORK/err")"
! grep -q 'not-the-token' "$WORK/err" || fail "the token is in the message: $(cat "$WORK/err")"
seg 1 create orders --server "$S" --admin-token-file "$WORK/nosuchfile"
grep -q 'nosuchfile' "$WORK/err" || fail "missing token file: $(cat "$WORK/err")"
: >"$WORK/empty"
seg 1 create orders --server "$S" --admin-token-file "$WORK/empty"
grep -q 'empty' "$WORK/err" || fail "empty token file: $(cat "$WORK/err")"

# With the token (surrounding whitespace trimmed, as the server reads it): created; the row shown.
seg 0 create orders --server "$S" --admin-token-file "$WORK/token" --start 100 --step 1000 --description 'order lines'
grep -q '^tag: *orders$' "$WORK/out" && grep -q '^max_id: *100 ' "$WORK/out" || fail "create: $(cat "$WORK/out")"
FLURRY_ADMIN_TOKEN_FILE=$WORK/token seg 0 create invoices --server "$S"
FLURRY_ADMIN_TOKEN_FILE=$WORK/token seg 1 create orders --server "$S"
grep -q '409' "$WORK/err" && grep -q 'ALREADY_EXISTS' "$WORK/err" || fail "duplicate: $(cat "$WORK/err")"
# Refused locally before the server is asked (the tag's characters are checked, also for URLs).
seg 1 create 'a/b' --server "$S" --admin-token-file "$WORK/token"
seg 1 show '../x' --server "$S"

# list, show: the server's view.
seg 0 list --server "$S"
[[ $(awk 'NR>1 {print $1}' "$WORK/out" | tr '\n' ' ') == 'invoices orders ' ]] || fail "list: $(cat "$WORK/out")"
seg 0 list --server "$S" --json
check_py '
import json, sys
tags = json.load(open(sys.argv[1]))["tags"]
assert [t["tag"] for t in tags] == ["invoices", "orders"], tags
assert tags[1]["max_id"] == "100" and tags[1]["step"] == 1000 and tags[1]["description"] == "order lines", tags
' "$WORK/out"
seg 0 show orders --server "$S" --json
check_py '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["tag"] == "orders" and j["served"] is False and j["current"] is None, j
assert j["stored"]["max_id"] == "100", j
' "$WORK/out"

# next: 25,000 IDs (several requests), increasing from the start; show then has the buffers.
seg 0 next orders --server "$S" -n 25000
cp "$WORK/out" "$WORK/ids-server"
check_py '
import sys
ids = [int(s) for s in open(sys.argv[1]).read().split()]
assert len(ids) == 25000 and ids[0] == 100, (len(ids), ids[:3])
assert all(a < b for a, b in zip(ids, ids[1:])), "not increasing"
' "$WORK/ids-server"
seg 0 show orders --server "$S"
grep -q '^served: *true$' "$WORK/out" && grep -q '^current: *[0-9]' "$WORK/out" || fail "show: $(cat "$WORK/out")"
seg 0 show orders --server "$S" --json
check_py '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["served"] is True and j["ids_issued"] == 25000 and j["current"] is not None, j
' "$WORK/out"

# The server's errors, shown: an unknown tag.
seg 1 next nosuch --server "$S"
grep -q '404' "$WORK/err" && grep -q 'NOT_FOUND' "$WORK/err" && grep -q 'nosuch' "$WORK/err" || fail "unknown tag: $(cat "$WORK/err")"
seg 1 show nosuch --server "$S"
grep -q 'NOT_FOUND' "$WORK/err" || fail "show of an unknown tag: $(cat "$WORK/err")"

# The CLI in store mode on the server's own store (sqlite in its data directory) while the server
# runs: the same tags, and IDs that never collide with the server's.
seg 0 list --data-dir "$D"
[[ $(awk 'NR>1 {print $1}' "$WORK/out" | tr '\n' ' ') == 'invoices orders ' ]] || fail "store-mode list: $(cat "$WORK/out")"
seg 0 next orders --data-dir "$D" -n 3000
cp "$WORK/out" "$WORK/ids-store"
seg 0 next orders --server "$S" -n 3000
cp "$WORK/out" "$WORK/ids-server2"
check_py '
import sys
sets = [[int(s) for s in open(p).read().split()] for p in sys.argv[1:]]
all_ids = [i for s in sets for i in s]
assert len(all_ids) == 31000 and len(set(all_ids)) == len(all_ids), "the CLI and the server issued the same ID"
assert min(sets[1]) > max(sets[0]), "the store-mode IDs are not above the server s earlier ones"
' "$WORK/ids-server" "$WORK/ids-store" "$WORK/ids-server2"
stop_server "$PID"

# A server without admin_token_file refuses every token, and says no token has scope admin.
start_server b "$WORK/data-b"
S=http://127.0.0.1:$PORT
seg 1 create orders --server "$S" --admin-token-file "$WORK/token"
grep -q '403' "$WORK/err" && grep -q 'needs a token with scope admin and this server has none' "$WORK/err" || fail "creation disabled: $(cat "$WORK/err")"
seg 0 list --server "$S"
grep -q 'no tags' "$WORK/out" || fail "empty list: $(cat "$WORK/out")"
stop_server "$PID"

echo "ok"
