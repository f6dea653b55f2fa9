#!/usr/bin/env python3
"""Measure a GPU machine and write a Tessera cluster file (lib/CostModel/README.md).

Runs on the GPU machine, which has python3 and torch but no MLIR:

    NCCL_NVLS_ENABLE=0 torchrun --nproc_per_node=2 bench/measure_cluster.py \\
        --name h200x2 --out h200x2.json \\
        --peak-flops bf16=9.89e14,fp16=9.89e14,fp32=6.7e13

then `tesserac MODEL --explain --cluster h200x2.json`. Without torchrun it starts one process per
GPU itself. Several nodes: `torchrun --nnodes=K --nproc_per_node=G ...`.

What it measures (rank 0 writes the file):
  device.flops        C = A @ B on random square matrices of a few sizes, in bf16, fp16 and fp32
                      (IEEE fp32: TF32 is switched off); the best rate per precision, which large
                      GEMMs reach. Every size's rate is listed in device.comment.
  device.memory_*     total memory as CUDA reports it; bandwidth of a large device-to-device copy
                      (bytes read + bytes written over the time).
  links.intra_node    NCCL all_reduce, all_gather, reduce_scatter, all_to_all and send_recv among
                      the ranks of one node (every node's group at once), by message size, as bus
                      bandwidth (NCCL's convention, Collective.h); the table goes in "measured" and a
                      fit of latency + bytes * factor / bandwidth in "latency" and "bandwidth".
  links.inter_node    the same among one rank per node (all local ranks' groups at once, as a data-
                      parallel axis across nodes uses every adapter), when there are several nodes.

Times are the slowest rank's (a collective is as fast as its slowest member), after warm-up, over
enough repetitions to run about a quarter of a second.

--dry-run checks the script and the file it writes without a GPU: CPU tensors, the gloo backend,
small sizes, two local processes. Its numbers mean nothing.
"""

import argparse
import datetime
import json
import math
import os
import socket
import sys
import time

COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"]
PRECISIONS = ["bf16", "fp16", "fp32"]


def bus_factor(collective, n):
    """Bytes over the slowest ring link per byte of the buffer (lib/CostModel/Collective.h)."""
    if n <= 1:
        return 0.0
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0  # send_recv


def fit_alpha_beta(points, factor):
    """Least squares of relative error for t = alpha + bytes * factor / beta.

    points: [(bytes, seconds)]. Relative error, because the times span four orders of magnitude
    and a plain fit would ignore every small message. Returns (alpha, beta) with alpha >= 0.
    """
    # Minimize sum(((alpha + x u) - t) / t)^2 over (alpha, u = 1/beta): normal equations of the
    # rows [1/t, x/t] against 1.
    rows = [(1.0 / t, bytes_ * factor / t) for bytes_, t in points]
    s11 = sum(a * a for a, _ in rows)
    s12 = sum(a * b for a, b in rows)
    s22 = sum(b * b for _, b in rows)
    r1 = sum(a for a, _ in rows)
    r2 = sum(b for _, b in rows)
    determinant = s11 * s22 - s12 * s12
    alpha, u = None, None
    if len(points) >= 2 and determinant > 0:
        alpha = (r1 * s22 - r2 * s12) / determinant
        u = (s11 * r2 - s12 * r1) / determinant
    if alpha is None or alpha < 0 or u is None or u <= 0:
        # A bandwidth-only line through the origin.
        alpha = 0.0
        u = r2 / s22
    return alpha, 1.0 / u


def parse_rates(text):
    """'bf16=9.89e14,fp32=6.7e13' -> {'bf16': 9.89e14, 'fp32': 6.7e13}"""
    rates = {}
    if not text:
        return rates
    for item in text.split(","):
        key, _, value = item.partition("=")
        key = key.strip()
        if key not in PRECISIONS:
            raise SystemExit(f"--peak-flops: unknown precision '{key}' (expected {', '.join(PRECISIONS)})")
        try:
            rates[key] = float(value)
        except ValueError:
            raise SystemExit(f"--peak-flops: '{item}' is not PRECISION=FLOPS")
        if not rates[key] > 0:
            raise SystemExit(f"--peak-flops: '{item}' must be positive")
    return rates


def message_sizes(args):
    """Powers of 4 from --min-bytes to --max-bytes."""
    sizes, size = [], args.min_bytes
    while size <= args.max_bytes:
        sizes.append(size)
        size *= 4
    return sizes


