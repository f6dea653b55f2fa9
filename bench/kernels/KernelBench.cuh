//===- KernelBench.cuh - What the kernel benchmarks share -----------------===//
//
// Error checks that end the program with the failing call's message, the
// mean time of a call (timeMs, or timeMsColdL2 with the L2 flushed before
// each), and a
// device tensor filled with a deterministic pattern (floats in [-2, 2),
// ids below a vocabulary), for the hand-run benchmarks in bench/kernels.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_BENCH_KERNELS_KERNELBENCH_CUH
#define TESSERA_BENCH_KERNELS_KERNELBENCH_CUH

#include "tessera/runtime/cuda_kernels.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace kernel_bench {

inline void check(cudaError_t error, const char *what) {
  if (error != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(error));
    std::exit(1);
  }
}

inline void checkKernel(int status) {
  if (status != 0) {
    std::fprintf(stderr, "%s\n", tessera_cuda_last_error());
    std::exit(1);
  }
}

/// Under TESSERA_BENCH_FILL=normal, float operands hold standard normal
/// values (a hash of the index through Box-Muller) instead of the default
/// pattern: a GEMM's power, and so its clock, depends on how many bits its
/// operands toggle, and a training step's activations and weights toggle
/// more than a short arithmetic pattern does.
inline bool fillNormal() {
  static const bool normal = [] {
    const char *value = std::getenv("TESSERA_BENCH_FILL");
    return value && std::string(value) == "normal";
  }();
  return normal;
}

/// A uniform value in (0, 1) from a 32-bit hash of `key` (splitmix-style).
__device__ inline float hashUniform(unsigned long long key) {
  key += 0x9e3779b97f4a7c15ull;
  key = (key ^ (key >> 30)) * 0xbf58476d1ce4e5b9ull;
  key = (key ^ (key >> 27)) * 0x94d049bb133111ebull;
  key ^= key >> 31;
  return (static_cast<float>(key >> 40) + 0.5f) * (1.0f / 16777216.0f);
}

/// Values in [-2, 2) (or standard normal ones, `normal`) in any float
/// storage type, ids in [0, idLimit), from the element index.
__global__ void fillKernel(void *data, int dtype, long long count,
                           long long idLimit, bool normal) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) +
                     threadIdx.x;
       i < count; i += static_cast<long long>(blockDim.x) * gridDim.x) {
    float value = static_cast<float>(i * 7919 % 4001) / 1000.0f - 2.0f;
    if (normal) {
      float u = hashUniform(2 * static_cast<unsigned long long>(i));
      float v = hashUniform(2 * static_cast<unsigned long long>(i) + 1);
      value = sqrtf(-2.0f * logf(u)) * cospif(2.0f * v);
    }
    if (dtype == TESSERA_F32) {
      static_cast<float *>(data)[i] = value;
    } else if (dtype == TESSERA_I64) {
      static_cast<long long *>(data)[i] = i * 7919 % idLimit;
    } else {
      // bf16: the top half of the f32 pattern.
      unsigned bits = __float_as_uint(value);
      static_cast<unsigned short *>(data)[i] =
          static_cast<unsigned short>(bits >> 16);
    }
  }
}

inline int sizeOf(int dtype) {
  return dtype == TESSERA_F32 ? 4 : dtype == TESSERA_I64 ? 8 : 2;
}

/// A filled device tensor, freed with the object.
struct DeviceBuffer {
  tessera_tensor tensor{};
  long long bytes = 0;
  DeviceBuffer(int dtype, std::vector<int64_t> shape,
               long long idLimit = 50257) {
    tensor.dtype = dtype;
    tensor.rank = static_cast<int32_t>(shape.size());
    long long count = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      tensor.shape[i] = shape[i];
      count *= shape[i];
    }
    bytes = count * sizeOf(dtype);
    check(cudaMalloc(&tensor.data, bytes > 0 ? bytes : 16), "cudaMalloc");
    fillKernel<<<4096, 256>>>(tensor.data, dtype, count, idLimit,
                                fillNormal());
    check(cudaGetLastError(), "fill");
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() { cudaFree(tensor.data); }
  tessera_tensor *get() { return &tensor; }
};

/// Mean ms per call of `body` over `iterations` calls, after two warm-ups.
inline double timeMs(const std::function<void()> &body, int iterations = 10) {
  body();
  body();
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  check(cudaEventRecord(start), "record");
  for (int i = 0; i < iterations; ++i)
    body();
  check(cudaEventRecord(stop), "record");
  check(cudaEventSynchronize(stop), "sync");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / iterations;
}

/// Mean ms per call of `body` over `iterations` calls with the L2 cache
/// flushed before each (a memset of twice its size, outside the timed
/// window), after one warm-up. timeMs repeats a call on the same operands,
/// so whatever fits the L2 (a Llama layer's weights, 8-32 MB, in an
/// H100's 50 MB) is read from it from the second call on; in a training
/// step each GEMM's weight was last read a layer ago. Each call is timed
/// on its own, so launch latency counts as it does in the step.
inline double timeMsColdL2(const std::function<void()> &body,
                           int iterations = 10) {
  static void *flush = nullptr;
  static size_t flushBytes = 0;
  if (!flush) {
    int device = 0, l2 = 0;
    check(cudaGetDevice(&device), "device");
    check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device),
          "L2 size");
    flushBytes = 2 * static_cast<size_t>(l2 > 0 ? l2 : 64 << 20);
    check(cudaMalloc(&flush, flushBytes), "cudaMalloc");
  }
  body();
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  double total = 0;
  for (int i = 0; i < iterations; ++i) {
    check(cudaMemsetAsync(flush, i & 0xff, flushBytes), "flush");
    check(cudaEventRecord(start), "record");
    body();
    check(cudaEventRecord(stop), "record");
    check(cudaEventSynchronize(stop), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    total += ms;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return total / iterations;
}

} // namespace kernel_bench

#endif // TESSERA_BENCH_KERNELS_KERNELBENCH_CUH
