//===- Reduction.cu - Sum, mean, max, min over any set of dims ------------===//
//
// One block per output element: its threads stride over the reduced index
// space (the reduced dims' shape, with x's strides) from the output's base
// offset (the kept dims' indices times x's strides), then reduce in the
// block. This handles "all dims" (one block, full width) and "last dim"
// (many blocks) alike; blocks loop when there are more outputs than the
// grid holds. Accumulators are f64 for floats and int64 for integers, and
// max/min propagate NaN, as runtime/cpu/Reduction.cpp does.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "OperandChecks.h"

using namespace tessera::cuda;
using tessera::cpu::elementCount;
using tessera::cpu::isFloatType;
using tessera::cpu::requireReduction;
using tessera::cpu::requireTensor;
using tessera::cpu::rowMajorStrides;
using tessera::cpu::shapeOf;

namespace {

constexpr int kReduceThreads = 256;

template <typename T> __device__ T initialValue(int op);
template <> __device__ double initialValue<double>(int op) {
  return op == TESSERA_REDUCE_MAX   ? -INFINITY
         : op == TESSERA_REDUCE_MIN ? INFINITY
                                    : 0.0;
}
template <> __device__ int64_t initialValue<int64_t>(int op) {
  return op == TESSERA_REDUCE_MAX   ? INT64_MIN
         : op == TESSERA_REDUCE_MIN ? INT64_MAX
                                    : 0;
}

template <typename T> __device__ T combine(int op, T accumulator, T value) {
  bool nan = accumulator != accumulator || value != value;
  switch (op) {
  case TESSERA_REDUCE_MAX:
    return nan ? accumulator + value : (value > accumulator ? value : accumulator);
  case TESSERA_REDUCE_MIN:
    return nan ? accumulator + value : (value < accumulator ? value : accumulator);
  default:
    // Sums of integers wrap (unsigned) like the CPU's int64 accumulation.
    if constexpr (sizeof(T) == 8 && T(1) / T(2) == T(0))
      return static_cast<T>(static_cast<uint64_t>(accumulator) +
                            static_cast<uint64_t>(value));
    else
      return accumulator + value;
  }
}

template <typename T> __device__ T loadAs(const void *data, int dtype, int64_t i);
template <> __device__ double loadAs<double>(const void *data, int dtype, int64_t i) {
  return loadNumber(data, dtype, i);
}
template <> __device__ int64_t loadAs<int64_t>(const void *data, int dtype, int64_t i) {
  return loadInteger(data, dtype, i);
}

template <typename T>
__global__ void reduceKernel(int op, const void *x, int xType, void *y,
                             int yType, StridedLayout<1> kept,
                             StridedLayout<1> reduced, int64_t outputCount,
                             int64_t reducedCount) {
  __shared__ T shared[kReduceThreads];
  for (int64_t j = blockIdx.x; j < outputCount; j += gridDim.x) {
    int64_t base[1];
    kept.offsets(j, base);
    T accumulator = initialValue<T>(op);
    for (int64_t r = threadIdx.x; r < reducedCount; r += blockDim.x) {
      int64_t offset[1];
      reduced.offsets(r, offset);
      accumulator = combine(op, accumulator, loadAs<T>(x, xType, base[0] + offset[0]));
    }
    shared[threadIdx.x] = accumulator;
    __syncthreads();
    for (int width = blockDim.x / 2; width > 0; width /= 2) {
      if (threadIdx.x < width)
        shared[threadIdx.x] =
            combine(op, shared[threadIdx.x], shared[threadIdx.x + width]);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      T value = shared[0];
      if (op == TESSERA_REDUCE_MEAN)
        value = static_cast<T>(value / static_cast<T>(reducedCount));
      if constexpr (sizeof(T) == 8 && T(1) / T(2) == T(0))
        storeInteger(y, yType, j, value);
      else
        storeNumber(y, yType, j, value);
    }
    __syncthreads();
  }
}

} // namespace

extern "C" int tessera_cuda_reduce(int32_t op, const tessera_tensor *x,
                                   tessera_tensor *y, const int64_t *dims,
                                   int32_t dim_count, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_reduce", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    std::vector<bool> reduced =
        requireReduction(op, input, output, dims, dim_count).reduced;
    Shape xStrides = rowMajorStrides(shapeOf(input));
    Shape keptShape, keptStrides, reducedShape, reducedStrides;
    int64_t reducedCount = 1;
    for (int32_t dim = 0; dim < input.rank; ++dim) {
      if (reduced[dim]) {
        reducedShape.push_back(input.shape[dim]);
        reducedStrides.push_back(xStrides[dim]);
        reducedCount *= input.shape[dim];
      } else {
        keptShape.push_back(input.shape[dim]);
        keptStrides.push_back(xStrides[dim]);
      }
    }
    int64_t outputCount = elementCount(output);
    if (outputCount == 0)
      return;
    Shape keptOperand[1] = {keptStrides}, reducedOperand[1] = {reducedStrides};
    StridedLayout<1> keptLayout = makeLayout(keptShape, keptOperand);
    StridedLayout<1> reducedLayout = makeLayout(reducedShape, reducedOperand);
    unsigned grid = static_cast<unsigned>(std::min<int64_t>(outputCount, 65536));
    if (isFloatType(input.dtype))
      reduceKernel<double><<<grid, kReduceThreads, 0, stream>>>(
          op, input.data, input.dtype, output.data, output.dtype, keptLayout,
          reducedLayout, outputCount, reducedCount);
    else
      reduceKernel<int64_t><<<grid, kReduceThreads, 0, stream>>>(
          op, input.data, input.dtype, output.data, output.dtype, keptLayout,
          reducedLayout, outputCount, reducedCount);
    cudaCheckLaunch();
  });
}
