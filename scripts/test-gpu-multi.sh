#!/usr/bin/env bash
# Runs the multi-GPU comm tests (runtime/test/comm/NcclCommGpuTest.cpp: every
# NCCL collective against the host backend, split communicators, the
# gradient reducer and ZeRO-1 pieces, torchrun-style and --nproc launching,
# a rank killed mid-collective, all-reduce bandwidth) on a machine with 2+
# GPUs, from a copy of a build.
#
#   scripts/test-gpu-multi.sh [BUILD_DIR] [-- GTEST_ARGS...]
#
# BUILD_DIR defaults to build-cuda (a runtime build where CUDA and NCCL were
# found). The binary links NCCL dynamically; if the loader cannot find
# libnccl.so.2, the script looks in the CUDA toolkit and PyTorch's wheels.
# NVLink SHARP (NVLS) stays off: NCCL_NVLS_ENABLE=0. With $OUT set (the
# device machine's result folder), the log and XML report are written there.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-build-cuda}"
[[ $# -gt 0 ]] && shift
[[ "${1:-}" == "--" ]] && shift
case "$build" in /*) ;; *) build="$root/$build" ;; esac

binary=""
for candidate in "$build/comm/tessera_runtime_comm_gpu_tests" \
                 "$build/runtime/comm/tessera_runtime_comm_gpu_tests"; do
  [[ -x "$candidate" ]] && binary="$candidate" && break
done
if [[ -z "$binary" ]]; then
  echo "test-gpu-multi.sh: no tessera_runtime_comm_gpu_tests under $build;" \
       "build it with: ninja -C $build tessera_runtime_comm_gpu_tests" >&2
  exit 2
fi

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  nvidia-smi -L
  gpus=$(nvidia-smi -L | wc -l)
  [[ "$gpus" -lt 2 ]] && echo "test-gpu-multi.sh: warning: $gpus GPU(s); the tests need 2 and will skip" >&2
else
  echo "test-gpu-multi.sh: warning: nvidia-smi sees no GPU; the tests will skip" >&2
fi

if ldd "$binary" | grep -q 'libnccl.*not found'; then
  extra=""
  for dir in /usr/local/cuda/lib /usr/local/cuda/lib64 \
             /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu \
             $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, "nccl", "lib") for p in nvidia.__path__))' 2>/dev/null || true); do
    if [[ -e "$dir/libnccl.so.2" ]]; then extra="$dir"; break; fi
  done
  if [[ -z "$extra" ]]; then
    echo "test-gpu-multi.sh: libnccl.so.2 not found on this machine" >&2
    exit 2
  fi
  export LD_LIBRARY_PATH="$extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "test-gpu-multi.sh: using NCCL from $extra"
fi

export NCCL_NVLS_ENABLE=0
report=()
log=/dev/null
if [[ -n "${OUT:-}" ]]; then
  report=(--gtest_output="xml:$OUT/tessera_runtime_comm_gpu_tests.xml")
  log="$OUT/tessera_runtime_comm_gpu_tests.log"
fi
"$binary" "${report[@]}" "$@" 2>&1 | tee "$log"
