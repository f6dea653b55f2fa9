#!/usr/bin/env bash
# On the GPU machine, from the repository root: the attention GPU tests, then
# tessera_attention_bench and PyTorch's SDPA at GPT-2 124M and 350M shapes.
#   bench/attention/run-on-gpu.sh [BUILD_DIR]   (default build-cuda)
set -uo pipefail
build="${1:-build-cuda}"
export NCCL_NVLS_ENABLE=0
scripts/test-gpu.sh "$build" -- --gtest_filter='AttentionCuda*'
# The bench needs cuBLASLt like the tests: reuse test-gpu.sh's search.
for dir in /usr/local/cuda/lib64 $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, s, "lib") for p in nvidia.__path__ for s in ("cu13", "cublas")))' 2>/dev/null); do
  [[ -e "$dir/libcublasLt.so.13" ]] && export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" && break
done
bench="$build/cuda/tessera_attention_bench"
"$bench" 16 12 12 1024 64 1 bf16
"$bench" 16 16 16 1024 64 1 bf16
"$bench" 16 12 12 1024 64 0 bf16
"$bench" 8 16 16 1024 128 1 bf16
"$bench" 4 16 16 1000 64 1 f16
python3 bench/attention/sdpa_reference.py 16 12 1024 64 1 bf16
python3 bench/attention/sdpa_reference.py 16 16 1024 64 1 bf16
python3 bench/attention/sdpa_reference.py 8 16 1024 128 1 bf16
