#!/usr/bin/env bash
# flurry serve's configuration: defaults, a TOML file (--config), FLURRY_* environment variables
# and flags, in the order flags > environment > file > defaults, shown by --print-config; unknown
# keys and bad values are errors naming the key; a server configured only through the
# environment and a file really listens and limits as configured.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

# run CODE COMMAND...: stdout in $WORK/out, stderr in $WORK/err; fails unless it exited CODE
# (CODE may be a list like "1|2") within 20 s.
run() {
  local expect=$1
  shift
  local code=0
  timeout 20 "$@" >"$WORK/out" 2>"$WORK/err" </dev/null || code=$?
  [[ $code =~ ^($expect)$ ]] ||
    fail "$* exited $code, expected $expect; stdout: $(head -c 500 "$WORK/out"); stderr: $(head -c 500 "$WORK/err")"
}

# cfg KEY: the value of KEY in the --print-config output in $WORK/out (TOML "key = value" lines,
# possibly in [sections], or JSON), without quotes.
cfg() {
  python3 - "$1" "$WORK/out" <<'EOF'
import json, re, sys
key, text = sys.argv[1], open(sys.argv[2]).read()
def norm(k): return k.replace("-", "_").lower()
found = []
try:
    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if norm(k) == key and not isinstance(v, (dict, list)):
                    found.append(str(v))
                walk(v)
    walk(json.loads(text))
except ValueError:
    for line in text.splitlines():
        m = re.match(r'\s*([A-Za-z0-9_.-]+)\s*[=:]\s*(.*?)\s*(#.*)?$', line)
        if m and norm(m.group(1).split(".")[-1]) == key:
            v = m.group(2)
            if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
                v = v[1:-1]
            found.append(v)
if len(found) != 1:
    sys.exit(f"--print-config: key {key!r} found {len(found)} times in:\n{text}")
print(found[0])
EOF
}

# expect_cfg KEY VALUE DESCRIPTION: the printed KEY is VALUE (for layout: contains VALUE).
expect_cfg() {
  local v
  v=$(cfg "$1") || fail "$3: $(cfg "$1" 2>&1)"
  if [[ $1 == layout ]]; then
    [[ $v == *"$2"* ]] || fail "$3: layout is '$v', expected '$2'"
  else
    [[ $v == "$2" ]] || fail "$3: $1 is '$v', expected '$2'"
  fi
}

mkdir -p cwd
cd cwd

# 1. Defaults, with no configuration at all; printing starts nothing.
run 0 "$FLURRY" serve --print-config
expect_cfg listen 127.0.0.1:7609 defaults
expect_cfg registry sqlite defaults
expect_cfg layout flurry defaults
expect_cfg lease_ttl_ms 10000 defaults
expect_cfg max_batch 100000 defaults
expect_cfg rollback wait defaults
v=$(cfg data_dir) || fail "defaults: no data_dir"
# Absolute and documented: $XDG_STATE_HOME/flurry (lib.sh points it into $WORK).
[[ $v == "$XDG_STATE_HOME/flurry" ]] || fail "default data_dir is '$v', not $XDG_STATE_HOME/flurry"
[[ ! -e $XDG_STATE_HOME/flurry ]] || fail "--print-config created the data directory"
run 0 env -u XDG_STATE_HOME HOME=/nonexistent-home "$FLURRY" serve --print-config
v=$(cfg data_dir)
if [[ $(id -u) == 0 ]]; then want=/var/lib/flurry; else want=/nonexistent-home/.local/state/flurry; fi
[[ $v == "$want" ]] || fail "default data_dir without XDG_STATE_HOME is '$v', not $want"

# 2. A file overrides the defaults.
cat >"$WORK/file.toml" <<'EOF'
# a flurry configuration
listen = "127.0.0.1:1111"
layout = "sonyflake"
lease_ttl_ms = 1111
max_batch = 5000
rollback = "fail"
EOF
run 0 "$FLURRY" serve --config "$WORK/file.toml" --print-config
expect_cfg listen 127.0.0.1:1111 file
expect_cfg layout sonyflake file
expect_cfg lease_ttl_ms 1111 file
expect_cfg max_batch 5000 file
expect_cfg rollback fail file
expect_cfg registry sqlite "file (not set there)"

# 3. The environment beats the file.
export FLURRY_LISTEN=127.0.0.1:2222 FLURRY_LAYOUT=twitter FLURRY_LEASE_TTL_MS=2222
run 0 "$FLURRY" serve --config "$WORK/file.toml" --print-config
expect_cfg listen 127.0.0.1:2222 "env over file"
expect_cfg layout twitter "env over file"
expect_cfg lease_ttl_ms 2222 "env over file"
expect_cfg max_batch 5000 "file where env is silent"

# 4. Flags beat the environment.
run 0 "$FLURRY" serve --config "$WORK/file.toml" --print-config --listen 127.0.0.1:3333 --layout instagram \
  --lease-ttl-ms 3333
expect_cfg listen 127.0.0.1:3333 "flag over env"
expect_cfg layout instagram "flag over env"
expect_cfg lease_ttl_ms 3333 "flag over env"
expect_cfg max_batch 5000 "file where flags and env are silent"
unset FLURRY_LISTEN FLURRY_LAYOUT FLURRY_LEASE_TTL_MS

