#!/usr/bin/env bash
# Prepares the GPU checks of the --target cuda executables (issue 4) and
# gathers everything the GPU machine needs (it has no MLIR) into one directory:
#   scripts/make-gpu-check.sh [BUILD_DIR] [OUT_DIR]   (defaults: build, BUILD_DIR/gpu-check)
# then, through the device tool:
#   run(command="bash <OUT_DIR>/run.sh", carry=["<OUT_DIR>"])
# BUILD_DIR must have been configured with the CUDA runtime (the default where
# nvcc is found). What it holds:
# - gpt2-tiny (causal LM), bert-tiny (MLM), llama-tiny, mistral-tiny (its
#   sliding window) and gemma2-tiny (softcap, alternating windows), fp32:
#   the first-step check against PyTorch's fixtures; llama-tiny again with
#   its gate/up projections packed (--pack-gate-up on);
# - llama-tiny in bf16 on 2 thread ranks with --zero 0, 1 and 2: the same
#   parameters bit for bit, ZeRO-1/2 mirroring the f32-read token table
#   alone (packed, summed over the ranks);
# - gpt2-tiny in bf16: a short run with two micro-batches a step, once
#   straight and once stopped at a checkpoint and resumed (the GPU backend's
#   accumulation, checkpoint download and --resume upload);
# - gpt2-tiny fp32 partitioned for the meshes 2 (tp) and 2x2 (dp-tp): the
#   same first-step check, their ranks as threads on this machine's GPUs and,
#   with 2 GPUs, the tp program launched on NCCL (--nproc 2);
# - llama-tiny with a vocabulary-parallel token table on meshes 2 and 2x2:
#   the first-step check (rows_axis);
# - gpt2-vocab300 (its head reads the padded copy of its table) on one
#   device, on tp 2 and as 2 stages over stage meshes of tp 2, the head
#   split over the classes: the first-step check;
# - gpt2-tiny with training-mode dropout on one device, dp 2 and dp x tp
#   2x2: 5 steps on test/data/pattern.bin, the meshes' equal to one device's
#   (each rank's block of the dropout streams, stream_axis);
# - gpt2-tiny fp32 as a 2-stage 1F1B pipeline: the same check, the stages as
#   threads and, with 2 GPUs, launched on NCCL;
# - gpt2-tiny fp32 as 2 stages over the stage meshes 2 (dp) and 2x2 (dp-tp):
#   the same check on the fixture's rows twice, 4 and 8 thread ranks; and
#   llama-tiny over 2x2, its token table vocabulary-parallel in the stage mesh;
# - llama-tiny fp32 as the pipeline search's plan on an 8-device cluster
#   file (two stages: PP2 x DP2 x TP2): the same check, 8 thread ranks; unpinned (DP4 x
#   TP2, ZeRO-1 inside the stage mesh) the same, each rank a quarter of the
#   state, and gpt2-tiny's PP2 x DP2 x TP2 with --zero 1;
# - gpt2-tiny fp32 as the mesh search's plans with a ZeRO stage per
#   parameter (mesh 2 under 2.5 MiB; a100-megatron's 2x2) and as a pipeline
#   whose stages recompute differently: the same check, and the first plan
#   with --zero 0 the same bits;
# - the driver's GPU kernel tests (tessera_runtime_cuda_tests, filtered), the
#   sharded and offloaded state's (tessera_runtime_offload_gpu_tests) and
#   the device-staged comm's (tessera_runtime_comm_gpu_tests), when BUILD_DIR
#   has them;
# - with SPEED=1, GPT-2 124M (bf16, 16 x 1024, random initial weights) and a
#   synthetic token shard: a few steps for ms/step, tokens/s and MFU.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$repo/build}"
out="${2:-$build/gpu-check}"
tesserac="$build/bin/tesserac"
rm -rf "$out" && mkdir -p "$out"

"$tesserac" "$repo/test/models/gpt2-tiny.raw.dyn.onnx" --dim batch=2 --dim seq=31 \
    --loss causal-lm --precision fp32 --target cuda -o "$out/gpt2-tiny-train"
"$tesserac" "$repo/test/models/bert-tiny.raw.dyn.onnx" --dim batch=2 --dim seq=32 \
    --loss mlm --precision fp32 --target cuda -o "$out/bert-tiny-train"
"$tesserac" "$repo/test/models/gpt2-tiny.raw.dyn.onnx" --dim batch=2 --dim seq=31 \
    --loss causal-lm --precision bf16 --target cuda -o "$out/gpt2-tiny-bf16-train"
