#!/usr/bin/env python3
"""Compares two loss curves (JSONL files with "step" and "loss" per line): the
Tessera run's --metrics file and torch_curve.py's output. Prints both curves
side by side and the largest relative gap; exits 1 when it exceeds --tolerance.

  python3 compare_curves.py TESSERA.jsonl TORCH.jsonl [--tolerance 0.02]
"""
import argparse, json, sys

p = argparse.ArgumentParser()
p.add_argument("tessera"); p.add_argument("torch"); p.add_argument("--tolerance", type=float, default=0.02)
p.add_argument("--label", default="")
a = p.parse_args()

def curve(path):
    steps = {}
    for line in open(path):
        line = line.strip()
        if line:
            r = json.loads(line); steps[int(r["step"])] = float(r["loss"])
    return steps

t, r = curve(a.tessera), curve(a.torch)
common = sorted(set(t) & set(r))
if not common:
    sys.exit(f"compare_curves: no common steps between {a.tessera} and {a.torch}")
worst, worst_step = 0.0, 0
print(f"{'step':>5} {'tessera':>10} {'pytorch':>10} {'rel gap':>9}")
for s in common:
    gap = abs(t[s] - r[s]) / abs(r[s])
    if gap > worst: worst, worst_step = gap, s
    if s <= 5 or s % 10 == 0 or s == common[-1]:
        print(f"{s:5d} {t[s]:10.5f} {r[s]:10.5f} {gap * 100:8.3f}%")
verdict = "OK" if worst <= a.tolerance else "FAIL"
print(f"CURVE {a.label} steps={len(common)} max_rel_gap={worst * 100:.3f}% at step {worst_step} "
      f"tolerance={a.tolerance * 100:.1f}% {verdict}")
sys.exit(0 if verdict == "OK" else 1)
