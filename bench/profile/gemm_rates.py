#!/usr/bin/env python3
"""The achieved rate of every GEMM of a traced step, by op: pairs the GEMM
kernels of one traced step (a `--trace` file), in launch order, with the GEMM
ops of the compiled step (`tesserac ... --compile-to=preparation`: the
tess.linear/linear_add/matmul/matmul_add ops of @forward_backward, in program
order), and prints each op kind and shape's calls, time and TFLOP/s.

The kernel trace names tiles and layouts but not shapes; the step's MLIR names
shapes but not kernels. A step launches its GEMMs in program order on one
stream, so the n-th GEMM kernel of a step is the n-th GEMM op, as long as
every GEMM is one kernel: the script checks the counts agree (cuBLASLt's
split-K launches a second, reduction kernel, which would break the pairing,
and the script then says so instead of printing a wrong table).

  python3 gemm_rates.py TRACE.json STEP.mlir [--peak 801e12]
"""
import argparse, collections, json, re

p = argparse.ArgumentParser()
p.add_argument("trace"); p.add_argument("mlir")
p.add_argument("--peak", type=float, default=0.0, help="FLOP/s to print each rate against")
a = p.parse_args()

# The GEMM ops of @forward_backward, with the FLOPs their shapes imply.
GEMM = re.compile(r'= (?:"?)(tess\.(?:linear_add|linear|matmul_add|matmul))(?:"?)(.*?): \((.*?)\) -> (tensor<[^>]*>)')
def dims(t):
    return [int(d) for d in re.match(r"tensor<([0-9x]+)x[a-z]", t).group(1).split("x")]
ops, inside = [], False
for line in open(a.mlir):
    if line.lstrip().startswith("func.func"):
        inside = "@forward_backward(" in line
        continue
    m = GEMM.search(line) if inside else None
    if not m:
        continue
    name, attrs, operands, result = m.groups()
    first = dims(operands.split(", tensor")[0])
    out = dims(result)
    if name.startswith("tess.linear"):
        inner = first[-1]                      # x [.., K] times W^T -> [.., N]
    else:
        inner = first[-2] if "transpose_lhs" in attrs else first[-1]
    rows = 1
    for d in out[:-1]:
        rows *= d
    flops = 2.0 * rows * out[-1] * inner
    flags = " ".join(f for f in ("transpose_weight", "transpose_lhs", "transpose_rhs") if f in attrs)
    ops.append((f"{name} {'x'.join(map(str, out))} K={inner} {flags}".strip(), flops))

events = json.load(open(a.trace))["traceEvents"]
steps = sorted((e for e in events if e.get("ph") == "X" and e.get("name", "").startswith("step")),
               key=lambda e: e["ts"])
kernels = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"), key=lambda e: e["ts"])
is_gemm = re.compile(r"nvjet|gemm|sm90_xmma|cutlass|Kernel_?Bgrad", re.I)
by = collections.defaultdict(lambda: [0, 0.0, 0.0, collections.Counter()])
paired = 0
for s in steps:
    lo, hi = s["ts"], s["ts"] + s["dur"]
    gemms = [k for k in kernels if lo <= k["ts"] < hi and is_gemm.search(k["name"])]
    if len(gemms) != len(ops):
        print(f"{s['name']}: {len(gemms)} GEMM kernels against {len(ops)} GEMM ops: not paired "
              "(a split-K reduction or a GEMM outside the step's program)")
        continue
    paired += 1
    for (what, flops), k in zip(ops, gemms):
        row = by[what]
        row[0] += 1; row[1] += k["dur"]; row[2] = flops
        row[3][k["name"].split("(")[0][:48]] += 1
if not paired:
    raise SystemExit("no traced step could be paired")
total = sum(r[1] for r in by.values())
print(f"{paired} traced steps paired; GEMMs {total / paired / 1000:.2f} ms a step")
print(f"{'ms/step':>8} {'calls':>5} {'us/call':>8} {'TFLOP/s':>8} {'of peak':>7}  op, kernel")
for what, (n, us, flops, names) in sorted(by.items(), key=lambda kv: -kv[1][1]):
    rate = flops * n / (us * 1e-6) / 1e12
    share = f"{100 * rate * 1e12 / a.peak:6.1f}%" if a.peak else ""
    print(f"{us / paired / 1000:8.3f} {n // paired:5d} {us / n:8.1f} {rate:8.1f} {share:>7}  {what}, "
          + ", ".join(f"{k} x{c // paired}" for k, c in names.most_common(2)))
