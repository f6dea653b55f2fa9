#!/usr/bin/env python3
"""The plan benchmark's table: per plan the measured step time and peak
memory per GPU (the median step of steps 6-20 of OUT/NAME.jsonl, the largest
peak) beside `tesserac --explain`'s prediction (HERE/NAME.explain.txt: the
"Plan time per step" step line and the "Plan memory per device" total), and
the plan the search picks on its own (HERE/search.explain.txt).

  python3 report.py HERE OUT
"""
import os
import re
import sys

from metrics import measured, predicted

PLANS = [("dp", "DP (--nproc 2)"), ("zero1", "ZeRO-1 (--nproc 2 --zero 1)"),
         ("tp", "TP (--mesh tp=2, Megatron column/row)")]


def prediction(path):
    """(step ms, MiB per device) of a plan's --explain output."""
    return predicted(path, "Plan time per step", "Plan memory per device")


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
