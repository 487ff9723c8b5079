#!/usr/bin/env bash
# next prints fresh, distinct, increasing IDs; decode takes them apart exactly; every --format
# round-trips through decode --format.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

S=$WORK/state

# next: 1000 distinct increasing decimal IDs, one per line.
run 0 next -n 1000 --state-dir "$S"
[[ ! -s err ]] || fail "next wrote to stderr: $(cat err)"
cp out ids1
check_py '
import sys
lines = open(sys.argv[1]).read().split("\n")
assert lines[-1] == "", "output does not end with a newline"
ids = lines[:-1]
assert len(ids) == 1000, len(ids)
for s in ids:
    assert s.isdigit() and s == str(int(s)), repr(s)
vals = [int(s) for s in ids]
assert all(a < b for a, b in zip(vals, vals[1:])), "not strictly increasing"
assert 0 < vals[0] < 2**63
' ids1
# By default the node ID is leased from the state directory's registry, as flurry serve does.
[[ -f $S/registry.db ]] || fail "no registry.db in the state directory: $(ls -la "$S")"

# Default: one ID, default state dir $XDG_STATE_HOME/flurry (lib.sh points it into $WORK), the
# same absolute directory from any working directory.
run 0 next
[[ $(wc -l <out) == 1 ]] || fail "next printed $(wc -l <out) lines"
[[ -f $XDG_STATE_HOME/flurry/registry.db ]] || fail "next did not use \$XDG_STATE_HOME/flurry by default"
[[ ! -e flurry-data ]] || fail "next created ./flurry-data"

# decode --json of one of them: node 0, a time within a few seconds of now, exact arithmetic.
first=$(head -n 1 ids1)
now_ms=$(date +%s%3N)
run 0 decode --json "$first"
cp out dec.json
check_py '
import json, sys, re, datetime
j = json.load(open(sys.argv[1]))
idtext, now_ms = sys.argv[2], int(sys.argv[3])
i = int(idtext)
keys = ["id", "layout", "time", "unix_ms", "ticks", "node", "seq", "fields", "encodings"]
assert list(j.keys()) == keys, list(j.keys())
assert j["id"] == idtext and isinstance(j["id"], str)
assert j["layout"].startswith("time:41@1ms,node:10,seq:12;"), j["layout"]
assert j["node"] == 0
assert j["ticks"] == i >> 22 and j["seq"] == i & 4095
epoch_ms = 1735689600000  # 2025-01-01T00:00:00Z
assert j["unix_ms"] == epoch_ms + j["ticks"], (j["unix_ms"], j["ticks"])
assert abs(j["unix_ms"] - now_ms) < 5000, (j["unix_ms"], now_ms)
t = datetime.datetime.fromtimestamp(j["unix_ms"] / 1000, datetime.timezone.utc)
assert j["time"] == t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (j["unix_ms"] % 1000), j["time"]
assert list(j["fields"].items()) == [("time", j["ticks"]), ("node", 0), ("seq", j["seq"])], j["fields"]
e = j["encodings"]
assert list(e.keys()) == ["dec", "hex", "base32", "base62"], list(e.keys())
assert e["dec"] == idtext
assert e["hex"] == "%016x" % i, e["hex"]
assert re.fullmatch(r"[0-9A-HJKMNP-TV-Z]{13}", e["base32"]), e["base32"]
assert re.fullmatch(r"[0-9A-Za-z]{1,11}", e["base62"]), e["base62"]
' dec.json "$first" "$now_ms"

# Plain text decode shows the fields, time, unix_ms, node and all encodings.
run 0 decode "$first"
hex=$(python3 -c 'import sys; print("%016x" % int(sys.argv[1]))' "$first")
for pattern in "^id +$first\$" '^ +time +[0-9]+ ' '^ +node +0 ' '^ +seq +[0-9]+ ' \
  '^time +20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9:]{8}\.[0-9]{3}Z$' '^unix_ms +[0-9]{13}$' \
  '^node +0$' "^ +dec +$first\$" "^ +hex +$hex\$" '^ +base32 +[0-9A-Z]{13}$' '^ +base62 +[0-9A-Za-z]+$'; do
  grep -Eq -- "$pattern" out || fail "decode output lacks /$pattern/: $(cat out)"
done

# Known values: a Twitter snowflake, decoded with the twitter preset.
tw=1541815603606036480
run 0 decode --layout twitter --json "$tw"
check_py '
import json, sys, datetime
j = json.load(open(sys.argv[1]))
i = int(sys.argv[2])
ms = (i >> 22) + 1288834974657
assert j["unix_ms"] == ms, (j["unix_ms"], ms)
assert j["time"] == "2022-06-28T16:07:40.105Z", j["time"]
dc, worker, seq = (i >> 17) & 31, (i >> 12) & 31, i & 4095
assert j["fields"] == {"time": i >> 22, "datacenter": dc, "worker": worker, "seq": seq}, j["fields"]
assert list(j["fields"].keys()) == ["time", "datacenter", "worker", "seq"]
assert j["node"] == dc << 5 | worker and j["seq"] == seq
assert "clock" not in j
' out "$tw"

