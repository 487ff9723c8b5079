#!/usr/bin/python3
"""The fleet harness's duplicate check (bench/fleet/fleet.py: read_batches, find_overlaps) on
synthetic collector output: it must accept IDs handed on correctly and catch every way the fleet
could repeat one. Needs no root and no server."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet  # noqa: E402

failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAILED: {what}")


def run(lines_by_file):
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for i, lines in enumerate(lines_by_file):
            p = os.path.join(d, f"ids-{i}.txt")
            with open(p, "w") as f:
                f.write("\n".join(lines) + "\n")
            paths.append(p)
        batches, bad, statuses = fleet.read_batches(paths)
        overlaps, total = fleet.find_overlaps(batches)
        return overlaps, total, bad, statuses


# Node 5 held by one process, then by another that starts above it: no overlap.
ov, total, bad, st = run([["1000 0 200 5 100 199 100", "1100 0 503 0 0 0 0"],
                          ["2000 1 200 5 200 299 100", "2100 1 200 7 10 19 10"]])
expect(not ov and total == 210 and bad == 0, f"a correct hand-off is accepted ({ov}, {total}, {bad})")
expect(st == {200: 3, 503: 1}, f"answers counted by status ({st})")

# The next owner starts at the last owner's last ID: one ID twice.
ov, total, _, _ = run([["1000 0 200 5 100 199 100"], ["2000 1 200 5 199 250 52"]])
expect(len(ov) == 1, f"an ID issued twice across processes is caught ({ov})")

# A batch inside an earlier, longer one, with a third after both: still caught.
ov, _, _, _ = run([["1 0 200 9 100 1000 900", "2 0 200 9 2000 2100 101"], ["3 1 200 9 500 510 11"]])
expect(len(ov) == 1 and ov[0][1][1] == 500, f"a batch nested in an earlier one is caught ({ov})")

# The same range on two different nodes is no duplicate (the node field differs).
ov, _, _, _ = run([["1 0 200 1 100 199 100"], ["2 1 200 2 100 199 100"]])
expect(not ov, f"equal ranges on two nodes are not overlaps ({ov})")

# A batch that failed the collector's own check (not increasing, or two nodes in one batch).
_, _, bad, _ = run([["1 0 1 3 100 90 11", "2 0 200 3 200 300 101"]])
expect(bad == 1, f"a batch out of order is counted ({bad})")

# Malformed lines (a collector's usage message, a torn last line) are not batches.
ov, total, _, _ = run([["fleet_collect: usage", "1 0 200 4 1 10 10", "2 0 200 4 11"]])
expect(total == 10 and not ov, f"malformed lines are ignored ({total})")

if failures:
    print(f"{len(failures)} failed")
    sys.exit(1)
print("ok")