# The Llama family: llama-tiny (rotary, RMSNorm, SwiGLU, grouped K/V heads)
# and mistral-tiny (the same with a sliding window of 16 over 31 tokens).
"$tesserac" "$repo/test/models/llama-tiny.raw.dyn.onnx" --dim batch=2 --dim seq=31 \
    --loss causal-lm --precision fp32 --target cuda -o "$out/llama-tiny-train"
# llama-tiny in bf16 for the data-parallel ZeRO on thread ranks: its token
# table read as f32, the rest as bf16 copies (the packed mirrors).
"$tesserac" "$repo/test/models/llama-tiny.raw.dyn.onnx" --dim batch=2 --dim seq=31 \
    --loss causal-lm --precision bf16 --target cuda --without-weights \
    -o "$out/llama-tiny-bf16-train"
"$tesserac" "$repo/test/models/generated/mistral-tiny.raw.dyn.onnx" --dim batch=2 --dim seq=31 \
    --loss causal-lm --precision fp32 --target cuda -o "$out/mistral-tiny-train"
"$tesserac" "$repo/test/models/generated/gemma2-tiny.raw.dyn.onnx" --dim batch=2 --dim seq=31 \
    --loss causal-lm --precision fp32 --target cuda -o "$out/gemma2-tiny-train"
# llama-tiny with SwiGLU's gate and up projections packed into one GEMM
# (--pack-gate-up on): the same model and weights, so the same fixture.
"$tesserac" "$repo/test/models/llama-tiny.raw.dyn.onnx" --dim batch=2 --dim seq=31 \
    --loss causal-lm --precision fp32 --target cuda --pack-gate-up on \
    --without-weights -o "$out/llama-tiny-pack-gate-up-train"
# Partitioned for meshes (tensor parallel on 2, data x tensor parallel on
# 2x2), without weights of their own: they start from gpt2-tiny-train's.
"$tesserac" "$repo/test/models/gpt2-tiny.raw.dyn.onnx" --dim batch=2 --dim seq=31 \
    --loss causal-lm --precision fp32 --target cuda --mesh 2 --strategy tp \
    --without-weights -o "$out/gpt2-tiny-tp-train"
"$tesserac" "$repo/test/models/gpt2-tiny.raw.dyn.onnx" --dim batch=2 --dim seq=31 \
    --loss causal-lm --precision fp32 --target cuda --mesh 2x2 --strategy dp-tp \
    --without-weights -o "$out/gpt2-tiny-dptp-train"
# gpt2-vocab300, whose head reads the padded copy of its table (300 classes
# padded to 320): on one device, and its head split over the classes on
# tensor parallel 2 and on 2 stages over stage meshes of tp 2 (the prepare
# keeping each rank's block of the copy), from the one device's weights.
"$tesserac" "$repo/test/models/generated/gpt2-vocab300.raw.dyn.onnx" --dim batch=2 --dim seq=31 \
    --loss causal-lm --precision fp32 --target cuda -o "$out/gpt2-vocab300-train"
"$tesserac" "$repo/test/models/generated/gpt2-vocab300.raw.dyn.onnx" --dim batch=2 --dim seq=31 \
    --loss causal-lm --precision fp32 --target cuda --mesh 2 --strategy tp \
    --without-weights -o "$out/gpt2-vocab300-tp-train"
"$tesserac" "$repo/test/models/generated/gpt2-vocab300.raw.dyn.onnx" --dim batch=4 --dim seq=31 \
    --loss causal-lm --precision fp32 --target cuda --stages 2 --microbatches 2 \
    --mesh 1x2 --strategy tp --without-weights -o "$out/gpt2-vocab300-pptp-train"
# llama-tiny with its token table vocabulary-parallel (rows_axis) on meshes
# 2 and 2x2, from llama-tiny-train's weights.
for mesh in 2 2x2; do
  "$tesserac" "$repo/test/models/llama-tiny.raw.dyn.onnx" --dim batch=2 --dim seq=31 \
      --loss causal-lm --precision fp32 --target cuda --mesh "$mesh" \
      --shard 'model.embed_tokens.weight=vocabulary-parallel' \
      --without-weights -o "$out/llama-tiny-vocab$mesh-train"