# 5. Errors name what is wrong: exit 2 (usage) or 1, nothing started.
check_named() { # check_named WHAT WORD: stderr mentions WORD
  grep -qi -- "$2" "$WORK/err" || fail "$1: the message does not name '$2': $(cat "$WORK/err")"
}
printf 'listen = "127.0.0.1:1111"\nbogus_key = 1\n' >"$WORK/unknown.toml"
run '1|2' "$FLURRY" serve --config "$WORK/unknown.toml" --print-config
check_named "unknown key" bogus_key
run '1|2' "$FLURRY" serve --config "$WORK/unknown.toml" --listen "127.0.0.1:$(free_port)" --data-dir "$WORK/d1"
check_named "unknown key (serving)" bogus_key
printf 'lease_ttl_ms = "soon"\n' >"$WORK/badvalue.toml"
run '1|2' "$FLURRY" serve --config "$WORK/badvalue.toml" --print-config
check_named "bad value" lease_ttl_ms
printf 'layout = "nosuchpreset"\n' >"$WORK/badlayout.toml"
run '1|2' "$FLURRY" serve --config "$WORK/badlayout.toml" --listen "127.0.0.1:$(free_port)" --data-dir "$WORK/d2"
check_named "bad layout" nosuchpreset
printf 'listen = \n' >"$WORK/syntax.toml"
run '1|2' "$FLURRY" serve --config "$WORK/syntax.toml" --print-config
run '1|2' "$FLURRY" serve --config "$WORK/does-not-exist.toml" --print-config
check_named "missing config file" does-not-exist
FLURRY_LEASE_TTL_MS=abc run '1|2' "$FLURRY" serve --print-config
check_named "bad environment value" 'FLURRY_LEASE_TTL_MS\|lease'
run 2 "$FLURRY" serve --lease-ttl-ms abc --print-config
check_named "bad flag value" 'lease-ttl-ms\|lease_ttl_ms'
run 2 "$FLURRY" serve --bogus-flag
check_named "unknown flag" bogus-flag
run '1|2' "$FLURRY" serve --rollback sometimes --print-config
check_named "bad rollback" sometimes
run '1|2' "$FLURRY" serve --registry nosuch --print-config
check_named "bad registry" nosuch
run '1|2' "$FLURRY" serve --listen nohostport --data-dir "$WORK/d3"
run '1|2' "$FLURRY" serve --max-batch 0 --print-config
[[ ! -e $WORK/d1 && ! -e $WORK/d2 ]] || fail "a refused configuration created its data directory"

# 6. A server configured by file and environment only: it listens where FLURRY_LISTEN says, keeps
#    its data where FLURRY_DATA_DIR says, and enforces the file's max_batch. Unrelated FLURRY_*
#    variables (a script's FLURRY_BIN, a typo) only draw a warning naming the closest setting.
PORT=$(free_port)
printf 'max_batch = 10\nlease_ttl_ms = 3000\nlisten = "127.0.0.1:1"\n' >"$WORK/serve.toml"
FLURRY_BIN=/usr/bin/flurry FLURRY_MAX_BACH=5 FLURRY_LISTEN=127.0.0.1:$PORT FLURRY_DATA_DIR=$WORK/envdata \
  "${PDEATH[@]}" "$FLURRY" serve --config "$WORK/serve.toml" >>"$WORK/env.log" 2>&1 &
PID=$!
SERVER_PIDS+=("$PID")
wait_ready "$PORT" "$PID" 15 || fail "the server configured by env and file is not ready on $PORT"
[[ -e $WORK/envdata/registry.db ]] || fail "no registry.db in FLURRY_DATA_DIR: $(ls -la "$WORK/envdata" 2>&1)"
expect_status 200 '/v1/ids?count=10'
expect_status 400 '/v1/ids?count=11'
grep -q count "$WORK/body" || fail "count=11 above max_batch 10: the message does not name count: $(cat "$WORK/body")"
# The start-up line names the node, layout, registry and listen address.
grep -q "127.0.0.1:$PORT" "$WORK/env.log" || fail "the start-up log does not show the listen address: $(head -5 "$WORK/env.log")"
grep -qi 'sqlite' "$WORK/env.log" || fail "the start-up log does not name the registry: $(head -5 "$WORK/env.log")"
grep -q 'time:41@1ms,node:10,seq:12\|flurry' "$WORK/env.log" || fail "the start-up log does not name the layout"
grep -q 'warning event=config_warning environment variable "FLURRY_MAX_BACH" .*closest is FLURRY_MAX_BATCH' "$WORK/env.log" ||
  fail "no warning naming FLURRY_MAX_BACH and FLURRY_MAX_BATCH: $(head -5 "$WORK/env.log")"
grep -q 'warning event=config_warning environment variable "FLURRY_BIN"' "$WORK/env.log" ||
  fail "no warning for FLURRY_BIN: $(head -5 "$WORK/env.log")"
stop_server "$PID"

echo "ok"
