#!/usr/bin/env python3
"""Compares the training state --explain predicts for each device of a
compiled pipeline ("device D: ... (state S, ..." in MiB, CompiledPipelineMemory.h)
with the state the driver allocated on that stage's ranks ("rank R (stage
D): resident training state: N bytes"), within a relative tolerance.

usage: pipeline_state.py EXPLAIN LOG [TOLERANCE]
Prints one line per device and "OK", or exits 1 naming the device."""
import re
import sys


def main():
    explain, log = sys.argv[1], sys.argv[2]
    tolerance = float(sys.argv[3]) if len(sys.argv) > 3 else 0.01
    predicted = {}
    for line in open(explain):
        match = re.match(r"\s+device (\d+): [0-9.]+ MiB \(state ([0-9.]+),", line)
        if match:
            predicted[int(match.group(1))] = float(match.group(2)) * 2**20
    allocated = {}
    for line in open(log):
        match = re.search(r"\(stage (\d+)\): resident training state: (\d+) bytes", line)
        if match:
            stage = int(match.group(1))
            allocated[stage] = max(allocated.get(stage, 0), int(match.group(2)))
    if not predicted or sorted(predicted) != sorted(allocated):
        print(f"devices differ: predicted {sorted(predicted)}, allocated {sorted(allocated)}")
        return 1
    for device in sorted(predicted):
        gap = abs(predicted[device] - allocated[device]) / allocated[device]
        print(f"device {device}: predicted {predicted[device]:.0f} bytes, "
              f"allocated {allocated[device]}, {100 * gap:.2f} %")
        if gap > tolerance:
            print(f"device {device}: more than {100 * tolerance:.1f} % apart")
            return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