done
# gpt2-tiny with training-mode dropout (test/models/add_dropout.py) on one
# device and partitioned data parallel over 2 and data x tensor parallel
# over 2x2: the ranks draw their blocks of each dropout's and attention's
# stream (stream_axis), so every step equals the single-device one.
for plan in "one" "dp --mesh 2 --strategy dp" "dptp --mesh 2x2 --strategy dp-tp"; do
  read -r name flags <<< "$plan"
  # shellcheck disable=SC2086
  "$tesserac" "$repo/test/models/gpt2-tiny-dropout.raw.dyn.onnx" --dim batch=4 --dim seq=32 \
      --loss causal-lm --precision fp32 --target cuda $flags -o "$out/gpt2-tiny-dropout-$name-train"
done
cp "$repo/test/data/pattern.bin" "$out/"
# Pipelined (2 stages, 1F1B, the fixture's 2 rows as 2 micro-batches).
"$tesserac" "$repo/test/models/gpt2-tiny.raw.dyn.onnx" --dim batch=2 --dim seq=31 \
    --loss causal-lm --precision fp32 --target cuda --stages 2 --microbatches 2 \
    --without-weights -o "$out/gpt2-tiny-pp2-train"

# Pipelined over stage meshes (PP2 x DP2, PP2 x DP2 x TP2): the step is the
# fixture's 2 rows twice, 2 micro-batches of both rows.
"$tesserac" "$repo/test/models/gpt2-tiny.raw.dyn.onnx" --dim batch=4 --dim seq=31 \
    --loss causal-lm --precision fp32 --target cuda --stages 2 --microbatches 2 \
    --mesh 2 --strategy dp --without-weights -o "$out/gpt2-tiny-ppdp-train"
"$tesserac" "$repo/test/models/gpt2-tiny.raw.dyn.onnx" --dim batch=4 --dim seq=31 \
    --loss causal-lm --precision fp32 --target cuda --stages 2 --microbatches 2 \
    --schedule interleaved:2 --mesh 2x2 --strategy dp-tp --without-weights \
    -o "$out/gpt2-tiny-ppdptp-train"
# llama-tiny as 2 stages over the stage mesh 2x2 (dp-tp): its untied token
# table vocabulary-parallel inside the first stage's mesh (rows_axis,
# tessera/Analysis/MegatronPartition.h), train-pipeline-mesh.test on the CPU.
"$tesserac" "$repo/test/models/llama-tiny.raw.dyn.onnx" --dim batch=4 --dim seq=31 \
    --loss causal-lm --precision fp32 --target cuda --stages 2 --microbatches 2 \
    --mesh 2x2 --strategy dp-tp --without-weights -o "$out/llama-tiny-ppdptp-train"
# The pipeline search's plan on an 8-device cluster file (ZeRO-1 pinned
# off, two stages): llama-tiny as PP2 x DP2 x TP2, its LM head and loss
# vocabulary-parallel (train-pipeline-plan.test on the CPU).
"$tesserac" "$repo/test/models/llama-tiny.raw.dyn.onnx" --dim batch=4 --dim seq=31 \
    --loss causal-lm --precision fp32 --target cuda --pipeline --stages 2 --zero 0 \
    --cluster "$repo/test/Lowering/Inputs/eight-small-devices.json" \
    --without-weights -o "$out/llama-tiny-searched-pipeline-train"
# Unpinned (under 2.2 MiB), the search shards the stage's optimizer state
# over its dp replicas: llama-tiny as DP4 x TP2, ZeRO-1 inside the stage
# mesh, which the executable runs by default (train-pipeline-plan.test on
# the CPU).
"$tesserac" "$repo/test/models/llama-tiny.raw.dyn.onnx" --dim batch=4 --dim seq=31 \
    --loss causal-lm --precision fp32 --target cuda --pipeline \
    --cluster "$repo/test/Lowering/Inputs/eight-small-devices.json" --memory-limit 2.2MiB \
    --without-weights -o "$out/llama-tiny-searched-zero1-train"
# The mesh search's ZeRO per parameter (runtime/train/MeshZero.h): gpt2-tiny
# on mesh 2 under 2.5 MiB (ZeRO-0, -2 and -3 by parameter) and on
# a100-megatron's 2x2 (ZeRO-2 over dp), as train-mesh-mixed-zero.test runs
# them on the CPU, their ZeRO-2 parameters pinned as there (the search no
# longer picks ZeRO-2 for a replicated layer); and a pipeline whose stages
# recompute differently (train-pipeline-mixed-remat.test).
"$tesserac" "$repo/test/models/gpt2-tiny.raw.dyn.onnx" --dim batch=2 --dim seq=31 \
    --loss causal-lm --precision fp32 --target cuda --mesh 2 --memory-limit 2.5MiB \
    --shard 'lm_head.weight=zero=2' --shard 'transformer.ln_f.weight=zero=2' \
    --without-weights -o "$out/gpt2-tiny-mixedzero-train"
