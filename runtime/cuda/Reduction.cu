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
// A block per output is the right shape only for long reductions. When each
// output sums a few elements (the gradient of a broadcast over a middle dim:
// grouped K/V heads repeated for attention, [B, Hkv, n, T, D] summed over
// n = 4), 8.4M outputs through 65,536 looping blocks of 256 threads, of
// which 4 load and all 256 run a shared-memory tree, took 33 ms for 134 MB
// (4 GB/s; issue 21). So the launch picks the shape by the reduced extent:
// - at most kThreadReductionLimit elements: one thread per output, adjacent
//   threads on adjacent outputs (coalesced where the kept dims are the
//   inner ones, as for that broadcast gradient);
// - a contiguous last dim of any length with many outputs: one warp per
//   output, its lanes on adjacent elements, a fixed shuffle tree;
// - otherwise the block per output above.
// Each shape adds in a fixed order, so results stay deterministic.
//
// Column sums: a sum or mean of a float tensor over its leading dims (the
// bias gradients: [tokens, C] summed over the tokens) reads x as [R, C]
// rows. One block per output would walk a column C elements apart, so
// instead each block sums a band of rows for a strip of columns, its warps
// reading whole rows with 16-byte loads, and writes one partial per column;
// a second kernel adds the partials of each column in band order. The sum
// is deterministic (no atomics), and the accumulators stay f64 as above: the
// kernel is bound by memory, so the wider adds are free and the result keeps
// the CPU reference's accuracy over 16384-row columns.
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

/// Stores the finished reduction of output j (the mean divides here).
template <typename T>
__device__ __forceinline__ void storeReduced(int op, void *y, int yType,
                                             int64_t j, T value,
                                             int64_t reducedCount) {
  if (op == TESSERA_REDUCE_MEAN)
    value = static_cast<T>(value / static_cast<T>(reducedCount));
  if constexpr (sizeof(T) == 8 && T(1) / T(2) == T(0))
    storeInteger(y, yType, j, value);
  else
    storeNumber(y, yType, j, value);
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
    if (threadIdx.x == 0)
      storeReduced(op, y, yType, j, shared[0], reducedCount);
    __syncthreads();
  }
}

/// One thread per output: for reductions of a few elements each.
template <typename T>
__global__ void __launch_bounds__(kReduceThreads)
    reducePerThreadKernel(int op, const void *x, int xType, void *y, int yType,
                          StridedLayout<1> kept, StridedLayout<1> reduced,
                          int64_t outputCount, int64_t reducedCount) {
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       j < outputCount; j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t base[1];
    kept.offsets(j, base);
    T accumulator = initialValue<T>(op);
    for (int64_t r = 0; r < reducedCount; ++r) {
      int64_t offset[1];
      reduced.offsets(r, offset);
      accumulator = combine(op, accumulator, loadAs<T>(x, xType, base[0] + offset[0]));
    }
    storeReduced(op, y, yType, j, accumulator, reducedCount);
  }
}

/// One warp per output of a reduction over x's contiguous last dims
/// (`reduced` has stride 1 in its inner dim): lanes read adjacent elements.
template <typename T>
__global__ void __launch_bounds__(kReduceThreads)
    reducePerWarpKernel(int op, const void *x, int xType, void *y, int yType,
                        StridedLayout<1> kept, StridedLayout<1> reduced,
                        int64_t outputCount, int64_t reducedCount) {
  constexpr int kWarpsPerBlock = kReduceThreads / 32;
  int lane = threadIdx.x % 32;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock +
                   threadIdx.x / 32;
       j < outputCount; j += static_cast<int64_t>(gridDim.x) * kWarpsPerBlock) {
    int64_t base[1];
    kept.offsets(j, base);
    T accumulator = initialValue<T>(op);
    for (int64_t r = lane; r < reducedCount; r += 32) {
      int64_t offset[1];
      reduced.offsets(r, offset);
      accumulator = combine(op, accumulator, loadAs<T>(x, xType, base[0] + offset[0]));
    }
    for (int width = 16; width > 0; width /= 2)
      accumulator = combine(op, accumulator,
                            static_cast<T>(__shfl_down_sync(0xffffffffu, accumulator, width)));
    if (lane == 0)
      storeReduced(op, y, yType, j, accumulator, reducedCount);
  }
}

