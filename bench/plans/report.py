#!/usr/bin/env python3
"""The plan benchmark's table: per plan the measured step time and peak
memory per GPU (the median step of steps 6-20 of OUT/NAME.jsonl, the largest
peak) beside `tesserac --explain`'s prediction (HERE/NAME.explain.txt: the
"Plan time per step" step line and the "Plan memory per device" total), and
the plan the search picks on its own (HERE/search.explain.txt).

  python3 report.py HERE OUT
"""
import json
import os
import re
import statistics
import sys

PLANS = [("dp", "DP (--nproc 2)"), ("zero1", "ZeRO-1 (--nproc 2 --zero 1)"),
         ("tp", "TP (--mesh tp=2, Megatron column/row)")]


def prediction(path):
    """(step ms, MiB per device) of a plan's --explain output."""
    text = open(path).read()
    plan_time = text[text.index("Plan time per step"):]
    step = float(re.search(r"^\s+step\s+([0-9.]+)", plan_time, re.M).group(1))
    plan_memory = text[text.index("Plan memory per device"):]
    total = float(re.search(r"^\s+total\s+([0-9.]+)", plan_memory, re.M).group(1))
    return step, total


def measured(path):
    """(median step ms, tokens/s at it, peak GiB) of a run, or None."""
    if not os.path.exists(path):
        return None
    rows = [json.loads(line) for line in open(path) if line.strip()]
    timed = [row for row in rows if row["step"] > 5]
    if not timed:
        return None
    ms = statistics.median(row["step_ms"] for row in timed)
    tokens = statistics.median(row["tokens_per_s"] for row in timed)
    peak = max(row["peak_memory_gib"] for row in rows)
    return ms, tokens, peak


def search_choice(path):
    """What the unconstrained search picked: its ZeRO line and the
    distinct strategies of the layers' linears."""
    text = open(path).read()
    zero = re.search(r"^\s+ZeRO\s+(.*)$", text, re.M)
    linears = sorted(set(re.findall(r"tess\.linear\s+(\S+: [^\n]+)", text)))
    return (zero.group(1) if zero else "?"), linears


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    here, out = sys.argv[1], sys.argv[2]
    print("| plan | measured ms/step | predicted ms | predicted / measured "
          "| tokens/s | peak GiB per GPU | predicted GiB |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    fastest = None
    for name, title in PLANS:
        step, mib = prediction(os.path.join(here, name + ".explain.txt"))
        run = measured(os.path.join(out, name + ".jsonl"))
        if run is None:
            print(f"| {title} | failed | {step:.1f} | | | | {mib / 1024:.2f} |")
            continue
        ms, tokens, peak = run
        if fastest is None or ms < fastest[1]:
            fastest = (name, ms)
        print(f"| {title} | {ms:.1f} | {step:.1f} | {step / ms:.2f} "
              f"| {tokens:,.0f} | {peak:.2f} | {mib / 1024:.2f} |")
    zero, linears = search_choice(os.path.join(here, "search.explain.txt"))
    print(f"search's own plan on --mesh 2: ZeRO {zero}; linears: "
          + "; ".join(linears))
    if fastest:
        print(f"fastest measured: {fastest[0]} ({fastest[1]:.1f} ms)")


if __name__ == "__main__":
    main()
