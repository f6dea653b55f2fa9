//===- Softmax.cu - Softmax along any axis, and its gradient --------------===//
//
// A tensor seen along `axis` is [outer, length, inner]; each (o, i) pair is
// one softmax over `length` values `inner` apart. One block per softmax:
// the row is read once for the max, once for exp and the f64 sum (kept in
// y), and y is scaled in place; the common case inner == 1 reads contiguous
// memory, inner > 1 reads strided memory, which is correct but slow (the
// lowering puts the softmax axis last for attention and the classifier).
// The arithmetic mirrors runtime/cpu/Softmax.cpp: max subtracted, f32 exp,
// f64 sum, multiplication by the f32 reciprocal; a row of all -inf is NaN.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

using namespace tessera::cuda;
using tessera::cpu::product;
using tessera::cpu::requireAxis;
using tessera::cpu::requireShape;
using tessera::cpu::requireTensor;
using tessera::cpu::shapeOf;

namespace {

constexpr int kSoftmaxThreads = 256;

struct AxisLayout {
  int64_t outer;
  int64_t length;
  int64_t inner;
};

AxisLayout axisLayout(const tessera_tensor &tensor, int64_t axis) {
  requireAxis(axis, tensor.rank, "axis");
  Shape shape = shapeOf(tensor);
  return {product(shape, 0, static_cast<size_t>(axis)), shape[axis],
          product(shape, static_cast<size_t>(axis) + 1, shape.size())};
}

__device__ int64_t softmaxBase(AxisLayout layout, int64_t softmaxIndex) {
  int64_t o = softmaxIndex / layout.inner, i = softmaxIndex % layout.inner;
  return o * layout.length * layout.inner + i;
}

__global__ void softmaxKernel(const void *x, int xType, void *y, int yType,
                              AxisLayout layout) {
  __shared__ double sharedSum[32];
  __shared__ float sharedMax[32];
  int64_t base = softmaxBase(layout, blockIdx.x);
  float maximum = -INFINITY;
  for (int64_t a = threadIdx.x; a < layout.length; a += blockDim.x)
    maximum = fmaxf(maximum, loadFloat(x, xType, base + a * layout.inner));
  maximum = blockMax(maximum, sharedMax);
  double sum = 0.0;
  for (int64_t a = threadIdx.x; a < layout.length; a += blockDim.x) {
    float value = expf(loadFloat(x, xType, base + a * layout.inner) - maximum);
    sum += value;
  }
  float reciprocalSum = static_cast<float>(1.0 / blockSum(sum, sharedSum));
  for (int64_t a = threadIdx.x; a < layout.length; a += blockDim.x) {
    int64_t at = base + a * layout.inner;
    float value = expf(loadFloat(x, xType, at) - maximum);
    storeFloat(y, yType, at, value * reciprocalSum);
  }
}

__global__ void softmaxGradKernel(const void *y, int yType, const void *dy,
                                  int dyType, void *dx, int dxType,
                                  AxisLayout layout) {
  __shared__ double shared[32];
  int64_t base = softmaxBase(layout, blockIdx.x);
  double weightedSum = 0.0;
  for (int64_t a = threadIdx.x; a < layout.length; a += blockDim.x) {
    int64_t at = base + a * layout.inner;
    weightedSum += static_cast<double>(loadFloat(dy, dyType, at)) *
                   loadFloat(y, yType, at);
  }
  float dot = static_cast<float>(blockSum(weightedSum, shared));
  for (int64_t a = threadIdx.x; a < layout.length; a += blockDim.x) {
    int64_t at = base + a * layout.inner;
    float probability = loadFloat(y, yType, at);
    storeFloat(dx, dxType, at,
               probability * (loadFloat(dy, dyType, at) - dot));
  }
}

unsigned softmaxCount(const AxisLayout &layout) {
  int64_t count = layout.outer * layout.inner;
  if (count > INT32_MAX)
    fail("more than 2^31 softmax rows");
  return static_cast<unsigned>(count);
}

} // namespace

extern "C" int tessera_cuda_softmax(const tessera_tensor *x, tessera_tensor *y,
                                    int64_t axis, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_softmax", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireShape(output, shapeOf(input), "y");
    requireKernelFloat(input, "x");
    requireKernelFloat(output, "y");
    AxisLayout layout = axisLayout(input, axis);
    unsigned count = softmaxCount(layout);
    if (count == 0 || layout.length == 0)
      return;
    softmaxKernel<<<count, kSoftmaxThreads, 0, stream>>>(
        input.data, input.dtype, output.data, output.dtype, layout);
    cudaCheckLaunch();
  });
}

extern "C" int tessera_cuda_softmax_grad(const tessera_tensor *y,
                                         const tessera_tensor *dy,
                                         tessera_tensor *dx, int64_t axis,
                                         cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_softmax_grad", [&] {
    const tessera_tensor &output = requireTensor(y, "y");
    const tessera_tensor &upstream = requireTensor(dy, "dy");
    tessera_tensor &inputGradient = requireTensor(dx, "dx");
    requireShape(upstream, shapeOf(output), "dy");
    requireShape(inputGradient, shapeOf(output), "dx");
    requireKernelFloat(output, "y");
    requireKernelFloat(upstream, "dy");
    requireKernelFloat(inputGradient, "dx");
    AxisLayout layout = axisLayout(output, axis);
    unsigned count = softmaxCount(layout);
    if (count == 0 || layout.length == 0)
      return;
    softmaxGradKernel<<<count, kSoftmaxThreads, 0, stream>>>(
        output.data, output.dtype, upstream.data, upstream.dtype,
        inputGradient.data, inputGradient.dtype, layout);
    cudaCheckLaunch();
  });
}
