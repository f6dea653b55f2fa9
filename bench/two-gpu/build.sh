#!/usr/bin/env bash
# Everything the 2-GPU measurements need, built on the CPU machine and packed
# into one carry (bench/carry/two-gpu.tar.xz, ignored by git): the machine's
# carry holds 64 MiB and the four benchmarks' executables are ~120 MiB
# uncompressed (their CUDA kernels), ~25 MiB compressed.
#   bash bench/two-gpu/build.sh [BUILD_DIR]       # ~15 minutes
#   run(command="bash bench/two-gpu/run.sh gpt2", carry=["bench/carry"], kind="nvidia-h200-x2")
#   run(command="bash bench/two-gpu/run.sh plans pipeline checks", carry=["bench/carry"], kind="nvidia-h200-x2")
# What each part measures:
#   gpt2      issue 4: GPT-2 124M and 350M on 1 and 2 GPUs (DP scaling) against PyTorch;
#   plans     issue 5: DP, ZeRO-1 and TP of GPT-2 350M, measured beside the predictions;
#   pipeline  issue 6: GPT-2 350M as a 2-stage 1F1B pipeline with each remat mode;
#   checks    the GPU checks, with the NCCL runs of the TP and the pipelined gpt2-tiny.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
bash "$root/bench/gpt2/build.sh" "$build"
bash "$root/bench/plans/build.sh" "$build"
bash "$root/bench/pipeline/build.sh" "$build"
bash "$root/scripts/make-gpu-check.sh" "$build" "$root/bench/profile/out"
strip "$root"/bench/profile/out/*-train "$root"/bench/profile/out/tessera_runtime_*_tests
mkdir -p "$root/bench/carry"
tar -C "$root" -cf - bench/gpt2/out bench/plans/out bench/pipeline/out bench/profile/out \
    | xz -6 -T0 > "$root/bench/carry/two-gpu.tar.xz"
ls -la "$root/bench/carry/two-gpu.tar.xz"