//===--- Column sums ------------------------------------------------------===//

constexpr int kColumnLanes = 32; // threads across the columns of a strip
constexpr int kRowLanes = 8;     // threads down the rows of a band
constexpr int64_t kColumnSumTargetBlocks = 1024;
constexpr int64_t kMinimumRowsPerBand = 128; // 16 loads per thread at least
constexpr int kBandLanes = 16; // threads splitting the bands of a column
constexpr int kColumnSumSlot = 3000; // streamScratch slot of the partials

__device__ __forceinline__ double toDouble(float value) { return value; }
__device__ __forceinline__ double toDouble(double value) { return value; }
__device__ __forceinline__ double toDouble(__nv_bfloat16 value) {
  return __bfloat162float(value);
}
__device__ __forceinline__ double toDouble(__half value) {
  return __half2float(value);
}

/// Block (x, y) sums rows [y * rowsPerBand, ...) of the strip of
/// kColumnLanes * Width columns from x * kColumnLanes * Width into
/// partials[y][column]. Each thread loads Width adjacent columns at once.
template <typename Element, int Width>
__global__ void __launch_bounds__(kColumnLanes *kRowLanes)
    columnPartialsKernel(const Element *x, int64_t rows, int64_t columns,
                         int64_t rowsPerBand, double *partials) {
  struct alignas(sizeof(Element) * Width) Pack {
    Element values[Width];
  };
  __shared__ double bandSums[kRowLanes][kColumnLanes * Width];
  int64_t firstColumn =
      (static_cast<int64_t>(blockIdx.x) * kColumnLanes + threadIdx.x) * Width;
  int64_t bandStart = static_cast<int64_t>(blockIdx.y) * rowsPerBand;
  int64_t bandEnd = min(bandStart + rowsPerBand, rows);
  double sums[Width];
  for (int i = 0; i < Width; ++i)
    sums[i] = 0.0;
  if (firstColumn < columns) {
#pragma unroll 4
    for (int64_t row = bandStart + threadIdx.y; row < bandEnd;
         row += kRowLanes) {
      Pack pack =
          *reinterpret_cast<const Pack *>(x + row * columns + firstColumn);
      for (int i = 0; i < Width; ++i)
        sums[i] += toDouble(pack.values[i]);
    }
  }
  for (int i = 0; i < Width; ++i)
    bandSums[threadIdx.y][threadIdx.x * Width + i] = sums[i];
  __syncthreads();
  // Fixed order over the row lanes: the same x gives the same bits.
  for (int local = threadIdx.y * kColumnLanes + threadIdx.x;
       local < kColumnLanes * Width; local += kColumnLanes * kRowLanes) {
    int64_t column =
        static_cast<int64_t>(blockIdx.x) * kColumnLanes * Width + local;
    if (column >= columns)
      continue;
    double total = 0.0;
    for (int lane = 0; lane < kRowLanes; ++lane)
      total += bandSums[lane][local];
    partials[static_cast<int64_t>(blockIdx.y) * columns + column] = total;
  }
}

