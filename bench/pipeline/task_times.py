#!/usr/bin/env python3
"""Where a pipelined step's time goes, per rank, from the per-rank `--trace`
files: every host range the driver records (the step's phases, and within
`pipeline` the forward and backward stage calls and the send/receive groups
of runtime/train/PipelineParallel.cpp), then the GPU time by kind (kernels,
copies, collectives, when CUPTI recorded them), as milliseconds per traced
step, count per step and mean per call.

  python3 task_times.py TRACE.rank0.json [TRACE.rank1.json ...]
"""
import collections, json, sys

GPU = ("kernel", "nccl", "memcpy", "memset")
for path in sys.argv[1:]:
    events = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    steps = [e for e in events if e.get("name", "").startswith("step")]
    nsteps = max(1, len(steps))
    wall = sum(e["dur"] for e in steps) / nsteps / 1000
    host, gpu = collections.defaultdict(list), collections.defaultdict(list)
    for e in events:
        if e.get("cat") in GPU:
            gpu[e["cat"]].append(e["dur"] / 1000)
        elif not e.get("name", "").startswith("step"):
            host[e.get("name", "?")].append(e["dur"] / 1000)
    print(f"{path}: {len(steps)} traced steps, {wall:.1f} ms a step")
    for kind, table in (("host", host), ("GPU", gpu)):
        for name, d in sorted(table.items(), key=lambda kv: -sum(kv[1])):
            print(f"  {kind:4s} {name:24s} {sum(d) / nsteps:9.2f} ms/step {len(d) / nsteps:7.1f} "
                  f"calls/step {sum(d) / len(d):8.3f} ms/call (max {max(d):.3f})")
