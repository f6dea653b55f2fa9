#!/usr/bin/env python3
"""Measure what a Transformer step's kernels reach on one GPU and add it to a cluster file.

    python3 bench/measure_kernels.py --update bench/clusters/h200x2-measured.json

runs on the GPU machine (python3 and torch, no MLIR) and writes into the file's "device":

  gemm_shapes     {precision: [[m, n, k, flop/s], ...]}: C[m, n] = A[m, k] @ B[k, n] at the
                  shapes a Transformer's linears run in training, for hidden sizes 768 to 4096 and
                  2,048 to 16,384 tokens: per layer the QKV, output, MLP-up and MLP-down
                  projections and the tied LM head, each forward (tokens x out x in) and its two
                  backward GEMMs (tokens x in x out for the input's gradient, in x out x tokens for
                  the weight's). Square sizes (device.flops) say what a GEMM can reach; these say
                  what the model's do: a K of 768 or a weight gradient's tall reduction runs well
                  below the 4096^3 rate. lib/CostModel times a contraction at the rate its shape's
                  neighbours in this table reach (DeviceModel::matrixRate).
  kernel_seconds  the time one kernel costs beyond its work: a CUDA graph of 2,000 one-element
                  kernels replayed, over 2,000. The compiled step is a graph of ~1,000 kernels, and
                  each costs at least this (its launch gap, its minimum duration).

Other fields are kept. --dry-run runs on the CPU with tiny shapes to check the script and the file
it writes; its numbers mean nothing (and --update is then refused unless --out names another file).
"""

import argparse
import datetime
import json
import sys
import time

VOCABULARY = 50304  # GPT-2's 50,257 padded to a multiple of 64, as tesserac pads the head


def linear_shapes(hidden_sizes, token_counts):
    """(m, n, k) of every GEMM a training step of these sizes runs, deduplicated."""
    shapes = set()
    for h in hidden_sizes:
        layers = [(h, 3 * h), (h, h), (h, 4 * h), (4 * h, h), (h, VOCABULARY)]
        for tokens in token_counts:
            for fan_in, fan_out in layers:
                shapes.add((tokens, fan_out, fan_in))  # forward
                shapes.add((tokens, fan_in, fan_out))  # input gradient
                shapes.add((fan_in, fan_out, tokens))  # weight gradient
    return sorted(shapes)


def timed(torch, run, synchronize, target_seconds=0.1, max_iterations=100):
    for _ in range(3):
        run()
    synchronize()
    start = time.perf_counter()
    run()
    synchronize()
    once = max(time.perf_counter() - start, 1e-7)
    iterations = int(min(max(target_seconds / once, 3), max_iterations))
    start = time.perf_counter()
    for _ in range(iterations):
        run()
    synchronize()
    return (time.perf_counter() - start) / iterations


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--update", required=True, help="the cluster file to add the tables to")
    parser.add_argument("--out", default="", help="write here instead of back into --update")
    parser.add_argument("--hidden", type=int, nargs="+", default=[768, 1024, 2048, 4096])
    parser.add_argument("--tokens", type=int, nargs="+", default=[2048, 8192, 16384])
    parser.add_argument("--precisions", nargs="+", default=["bf16", "fp16"])
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    out = args.out or args.update
    if args.dry_run and out == args.update:
        parser.error("--dry-run writes meaningless numbers: name another file with --out")

    import torch
    if args.dry_run:
        device, synchronize = torch.device("cpu"), lambda: None
        args.hidden, args.tokens = [16], [32]
    else:
        if not torch.cuda.is_available():
            raise SystemExit("no CUDA device: run on the GPU machine, or pass --dry-run")
        device, synchronize = torch.device("cuda"), torch.cuda.synchronize
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}

    cluster = json.load(open(args.update))
    tables = {}
    for name in args.precisions:
        rows = []
        for m, n, k in linear_shapes(args.hidden, args.tokens):
            if args.dry_run:
                m, n, k = min(m, 64), min(n, 64), min(k, 64)
            a = torch.randn(m, k, device=device).to(dtypes[name])
            b = torch.randn(k, n, device=device).to(dtypes[name])
            seconds = timed(torch, lambda: torch.matmul(a, b), synchronize)
            rows.append([m, n, k, 2.0 * m * n * k / seconds])
            del a, b
        tables[name] = rows
        best = max(rows, key=lambda row: row[3])
        worst = min(rows, key=lambda row: row[3])
        print(f"{name}: {len(rows)} shapes, {worst[3] / 1e12:.0f} to {best[3] / 1e12:.0f} TFLOP/s "
              f"(slowest {worst[:3]}, fastest {best[:3]})", file=sys.stderr)

    kernels = 2000
    x = torch.zeros(1, device=device)
    if args.dry_run:
        seconds = timed(torch, lambda: x.add_(1), synchronize)
    else:
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            for _ in range(3):
                x.add_(1)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(kernels):
                x.add_(1)
        seconds = timed(torch, graph.replay, synchronize) / kernels
    print(f"kernel_seconds: {seconds * 1e6:.2f} us per kernel in a replayed graph", file=sys.stderr)

    device_json = cluster["device"]
    device_json["gemm_shapes"] = tables
    device_json["kernel_seconds"] = seconds
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    device_json["comment"] = (device_json.get("comment", "") +
                              f"; gemm_shapes and kernel_seconds measured by "
                              f"bench/measure_kernels.py {stamp}" +
                              (" (DRY RUN)" if args.dry_run else ""))
    with open(out, "w") as file:
        file.write(json.dumps(cluster, indent=2) + "\n")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
