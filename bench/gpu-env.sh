# Sourced by the GPU-machine scripts (benchmarks, scripts/test-gpu.sh, the
# gpu-check): where the executables find cuBLASLt and NCCL (linked
# dynamically) and libcudnn.so.9 (opened at run time by the attention, so
# ldd cannot tell it is missing): the CUDA toolkit's, or the pip wheels'
# beside torch. Also NCCL_NVLS_ENABLE=0 for every
# multi-GPU run (NVLink multicast is off on the lent machines). Also counts
# and lists the GPUs: $gpus.
export NCCL_NVLS_ENABLE=0
for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, s, "lib") for p in nvidia.__path__ for s in ("cu13", "cublas", "nccl", "cudnn")))' 2>/dev/null); do
  [[ -d "$dir" ]] && export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
gpus=$(nvidia-smi -L | wc -l)
nvidia-smi -L
