#!/usr/bin/env bash
# flurry layout: the diagram and facts of the default and preset layouts; expired layouts fail.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

# expect_lines PATTERN...: each extended regex matches a line of the last output.
expect_lines() {
  local p
  for p in "$@"; do
    grep -Eq -- "$p" out || fail "no line matches /$p/ in:
$(cat out)"
  done
}

# check_diagram: the first five lines are the diagram; the bit positions run from 63 to 0, the
# borders line up, and nothing is wider than 100 columns.
check_diagram() {
  check_py '
import sys
lines = open(sys.argv[1]).read().split("\n")
pos, top, names, bottom, widths = lines[:5]
assert pos.split()[0] == "63" and pos.split()[-1] == "0", pos
assert top == bottom and top.startswith("+") and top.endswith("+") and set(top) <= set("+-"), top
assert names.startswith("|") and names.endswith("|") and len(names) == len(top), names
bars = [i for i, c in enumerate(names) if c == "|"]
plus = [i for i, c in enumerate(top) if c == "+"]
assert bars == plus, (bars, plus)
for line in lines:
    assert len(line) <= 100, "line wider than 100 columns: " + line
' out
}

run 0 layout
[[ ! -s err ]] || fail "layout wrote to stderr: $(cat err)"
cp out default
check_diagram
expect_lines '^\| *0 *\| +time +\| +node +\| +seq +\|$' '^ +41 bits +10 bits +12 bits$' \
  '^preset +flurry$' '^text +time:41@1ms,node:10,seq:12;epoch=' '^bits +63$' \
  '^epoch +2025-01-01T00:00:00\.000Z$' '^unit +1ms$' \
  '^ends +2094-09-07T15:47:35\.552Z \([0-9]+\.[0-9] years from now\)$' \
  '^rate limit +4096000 IDs/s per node$' '^nodes +1024 \(node:10\)$'
if grep -q '^clock' out; then fail "flurry has no clock field: $(cat out)"; fi
# The time field is drawn one column per bit, the positions at its edges.
grep -Eq '^\+-+\+-{41}\+-{10}\+-{12}\+$' out || fail "box widths are not the bit counts: $(sed -n 2p out)"
expect_lines '^ 63 +62 +22 21 +12 11 +0$'
# Years remaining: about 2094 minus this year.
years=$(sed -nE 's/^ends .*\(([0-9]+)\.[0-9] years from now\)$/\1/p' out)
this_year=$(date -u +%Y)
((years >= 2094 - this_year - 1 && years <= 2094 - this_year)) || fail "years remaining: $years"

run 0 layout flurry
cmp -s out default || fail "layout flurry differs from layout: $(diff out default)"

run 0 layout twitter
check_diagram
expect_lines '\| +datacenter +\| +worker +\|' '^preset +twitter$' \
  '^epoch +2010-11-04T01:42:54\.657Z$' '^ends +2080-07-10T17:30:30\.209Z ' \
  '^rate limit +4096000 IDs/s per node$' '^nodes +1024 \(datacenter:5, worker:5\)$'

run 0 layout multiclock
check_diagram
expect_lines '\| +clock +\|' '^clock gens +16 \(clock:4\)$' '^nodes +256 \(worker:8\)$' \
  '^rate limit +1024000 IDs/s per node$'

run 0 layout sonyflake
check_diagram
expect_lines '^unit +10ms$' '^rate limit +25600 IDs/s per node$' '^nodes +65536 \(machine:16\)$' \
  '\| +time +\| +seq +\| +machine +\|$'

run 0 layout js-safe
check_diagram
expect_lines '^bits +53$' '^ 63 +53 52 ' '^\| +0 +\| +time +\|'

run 0 layout 'time:40@10ms,shard:12,seq:11;epoch=2024-06-01Z'
check_diagram
expect_lines '^unit +10ms$' '^epoch +2024-06-01T00:00:00\.000Z$' '^nodes +4096 \(shard:12\)$' \
  '^rate limit +204800 IDs/s per node$'
if grep -q '^preset' out; then fail "a custom layout shows a preset: $(cat out)"; fi

# uid-generator's 28 bits of seconds ran out in 2024: the command says so and fails.
run 1 layout uid-generator
check_error_output "layout uid-generator"
grep -q 2024 err || fail "the message does not mention 2024: $(cat err)"

# --list: one line per preset (name, text, summary); every live preset shows, by name and text.
run 0 layout --list
cp out list
[[ ! -s err ]] || fail "layout --list wrote to stderr: $(cat err)"
for name in flurry twitter sonyflake instagram uid-generator multiclock region js-safe; do
  grep -q "^$name " list || fail "--list lacks $name: $(cat list)"
done
[[ $(head -n 1 list | awk '{print $1}') == flurry ]] || fail "--list does not start with flurry"
while read -r name text summary; do
  [[ -n $summary ]] || fail "--list: no summary for $name"
  if [[ $name == uid-generator ]]; then
    expect_error 1 layout "$name"
    expect_error 1 layout "$text"
    continue
  fi
  run 0 layout "$name"
  check_diagram
  grep -q "^preset \+$name\$" out || fail "layout $name does not name its preset"
  canonical=$(sed -n 's/^text \+//p' out)
  run 0 layout "$text"
  grep -qxF "text         $canonical" out || fail "layout '$text' is not the same as $name: $(cat out)"
  run 0 layout "$canonical"
  grep -qxF "text         $canonical" out || fail "the canonical text of $name does not round-trip"
done <list

echo "ok"
