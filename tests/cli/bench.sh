#!/usr/bin/env bash
# flurry bench: reports its measurements, checks uniqueness, leaves no temporary directory.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

find /tmp -maxdepth 1 -name 'flurry-bench-*' | sort >before

# check_json THREADS BATCH LIMIT: the last output is the JSON report of a good run.
check_json() {
  check_py '
import json, sys
j = json.load(open(sys.argv[1]))
threads, batch, limit = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
keys = {"ids_per_second", "layout_limit_per_second", "threads", "seconds", "batch", "ids", "unique",
        "stopped_by", "measures"}
assert set(j) == keys, sorted(j)
assert j["unique"] is True
assert j["stopped_by"] in ("time", "buffer_full"), j
assert "generator calls only" in j["measures"] and "after timing" in j["measures"], j
assert j["threads"] == threads and j["batch"] == batch, j
assert j["layout_limit_per_second"] == limit, j
assert j["ids"] > 0 and j["ids"] % batch == 0, j
assert 0.1 < j["seconds"] < 10, j
assert abs(j["ids_per_second"] - j["ids"] / j["seconds"]) <= 0.01 * j["ids_per_second"] + 1, j
' out "$@"
}

run 0 bench --seconds 0.3 --json
[[ $(wc -l <out) == 1 ]] || fail "bench --json printed more than one line: $(cat out)"
check_json 1 1 4096000

run 0 bench --seconds 0.3 --threads 2 --batch 64 --json
check_json 2 64 4096000

run 0 bench --seconds 0.2 --layout multiclock --threads 3 --json
check_json 3 1 1024000

run 0 bench --seconds 0.2
for key in ids_per_second layout_limit_per_second threads seconds batch ids unique; do
  grep -Eq "^$key +[0-9a-z.]+$" out || fail "bench output lacks $key: $(cat out)"
done
grep -Eq '^unique +true$' out || fail "bench: not unique: $(cat out)"
grep -Eq '^stopped_by +(time|buffer_full)$' out || fail "bench output lacks stopped_by: $(cat out)"
grep -Eq '^measures +generator calls only; .*checked after timing$' out ||
  fail "bench output does not say what it measures: $(cat out)"

# --reference: the textbook snowflake through the same harness and threads, its IDs checked too.
run 0 bench --seconds 0.3 --threads 2 --reference --json
check_py '
import json, sys
j = json.load(open(sys.argv[1]))
ref = j["reference"]
assert ref["name"].startswith("textbook snowflake"), ref
assert ref["unique"] is True and ref["ids"] > 0 and 0.1 < ref["seconds"] < 10, ref
assert abs(ref["ids_per_second"] - ref["ids"] / ref["seconds"]) <= 0.01 * ref["ids_per_second"] + 1, ref
assert abs(j["ratio_to_reference"] - j["ids_per_second"] / ref["ids_per_second"]) < 1e-9, j
assert j["unique"] is True and j["threads"] == 2, j
' out
run 0 bench --seconds 0.2 --reference
grep -Eq '^reference +textbook snowflake' out || fail "bench --reference does not name it: $(cat out)"
grep -Eq '^reference_ids_per_second +[0-9]+$' out || fail "bench --reference lacks its rate: $(cat out)"
grep -Eq '^reference_unique +true$' out || fail "bench --reference: not unique: $(cat out)"
grep -Eq '^ratio_to_reference +[0-9.]+$' out || fail "bench --reference lacks the ratio: $(cat out)"

# A batch larger than the generator can reserve within max_lead is refused by the library.
expect_error 1 bench --seconds 0.2 --batch 16777216

find /tmp -maxdepth 1 -name 'flurry-bench-*' | sort >after
leftover=$(comm -13 before after)
[[ -z $leftover ]] || fail "bench left temporary directories: $leftover"

echo "ok"
