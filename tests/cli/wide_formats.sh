#!/usr/bin/env bash
# flurry next --format uuidv7|ulid writes real UUIDv7s and ULIDs that sort like the IDs and carry
# their time; flurry decode reads them back (by shape, or with --format) to the same ID; layouts
# and text that cannot be read are refused with a message.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

S=$WORK/state-dir

# UUIDv7: 3000 of them, version 7 and RFC 9562's variant by Python's own parser, strictly
# increasing as text (the IDs inside increase), the millisecond a recent one.
now_ms=$(date +%s%3N)
run 0 next -n 3000 --format uuidv7 --state-dir "$S"
[[ ! -s err ]] || fail "next wrote to stderr: $(cat err)"
cp out uuids
check_py '
import re, sys, uuid
lines = open(sys.argv[1]).read().split("\n")
assert lines[-1] == "", "output does not end with a newline"
texts, now_ms = lines[:-1], int(sys.argv[2])
assert len(texts) == 3000, len(texts)
for t in texts:
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", t), t
    u = uuid.UUID(t)
    assert u.version == 7 and u.variant == uuid.RFC_4122, t
    assert str(u) == t
assert all(a < b for a, b in zip(texts, texts[1:])), "UUIDv7 text does not increase"
ms = int(texts[0][:8] + texts[0][9:13], 16)
assert abs(ms - now_ms) < 10000, (ms, now_ms)
' uuids "$now_ms"

# decode by shape and with --format: the same ID, whose unix_ms is the UUID's millisecond and
# whose fields are the bits after it (default layout: node 10 bits, seq 12).
first=$(head -n 1 uuids)
last=$(tail -n 1 uuids)
run 0 decode --json "$first"
cp out first.json
run 0 decode --format uuidv7 --json "${first^^}"
cmp -s out first.json || fail "decode --format uuidv7 of the upper-case UUID differs: $(cat out)"
run 0 decode --json "$last"
cp out last.json
check_py '
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for j, t in ((a, sys.argv[3]), (b, sys.argv[4])):
    v = int(t.replace("-", ""), 16)
    assert j["unix_ms"] == v >> 80, (j["unix_ms"], v >> 80)
    payload = ((v >> 64) & 0xfff) << 62 | (v & ((1 << 62) - 1))
    fields = payload >> 52
    assert int(j["id"]) & ((1 << 22) - 1) == fields, (j["id"], fields)
    assert j["node"] == fields >> 12 and j["seq"] == fields & 4095
assert int(a["id"]) < int(b["id"])
' first.json last.json "$first" "$last"

# ULID: 26 Crockford characters, first 0-7, increasing, the time in front; decode gives the ID.
run 0 next -n 3000 --format ulid --state-dir "$S"
cp out ulids
check_py '
import re, sys
texts = open(sys.argv[1]).read().split()
assert len(texts) == 3000, len(texts)
A = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
for t in texts:
    assert re.fullmatch(r"[0-7][0-9A-HJKMNP-TV-Z]{25}", t), t
assert all(a < b for a, b in zip(texts, texts[1:])), "ULID text does not increase"
' ulids
u=$(head -n 1 ulids)
run 0 decode --json "$u"
cp out ulid.json
run 0 decode --format ulid --json "${u,,}"
cmp -s out ulid.json || fail "decode --format ulid of the lower-case ULID differs: $(cat out)"
check_py '
import json, sys
j, t = json.load(open(sys.argv[1])), sys.argv[2]
A = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
v = 0
for c in t:
    v = v * 32 + A.index(c)
assert j["unix_ms"] == v >> 80, (j["unix_ms"], v >> 80)
assert int(j["id"]) & ((1 << 22) - 1) == (v >> 58) & ((1 << 22) - 1)
' ulid.json "$u"
# The ULIDs came after the UUIDs from the same node: their IDs are larger.
check_py '
import json, sys
assert int(json.load(open(sys.argv[1]))["id"]) > int(json.load(open(sys.argv[2]))["id"])
' ulid.json last.json

# Layouts: a time unit finer than 1 ms round-trips; coarser ones are refused before any ID.
fine='time:43@100us,node:10,seq:10;epoch=2025-01-01Z'
run 0 next -n 50 --format uuidv7 --layout "$fine" --state-dir "$WORK/fine"
for t in $(head -n 3 out); do
  run 0 decode --layout "$fine" --json "$t"
  grep -q '"unix_ms":' out || fail "decode of a 100us UUIDv7: $(cat out)"
done
expect_error 1 next --format uuidv7 --layout sonyflake --state-dir "$WORK/sony"
grep -q 'cannot be written as uuidv7: its time unit is coarser than 1 ms' err ||
  fail "coarse layout: unclear message: $(cat err)"
[[ ! -e $WORK/sony/registry.db ]] || fail "a refused format leased a node ID first"
expect_error 1 next --format ulid --layout uid-generator --state-dir "$WORK/sony"
grep -q 'cannot be written as ulid' err || fail "coarse layout (ulid): $(cat err)"
expect_error 1 decode --layout sonyflake "$first"
grep -q 'coarser than 1 ms' err || fail "decode with a coarse layout: $(cat err)"

# Bad text: each message says what is wrong.
expect_error 1 decode 01941f29-7fe8-4014-807f-ffffffffffff
grep -q 'version 4' err || fail "UUIDv4 accepted or unclear: $(cat err)"
expect_error 1 decode 01941f29-7fe8-7014-c07f-ffffffffffff
grep -q 'variant bits 11' err || fail "bad variant: $(cat err)"
expect_error 1 decode 01941f29-7fe8-7014-807f-fffffffffffg
grep -q "bad character 'g' at position 35" err || fail "bad UUID character: $(cat err)"
expect_error 1 decode --format uuidv7 01941f29-7fe8-7014-807f-fffffffffff
grep -q '35 characters, expected 36' err || fail "short UUID: $(cat err)"
expect_error 1 decode 018cc251-f400-7000-8000-000000000000
grep -q "lies before the layout's epoch" err || fail "UUID before the epoch: $(cat err)"
expect_error 1 decode 81JGFJJZZ80501R00000000000
grep -q 'overflows 128 bits' err || fail "ULID above 128 bits: $(cat err)"
expect_error 1 decode 01JGFJJZZ80501R0000000000U
grep -q "bad character 'U' at position 25" err || fail "bad ULID character: $(cat err)"
# An explicit --format is obeyed, not second-guessed by the shape.
expect_error 1 decode --format dec "$first"
grep -q '^flurry: decimal ID' err || fail "--format dec with a UUID: $(cat err)"
expect_error 2 next --format UUIDv7 --state-dir "$S"
grep -q 'expected dec, hex, base32, base62, uuidv7 or ulid' err || fail "bad --format: $(cat err)"
expect_error 2 decode --format uuid "$first"

# Help texts name the new encodings.
run 0 next --help
grep -q 'uuidv7 or ulid' out || fail "next --help lacks the wide formats: $(cat out)"
run 0 decode --help
grep -q 'uuidv7 or ulid' out || fail "decode --help lacks the wide formats: $(cat out)"

echo "ok"
