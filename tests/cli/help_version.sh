#!/usr/bin/env bash
# --help on every verb and at the top level, and --version.
# Usage: help_version.sh path/to/flurry VERSION
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
VERSION=${2:?usage: $0 path/to/flurry VERSION}

run 0 --version
[[ $(cat out) == "flurry $VERSION" ]] || fail "--version printed '$(cat out)', expected 'flurry $VERSION'"
[[ ! -s err ]] || fail "--version wrote to stderr: $(cat err)"

# expect_help ARGS... -- WORDS...: flurry ARGS exits 0, prints help on stdout mentioning WORDS.
expect_help() {
  local args=()
  while [[ $1 != -- ]]; do
    args+=("$1")
    shift
  done
  shift
  run 0 "${args[@]}"
  [[ ! -s err ]] || fail "flurry ${args[*]} wrote to stderr: $(cat err)"
  grep -qi 'usage' out || fail "flurry ${args[*]}: no usage line in: $(cat out)"
  local word
  for word in "$@"; do
    grep -qF -- "$word" out || fail "flurry ${args[*]} does not mention '$word': $(cat out)"
  done
}

expect_help --help -- next decode layout bench --version
expect_help -h -- next decode layout bench
expect_help next --help -- -n --count --layout --node --state-dir --format --rollback --max-lead --max-wait \
  dec hex base32 base62 wait fail clock
expect_help decode --help -- --layout --format --json ID
expect_help layout --help -- --list LAYOUT
expect_help bench --help -- --layout --threads --seconds --batch --json

# The help of a verb is the verb's, not the top level's.
run 0 next --help
grep -q 'state-dir' out || fail "next --help lacks --state-dir"
run 0 bench --help
if grep -q 'state-dir' out; then fail "bench --help shows next's options"; fi

echo "ok"
