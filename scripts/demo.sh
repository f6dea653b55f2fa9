#!/usr/bin/env bash
# Tessera end to end, on the tiny GPT-2 shipped in test/models (2 layers, d=64, 4 heads,
# vocabulary 512; 136,960 parameters).
#
# Steps:
#   1. install what is missing (scripts/install-deps.sh)
#   2. configure once and build the tools
#   3. import the ONNX model with symbolic batch and seq bound to 2 and 32, and print its summary
#   4. compile it into a CPU training executable (batch 4, seq 32, causal LM, fp32): the step lowered
#      to C++ over the runtime's kernels, its initial weights written beside it
#   5. train it for 40 steps on test/data/pattern.bin (a repeating random token sequence, made by
#      test/data/make_pattern_shard.py): the loss falls from ln(512) = 6.2 towards 2
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build=build
model=test/models/gpt2-tiny.raw.dyn.onnx

step() {
  printf '\n==> %s\n' "$*"
}

step "1. dependencies"
bash scripts/install-deps.sh

step "2. build"
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -G Ninja -S . -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_DIR=/usr/lib/llvm-22/lib/cmake/llvm
fi
ninja -C "$build" -j"$(nproc)"

step "3. import $model (batch=2, seq=32)"
"$build/bin/tesserac" "$model" --dim batch=2 --dim seq=32 --summary

step "4. compile $model for the CPU (batch=4, seq=32, causal LM, fp32)"
mkdir -p "$build/demo"
"$build/bin/tesserac" "$model" --dim batch=4 --dim seq=32 --loss causal-lm --target cpu \
  -o "$build/demo/gpt2-tiny-train"
ls -l "$build/demo/gpt2-tiny-train" "$build/demo/gpt2-tiny-train.weights.safetensors"

step "5. train 40 steps on test/data/pattern.bin"
"$build/demo/gpt2-tiny-train" --data test/data/pattern.bin --steps 40 --lr 3e-3 --warmup 4 \
  --schedule cosine --seed 1 --metrics "$build/demo/metrics.jsonl"
