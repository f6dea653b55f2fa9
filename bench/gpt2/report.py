#!/usr/bin/env python3
"""Prints the GPT-2 benchmark table (markdown) from run.sh's results folder:
tokens/s per configuration (median over steps after the first 5), Tessera's
ratio to the best PyTorch configuration of the same size and GPU count, the
1 -> 2 GPU scaling, and peak device memory next to tesserac --summary's
prediction.

  python3 report.py RESULTS_DIR EXECUTABLES_DIR
"""
import json, os, re, statistics, sys

res, exe = sys.argv[1], sys.argv[2]

def tessera(name, gpus, variant=""):
    path = os.path.join(res, f"tessera-{name}-{gpus}gpu{variant}.jsonl")
    if not os.path.exists(path):
        return None
    rows = [json.loads(l) for l in open(path) if l.strip()]
    rows = [r for r in rows if r.get("step", 0) > 5] or rows
    if not rows:
        return None
    tok = statistics.median(r["tokens_per_s"] for r in rows)
    mem = max((r.get("peak_memory_gib") or 0) for r in rows) or None
    mfu = statistics.median(r["mfu"] for r in rows) if all("mfu" in r for r in rows) else None
    return {"tok": tok, "mem": mem, "mfu": mfu, "ms": statistics.median(r["step_ms"] for r in rows)}

def torch(name, gpus, comp):
    path = os.path.join(res, f"torch-{name}-{gpus}gpu-compile{comp}.log")
    if not os.path.exists(path):
        return None
    m = re.search(r"RESULT .*tok_per_s=(\d+).*peak_mem_GiB=([\d.]+)", open(path).read())
    return {"tok": float(m.group(1)), "mem": float(m.group(2))} if m else None

def predicted(name):
    """tesserac --summary's "Peak device memory per GPU (predicted): N GiB" line."""
    path = os.path.join(exe, f"{name}.summary.txt")
    if not os.path.exists(path):
        return None
    m = re.search(r"Peak device memory.*?([\d.]+) GiB", open(path).read())
    return float(m.group(1)) if m else None

fmt = lambda x: f"{x:,.0f}" if x else "-"
print("| model | GPUs | Tessera tok/s | PyTorch compile | PyTorch eager | Tessera / best PyTorch | Tessera MFU | "
      "Tessera peak GiB (predicted) | PyTorch peak GiB |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for name in ("gpt2-124m", "gpt2-350m"):
    one = None
    for gpus in (1, 2):
        t, c, e = tessera(name, gpus), torch(name, gpus, 1), torch(name, gpus, 0)
        if not (t or c or e):
            continue
        best = max([x["tok"] for x in (c, e) if x] or [0])
        ratio = f"{t['tok'] / best:.2f}x" if t and best else "-"
        pred = predicted(name)
        mem = (f"{t['mem']:.1f}" if t and t["mem"] else "-") + (f" ({pred:.1f})" if pred else "")
        pmem = "/".join(f"{x['mem']:.1f}" for x in (c, e) if x) or "-"
        mfu = f"{t['mfu'] * 100:.1f}%" if t and t["mfu"] else "-"
        print(f"| {name} | {gpus} | {fmt(t and t['tok'])} | {fmt(c and c['tok'])} | {fmt(e and e['tok'])} | "
              f"{ratio} | {mfu} | {mem} | {pmem} |")
        own = tessera(name, gpus, "-own-attention")
        if own and best:
            print(f"| {name} | {gpus}, own attention | {fmt(own['tok'])} |  |  | {own['tok'] / best:.2f}x | "
                  f"{own['mfu'] * 100:.1f}% | {own['mem']:.1f} |  |" if own["mfu"] and own["mem"] else
                  f"| {name} | {gpus}, own attention | {fmt(own['tok'])} |  |  | {own['tok'] / best:.2f}x |  |  |  |")
        if gpus == 1:
            one = t
        elif one and t:
            print(f"|  | scaling 1->2 | {t['tok'] / (2 * one['tok']):.2f} |  |  |  |  |  |  |")
