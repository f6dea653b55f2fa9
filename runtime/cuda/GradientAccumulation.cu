//===- GradientAccumulation.cu - Summing micro-batch gradients in f32 -----===//
//
// With K micro-batches a step, the driver sums their gradients in f32 over
// its flat gradient buffer (the zero gaps between parameters included: one
// launch over one contiguous range, never a loop over tensors). The first
// micro-batch's gradients are written rather than added, so the
// accumulators need no clearing pass. Memory-bound (one or two reads and
// one write an element) and a small part of a step: a plain grid-stride
// loop, specialized per gradient dtype.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include "tessera/runtime/cuda_optimizer.h"

using namespace tessera::cuda;

namespace {

template <typename Element> __device__ __forceinline__ float widen(Element x);
template <> __device__ __forceinline__ float widen(float x) { return x; }
template <> __device__ __forceinline__ float widen(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <> __device__ __forceinline__ float widen(__half x) {
  return __half2float(x);
}

template <typename Element>
__global__ void accumulateKernel(float *accumulator, const Element *gradient,
                                 int64_t count, bool first) {
  TESSERA_GRID_STRIDE_LOOP(i, count) {
    float g = widen(gradient[i]);
    accumulator[i] = first ? g : accumulator[i] + g;
  }
}

template <typename Element>
void launchAccumulate(float *accumulator, const void *gradient, int64_t count,
                      bool first, cudaStream_t stream) {
  accumulateKernel<<<gridFor(count), kThreadsPerBlock, 0, stream>>>(
      accumulator, static_cast<const Element *>(gradient), count, first);
  cudaCheckLaunch();
}

} // namespace

extern "C" int tessera_cuda_accumulate_gradients(float *accumulator,
                                                 const void *gradient,
                                                 int32_t gradient_dtype,
                                                 int64_t count, int32_t first,
                                                 cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_accumulate_gradients", [&] {
    if (count < 0)
      fail("count " + std::to_string(count) + " is negative");
    if (count == 0)
      return;
    if (!accumulator || !gradient)
      fail("accumulator and gradient must not be null");
    switch (gradient_dtype) {
    case TESSERA_F32:
      return launchAccumulate<float>(accumulator, gradient, count, first != 0,
                                     stream);
    case TESSERA_BF16:
      return launchAccumulate<__nv_bfloat16>(accumulator, gradient, count,
                                             first != 0, stream);
    case TESSERA_F16:
      return launchAccumulate<__half>(accumulator, gradient, count, first != 0,
                                      stream);
    default:
      fail(std::string("gradient must be f32, bf16 or f16, not ") +
           tessera::cpu::dtypeName(gradient_dtype));
    }
  });
}