# Expired layouts still decode (uid-generator ran out in 2024).
uid=$(((5000000 << 35) | (3 << 13) | 7))
run 0 decode --layout uid-generator --json "$uid"
check_py '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ticks"] == 5000000 and j["node"] == 3 and j["seq"] == 7, j
assert j["unix_ms"] == 1463702400000 + 5000000 * 1000, j["unix_ms"]  # epoch 2016-05-20
assert j["time"] == "2016-07-16T20:53:20.000Z", j["time"]
' out

# Layouts with a clock field report it; sonyflake puts the machine last.
mc=$(((123456 << 22) | (5 << 18) | (200 << 10) | 9))
run 0 decode --layout multiclock --json "$mc"
check_py '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["clock"] == 5 and j["node"] == 200 and j["seq"] == 9 and j["ticks"] == 123456, j
assert list(j["fields"].keys()) == ["time", "clock", "worker", "seq"]
' out
run 0 decode --layout sonyflake --json $(((1000 << 24) | (17 << 16) | 4242))
check_py '
import json, sys
j = json.load(open(sys.argv[1]))
assert list(j["fields"].items()) == [("time", 1000), ("seq", 17), ("machine", 4242)], j["fields"]
assert j["node"] == 4242 and j["seq"] == 17
assert j["unix_ms"] == 1409529600000 + 10000, j["unix_ms"]  # epoch 2014-09-01, 10 ms units
' out

# Every --format round-trips through decode --format, and later runs issue larger IDs.
prev_max=$(tail -n 1 ids1)
for fmt in dec hex base32 base62; do
  run 0 next -n 20 --format "$fmt" --state-dir "$S"
  cp out "ids.$fmt"
  case $fmt in
  dec) shape='^[1-9][0-9]*$' ;;
  hex) shape='^[0-9a-f]{16}$' ;;
  base32) shape='^[0-9A-HJKMNP-TV-Z]{13}$' ;;
  base62) shape='^[0-9A-Za-z]{1,11}$' ;;
  esac
  [[ $(wc -l <"ids.$fmt") == 20 ]] || fail "--format $fmt printed $(wc -l <"ids.$fmt") lines"
  if grep -Evq -- "$shape" "ids.$fmt"; then fail "--format $fmt: bad shape: $(cat "ids.$fmt")"; fi
  if [[ $fmt == hex || $fmt == base32 ]]; then
    sort -c "ids.$fmt" || fail "--format $fmt does not sort like the numbers"
  fi
  : >"dec.$fmt"
  while read -r text; do
    run 0 decode --format "$fmt" --json "$text"
    python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["encodings"][sys.argv[2]] == sys.argv[3], (j["encodings"], sys.argv[3])
assert j["node"] == 0
print(j["id"])
' out "$fmt" "$text" >>"dec.$fmt" || fail "decode --format $fmt $text did not round-trip"
  done <"ids.$fmt"
  check_py '
import sys
vals = [int(s) for s in open(sys.argv[1]).read().split()]
assert len(vals) == 20
assert int(sys.argv[2]) < vals[0], "a later run issued a smaller ID"
assert all(a < b for a, b in zip(vals, vals[1:]))
' "dec.$fmt" "$prev_max"
  prev_max=$(tail -n 1 "dec.$fmt")
done
# Decoding in one encoding and another agrees.
h=$(head -n 1 ids.hex)
run 0 decode --format hex --json "$h"
d=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' out)
run 0 decode --json "$d"
grep -q "\"hex\":\"$h\"" out || fail "decode $d does not give hex $h: $(cat out)"
# Lenient hex input (0x prefix, upper case, no padding) decodes to the same ID.
run 0 decode --format hex --json "0x$(printf '%X' "$d")"
grep -q "\"id\":\"$d\"" out || fail "lenient hex did not decode to $d: $(cat out)"

# Many IDs at once: buffered output, chunks larger than one batch, all distinct.
run 0 next -n 300000 --state-dir "$S"
check_py '
import sys
vals = [int(s) for s in open(sys.argv[1]).read().split()]
assert len(vals) == 300000, len(vals)
assert all(a < b for a, b in zip(vals, vals[1:])), "not strictly increasing"
assert vals[0] > int(sys.argv[2])
' out "$prev_max"

# A static node ID cannot share a directory with the leasing registry (it would not see the
# horizons kept there), and the other way round.
run 1 next -n 3 --node 1023 --state-dir "$S"
grep -q 'registry.db' err || fail "static node in a registry directory: unclear message: $(cat err)"
[[ ! -s out ]] || fail "IDs printed although refused: $(cat out)"
ST=$WORK/static
# A static node ID: its own state file, IDs carrying its node ID.
run 0 next -n 3 --node 1023 --state-dir "$ST"
[[ -f $ST/horizon-node-1023.state ]] || fail "no state file for node 1023"
run 0 decode --json "$(head -n 1 out)"
grep -q '"node":1023' out || fail "node 1023 not in the ID: $(cat out)"

# A state directory written for one layout refuses another.
expect_error 1 next --layout twitter --state-dir "$S"

echo "ok"
