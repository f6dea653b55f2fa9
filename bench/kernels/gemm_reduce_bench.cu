//===- gemm_reduce_bench.cu - LM-head GEMMs and bias-gradient sums -------===//
//
// Times, at GPT-2 124M's training shapes (16 x 1024 tokens, bf16), the two
// kernels families the step profile showed as slow: the LM head's three
// products with the 50257-wide logits (misaligned leading dim, now padded
// in scratch) next to the same products at an aligned width of 50264, and
// the bias-gradient column sums (reduce_sum over the tokens). Prints ms per
// call. Run by hand on the GPU machine; not a test.
//
//===----------------------------------------------------------------------===//

#include "KernelBench.cuh"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

using kernel_bench::check;
using kernel_bench::checkKernel;
using kernel_bench::timeMs;

namespace {

/// Small values so that no product overflows bf16.
__global__ void fillKernel(unsigned short *data, long long count) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) +
                     threadIdx.x;
       i < count; i += static_cast<long long>(blockDim.x) * gridDim.x)
    data[i] = static_cast<unsigned short>(0x3c00 + (i * 7919 % 127));
}

struct DeviceBuffer {
  tessera_tensor tensor{};
  DeviceBuffer(std::vector<int64_t> shape) {
    tensor.dtype = TESSERA_BF16;
    tensor.rank = static_cast<int32_t>(shape.size());
    long long count = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      tensor.shape[i] = shape[i];
      count *= shape[i];
    }
    check(cudaMalloc(&tensor.data, count * 2), "cudaMalloc");
    fillKernel<<<4096, 256>>>(static_cast<unsigned short *>(tensor.data),
                              count);
    check(cudaGetLastError(), "fill");
  }
  ~DeviceBuffer() { cudaFree(tensor.data); }
  tessera_tensor *get() { return &tensor; }
};

void benchLmHead(int64_t vocabulary) {
  const int64_t tokens = 16384, width = 768;
  DeviceBuffer x({tokens, width}), embedding({vocabulary, width}),
      logits({tokens, vocabulary}), dx({tokens, width}),
      dEmbedding({vocabulary, width});
  double flop = 2.0 * tokens * width * vocabulary;
  auto report = [&](const char *name, double ms) {
    std::printf("gemm %-28s V=%lld  %8.3f ms  %6.1f TFLOP/s\n", name,
                static_cast<long long>(vocabulary), ms, flop / ms / 1e9);
  };
  report("logits = x embedding^T", timeMs([&] {
           checkKernel(tessera_cuda_matmul(x.get(), embedding.get(),
                                           logits.get(), 0, 1, nullptr));
         }));
  report("dx = dlogits embedding", timeMs([&] {
           checkKernel(tessera_cuda_matmul(logits.get(), embedding.get(),
                                           dx.get(), 0, 0, nullptr));
         }));
  report("dembedding = dlogits^T x", timeMs([&] {
           checkKernel(tessera_cuda_matmul(logits.get(), x.get(),
                                           dEmbedding.get(), 1, 0, nullptr));
         }));
}

void benchBiasGradients() {
  const int64_t tokens = 16384;
  double total = 0;
  // Per layer: qkv (2304), attention projection (768), MLP up (3072) and
  // down (768); 12 layers, plus one more 768-wide sum.
  for (int64_t columns : {2304, 768, 3072}) {
    DeviceBuffer x({tokens, columns}), y({columns});
    int64_t dims[1] = {0};
    double ms = timeMs(
        [&] {
          checkKernel(tessera_cuda_reduce(TESSERA_REDUCE_SUM, x.get(), y.get(),
                                          dims, 1, nullptr));
        },
        50);
    std::printf("reduce_sum [%lld, %lld] over rows  %8.4f ms  %7.1f GB/s\n",
                static_cast<long long>(tokens),
                static_cast<long long>(columns), ms,
                tokens * columns * 2.0 / ms / 1e6);
    total += ms * (columns == 768 ? 25 : 12);
  }
  std::printf("reduce_sum: the step's 49 bias sums ~ %.3f ms\n", total);
}

} // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device\n");
    return 0;
  }
  benchLmHead(50257);
  benchLmHead(50264);
  benchBiasGradients();
  check(cudaDeviceSynchronize(), "sync");
  tessera_cuda_release_resources();
  return 0;
}
