#!/usr/bin/env bash
# Prepares the GPU first-step check (issue 4): compiles gpt2-tiny (causal LM)
# and bert-tiny (MLM) with --target cuda, fp32, and gathers everything the GPU
# machine needs (it has no MLIR) into one directory:
#   scripts/make-gpu-check.sh [BUILD_DIR] [OUT_DIR]   (defaults: build, BUILD_DIR/gpu-check)
# then, through the device tool:
#   run(command="bash <OUT_DIR>/run.sh", carry=["<OUT_DIR>"])
# BUILD_DIR must have been configured with the CUDA runtime (the default where
# nvcc is found).
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

step="$repo/test/Lowering/Inputs/training_step.py"
python3 "$step" write-batch "$repo/test/fixtures/gpt2-tiny.reference.json" "$out/gpt2-tiny.batch.npy"
python3 "$step" write-batch "$repo/test/fixtures/bert-tiny.reference.json" "$out/bert-tiny.batch.npy" --mlm
cp "$step" "$out/training_step.py"
cp "$repo/test/fixtures/gpt2-tiny.reference.json" "$repo/test/fixtures/bert-tiny.reference.json" "$out/"
cp "$repo/scripts/gpu-check-run.sh" "$out/run.sh"
du -sh "$out"
