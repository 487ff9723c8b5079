#!/usr/bin/env bash
# Bad command lines exit 2, inputs the library rejects exit 1; either way one line on stderr
# starting with "flurry: " and nothing on stdout.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

S=$WORK/state

# Usage errors: exit 2.
expect_error 2
expect_error 2 bogus
expect_error 2 --bogus
expect_error 2 next --bogus
expect_error 2 next -n
expect_error 2 next -n 0 --state-dir "$S"
expect_error 2 next -n abc --state-dir "$S"
expect_error 2 next -n -5 --state-dir "$S"
expect_error 2 next -n 1.5 --state-dir "$S"
expect_error 2 next -n 99999999999999999999999 --state-dir "$S"
expect_error 2 next -n '' --state-dir "$S"
expect_error 2 next --format xyz --state-dir "$S"
expect_error 2 next --format DEC --state-dir "$S"
expect_error 2 next --rollback sometimes --state-dir "$S"
expect_error 2 next --node x --state-dir "$S"
expect_error 2 next --node -1 --state-dir "$S"
expect_error 2 next --max-lead soon --state-dir "$S"
expect_error 2 next --max-wait 99999999999999999 --state-dir "$S"
expect_error 2 next --state-dir ''
expect_error 2 decode
expect_error 2 decode 1 2
expect_error 2 decode 1 --format xyz
expect_error 2 decode --json
expect_error 2 layout --list twitter
expect_error 2 layout flurry twitter
expect_error 2 bench --threads 0
expect_error 2 bench --threads many
expect_error 2 bench --seconds 0
expect_error 2 bench --seconds abc
expect_error 2 bench --seconds -1
expect_error 2 bench --seconds nan
expect_error 2 bench --batch 0
[[ ! -e $S && ! -e $XDG_STATE_HOME/flurry ]] || fail "a usage error created the state directory"

# The message says what is wrong.
run 2 next -n 0 --state-dir "$S"
grep -q -- '-n' err || fail "-n 0: message does not name the option: $(cat err)"
run 2 next --format xyz --state-dir "$S"
grep -q 'xyz' err || fail "--format xyz: message does not show the value: $(cat err)"
run 2 bogus
grep -q 'bogus' err || fail "unknown verb: message does not show it: $(cat err)"

# Rejected by the library: exit 1.
expect_error 1 next --layout 'time:41,seq:0' --state-dir "$S"
expect_error 1 next --layout 'time:41,node:10,seq:12,extra' --state-dir "$S"
expect_error 1 next --layout 'time:99999999999999999999@1ms,node:1,seq:1' --state-dir "$S"
expect_error 1 next --layout "$(printf 'time:41\001,node:10,seq:12')" --state-dir "$S"
expect_error 1 next --layout '' --state-dir "$S"
expect_error 1 next --node 5000 --state-dir "$S"
expect_error 1 next --node 1024 --state-dir "$S"
expect_error 1 next --layout uid-generator --state-dir "$S"
expect_error 1 next --rollback clock --state-dir "$S" # the flurry layout has no clock field
expect_error 1 decode notanumber
expect_error 1 decode 99999999999999999999999
expect_error 1 decode 18446744073709551616
expect_error 1 decode 9223372036854775808 # bit 63 set: not an ID of a 63-bit layout
expect_error 1 decode ''
expect_error 1 decode 12x4
expect_error 1 decode --format hex 0xzz
expect_error 1 decode --format hex 10000000000000000
expect_error 1 decode --format base32 'U0000000000000'
expect_error 1 decode --format base62 'abc!'
expect_error 1 decode --layout 'time:41,seq:0' 1
expect_error 1 decode --layout js-safe 9007199254740992 # 2^53 does not fit in 53 bits
expect_error 1 layout 'time:41,seq:0'
expect_error 1 layout nosuchpreset
expect_error 1 layout "$(head -c 3000 /dev/zero | tr '\0' 'x')"
expect_error 1 bench --layout 'time:41,seq:0' --seconds 0.1
expect_error 1 bench --layout uid-generator --seconds 0.1

run 1 decode notanumber
grep -q 'notanumber\|character\|digit' err || fail "decode notanumber: unclear message: $(cat err)"
run 1 next --node 5000 --state-dir "$S"
grep -q '5000\|node' err || fail "--node 5000: unclear message: $(cat err)"

echo "ok"
