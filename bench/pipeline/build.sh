#!/usr/bin/env bash
# The CPU-machine half of the pipeline and remat benchmark (issue 6: "on 2
# GPUs, GPT-2 350M as a 2-stage 1F1B pipeline and with each remat mode,
# measured step time and peak memory next to the predictions"). Compiles
# GPT-2 350M in bf16 for the GPU, writes what the pipeline planner predicts
# for each run (`tesserac --explain --pipeline` with the run's layout forced,
# on the measured cluster bench/clusters/h200x2-measured.json) and what its
# search picks for 2 devices, and gathers what the GPU machine needs into
# bench/pipeline/out (ignored by git):
#   bash bench/pipeline/build.sh [BUILD_DIR]     # default build/; ~10 minutes
#   run(command="bash bench/pipeline/run.sh", carry=["bench/pipeline/out"], kind="nvidia-h200-x2")
# The runs (REMAT = none, selective, full):
#   pp2-REMAT  --stages 2 --microbatches 8 --schedule 1f1b --remat REMAT, a
#              global batch of 16 x 1024 (micro-batches of 2 rows), one rank
#              per GPU (--nproc 2, activations over NCCL): needs 2 GPUs;
#   one-REMAT  one GPU, --remat REMAT, a batch of 8 x 1024: what remat costs
#              and saves without a pipeline (runs on 1 GPU too).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
shared="${TESSERA_SHARED:-$root/../shared}"
out="$root/bench/pipeline/out"
tesserac="$build/bin/tesserac"
model="$shared/models/gpt2-350m.raw.dyn.onnx"
cluster="$root/bench/clusters/h200x2-measured.json"
[[ -x "$tesserac" ]] || { echo "build.sh: $tesserac not found: build first (scripts/test.sh)" >&2; exit 1; }
[[ -f "$model" ]] || { echo "build.sh: $model not found (set TESSERA_SHARED)" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out"
common=(--dim seq=1024 --loss causal-lm --precision bf16)

for remat in none selective full; do
  "$tesserac" "$model" --dim batch=16 "${common[@]}" --explain --pipeline --cluster "$cluster" \
      --pipeline-devices 2 --stages 2 --microbatches 8 --schedule 1f1b --remat "$remat" \
      > "$out/pp2-$remat.explain.txt"
  "$tesserac" "$model" --dim batch=8 "${common[@]}" --explain --pipeline --cluster "$cluster" \
      --pipeline-devices 1 --stages 1 --microbatches 1 --remat "$remat" \
      > "$out/one-$remat.explain.txt"
done
# The planner's own choice for 2 devices at the pipeline runs' global batch.
"$tesserac" "$model" --dim batch=16 "${common[@]}" --explain --pipeline --cluster "$cluster" \
    --pipeline-devices 2 > "$out/search.explain.txt"

for remat in none selective full; do
  echo "== tesserac gpt2-350m --stages 2 --microbatches 8 --remat $remat (global batch 16, bf16)"
  "$tesserac" "$model" --dim batch=16 "${common[@]}" --target cuda --without-weights \
      --stages 2 --microbatches 8 --schedule 1f1b --remat "$remat" -o "$out/pp2-$remat-train"
  echo "== tesserac gpt2-350m --remat $remat (batch 8, bf16)"
  "$tesserac" "$model" --dim batch=8 "${common[@]}" --target cuda --without-weights \
      --remat "$remat" -o "$out/one-$remat-train"
done
strip "$out"/*-train
cp "$root/bench/pipeline/report.py" "$root/bench/pipeline/task_times.py" "$root/bench/metrics.py" "$root/bench/gpu-env.sh" "$root/bench/pipeline/run.sh" \
    "$root/bench/gpt2/make_tokens.py" "$out/"
du -sh "$out"