/// y[column] = the sum (or mean) of the `bands` partials of each column:
/// kBandLanes threads per column take every kBandLanes-th band, then add
/// their sums in lane order (deterministic, like the partials).
__global__ void __launch_bounds__(kColumnLanes *kBandLanes)
    columnTotalsKernel(const double *partials, int64_t bands, int64_t rows,
                       int64_t columns, bool mean, void *y, int yType) {
  __shared__ double laneSums[kBandLanes][kColumnLanes];
  int64_t column =
      static_cast<int64_t>(blockIdx.x) * kColumnLanes + threadIdx.x;
  double sum = 0.0;
  if (column < columns)
    for (int64_t band = threadIdx.y; band < bands; band += kBandLanes)
      sum += partials[band * columns + column];
  laneSums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || column >= columns)
    return;
  double total = 0.0;
  for (int lane = 0; lane < kBandLanes; ++lane)
    total += laneSums[lane][threadIdx.x];
  storeNumber(y, yType, column, mean ? total / rows : total);
}

template <typename Element>
void launchColumnPartials(const void *x, int64_t rows, int64_t columns,
                          int64_t rowsPerBand, dim3 grid, double *partials,
                          bool vectorized, cudaStream_t stream) {
  constexpr int kWidth = 16 / sizeof(Element);
  dim3 block(kColumnLanes, kRowLanes);
  const Element *data = static_cast<const Element *>(x);
  if (vectorized)
    columnPartialsKernel<Element, kWidth>
        <<<grid, block, 0, stream>>>(data, rows, columns, rowsPerBand, partials);
  else
    columnPartialsKernel<Element, 1>
        <<<grid, block, 0, stream>>>(data, rows, columns, rowsPerBand, partials);
}

/// Sums (or averages) the contiguous x, seen as [rows, columns], over its
/// rows into y[columns].
void sumColumns(bool mean, const tessera_tensor &x, tessera_tensor &y,
                int64_t rows, int64_t columns, cudaStream_t stream) {
  size_t elementSize = tessera::cpu::dtypeSize(x.dtype);
  int64_t width = 16 / static_cast<int64_t>(elementSize);
  bool vectorized = columns % width == 0 &&
                    reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
  int64_t strip = kColumnLanes * (vectorized ? width : 1);
  int64_t strips = (columns + strip - 1) / strip;
  // Enough bands to put ~kColumnSumTargetBlocks blocks on the device, but
  // bands long enough that each thread has a run of loads in flight.
  int64_t maxBands = std::max<int64_t>(
      1, (rows + kMinimumRowsPerBand - 1) / kMinimumRowsPerBand);
  int64_t bands = std::min<int64_t>(
      maxBands, std::max<int64_t>(1, kColumnSumTargetBlocks / strips));
  int64_t rowsPerBand = (rows + bands - 1) / bands;
  bands = (rows + rowsPerBand - 1) / rowsPerBand;
  double *partials = static_cast<double *>(streamScratch(
      stream, bands * columns * sizeof(double), kColumnSumSlot));
  dim3 grid(static_cast<unsigned>(strips), static_cast<unsigned>(bands));
  switch (x.dtype) {
  case TESSERA_F32:
    launchColumnPartials<float>(x.data, rows, columns, rowsPerBand, grid,
                                partials, vectorized, stream);
    break;
  case TESSERA_BF16:
    launchColumnPartials<__nv_bfloat16>(x.data, rows, columns, rowsPerBand,
                                        grid, partials, vectorized, stream);
    break;
  case TESSERA_F16:
    launchColumnPartials<__half>(x.data, rows, columns, rowsPerBand, grid,
                                 partials, vectorized, stream);
    break;
  default:
    launchColumnPartials<double>(x.data, rows, columns, rowsPerBand, grid,
                                 partials, vectorized, stream);
    break;
  }
  cudaCheckLaunch();
  unsigned totalsGrid =
      static_cast<unsigned>((columns + kColumnLanes - 1) / kColumnLanes);
  columnTotalsKernel<<<totalsGrid, dim3(kColumnLanes, kBandLanes), 0,
                       stream>>>(partials, bands, rows, columns, mean, y.data,
                                 y.dtype);
  cudaCheckLaunch();
}

