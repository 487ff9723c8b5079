#!/usr/bin/env bash
# The thread-safety check fails on a planted violation: tools/check-thread-safety.py, given
# tests/static/planted_thread_safety_violation.cc, must exit 1 and report every line marked
# PLANTED there (as file:line:col: clang's message), and no other line.
# Usage: planted_thread_safety.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$1
src=$2
planted=tests/static/planted_thread_safety_violation.cc
fail() { echo "FAIL: $*" >&2; printf '%s\n' "$out" >&2; exit 1; }

out=$(cd "$src" && python3 tools/check-thread-safety.py --build-dir "$build" --file "$planted" 2>&1)
rc=$?
printf '%s\n' "$out"
((rc == 1)) || fail "the check exited $rc on a planted violation, not 1"
mapfile -t want < <(grep -n 'PLANTED' "$src/$planted" | grep -v '^[0-9]*://' | cut -d: -f1)
((${#want[@]} == 2)) || fail "expected 2 PLANTED lines in $planted, found ${#want[@]}"
for line in "${want[@]}"; do
  grep -Eq "^$planted:$line:[0-9]+: .*(requires holding|calling function).*mutex 'mu_'" <<<"$out" ||
    fail "line $line of $planted (planted) was not reported as file:line:col: message"
done
reported=$(grep -Ec "^$planted:[0-9]+:[0-9]+: " <<<"$out")
((reported == ${#want[@]})) ||
  fail "$reported violations reported, ${#want[@]} planted (a right use was reported too?)"
grep -q "^check-thread-safety: ${#want[@]} violation(s)" <<<"$out" || fail "no summary line"
echo "ok: the ${#want[@]} planted violations were reported with file:line, nothing else"
