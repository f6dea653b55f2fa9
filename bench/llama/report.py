#!/usr/bin/env python3
"""Prints the Llama-family benchmark table (markdown) from run.sh's results
folder: Tessera's tokens/s (median over the steps after the first 5), its
ratio to torch.compile and eager PyTorch in the same call, MFU, and peak
device memory beside tesserac --summary's prediction and PyTorch's.

  python3 report.py RESULTS_DIR EXECUTABLES_DIR
"""
import glob, json, os, re, statistics, sys

res, exe = sys.argv[1], sys.argv[2]
# The rows under each model: the executables build.sh compiled with other
# flags, and run.sh's run with --gemm-autotune on.
VARIANTS = {"remat-selective": "--remat selective", "logits-block-2gib": "--logits-block 2GiB",
            "pack-gate-up": "--pack-gate-up on", "gemm-autotune": "--gemm-autotune on"}

def tessera(name):
    path = os.path.join(res, f"tessera-{name}.jsonl")
    if not os.path.exists(path):
        return None
    rows = [json.loads(l) for l in open(path) if l.strip()]
    rows = [r for r in rows if r.get("step", 0) > 5] or rows
    if not rows:
        return None
    return {"tok": statistics.median(r["tokens_per_s"] for r in rows),
            "ms": statistics.median(r["step_ms"] for r in rows),
            "mfu": statistics.median(r.get("mfu", 0) for r in rows),
            "mem": max(r.get("peak_memory_gib") or 0 for r in rows)}

def torch(name, comp):
    path = os.path.join(res, f"torch-{name}-compile{comp}.log")
    if not os.path.exists(path):
        return None
    m = re.search(r"RESULT .*median_step_ms=([\d.]+) tok_per_s=(\d+).*peak_mem_GiB=([\d.]+)", open(path).read())
    return {"ms": float(m.group(1)), "tok": float(m.group(2)), "mem": float(m.group(3))} if m else None

def predicted(name):
    path = os.path.join(exe, f"{name}.summary.txt")
    m = re.search(r"Peak device memory.*?([\d.]+) GiB", open(path).read()) if os.path.exists(path) else None
    return float(m.group(1)) if m else None

names = sorted({os.path.basename(p)[: -len("-train")] for p in glob.glob(os.path.join(exe, "*-train"))
                if not any(p.endswith(f"-{v}-train") for v in VARIANTS) and "llama-8x1024" not in p})
print("| model | Tessera tok/s (ms/step) | torch.compile tok/s (ms) | eager tok/s | Tessera / torch.compile | "
      "Tessera MFU | Tessera peak GiB (predicted) | PyTorch peak GiB (compile/eager) |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for name in names:
    t, c, e = tessera(name), torch(name, 1), torch(name, 0)
    fmt = lambda x: f"{x['tok']:,.0f} ({x['ms']:.0f})" if x else "-"
    ratio = f"{t['tok'] / c['tok']:.2f}x" if t and c else "-"
    pred = predicted(name)
    mem = (f"{t['mem']:.1f}" if t else "-") + (f" ({pred:.1f})" if pred else "")
    pmem = "/".join(f"{x['mem']:.1f}" for x in (c, e) if x) or "-"
    mfu = f"{t['mfu'] * 100:.1f}%" if t and t["mfu"] else "-"
    eager = f"{e['tok']:,.0f}" if e else "-"
    print(f"| {name} | {fmt(t)} | {fmt(c)} | {eager} | {ratio} | {mfu} | {mem} | {pmem} |")
    for variant, flag in VARIANTS.items():
        r = tessera(f"{name}-{variant}")
        if not r:
            continue
        ratio = f"{r['tok'] / c['tok']:.2f}x" if c else "-"
        mfu = f"{r['mfu'] * 100:.1f}%" if r["mfu"] else "-"
        pred = predicted(f"{name}-{variant}")
        mem = f"{r['mem']:.1f}" + (f" ({pred:.1f})" if pred else "")
        print(f"| {name}, {flag} | {fmt(r)} |  |  | {ratio} | {mfu} | {mem} |  |")
