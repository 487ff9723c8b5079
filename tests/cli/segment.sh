#!/usr/bin/env bash
# flurry segment create|list|show|next on the stores directly (SQLite files in temporary
# directories): what each prints, that IDs never repeat across runs and stay increasing, and that
# bad input is refused with one line saying what is wrong (exit 2 for the command line, 1 for what
# the library or the store refuses).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

D=$WORK/data

# create: the row as stored; the default store is sqlite in --data-dir.
run 0 segment create orders --start 1000 --step 100 --description 'order lines' --data-dir "$D"
[[ -f $D/segments.db ]] || fail "create did not use DATA_DIR/segments.db: $(ls -la "$D" 2>&1)"
grep -q '^tag: *orders$' out || fail "create output: $(cat out)"
grep -q '^max_id: *1000 ' out || fail "create output lacks max_id 1000: $(cat out)"
grep -q '^step: *100$' out || fail "create output lacks the step: $(cat out)"
grep -q "^store: *sqlite:.*segments.db$" out || fail "create output lacks the store: $(cat out)"
run 0 segment create invoices --data-dir "$D"

# A strict tag (served only by the timestamp oracle's leader): created on the store directly and
# shown so, but no process without the oracle hands out its numbers.
run 0 segment create ticks --strict --data-dir "$WORK/strict"
grep -q '^strict: *true$' out || fail "create --strict output: $(cat out)"
expect_error 1 segment next ticks --data-dir "$WORK/strict"
grep -q 'FAILED_PRECONDITION' err || fail "next of a strict tag on the store: $(cat err)"
grep -q -- '--tso' err || fail "next of a strict tag does not say what serves it: $(cat err)"

# A second create of the same tag is refused, and says so.
expect_error 1 segment create orders --data-dir "$D"
grep -q 'ALREADY_EXISTS' err || fail "duplicate create: $(cat err)"
grep -q 'orders' err || fail "duplicate create does not name the tag: $(cat err)"

# list: by name, as a table and as the server's JSON shape.
run 0 segment list --data-dir "$D"
[[ $(sed -n 1p out) == TAG* ]] || fail "list has no header: $(cat out)"
[[ $(awk 'NR>1 {print $1}' out | tr '\n' ' ') == 'invoices orders ' ]] || fail "list: $(cat out)"
grep -q '^orders  *1000  *100  *1  *0  *20[0-9-]*T[0-9:.]*Z  *order lines$' out || fail "list row: $(cat out)"
run 0 segment list --json --data-dir "$D"
check_py '
import json, sys
j = json.load(open(sys.argv[1]))
tags = j["tags"]
assert [t["tag"] for t in tags] == ["invoices", "orders"], tags
o = tags[1]
assert list(o.keys()) == ["tag", "max_id", "step", "delta", "remainder", "strict", "description",
                         "update_time"], o
assert o["strict"] is False, o
assert o["max_id"] == "1000" and o["step"] == 100 and o["delta"] == 1 and o["remainder"] == 0, o
assert o["description"] == "order lines" and o["update_time"].endswith("Z"), o
assert tags[0]["max_id"] == "1" and tags[0]["step"] == 1000, tags[0]
' out

# next: increasing IDs from 1000, one per line; later runs continue above (a run leaves the rest
# of its ranges unused: gaps, never repeats).
run 0 segment next orders --count 250 --data-dir "$D"
[[ ! -s err ]] || fail "next wrote to stderr: $(cat err)"
cp out ids1
run 0 segment next orders -n 1 --data-dir "$D"
cp out ids2
run 0 segment next orders --count 5000 --data-dir "$D"
cp out ids3
check_py '
import sys
runs = []
for path in sys.argv[1:]:
    text = open(path).read()
    assert text.endswith("\n"), path
    lines = text.split("\n")[:-1]
    assert all(s.isdigit() and s == str(int(s)) for s in lines), path
    runs.append([int(s) for s in lines])
assert [len(r) for r in runs] == [250, 1, 5000], [len(r) for r in runs]
assert runs[0][:3] == [1000, 1001, 1002], runs[0][:3]
ids = [i for r in runs for i in r]
assert all(a < b for a, b in zip(ids, ids[1:])), "IDs not increasing across runs"
' ids1 ids2 ids3

# show: the stored row; max_id moved past everything handed out.
run 0 segment show orders --json --data-dir "$D"
check_py '
import json, sys
j = json.load(open(sys.argv[1]))
last = int(open(sys.argv[2]).read().split()[-1])
assert j["tag"] == "orders", j
(row,) = j["stores"]
assert row["store"].startswith("sqlite:") and row["store"].endswith("segments.db"), row
assert int(row["max_id"]) > last and row["step"] == 100, (row, last)
' out ids3
run 0 segment show orders --data-dir "$D"
grep -q '^description: *order lines$' out || fail "show: $(cat out)"

# --store sqlite:PATH: another file, independent of the data directory's.
run 0 segment create orders --store "sqlite:$WORK/other.db" --start 7 --step 10
run 0 segment next orders --store "sqlite:$WORK/other.db" -n 3
[[ $(tr '\n' ' ' <out) == '7 8 9 ' ]] || fail "next on sqlite:PATH: $(cat out)"

# Residues on one store: only x % 3 == 2.
run 0 segment create odd --delta 3 --remainder 2 --start 10 --step 30 --data-dir "$D"
run 0 segment next odd -n 4 --data-dir "$D"
[[ $(tr '\n' ' ' <out) == '11 14 17 20 ' ]] || fail "next with delta 3 remainder 2: $(cat out)"

