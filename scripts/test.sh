#!/usr/bin/env bash
# Builds Tessera and runs every test through ctest: the lit suites (one ctest test, `lit`, over
# test/) and the GoogleTest unit tests (one ctest test per test case); then fuzzes each of the
# training driver's readers for a bounded time (scripts/fuzz.sh, $TESSERA_FUZZ_SECONDS each, default
# 20). Exits non-zero when the build or any test fails, or the fuzzing finds a bug. Safe to run again: it configures only once and Ninja rebuilds only
# what changed (re-running CMake by itself when a CMakeLists.txt changed).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build=build

# --python: the venv with onnx, onnxruntime and numpy that the onnxruntime parity test (ctest label
# `python`) runs with; without it CMake leaves that test out.
bash scripts/install-deps.sh --python

if [[ ! -f "$build/build.ninja" ]]; then
  cmake -G Ninja -S . -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_DIR=/usr/lib/llvm-22/lib/cmake/llvm
fi

ninja -C "$build" -j"$(nproc)"

# --no-tests=error: a configuration that registers no test at all is a failure, not a pass.
ctest --test-dir "$build" --output-on-failure --no-tests=error

# The readers' libFuzzer targets (safetensors, checkpoints, .npy, token shards), built apart in
# build-fuzz with clang, ASan and UBSan: about two minutes on two cores, the build included.
bash scripts/fuzz.sh "${TESSERA_FUZZ_SECONDS:-20}"
