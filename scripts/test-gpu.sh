#!/usr/bin/env bash
# Runs Tessera's GPU tests (ctest label `gpu`) from a copy of a build, on a
# machine with a CUDA device but no MLIR and no CMake build tree of its own.
#
#   scripts/test-gpu.sh [BUILD_DIR] [-- GTEST_ARGS...]
#
# BUILD_DIR defaults to build-cuda (the standalone runtime build:
# cmake -S runtime -B build-cuda -DTESSERA_RUNTIME_CUDA=ON). The test binary
# links the CUDA runtime statically and needs only the driver and
# libcublasLt.so.13 on the GPU machine; if the dynamic loader cannot find
# cuBLASLt, the script looks in the CUDA toolkit and in PyTorch's wheels.
# With $OUT set (the device machine's result folder), the log and the
# GoogleTest XML report are written there.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-build-cuda}"
[[ $# -gt 0 ]] && shift
[[ "${1:-}" == "--" ]] && shift
case "$build" in /*) ;; *) build="$root/$build" ;; esac

binary=""
for candidate in "$build/cuda/tessera_runtime_cuda_tests" \
                 "$build/runtime/cuda/tessera_runtime_cuda_tests"; do
  [[ -x "$candidate" ]] && binary="$candidate" && break
done
if [[ -z "$binary" ]]; then
  echo "test-gpu.sh: no tessera_runtime_cuda_tests under $build;" \
       "build it with: ninja -C $build tessera_runtime_cuda_tests" >&2
  exit 2
fi

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "test-gpu.sh: warning: nvidia-smi sees no GPU; the tests will skip" >&2
else
  nvidia-smi -L
fi

# cuBLASLt, and cuDNN for the attention, where the loader does not look.
source "$(dirname "${BASH_SOURCE[0]}")/../bench/gpu-env.sh" >/dev/null
if ldd "$binary" | grep -q 'libcublasLt.*not found'; then
  echo "test-gpu.sh: libcublasLt.so.13 not found on this machine" >&2
  exit 2
fi

report=()
log=/dev/null
if [[ -n "${OUT:-}" ]]; then
  report=(--gtest_output="xml:$OUT/tessera_runtime_cuda_tests.xml")
  log="$OUT/tessera_runtime_cuda_tests.log"
fi
set -o pipefail
"$binary" "${report[@]}" "$@" 2>&1 | tee "$log"
