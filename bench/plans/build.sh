#!/usr/bin/env bash
# The CPU-machine half of the plan benchmark (issue 5: "on 2 GPUs, measured
# step time for the plans DP, TP and ZeRO-1 of GPT-2 350M, next to the cost
# model's prediction for each"). Compiles GPT-2 350M in bf16 for the GPU at a
# global batch of 16 x 1024 (8 x 1024 per GPU for the data-parallel plans),
# writes what the cost model predicts for each plan on 2 H200s
# (`tesserac --explain`, the measured cluster bench/clusters/h200x2-measured.json)
# and what the search picks on its own, and gathers everything the GPU
# machine needs into bench/plans/out (ignored by git):
#   bash bench/plans/build.sh [BUILD_DIR]        # default build/; ~6 minutes
#   run(command="bash bench/plans/run.sh", carry=["bench/plans/out"], kind="nvidia-h200-x2")
# The plans:
#   dp     the single-device program, --nproc 2: the driver's data
#          parallelism (bucketed all-reduce overlapped with the backward);
#   zero1  the same with --zero 1 (reduce-scatter, sharded AdamW, all-gather);
#   tp     the program partitioned for --mesh tp=2 --strategy tp (Megatron
#          column/row linears, heads split), --nproc 2 on NCCL.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
shared="${TESSERA_SHARED:-$root/../shared}"
out="$root/bench/plans/out"
tesserac="$build/bin/tesserac"
model="$shared/models/gpt2-350m.raw.dyn.onnx"
cluster="$root/bench/clusters/h200x2-measured.json"
[[ -x "$tesserac" ]] || { echo "build.sh: $tesserac not found: build first (scripts/test.sh)" >&2; exit 1; }
[[ -f "$model" ]] || { echo "build.sh: $model not found (set TESSERA_SHARED)" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out"
common=(--dim seq=1024 --loss causal-lm --precision bf16)

# Predictions: the plan's memory per device and step time on 2 devices.
explain() { # name flags...
  local name=$1; shift
  "$tesserac" "$model" --dim batch=16 "${common[@]}" --explain --cluster "$cluster" "$@" \
      > "$out/$name.explain.txt"
}
explain dp --mesh dp=2 --zero 0
explain zero1 --mesh dp=2 --zero 1
explain tp --mesh tp=2 --shard 'c_attn|c_fc=tp-column' --shard 'attn.c_proj|mlp.c_proj=tp-row'
explain search --mesh 2

echo "== tesserac gpt2-350m (batch 8 per GPU, bf16, --target cuda)"
"$tesserac" "$model" --dim batch=8 "${common[@]}" --target cuda --without-weights -o "$out/dp-train"
echo "== tesserac gpt2-350m --mesh tp=2 --strategy tp (batch 16, bf16, --target cuda)"
"$tesserac" "$model" --dim batch=16 "${common[@]}" --target cuda --mesh tp=2 --strategy tp \
    --without-weights -o "$out/tp-train"
strip "$out/dp-train" "$out/tp-train"
cp "$root/bench/plans/report.py" "$root/bench/metrics.py" "$root/bench/gpu-env.sh" "$root/bench/plans/run.sh" \
    "$root/bench/gpt2/make_tokens.py" "$out/"
du -sh "$out"
