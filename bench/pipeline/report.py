#!/usr/bin/env python3
"""The pipeline and remat benchmark's table: per run the measured step time
and peak memory per GPU (the median step of steps 6-20 of OUT/NAME.jsonl,
the largest peak over the ranks' metrics) beside the pipeline planner's
prediction (HERE/NAME.explain.txt: the "step" line of "Predicted step time
by part" and the "total" of "Memory per device", the fullest stage's), and
the layout its search picks for 2 devices (HERE/search.explain.txt).

  python3 report.py HERE OUT
"""
import os
import re
import sys

from metrics import measured, predicted

RUNS = [(f"{layout}-{remat}", f"{title}, remat {remat}")
        for layout, title in (("one", "1 GPU, batch 8"),
                              ("pp2", "2-stage 1F1B, 8 x 2 rows"))
        for remat in ("none", "selective", "full")]


def prediction(path):
    """(step ms, GiB on the fullest device) of a --explain --pipeline."""
    return predicted(path, "Predicted step time by part", "Memory per device")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    here, out = sys.argv[1], sys.argv[2]
    print("| run | measured ms/step | predicted ms | predicted / measured "
          "| tokens/s | peak GiB per GPU | predicted GiB | predicted / measured |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    fastest = None
    for name, title in RUNS:
        step, gib = prediction(os.path.join(here, name + ".explain.txt"))
        run = measured(os.path.join(out, name + ".jsonl"))
        if run is None:
            print(f"| {title} | not run | {step:.1f} | | | | {gib:.2f} | |")
            continue
        ms, tokens, peak = run
        if name.startswith("pp2") and (fastest is None or ms < fastest[1]):
            fastest = (name, ms)
        print(f"| {title} | {ms:.1f} | {step:.1f} | {step / ms:.2f} "
              f"| {tokens:,.0f} | {peak:.2f} | {gib:.2f} | {gib / peak:.2f} |")
    search = open(os.path.join(here, "search.explain.txt")).read()
    layout = re.search(r"^\s+layout\s+(.*)$", search, re.M)
    remat = re.search(r"^Remat per layer: (.*)$", search, re.M)
    print("search's own layout for 2 devices: "
          + (layout.group(1) if layout else "?")
          + "; remat " + (remat.group(1) if remat else "?"))
    if fastest:
        print(f"fastest measured pipeline run: {fastest[0]} ({fastest[1]:.1f} ms)")


if __name__ == "__main__":
    main()
