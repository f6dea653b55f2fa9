#!/usr/bin/env python3
"""Writes a Chrome trace like `--trace`'s for gemm-rates.test: one traced step
whose GEMM kernels (nvjet_*, 1 us each, a non-GEMM kernel between each two)
are as many as the GEMM ops of STEP.mlir's @forward_backward, plus EXTRA more
(a split-K reduction's kernel, say).

  gemm_trace.py STEP.mlir OUT.json [EXTRA]
"""
import json, re, sys

inside, count = False, 0
for line in open(sys.argv[1]):
    if line.lstrip().startswith("func.func"):
        inside = "@forward_backward(" in line
    elif inside and re.search(r"\btess\.(linear|linear_add|matmul|matmul_add)\b", line):
        count += 1
count += int(sys.argv[3]) if len(sys.argv) > 3 else 0
events = [{"ph": "X", "cat": "host", "name": "step 3", "ts": 0.0, "dur": 10.0 * count + 10}]
for i in range(count):
    events.append({"ph": "X", "cat": "kernel", "name": "nvjet_sm90_tst_128x128(args)", "ts": 10.0 * i, "dur": 1.0})
    events.append({"ph": "X", "cat": "kernel", "name": "swigluKernel(args)", "ts": 10.0 * i + 5, "dur": 1.0})
json.dump({"traceEvents": events}, open(sys.argv[2], "w"))
