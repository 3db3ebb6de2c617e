#!/usr/bin/env python3
"""Writes ctest's cost data (CTestCostData.txt) from the output of a ctest run.

ctest starts the tests it knows to be long first when it runs them in
parallel, but it learns their times only from an earlier run in the same
build directory. A fresh clone has none, so the longest tests may start last
and leave one core idle at the end. scripts/test.sh and .ci/run seed a new
build directory with the times checked in under test/ (written by this
script from a CI log):

  scripts/ctest_costs.py LOG RUN > test/ctest-costs.txt

LOG is ctest's console output; RUN picks the run in it (0: the first).
"""
import re
import sys

LINE = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) .*?([\d.]+) sec\s*$")


def runs(lines):
    """The test times of each ctest run in `lines`, in order."""
    current = {}
    for line in lines:
        m = LINE.match(line)
        if m:
            current[m.group(1)] = float(m.group(2))
        elif line.startswith("Total Test time") and current:
            yield current
            current = {}
    if current:
        yield current


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
        found = list(runs(f))
    which = int(sys.argv[2])
    if which >= len(found):
        sys.exit(f"{sys.argv[1]}: {len(found)} ctest runs, no run {which}")
    for name, seconds in sorted(found[which].items(), key=lambda kv: -kv[1]):
        print(f"{name} 1 {seconds:g}")
    print("---")


if __name__ == "__main__":
    main()