# Two stores: the tag gets delta 2 and remainders 0 and 1; their IDs never collide, and next
# serves from one of them.
S2="sqlite:$WORK/a.db,sqlite:$WORK/b.db"
run 0 segment create pair --store "$S2" --start 100 --step 50
grep -q '^remainder: *0$' out && grep -q '^remainder: *1$' out || fail "two stores: $(cat out)"
run 0 segment next pair --store "$S2" -n 20
check_py '
import sys
ids = [int(s) for s in open(sys.argv[1]).read().split()]
assert len(ids) == 20 and len(set(ids)) == 20, ids
assert all(a < b for a, b in zip(ids, ids[1:])), ids
assert len({i % 2 for i in ids}) == 1, ids
' out
run 0 segment show pair --store "$S2" --json
check_py '
import json, sys
rows = json.load(open(sys.argv[1]))["stores"]
assert [(r["delta"], r["remainder"]) for r in rows] == [(2, 0), (2, 1)], rows
' out
expect_error 1 segment create pair2 --store "$S2" --delta 2 --remainder 1

# An unknown tag fails with a message naming it; nothing on stdout.
expect_error 1 segment next nosuch --data-dir "$D"
grep -q 'NOT_FOUND' err && grep -q 'nosuch' err || fail "next of an unknown tag: $(cat err)"
expect_error 1 segment show nosuch --data-dir "$D"
grep -q 'NOT_FOUND' err && grep -q 'nosuch' err || fail "show of an unknown tag: $(cat err)"

# Bad tag names and specs: refused by the library (exit 1) before any store is touched.
expect_error 1 segment create 'bad tag' --data-dir "$WORK/untouched"
grep -q 'tag' err || fail "bad tag: $(cat err)"
expect_error 1 segment create "$(head -c 129 /dev/zero | tr '\0' 'x')" --data-dir "$WORK/untouched"
expect_error 1 segment next 'a/b' --data-dir "$WORK/untouched"
expect_error 1 segment show '' --data-dir "$WORK/untouched"
expect_error 1 segment create big --step 999999999999999 --data-dir "$WORK/untouched"
expect_error 1 segment create res --delta 2 --remainder 2 --data-dir "$WORK/untouched"
expect_error 1 segment create long --description "$(head -c 300 /dev/zero | tr '\0' 'd')" --data-dir "$WORK/untouched"
[[ ! -e $WORK/untouched ]] || fail "a refused command created its data directory"

# Bad command lines: exit 2, the option named.
expect_error 2 segment
expect_error 2 segment bogus
expect_error 2 segment next
expect_error 2 segment next orders --count 0 --data-dir "$D"
grep -q -- '--count' err || fail "--count 0: $(cat err)"
expect_error 2 segment next orders --count abc --data-dir "$D"
expect_error 2 segment next orders -n -1 --data-dir "$D"
expect_error 2 segment next orders -n 99999999999999999999999 --data-dir "$D"
expect_error 2 segment create x --step 0 --data-dir "$D"
expect_error 2 segment create x --start -1 --data-dir "$D"
expect_error 2 segment create x --delta 2 --data-dir "$D"
grep -q -- '--remainder' err || fail "--delta alone: $(cat err)"
expect_error 2 segment list --timeout-ms 0 --data-dir "$D"
expect_error 2 segment list --store 'mysql://db/ids'
grep -q -- '--store' err || fail "bad --store: $(cat err)"
expect_error 2 segment list --data-dir ''
expect_error 2 segment list --store sqlite --server http://127.0.0.1:1
grep -q -- '--store and --server' err || fail "--store with --server: $(cat err)"
expect_error 2 segment list --data-dir "$D" --server http://127.0.0.1:1
expect_error 2 segment create x --admin-token-file /dev/null --data-dir "$D"
grep -q -- '--admin-token-file' err || fail "--admin-token-file in store mode: $(cat err)"
for url in ftp://127.0.0.1:1 127.0.0.1:7609 http://127.0.0.1 http://:7609 http://h:0 \
  http://h:65536 http://h:x 'http://h:1/v1' 'http://u@h:1' 'http://[::1'; do
  expect_error 2 segment list --server "$url"
  grep -q -- '--server' err || fail "--server $url: $(cat err)"
done
# The host and port are read by the one HOST:PORT parser (flurry/host_port.h), its reason kept.
expect_error 2 segment list --server http://h:0
grep -q '"h:0" is not HOST:PORT (the port must be a number from 1 to 65535)' err ||
  fail "--server http://h:0: $(cat err)"
expect_error 2 segment list --server 'http://::1:7609'
grep -q 'an IPv6 address goes in brackets' err || fail "--server http://::1:7609: $(cat err)"
expect_error 2 segment list --server 'http://[fe80::1%25lo]:7609'
grep -q "has a '%'" err || fail "--server with a zone: $(cat err)"

# A server that is not there: a clear failure within the timeout, not a hang.
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
expect_error 1 segment list --server "http://127.0.0.1:$PORT" --timeout-ms 2000
grep -q "127.0.0.1:$PORT" err || fail "unreachable server: $(cat err)"

# The default data directory is flurry serve's: $XDG_STATE_HOME/flurry (lib.sh sets it).
run 0 segment create here
[[ -f $XDG_STATE_HOME/flurry/segments.db ]] || fail "the default store is not \$XDG_STATE_HOME/flurry/segments.db"

echo "ok"
