#!/usr/bin/env bash
# flurry order encode|decode|new: round trips, grouping and separators ignored, every decode error
# with its kind and position, a wrong key, key rotation, bad key files and bad options.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

K1=2b7e151628aed2a6abf7158809cf4f3c
K2=6a1f0c9e55b3d2e47a8b19f03c6d2e8175a4b9c0d1e2f30415263748596a7b8c
printf '# test keys\n1 = %s\n' "$K1" >keys1
printf '1 = %s\n2 = %s\n' "$K1" "$K2" >keys12
printf '1 = 000102030405060708090a0b0c0d0e0f\n' >other
IDS="0 1 2 249828521961062400 9223372036854775807"

# encode then decode: the same IDs, numbers of 21 digits (version, 19 digits, Damm).
run 0 order encode $IDS --key-file keys1
cp out codes
check_py '
import sys
codes = open(sys.argv[1]).read().split()
assert len(codes) == 5 and len(set(codes)) == 5, codes
assert all(len(c) == 21 and c.isdigit() and c[0] == "1" for c in codes), codes
' codes
# The largest ID's time is 2094: a number nobody can have been issued yet, refused as a forgery
# would be; the others decode.
# shellcheck disable=SC2046
run 0 order decode $(head -n 4 codes) --key-file keys1
[[ $(tr '\n' ' ' <out) == "${IDS% *} " ]] || fail "decode gave $(cat out), expected ${IDS% *}"
expect_error 1 order decode "$(tail -n 1 codes)" --key-file keys1
grep -q 'no_such_id' err && grep -q 'later than' err || fail "a number of 2094: $(cat err)"

# The environment variable is the key source without --key-file.
FLURRY_ORDER_KEYS="1 = $K1" run 0 order encode $IDS
cmp -s out codes || fail "FLURRY_ORDER_KEYS gave other numbers: $(cat out)"

