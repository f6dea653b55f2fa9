#!/usr/bin/env bash
# Tessera end to end, on the tiny GPT-2 shipped in test/models (2 layers, d=64, 4 heads,
# vocabulary 512; 136,960 parameters).
#
# Steps:
#   1. install what is missing (scripts/install-deps.sh)
#   2. configure once and build the tools
#   3. import the ONNX model with symbolic batch and seq bound to 2 and 32, and print its summary
#
# Compiling the imported model to a training executable and training it are the next steps; they
# are added below step 3 once tesserac can do them.
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