/// Whether every reduced dim (of extent > 1) precedes every kept one, so
/// that x is [reduced, kept] in memory.
bool reducesLeadingDims(const tessera_tensor &x,
                        const std::vector<bool> &reduced) {
  bool keptSeen = false;
  for (int32_t dim = 0; dim < x.rank; ++dim) {
    if (x.shape[dim] == 1)
      continue;
    if (!reduced[dim])
      keptSeen = true;
    else if (keptSeen)
      return false;
  }
  return true;
}

/// Outputs of at most this many elements each take one thread apiece.
constexpr int64_t kThreadReductionLimit = 64;
/// Below this many outputs a warp (or thread) per output leaves SMs idle,
/// and the block per output spreads each reduction wider instead.
constexpr int64_t kManyOutputs = 4096;

enum class ReductionShape { PerThread, PerWarp, PerBlock };

ReductionShape chooseReductionShape(int64_t outputCount, int64_t reducedCount,
                                    const Shape &reducedStrides) {
  if (reducedCount <= kThreadReductionLimit && outputCount >= kManyOutputs)
    return ReductionShape::PerThread;
  bool innerContiguous = !reducedStrides.empty() && reducedStrides.back() == 1;
  if (innerContiguous && outputCount >= kManyOutputs)
    return ReductionShape::PerWarp;
  return ReductionShape::PerBlock;
}

template <typename T>
void launchReduction(ReductionShape shape, int op, const tessera_tensor &x,
                     tessera_tensor &y, const StridedLayout<1> &kept,
                     const StridedLayout<1> &reduced, int64_t outputCount,
                     int64_t reducedCount, cudaStream_t stream) {
  auto blocksFor = [&](int64_t outputsPerBlock) {
    return static_cast<unsigned>(std::min<int64_t>(
        (outputCount + outputsPerBlock - 1) / outputsPerBlock, 65536));
  };
  switch (shape) {
  case ReductionShape::PerThread:
    reducePerThreadKernel<T><<<blocksFor(kReduceThreads), kReduceThreads, 0,
                               stream>>>(op, x.data, x.dtype, y.data, y.dtype,
                                         kept, reduced, outputCount,
                                         reducedCount);
    break;
  case ReductionShape::PerWarp:
    reducePerWarpKernel<T><<<blocksFor(kReduceThreads / 32), kReduceThreads, 0,
                             stream>>>(op, x.data, x.dtype, y.data, y.dtype,
                                       kept, reduced, outputCount,
                                       reducedCount);
    break;
  case ReductionShape::PerBlock:
    reduceKernel<T><<<blocksFor(1), kReduceThreads, 0, stream>>>(
        op, x.data, x.dtype, y.data, y.dtype, kept, reduced, outputCount,
        reducedCount);
    break;
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
    // Below a warp of columns the strips would idle; the generic kernel's
    // one block per output is the better shape there.
    bool sum = op == TESSERA_REDUCE_SUM || op == TESSERA_REDUCE_MEAN;
    if (sum && isFloatType(input.dtype) && outputCount >= kColumnLanes &&
        reducedCount > 0 && reducesLeadingDims(input, reduced)) {
      sumColumns(op == TESSERA_REDUCE_MEAN, input, output, reducedCount,
                 outputCount, stream);
      return;
    }
    Shape keptOperand[1] = {keptStrides}, reducedOperand[1] = {reducedStrides};
    StridedLayout<1> keptLayout = makeLayout(keptShape, keptOperand);
    StridedLayout<1> reducedLayout = makeLayout(reducedShape, reducedOperand);
    ReductionShape shape =
        chooseReductionShape(outputCount, reducedCount, reducedStrides);
    if (isFloatType(input.dtype))
      launchReduction<double>(shape, op, input, output, keptLayout,
                              reducedLayout, outputCount, reducedCount, stream);
    else
      launchReduction<int64_t>(shape, op, input, output, keptLayout,
                               reducedLayout, outputCount, reducedCount, stream);
    cudaCheckLaunch();
  });
}
