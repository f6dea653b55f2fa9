#!/usr/bin/env python3
"""Where the PyTorch peer's step goes, kernel by kernel, to read beside
Tessera's own trace (summarize_trace.py): which op kinds PyTorch runs faster
is where Tessera's step has room.

  python3 profile_peer.py [--skip 8] [--active 3] -- PEER.py --L 16 ... --steps 12

Runs the peer script unchanged (runpy) under torch.profiler, stepping the
profiler from a global optimizer step hook, so the profiled steps are the
peer's own steady steps after torch.compile's warm-up. Prints the GPU time a
step by kind (GEMM, attention, Triton fusions, optimizer, other) and the top
kernels with their calls and ms a step.
"""
import argparse
import collections
import runpy
import sys

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.profiler import ProfilerActivity, profile, schedule

p = argparse.ArgumentParser()
p.add_argument("--skip", type=int, default=8, help="steps before the profiled ones")
p.add_argument("--active", type=int, default=3, help="steps profiled")
p.add_argument("--top", type=int, default=30)
p.add_argument("peer", nargs=argparse.REMAINDER)
a = p.parse_args()
peer = a.peer[1:] if a.peer and a.peer[0] == "--" else a.peer
if not peer:
    sys.exit("profile_peer.py: name the peer script after --")

# Kernels on the GPU; on a machine without one (a dry run of this script),
# the host's ops.
activity = ProfilerActivity.CUDA if torch.cuda.is_available() else ProfilerActivity.CPU
prof = profile(activities=[activity],
               schedule=schedule(wait=a.skip - 1, warmup=1, active=a.active, repeat=1))
prof.start()
register_optimizer_step_post_hook(lambda *_: prof.step())
sys.argv = peer
runpy.run_path(peer[0], run_name="__main__")
prof.stop()


def kind(name):
    n = name.lower()
    if any(s in n for s in ("flash", "fmha", "cudnn", "attention", "sdpa")):
        return "attention"
    if any(s in n for s in ("gemm", "nvjet", "xmma", "cutlass", "sm90_", "ampere_", "matmul")):
        return "gemm"
    if "adam" in n or "multi_tensor" in n:
        return "optimizer"
    if n.startswith("triton"):
        return "triton fusions"
    return "other"


rows = collections.defaultdict(lambda: [0.0, 0])
for e in prof.key_averages():
    t = e.device_time_total if activity == ProfilerActivity.CUDA else e.self_cpu_time_total
    if t <= 0 or e.key.startswith("ProfilerStep"):
        continue
    rows[e.key][0] += t / 1000.0 / a.active
    rows[e.key][1] += e.count / a.active
kinds = collections.defaultdict(float)
for name, (ms, _) in rows.items():
    kinds[kind(name)] += ms
total = sum(kinds.values())
print(f"PyTorch peer, GPU kernel time a step (mean of {a.active} steps after {a.skip}): {total:.2f} ms")
for k, ms in sorted(kinds.items(), key=lambda kv: -kv[1]):
    print(f"  {k:<16} {ms:9.2f} ms  {100 * ms / total:5.1f} %")
print(f"\ntop {a.top} kernels            ms/step  calls/step  kind")
for name, (ms, calls) in sorted(rows.items(), key=lambda kv: -kv[1][0])[: a.top]:
    print(f"  {ms:9.3f} {calls:8.1f}  {kind(name):<14} {name[:110]}")
