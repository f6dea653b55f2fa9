//===- FlashAttentionBench.cu - Times tessera_cuda_attention(_grad) -------===//
//
// A micro-benchmark, not a test: times the forward and the forward plus
// backward of tessera_cuda_attention at GPT-2 training shapes and prints
// TFLOP/s with FlashAttention's flop counts (forward 4 B H Tq Tk D, halved
// when causal; backward 2.5 times the forward). Build it with the CUDA
// runtime (target tessera_attention_bench) and run on the GPU machine:
//
//   tessera_attention_bench [batch heads kv_heads seq head_dim causal dtype]
//
// defaults 16 12 12 1024 64 1 bf16 (GPT-2 124M at 16 x 1024 tokens).
// sdpa_reference.py times PyTorch's scaled_dot_product_attention likewise.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/cuda_kernels.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

void check(bool ok, const char *what) {
  if (!ok) {
    std::fprintf(stderr, "attention bench: %s failed: %s\n", what,
                 tessera_cuda_last_error());
    std::exit(1);
  }
}

/// A device tensor of 16-bit random values in [-1, 1].
struct Buffer {
  tessera_tensor tensor{};
  Buffer(int32_t dtype, std::vector<int64_t> shape, uint32_t seed) {
    tensor.dtype = dtype;
    tensor.rank = static_cast<int32_t>(shape.size());
    size_t count = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      tensor.shape[i] = shape[i];
      count *= static_cast<size_t>(shape[i]);
    }
    std::vector<uint16_t> host(count);
    std::mt19937 generator(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (uint16_t &value : host) {
      float x = uniform(generator);
      uint32_t bits;
      std::memcpy(&bits, &x, sizeof(bits));
      // bf16: the top half of an f32; f16: a crude but valid half (the
      // values only need to be finite and of unit scale).
      value = dtype == TESSERA_BF16
                  ? static_cast<uint16_t>(bits >> 16)
                  : static_cast<uint16_t>(((bits >> 16) & 0x8000u) |
                                          (0x3800u + (bits >> 13 & 0x3ffu)));
    }
    check(cudaMalloc(&tensor.data, count * 2) == cudaSuccess, "cudaMalloc");
    check(cudaMemcpy(tensor.data, host.data(), count * 2,
                     cudaMemcpyHostToDevice) == cudaSuccess,
          "cudaMemcpy");
  }
  ~Buffer() { cudaFree(tensor.data); }
};

template <typename Body> float millisecondsPerCall(int calls, Body &&body) {
  for (int i = 0; i < 3; ++i)
    body();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  for (int i = 0; i < calls; ++i)
    body();
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float milliseconds = 0.0f;
  cudaEventElapsedTime(&milliseconds, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return milliseconds / static_cast<float>(calls);
}

} // namespace

int main(int argc, char **argv) {
  int64_t batch = 16, heads = 12, keyHeads = 12, seq = 1024, dim = 64;
  int causal = 1;
  std::string type = "bf16";
  int64_t *numbers[] = {&batch, &heads, &keyHeads, &seq, &dim};
  for (int i = 1; i < argc && i <= 5; ++i)
    *numbers[i - 1] = std::atoll(argv[i]);
  if (argc > 6)
    causal = std::atoi(argv[6]);
  if (argc > 7)
    type = argv[7];
  int32_t dtype = type == "f16" ? TESSERA_F16 : TESSERA_BF16;

  Buffer q(dtype, {batch, heads, seq, dim}, 1), k(dtype, {batch, keyHeads, seq, dim}, 2),
      v(dtype, {batch, keyHeads, seq, dim}, 3), dy(dtype, {batch, heads, seq, dim}, 4),
      y(dtype, {batch, heads, seq, dim}, 5), dq(dtype, {batch, heads, seq, dim}, 6),
      dk(dtype, {batch, keyHeads, seq, dim}, 7), dv(dtype, {batch, keyHeads, seq, dim}, 8);
  double scale = 1.0 / std::sqrt(static_cast<double>(dim));
  auto forward = [&] {
    check(tessera_cuda_attention(&q.tensor, &k.tensor, &v.tensor, nullptr,
                                 &y.tensor, causal, scale, 0.0, 0,
                                 nullptr) == 0,
          "tessera_cuda_attention");
  };
  auto backward = [&] {
    check(tessera_cuda_attention_grad(&q.tensor, &k.tensor, &v.tensor, nullptr,
                                      &dy.tensor, &dq.tensor, &dk.tensor,
                                      &dv.tensor, causal, scale, 0.0, 0,
                                      nullptr) == 0,
          "tessera_cuda_attention_grad");
  };
  const int calls = 20;
  float forwardMs = millisecondsPerCall(calls, forward);
  float bothMs = millisecondsPerCall(calls, [&] {
    forward();
    backward();
  });
  check(tessera_cuda_check_device_errors(nullptr) == 0, "the kernels");
  double forwardFlops = 4.0 * batch * heads * seq * seq * dim;
  if (causal)
    forwardFlops /= 2;
  double backwardMs = bothMs - forwardMs;
  std::printf("tessera attention B=%lld Hq=%lld Hkv=%lld T=%lld D=%lld "
              "causal=%d %s\n",
              static_cast<long long>(batch), static_cast<long long>(heads),
              static_cast<long long>(keyHeads), static_cast<long long>(seq),
              static_cast<long long>(dim), causal, type.c_str());
  std::printf("  forward           %8.3f ms  %6.1f TFLOP/s\n", forwardMs,
              forwardFlops / (forwardMs * 1e9));
  std::printf("  backward          %8.3f ms  %6.1f TFLOP/s (2.5x forward "
              "flops)\n",
              backwardMs, 2.5 * forwardFlops / (backwardMs * 1e9));
  std::printf("  forward+backward  %8.3f ms  %6.1f TFLOP/s (3.5x forward "
              "flops)\n",
              bothMs, 3.5 * forwardFlops / (bothMs * 1e9));
  tessera_cuda_release_resources();
  return 0;
}
