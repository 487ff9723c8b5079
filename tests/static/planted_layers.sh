#!/usr/bin/env bash
# The layering check fails on planted violations: tools/check-layers.py, given
# tests/static/planted_layer_violation.cc as a source of src/ops, must exit 1 and report exactly
# the lines marked PLANTED there (an include of a higher layer, of another library's private
# header, and one spelled with ".."), each as file:line: message, and no other line.
# Usage: planted_layers.sh SOURCE_DIR
set -uo pipefail
src=$1
planted=tests/static/planted_layer_violation.cc
out=$(cd "$src" && python3 tools/check-layers.py --as ops "$planted" 2>&1)
rc=$?
fail() { echo "FAIL: $*" >&2; printf '%s\n' "$out" >&2; exit 1; }
printf '%s\n' "$out"
((rc == 1)) || fail "the check exited $rc on planted violations, not 1"
mapfile -t want < <(grep -n 'PLANTED' "$src/$planted" | grep -v '^[0-9]*://' | cut -d: -f1)
((${#want[@]} == 3)) || fail "expected 3 PLANTED lines in $planted, found ${#want[@]}"
grep -q "^$planted:${want[0]}: ops may not include http" <<<"$out" || fail "the arrow up was not reported"
grep -q "^$planted:${want[1]}: \"http/api.h\" is a private header of http" <<<"$out" ||
  fail "the private header was not reported"
grep -q "^$planted:${want[2]}: \"../http/json_views.h\" climbs out" <<<"$out" ||
  fail "the \"..\" spelling was not reported"
reported=$(grep -Ec "^$planted:[0-9]+: " <<<"$out")
((reported == 3)) || fail "$reported violations reported, 3 planted (a right include was reported too?)"
echo "ok: the 3 planted violations were reported with file:line, nothing else"