"$tesserac" "$repo/test/models/gpt2-tiny.raw.dyn.onnx" --dim batch=2 --dim seq=31 \
    --loss causal-lm --precision fp32 --target cuda --mesh 2x2 --cluster a100-megatron \
    --shard 'transformer.ln_f.weight=zero=2' \
    --without-weights -o "$out/gpt2-tiny-mixedzerodptp-train"
"$tesserac" "$repo/test/models/gpt2-tiny.raw.dyn.onnx" --dim batch=2 --dim seq=31 \
    --loss causal-lm --precision fp32 --target cuda --pipeline --stages 2 --microbatches 2 \
    --cluster "$repo/test/Lowering/Inputs/two-small-devices.json" \
    --without-weights -o "$out/gpt2-tiny-mixedremat-train"

step="$repo/test/Lowering/Inputs/training_step.py"
python3 "$step" write-batch "$repo/test/fixtures/gpt2-tiny.reference.json" "$out/gpt2-tiny-x2.batch.npy" --repeat 2
python3 "$step" write-batch "$repo/test/fixtures/gpt2-tiny.reference.json" "$out/gpt2-tiny.batch.npy"
python3 "$step" write-batch "$repo/test/fixtures/bert-tiny.reference.json" "$out/bert-tiny.batch.npy" --mlm
python3 "$step" write-batch "$repo/test/fixtures/llama-tiny.reference.json" "$out/llama-tiny.batch.npy"
python3 "$step" write-batch "$repo/test/fixtures/llama-tiny.reference.json" "$out/llama-tiny-x2.batch.npy" --repeat 2
python3 "$step" write-batch "$repo/test/models/generated/mistral-tiny.reference.json" "$out/mistral-tiny.batch.npy"
python3 "$step" write-batch "$repo/test/models/generated/gemma2-tiny.reference.json" "$out/gemma2-tiny.batch.npy"
python3 "$step" write-batch "$repo/test/models/generated/gpt2-vocab300.reference.json" "$out/gpt2-vocab300.batch.npy"
python3 "$step" write-batch "$repo/test/models/generated/gpt2-vocab300.reference.json" "$out/gpt2-vocab300-x2.batch.npy" --repeat 2
cp "$step" "$repo/test/Lowering/Inputs/training_runs.py" \
   "$repo/test/Lowering/Inputs/stage_zero.py" "$out/"
cp "$repo/test/fixtures/gpt2-tiny.reference.json" "$repo/test/fixtures/bert-tiny.reference.json" \
   "$repo/test/fixtures/llama-tiny.reference.json" \
   "$repo/test/models/generated/mistral-tiny.reference.json" \
   "$repo/test/models/generated/gemma2-tiny.reference.json" \
   "$repo/test/models/generated/gpt2-vocab300.reference.json" "$out/"
cp "$repo/scripts/gpu-check-run.sh" "$out/run.sh"
cp "$repo/bench/gpu-env.sh" "$out/"

# The top-level build puts executables in bin/, a runtime-only one in cuda/
# and comm/.
for tests in tessera_runtime_cuda_tests tessera_runtime_comm_gpu_tests \
             tessera_runtime_offload_gpu_tests; do
  for dir in "$build/bin" "$build/cuda" "$build/comm"; do
    if [[ -x "$dir/$tests" ]]; then cp "$dir/$tests" "$out/"; break; fi
  done
done

if [[ "${SPEED:-0}" == 1 ]]; then
  "$tesserac" "$repo/../shared/models/gpt2-124m.raw.dyn.onnx" --dim batch=16 --dim seq=1024 \
      --loss causal-lm --precision bf16 --target cuda --without-weights -o "$out/gpt2-124m-train"
  # An llm.c token shard of uniformly random GPT-2 ids: enough for 12 steps.
  python3 - "$out/gpt2-124m.tokens.bin" <<'PY'
import random, struct, sys
count = 12 * (16 * 1024 + 1)
random.seed(0)
header = struct.pack("<256i", 20240520, 1, count, *([0] * 253))
tokens = struct.pack("<%dH" % count, *(random.randrange(50257) for _ in range(count)))
open(sys.argv[1], "wb").write(header + tokens)
PY
fi
du -sh "$out"