class Bench:
    """Device, timing and process groups of one rank."""

    def __init__(self, args, torch, dist):
        self.args, self.torch, self.dist = args, torch, dist
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.local_world = int(os.environ.get("LOCAL_WORLD_SIZE", self.world))
        self.local_rank = int(os.environ.get("LOCAL_RANK", self.rank))
        if self.world % self.local_world != 0:
            raise SystemExit(f"{self.world} ranks do not split into nodes of {self.local_world}")
        self.nodes = self.world // self.local_world
        if args.dry_run:
            self.device = torch.device("cpu")
            self.collective_dtype = torch.float32  # gloo's reductions are for fp32
        else:
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
            self.collective_dtype = torch.bfloat16  # what training all-reduces
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False

        # Every rank creates every group, in the same order (torch.distributed requires it).
        self.intra_group, self.inter_group = None, None
        for node in range(self.nodes):
            ranks = list(range(node * self.local_world, (node + 1) * self.local_world))
            group = dist.new_group(ranks) if self.nodes > 1 else dist.group.WORLD
            if self.rank in ranks:
                self.intra_group = group
        if self.nodes > 1:
            for local in range(self.local_world):
                ranks = [local + node * self.local_world for node in range(self.nodes)]
                group = dist.new_group(ranks)
                if self.rank in ranks:
                    self.inter_group = group

    def synchronize(self):
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()

    def timed(self, run, warmup=3, target_seconds=0.25, max_iterations=200, collective=False):
        """Seconds per call of `run`, on this rank.

        For a collective every rank must make the same number of calls, or the run hangs: the
        repetition count then comes from the slowest rank's first timing.
        """
        for _ in range(warmup):
            run()
        self.synchronize()
        start = time.perf_counter()
        run()
        self.synchronize()
        once = max(time.perf_counter() - start, 1e-7)
        if collective:
            once = self.slowest(once)
        iterations = int(min(max(target_seconds / once, 3), max_iterations))
        if self.args.dry_run:
            iterations = 3
        start = time.perf_counter()
        for _ in range(iterations):
            run()
        self.synchronize()
        return (time.perf_counter() - start) / iterations

    def slowest(self, seconds):
        """The largest of every rank's `seconds`."""
        value = self.torch.tensor([seconds], dtype=self.torch.float64)
        if self.device.type == "cuda":
            value = value.to(self.device)
        self.dist.all_reduce(value, op=self.dist.ReduceOp.MAX)
        return float(value.item())

    # -- device -----------------------------------------------------------------------------

    def gemm_rates(self):
        """{precision: [(n, flop/s)]} on this rank's device."""
        torch = self.torch
        dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
        sizes = [64, 128] if self.args.dry_run else self.args.gemm_sizes
        rates = {}
        for name in PRECISIONS:
            rates[name] = []
            for n in sizes:
                a = torch.randn(n, n, device=self.device).to(dtypes[name])
                b = torch.randn(n, n, device=self.device).to(dtypes[name])
                seconds = self.timed(lambda: torch.matmul(a, b))
                rates[name].append((n, 2.0 * n ** 3 / seconds))
                del a, b
        return rates

    def memory_bandwidth(self):
        """Bytes/s of a device-to-device copy: each byte read once and written once."""
        size = (16 << 20) if self.args.dry_run else (1 << 30)
        source = self.torch.empty(size, dtype=self.torch.uint8, device=self.device)
        target = self.torch.empty_like(source)
        seconds = self.timed(lambda: target.copy_(source))
        del source, target
        return 2.0 * size / seconds

    def memory_bytes(self):
        if self.device.type == "cuda":
            return self.torch.cuda.get_device_properties(self.device).total_memory
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

    def device_name(self):
        if self.device.type == "cuda":
            return self.torch.cuda.get_device_name(self.device)
        return "CPU (dry run: " + socket.gethostname() + ")"

    # -- collectives ------------------------------------------------------------------------

    def collective_call(self, collective, group, n, size):
        """A function running `collective` over a buffer of `size` bytes in `group` of n."""
        torch, dist = self.torch, self.dist
        element = torch.tensor([], dtype=self.collective_dtype).element_size()
        count = max(size // element // n, 1) * n  # divisible among n ranks
        if collective == "all_reduce":
            buffer = torch.ones(count, dtype=self.collective_dtype, device=self.device)
            return lambda: dist.all_reduce(buffer, group=group)
        if collective == "all_gather":
            output = torch.empty(count, dtype=self.collective_dtype, device=self.device)
            shard = torch.ones(count // n, dtype=self.collective_dtype, device=self.device)
            return lambda: dist.all_gather_into_tensor(output, shard, group=group)
        if collective == "reduce_scatter":
            full = torch.ones(count, dtype=self.collective_dtype, device=self.device)
            shard = torch.empty(count // n, dtype=self.collective_dtype, device=self.device)
            return lambda: dist.reduce_scatter_tensor(shard, full, group=group)
        if collective == "all_to_all":
            source = torch.ones(count, dtype=self.collective_dtype, device=self.device)
            target = torch.empty_like(source)
            return lambda: dist.all_to_all_single(target, source, group=group)
        # send_recv: ranks 2k and 2k+1 of the group exchange one message each way at once, as
        # neighbouring pipeline stages do; an odd last rank idles.
        buffer = torch.ones(count, dtype=self.collective_dtype, device=self.device)
        incoming = torch.empty_like(buffer)
        group_rank = dist.get_rank(group)
        peer_group_rank = group_rank + 1 if group_rank % 2 == 0 else group_rank - 1
        if peer_group_rank >= n:
            return lambda: None
        peer = dist.get_global_rank(group, peer_group_rank) if group is not dist.group.WORLD \
            else peer_group_rank

        def exchange():
            requests = dist.batch_isend_irecv([
                dist.P2POp(dist.isend, buffer, peer, group),
                dist.P2POp(dist.irecv, incoming, peer, group),
            ])
            for request in requests:
                request.wait()
        return exchange

    def measure_link(self, group):
        """{collective: [(bytes, seconds)]} in `group` (every rank calls this for its group)."""
        n = self.dist.get_world_size(group)
        results = {}
        for collective in COLLECTIVES:
            results[collective] = []
            for size in message_sizes(self.args):
                run = self.collective_call(collective, group, n, size)
                self.dist.barrier()
                seconds = self.slowest(self.timed(run, warmup=5, collective=True))
                element = self.torch.tensor([], dtype=self.collective_dtype).element_size()
                actual = max(size // element // n, 1) * n * element
                results[collective].append((actual, seconds))
                del run
        return n, results


def link_json(name, group_size, results, comment):
    link = {"name": name, "comment": comment, "collectives": {}}
    for collective in COLLECTIVES:
        factor = bus_factor(collective, group_size)
        points = results[collective]
        alpha, beta = fit_alpha_beta(points, factor)
        link["collectives"][collective] = {
            "latency": alpha,
            "bandwidth": beta,
            "measured_group_size": group_size,
            "measured": [{"bytes": int(b), "bus_bandwidth": b * factor / t} for b, t in points],
        }
    # The link's defaults: the all-reduce fit, for collectives a hand-edited file drops.
    link["latency"] = link["collectives"]["all_reduce"]["latency"]
    link["bandwidth"] = link["collectives"]["all_reduce"]["bandwidth"]
    return link


def build_cluster(args, bench, gemm, bandwidth, intra, inter):
    """The cluster file's JSON object from rank 0's measurements."""
    flops = {name: max(rate for _, rate in gemm[name]) for name in PRECISIONS}
    gemm_text = "; ".join(
        name + " " + ", ".join(f"{n}^3 {rate / 1e12:.1f}" for n, rate in gemm[name])
        for name in PRECISIONS)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    device = {
        "name": bench.device_name(),
        "comment": f"measured by bench/measure_cluster.py {stamp}{' (DRY RUN)' if args.dry_run else ''}; "
                   f"GEMM TFLOP/s by size: {gemm_text}",
        "memory_bytes": bench.memory_bytes(),
        "memory_bandwidth": bandwidth,
        "flops": flops,
    }
    peaks = parse_rates(args.peak_flops)
    if peaks:
        device["peak_flops"] = peaks
    if args.vector_flops:
        device["vector_flops"] = args.vector_flops
    attention = parse_rates(args.attention_flops)
    if attention:
        device["attention_flops"] = attention
    devices_per_node = args.devices_per_node or (
        bench.local_world if args.dry_run else bench.torch.cuda.device_count())
    cluster = {
        "name": args.name,
        "description": args.description or
        f"{bench.nodes} node(s) of {devices_per_node} {device['name']}, measured {stamp}",
        "nodes": bench.nodes,
        "devices_per_node": devices_per_node,
        "device": device,
        "links": {"intra_node": link_json(args.intra_name, intra[0], intra[1],
                                          f"measured among {intra[0]} ranks of a node")},
    }
    if inter is not None:
        cluster["links"]["inter_node"] = link_json(
            args.inter_name, inter[0], inter[1], f"measured among {inter[0]} ranks, one per node")
    return cluster


def run_rank(args):
    import torch
    import torch.distributed as dist

    backend = "gloo" if args.dry_run else "nccl"
    if not args.dry_run and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run on the GPU machine, or pass --dry-run")
    dist.init_process_group(backend=backend)
    try:
        bench = Bench(args, torch, dist)
        if bench.local_world < 2:
            raise SystemExit("measuring the intra-node link needs at least 2 processes per node "
                             "(torchrun --nproc_per_node=2 or more)")
        gemm, bandwidth = None, None
        if bench.rank == 0:
            gemm = bench.gemm_rates()
            bandwidth = bench.memory_bandwidth()
            if not args.dry_run:
                torch.cuda.empty_cache()
        dist.barrier()
        intra = bench.measure_link(bench.intra_group)
        inter = bench.measure_link(bench.inter_group) if bench.inter_group is not None else None
        if bench.rank == 0:
            cluster = build_cluster(args, bench, gemm, bandwidth, intra, inter)
            text = json.dumps(cluster, indent=2) + "\n"
            if args.out == "-":
                sys.stdout.write(text)
            else:
                with open(args.out, "w") as file:
                    file.write(text)
                print(f"wrote {args.out}", file=sys.stderr)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def spawned_rank(local_rank, args, world, port):
    """One process of a run started without torchrun: the environment torchrun would set."""
    os.environ.update({"RANK": str(local_rank), "LOCAL_RANK": str(local_rank),
                       "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    run_rank(args)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="-", help="the cluster file to write (default: stdout)")
    parser.add_argument("--name", default="measured", help="the cluster's name")
    parser.add_argument("--description", default="", help="one line about the machine")
    parser.add_argument("--peak-flops", default="",
                        help="datasheet dense peaks for MFU, e.g. bf16=9.89e14,fp16=9.89e14,fp32=6.7e13")
    parser.add_argument("--attention-flops", default="",
                        help="the fused attention kernels' rate, forward and backward together, as "
                             "a traced training step gives it (bench/profile), e.g. "
                             "bf16=4.93e14,fp16=4.93e14")
    parser.add_argument("--vector-flops", type=float, default=0.0,
                        help="rate of non-matrix arithmetic (default: the measured fp32 GEMM rate)")
    parser.add_argument("--devices-per-node", type=int, default=0,
                        help="GPUs per node if more than the ranks measured (default: all visible)")
    parser.add_argument("--intra-name", default="NVLink", help="name of the intra-node link")
    parser.add_argument("--inter-name", default="InfiniBand", help="name of the inter-node link")
    parser.add_argument("--gemm-sizes", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    parser.add_argument("--min-bytes", type=int, default=64 << 10)
    parser.add_argument("--max-bytes", type=int, default=1 << 30)
    parser.add_argument("--nproc", type=int, default=0,
                        help="processes to start without torchrun (default: one per GPU; 2 in a dry run)")
    parser.add_argument("--dry-run", action="store_true",
                        help="CPU and gloo, small sizes: check the script and its output, not the machine")
    args = parser.parse_args()
    if args.dry_run:
        args.max_bytes = min(args.max_bytes, 1 << 20)
        args.min_bytes = min(args.min_bytes, 4 << 10)
    if args.min_bytes <= 0 or args.max_bytes < args.min_bytes:
        parser.error("--min-bytes must be positive and at most --max-bytes")

    if "RANK" in os.environ:
        run_rank(args)
        return
    import torch
    import torch.multiprocessing
    processes = args.nproc or (2 if args.dry_run else torch.cuda.device_count())
    if processes < 2:
        raise SystemExit(f"{processes} device(s): measuring collectives needs at least 2 "
                         "(or pass --dry-run to check the script on the CPU)")
    torch.multiprocessing.spawn(spawned_rank, args=(args, processes, free_port()), nprocs=processes)


if __name__ == "__main__":
    main()
