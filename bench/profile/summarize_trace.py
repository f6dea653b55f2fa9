#!/usr/bin/env python3
"""Where the step's GPU time goes, from a `--trace` file (Chrome trace JSON):
kernel time grouped by kernel name (and by category), the busy fraction of
the GPU within each traced step, and the gaps between kernels.

  python3 summarize_trace.py TRACE.json [--top 40]
"""
import argparse, collections, json, re

p = argparse.ArgumentParser(); p.add_argument("trace"); p.add_argument("--top", type=int, default=40)
a = p.parse_args()
events = json.load(open(a.trace))["traceEvents"]
gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "nccl", "memcpy", "memset")]
steps = [e for e in events if e.get("ph") == "X" and e.get("name", "").startswith("step")]
def short(name):
    # Drop the argument list (the last top-level parenthesis) and "(anonymous
    # namespace)", keep template arguments: they tell kernels apart.
    name = name.replace("(anonymous namespace)::", "")
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):
        if ch == "<": depth += 1
        elif ch == ">": depth -= 1
        elif ch == "(" and depth == 0: cut = i; break
    return name[:cut][:110]
by = collections.defaultdict(lambda: [0.0, 0])
for e in gpu:
    k = (e["cat"], short(e["name"]))
    by[k][0] += e["dur"]; by[k][1] += 1
total = sum(v[0] for v in by.values())
nsteps = max(1, len(steps))
span = sum(s["dur"] for s in steps) if steps else (max(e["ts"] + e["dur"] for e in gpu) - min(e["ts"] for e in gpu))
print(f"traced steps: {len(steps)}; wall {span / 1000:.2f} ms; GPU busy {total / 1000:.2f} ms "
      f"({100 * total / span:.1f} %); per step: wall {span / nsteps / 1000:.2f} ms, GPU {total / nsteps / 1000:.2f} ms")
print(f"{'ms/step':>9} {'%':>6} {'calls':>6}  kind/name")
for (cat, name), (dur, n) in sorted(by.items(), key=lambda kv: -kv[1][0])[: a.top]:
    print(f"{dur / nsteps / 1000:9.3f} {100 * dur / total:6.2f} {n // nsteps:6d}  {cat}: {name}")

# Idle time: the gaps between GPU activity (every stream merged) inside each
# traced step, where a step's wall time the kernels do not cover goes. The
# largest gaps name the activity on either side and the host ranges (the
# driver's phases: data, forward_backward, optimizer, ...) open at the gap.
host = [e for e in events if e.get("ph") == "X" and e.get("cat") not in ("kernel", "nccl", "memcpy", "memset")
        and not e.get("name", "").startswith("step")]
gaps, idle = [], collections.Counter()
for s in steps:
    lo, hi = s["ts"], s["ts"] + s["dur"]
    inside = sorted((e for e in gpu if e["ts"] < hi and e["ts"] + e["dur"] > lo), key=lambda e: e["ts"])
    if not inside:
        continue
    idle["before the first GPU activity"] += max(0.0, inside[0]["ts"] - lo)
    end, last = inside[0]["ts"] + inside[0]["dur"], inside[0]
    for e in inside[1:]:
        if e["ts"] > end:
            gaps.append((e["ts"] - end, end, short(last["name"]), short(e["name"])))
            idle["between GPU activities (>= 50 us)" if e["ts"] - end >= 50 else "between GPU activities (< 50 us)"] += e["ts"] - end
        if e["ts"] + e["dur"] > end:
            end, last = e["ts"] + e["dur"], e
    idle["after the last GPU activity"] += max(0.0, hi - end)
if gaps or idle:
    print(f"\nGPU idle within the traced steps: {sum(idle.values()) / nsteps / 1000:.3f} ms/step")
    for what, us in idle.most_common():
        print(f"  {us / nsteps / 1000:9.3f} ms/step  {what}")
    print("largest gaps (us, the activity before -> after, host ranges open):")
    for dur, at, before, after in sorted(gaps, reverse=True)[:12]:
        mid = at + dur / 2
        open_ranges = sorted({h["name"] for h in host if h["ts"] <= mid <= h["ts"] + h["dur"]})
        print(f"  {dur:9.1f}  {before[:50]} -> {after[:50]}  [{', '.join(open_ranges)[:80]}]")