# Grouping and separators: displayed, and ignored when decoding (any of them, or none).
run 0 order encode 249828521961062400 --key-file keys1 --group 4 --separator ' '
grouped=$(cat out)
[[ $grouped =~ ^[0-9]{4}( [0-9]{4}){4}\ [0-9]$ ]] || fail "not grouped by 4: '$grouped'"
plain=$(sed -n 4p codes)
[[ ${grouped// /} == "$plain" ]] || fail "grouping changed the number: $grouped vs $plain"
run 0 order decode "$grouped" "${plain:0:7}-${plain:7:7}-${plain:7+7}" --key-file keys1
[[ $(tr '\n' ' ' <out) == "249828521961062400 249828521961062400 " ]] || fail "grouped decode: $(cat out)"

# --layout prints the fields as flurry decode does; --json one object per number.
run 0 order decode "$plain" --key-file keys1 --layout flurry --json
check_py '
import json, sys
d = json.loads(open(sys.argv[1]).read())
assert d["order_number"] == sys.argv[2] and d["id"] == "249828521961062400", d
assert d["key_version"] == "1" and d["source"] == "snowflake", d
assert d["node"] == 0 and d["time"].startswith("2026-"), d
' out "$plain"
run 0 order decode "$plain" --key-file keys1 --layout flurry
grep -q '^seq ' out || fail "no fields with --layout: $(cat out)"

# Errors: kind and position, exit 1, one line.
bad_check="${plain:0:20}$(((${plain:20:1} + 1) % 10))"
expect_error 1 order decode "$bad_check" --key-file keys1
grep -q 'kind check, position 21' err || fail "wrong check: $(cat err)"
expect_error 1 order decode "${plain:0:20}" --key-file keys1
grep -q 'kind length, position 0' err || fail "wrong length: $(cat err)"
expect_error 1 order decode "${plain:0:6}x${plain:7}" --key-file keys1
grep -q "kind character, position 7" err || fail "bad character: $(cat err)"
expect_error 1 order decode "9${plain:1}" --key-file keys1
grep -q 'kind \(version\|check\)' err || fail "unknown version: $(cat err)"

# A wrong key: another ID or an error, never a crash and never the right ID.
code=0
"$FLURRY" order decode "$plain" --key-file other >out 2>err || code=$?
[[ $code == 0 || $code == 1 ]] || fail "wrong key: exit $code: $(cat err)"
[[ $(cat out) != 249828521961062400 ]] || fail "a wrong key decoded the right ID"

# Rotation: a second key appended becomes active; old numbers still decode.
run 0 order encode 249828521961062400 --key-file keys12
new=$(cat out)
[[ ${new:0:1} == 2 ]] || fail "the new number does not carry version 2: $new"
[[ $new != "$plain" ]] || fail "rotation gave the same number"
run 0 order decode "$plain" "$new" --key-file keys12 --json
check_py '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
assert [r["id"] for r in rows] == ["249828521961062400"] * 2, rows
assert [r["key_version"] for r in rows] == ["1", "2"], rows
' out
# A retired key: numbers of its version are refused, naming the version.
printf '2 = %s\n' "$K2" >keys2
expect_error 1 order decode "$plain" --key-file keys2
grep -q "kind version, position 1" err || fail "retired key: $(cat err)"

# A tag is a source of its own: other numbers, decoded with the same --tag.
run 0 order encode 1 2 3 --key-file keys1 --tag orders
cp out tagged
cmp -s tagged <(head -n 3 codes) && fail "a tag's numbers equal the snowflake ones"
# shellcheck disable=SC2046
run 0 order decode $(cat tagged) --key-file keys1 --tag orders
[[ $(tr '\n' ' ' <out) == "1 2 3 " ]] || fail "tag decode: $(cat out)"
expect_error 1 order encode 1 --key-file keys1 --tag orders --prefix date
grep -q 'carry no date' err || fail "date prefix for a tag: $(cat err)"

# base32 with mod 37, a literal prefix, a date prefix.
run 0 order encode 249828521961062400 --key-file keys1 --alphabet base32 --prefix ord
b32=$(cat out)
[[ $b32 =~ ^ORD1[0-9A-Z*~$=]{14}$ ]] || fail "base32: '$b32'"
run 0 order decode "$(tr 'A-Z' 'a-z' <<<"$b32")" --key-file keys1 --alphabet base32 --prefix ord
[[ $(cat out) == 249828521961062400 ]] || fail "base32 decode: $(cat out)"
run 0 order encode 249828521961062400 --key-file keys1 --prefix date --utc-offset +08:00
[[ $(cat out) =~ ^261121[0-9]{21}$ ]] || fail "date prefix: $(cat out)"

# new: issued locally as flurry next does (distinct, increasing IDs underneath).
run 0 order new -n 200 --key-file keys1 --state-dir "$WORK/state"
cp out fresh
# shellcheck disable=SC2046
run 0 order decode $(cat fresh) --key-file keys1
check_py '
import sys
ids = [int(x) for x in open(sys.argv[1]).read().split()]
assert len(ids) == 200 and all(a < b for a, b in zip(ids, ids[1:])), ids[:5]
' out
expect_error 2 order new --tag orders --key-file keys1
expect_error 2 order new --server ftp://x --key-file keys1

# Bad key files and options: named, never the key bytes.
expect_error 2 order encode 1
grep -q 'FLURRY_ORDER_KEYS' err || fail "no keys: $(cat err)"
printf '1 = %szz\n' "${K1:0:30}" >badhex
expect_error 1 order encode 1 --key-file badhex
grep -q 'line 1' err || fail "bad hex: $(cat err)"
grep -q "${K1:0:8}" err && fail "the error shows key bytes: $(cat err)"
printf '1 = %s\n1 = %s\n' "$K1" "$K1" >dup
expect_error 1 order encode 1 --key-file dup
printf '1 = 2b7e\n' >short
expect_error 1 order encode 1 --key-file short
expect_error 1 order encode 1 --key-file "$WORK/missing"
expect_error 2 order encode x --key-file keys1
expect_error 2 order encode 1 --key-file keys1 --alphabet hex
expect_error 2 order encode 1 --key-file keys1 --alphabet base32 --check damm
grep -q -- '--check damm needs --alphabet digits' err || fail "mismatch: $(cat err)"
expect_error 2 order encode 1 --key-file keys1 --separator +
expect_error 2 order encode 1 --key-file keys1 --utc-offset +99:00
expect_error 1 order encode 1 --key-file keys1 --length 3
echo "PASS"
