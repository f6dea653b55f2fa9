//===- Normalization.cu - LayerNorm and RMSNorm, forward and backward -----===//
//
// One block per row (the elements of dims [axis, rank)), as in llm.c: a row
// of a transformer's hidden size (768..8192) fits a block's registers and
// L1, so the statistics pass and the normalize pass read DRAM about once.
// Statistics are accumulated in f64 per thread and block-reduced, like the
// CPU kernels' f64 sums, so the two backends agree to f32 rounding; LayerNorm
// uses the two-pass variance (mean first), which stays accurate for rows
// with a large mean.
//
// LayerNorm and RMSNorm share the kernels (`rms` selects: RMSNorm is
// LayerNorm with the mean fixed at 0 and no bias). The backward kernels
// recompute the statistics (the ABI passes no saved mean/rstd) and write
// dx, plus the residual when the lowering fused the backward's residual add
// into the call (*_norm_grad_add: one rounding, and a 75 MB add a GPT-2
// 124M layer norm fewer). The parameter gradients are column sums over all
// rows, in a fixed order set by the shapes alone, so repeated calls give
// the same bits (f64 atomics across chunks did not):
// - on the warp path for rows to 1024 elements, the backward kernel sums
//   them itself: each warp over its rows of a 32-row block in f32 slots of
//   shared memory laid out so a warp's lanes hit 32 banks (registers spill
//   beside the row; a 32-byte stride between lanes made it 15 % slower
//   than two kernels), the block over its warps in order, then
//   reducePartials over the blocks in f64. Measured on an H200 at GPT-2
//   124M's [16384, 768] bf16 (2026-12-03): 68 us a call against 92 us for
//   the two-kernel version, which re-read x and dy;
// - on the wide-row path (whole packs, 1025 to 8192 elements: Llama's 2048
//   to 8192) the backward kernel sums them too: each block over its chunk
//   of rows, a thread per column pack, in f32 registers (the chunk is
//   sized for one wave of blocks, so the order is set by the shapes and
//   the device's SM count: the same bits on the same GPU model);
// - the block path leaves (mean, rstd) per row in scratch, and a second
//   kernel reads x and dy again by column (f64), writing per-chunk
//   partials for reducePartials (so does the warp path above 1024 elements
//   when TESSERA_NORM_FUSED_PARTIALS=0 asks for it, for A/B measurements).
// reducePartials gives a block 16 columns and 16 slices of the chunks: a
// thread sums its slice's chunks in order, then one thread a column adds
// the 16 slice sums in order.
//
// Rows of up to 2048 f32/bf16/f16 elements in 16-byte aligned packs take a
// faster forward, and rows up to 1024 a faster backward: one warp per row,
// the row held in registers, so x (and dy) are read once and no block-wide
// barrier is needed. Wider rows in whole packs, to 8192, are held across a
// block (the wide-row kernels: the forward 1 to 4 packs a thread, the
// backward one pack a thread of 256 to 1024). All use the same formulas and
// f64 row sums; the wide-row kernels add each thread's few elements in f32
// before they go to f64, and the orders differ.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <type_traits>

using namespace tessera::cuda;
using tessera::cpu::elementCount;
using tessera::cpu::product;
using tessera::cpu::requireAxis;
using tessera::cpu::requireShape;
using tessera::cpu::requireTensor;
using tessera::cpu::shapeOf;

namespace {

constexpr int kNormThreads = 256;
constexpr int kRowsPerColumnChunk = 64;
// The warp path's partials: chunks small enough for many blocks in flight.
constexpr int kRowsPerPartial = 32;
constexpr int kParameterGradientSlot = 3200; // streamScratch slot

struct RowStatistics {
  float mean;
  float reciprocalStd;
};

/// Every thread of the block gets the row's statistics.
__device__ RowStatistics rowStatistics(const void *x, int xType,
                                       int64_t rowStart, int64_t width,
                                       double epsilon, bool rms,
                                       double *shared) {
  double mean = 0.0;
  if (!rms) {
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < width; j += blockDim.x)
      sum += loadFloat(x, xType, rowStart + j);
    mean = blockSum(sum, shared) / static_cast<double>(width);
  }
  // As the CPU kernels: f64 deviations from the f64 mean (rms: the value).
  float meanF = static_cast<float>(mean);
  double squares = 0.0;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    double deviation =
        rms ? static_cast<double>(loadFloat(x, xType, rowStart + j))
            : static_cast<double>(loadFloat(x, xType, rowStart + j)) - mean;
    squares += deviation * deviation;
  }
  double variance = blockSum(squares, shared) / static_cast<double>(width);
  return {meanF, static_cast<float>(1.0 / sqrt(variance + epsilon))};
}

__global__ void normForwardKernel(const void *x, int xType, const void *scale,
                                  int scaleType, const void *bias, int biasType,
                                  void *y, int yType, int64_t width,
                                  double epsilon, bool rms) {
  __shared__ double shared[32];
  int64_t rowStart = static_cast<int64_t>(blockIdx.x) * width;
  RowStatistics statistics =
      rowStatistics(x, xType, rowStart, width, epsilon, rms, shared);
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    float value = loadFloat(x, xType, rowStart + j);
    float normalized =
        rms ? value * statistics.reciprocalStd
            : (value - statistics.mean) * statistics.reciprocalStd;
    if (scale)
      normalized *= loadFloat(scale, scaleType, j);
    if (bias)
      normalized += loadFloat(bias, biasType, j);
    storeFloat(y, yType, rowStart + j, normalized);
  }
}

__global__ void normBackwardKernel(const void *x, int xType, const void *scale,
                                   int scaleType, const void *dy, int dyType,
                                   const void *residual, int residualType,
                                   void *dx, int dxType, int64_t width,
                                   double epsilon, bool rms,
                                   RowStatistics *savedStatistics) {
  __shared__ double shared[32];
  int64_t row = blockIdx.x;
  int64_t rowStart = row * width;
  RowStatistics statistics =
      rowStatistics(x, xType, rowStart, width, epsilon, rms, shared);
  // layer_norm: dx = rstd (h - mean(h) - xhat mean(h xhat))
  // rms_norm:   dx = rstd (h - x rstd^2 mean(h x))
  double sumScaled = 0.0, sumScaledTimesOther = 0.0;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    float value = loadFloat(x, xType, rowStart + j);
    float upstream = loadFloat(dy, dyType, rowStart + j);
    float scaled = scale ? upstream * loadFloat(scale, scaleType, j) : upstream;
    float other =
        rms ? value : (value - statistics.mean) * statistics.reciprocalStd;
    sumScaled += scaled;
    sumScaledTimesOther += static_cast<double>(scaled) * other;
  }
  double widthD = static_cast<double>(width);
  float meanScaled = static_cast<float>(blockSum(sumScaled, shared) / widthD);
  double meanProduct = blockSum(sumScaledTimesOther, shared) / widthD;
  float correction =
      rms ? static_cast<float>(statistics.reciprocalStd *
                               statistics.reciprocalStd * meanProduct)
          : static_cast<float>(meanProduct);
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    float value = loadFloat(x, xType, rowStart + j);
    float upstream = loadFloat(dy, dyType, rowStart + j);
    float scaled = scale ? upstream * loadFloat(scale, scaleType, j) : upstream;
    float result;
    if (rms) {
      result = statistics.reciprocalStd * (scaled - value * correction);
    } else {
      float normalized = (value - statistics.mean) * statistics.reciprocalStd;
      result = statistics.reciprocalStd *
               (scaled - meanScaled - normalized * correction);
    }
    if (residual)
      result += loadFloat(residual, residualType, rowStart + j);
    storeFloat(dx, dxType, rowStart + j, result);
  }
  if (threadIdx.x == 0 && savedStatistics)
    savedStatistics[row] = statistics;
}

//===--- One warp per row: rows held in registers ------------------------===//

constexpr int kWarpsPerNormBlock = 4;
/// Rows up to this many elements (kMaxPacksPerLane packs of 8 per lane).
constexpr int kMaxPacksPerLane = 8;
/// The widest rows (packs a lane) whose parameter-gradient sums the
/// backward kernel keeps itself: 1024 elements, 64 KB of shared memory.
constexpr int kMaxFusedPartialPacks = 4;

/// The forward of one pack at column j: values = (x - mean) * rstd (rms:
/// x * rstd), times scale, plus bias, in place.
__device__ __forceinline__ void normalizePack(float (&values)[kPack],
                                              RowStatistics statistics,
                                              bool rms, const void *scale,
                                              int scaleType, const void *bias,
                                              int biasType, int64_t j) {
  float scales[kPack], biases[kPack];
  if (scale)
    loadPack(scale, scaleType, j, scales);
  if (bias)
    loadPack(bias, biasType, j, biases);
#pragma unroll
  for (int k = 0; k < kPack; ++k) {
    float normalized =
        rms ? values[k] * statistics.reciprocalStd
            : (values[k] - statistics.mean) * statistics.reciprocalStd;
    if (scale)
      normalized *= scales[k];
    if (bias)
      normalized += biases[k];
    values[k] = normalized;
  }
}

/// The statistics of the row in `values` (kPacks packs per lane; pack p of
/// this lane holds elements ((p * 32 + lane) * kPack ...), valid while below
/// `width`), as rowStatistics computes them.
template <int kPacks>
__device__ RowStatistics warpRowStatistics(const float (&values)[kPacks][kPack],
                                           int64_t width, double epsilon,
                                           bool rms) {
  int lane = threadIdx.x % 32;
  double mean = 0.0;
  if (!rms) {
    double sum = 0.0;
#pragma unroll
    for (int p = 0; p < kPacks; ++p)
      if ((p * 32 + lane) * kPack < width)
#pragma unroll
        for (int k = 0; k < kPack; ++k)
          sum += values[p][k];
    mean = warpSum(sum) / static_cast<double>(width);
  }
  double squares = 0.0;
#pragma unroll
  for (int p = 0; p < kPacks; ++p)
    if ((p * 32 + lane) * kPack < width)
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        double deviation = static_cast<double>(values[p][k]) - mean;
        squares += deviation * deviation;
      }
  double variance = warpSum(squares) / static_cast<double>(width);
  return {static_cast<float>(mean),
          static_cast<float>(1.0 / sqrt(variance + epsilon))};
}

template <int kPacks>
__global__ void normForwardWarpKernel(const void *x, int xType,
                                      const void *scale, int scaleType,
                                      const void *bias, int biasType, void *y,
                                      int yType, int64_t rows, int64_t width,
                                      double epsilon, bool rms) {
  int64_t row =
      static_cast<int64_t>(blockIdx.x) * kWarpsPerNormBlock + threadIdx.x / 32;
  if (row >= rows)
    return;
  int lane = threadIdx.x % 32;
  int64_t rowStart = row * width;
  float values[kPacks][kPack];
#pragma unroll
  for (int p = 0; p < kPacks; ++p) {
    int64_t j = (p * 32 + lane) * kPack;
    if (j < width)
      loadPack(x, xType, rowStart + j, values[p]);
  }
  RowStatistics statistics = warpRowStatistics(values, width, epsilon, rms);
#pragma unroll
  for (int p = 0; p < kPacks; ++p) {
    int64_t j = (p * 32 + lane) * kPack;
    if (j >= width)
      continue;
    normalizePack(values[p], statistics, rms, scale, scaleType, bias, biasType,
                  j);
    storePack(y, yType, rowStart + j, values[p]);
  }
}

/// Warps of a backward block on the warp path.
constexpr int kWarpsPerBackwardBlock = 8;

/// One warp per row, as normBackwardKernel's formulas, for rows
/// [blockIdx.x rowsPerBlock, + rowsPerBlock): warp w of the block takes
/// rows w, w + 8, ... of them. dx = (residual +) the norm's gradient, one
/// rounding. With kPartials, each lane also sums dy * xhat and dy of its
/// columns over its warp's rows, in f32 in its warp's part of shared memory
/// (registers would spill beside the row), and the block adds its warps'
/// sums in warp order into partials[blockIdx.x][0 .. 2 width), for
/// reducePartials. Without kPartials (TESSERA_NORM_FUSED_PARTIALS=0) the
/// kernel leaves (mean, rstd) per row in savedStatistics instead, for
/// parameterPartialsKernel. Rows to kMaxFusedPartialPacks packs a lane
/// only: wider ones take the wide-row kernels (holding dy beside x took
/// ~255 registers a thread at 2048 elements, and re-reading it 0.195 ms
/// for Llama 3.2 1B's [16384, 2048] bf16, 34 % of bandwidth).
template <int kPacks, bool kPartials>
__global__ void __launch_bounds__(kWarpsPerBackwardBlock * 32, 2)
    normBackwardWarpKernel(const void *x, int xType, const void *scale,
                           int scaleType, const void *dy, int dyType,
                           const void *residual, int residualType, void *dx,
                           int dxType, int64_t rows, int64_t width,
                           double epsilon, bool rms, int64_t rowsPerBlock,
                           float *partials, RowStatistics *savedStatistics) {
  // kPartials: per warp, dscale then dbias sums, kSlots each; a lane
  // touches only its own slots of its warp's part, so no barrier until the
  // end. Element k of pack p of a lane sits at slot (p kPack + k) 32 + lane:
  // the warp's 32 lanes hit 32 banks.
  constexpr int kSlots = kPacks * 32 * kPack;
  extern __shared__ float warpSums[];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int64_t firstRow = static_cast<int64_t>(blockIdx.x) * rowsPerBlock;
  int64_t lastRow = min(rows, firstRow + rowsPerBlock);
  float *scaleSums = warpSums + warp * 2 * kSlots + lane,
        *biasSums = scaleSums + kSlots;
  if constexpr (kPartials)
#pragma unroll
    for (int slot = 0; slot < kPacks * kPack; ++slot)
      scaleSums[slot * 32] = biasSums[slot * 32] = 0.0f;
  static_assert(kPacks <= kMaxFusedPartialPacks, "wider rows: wide-row path");
  for (int64_t row = firstRow + warp; row < lastRow;
       row += kWarpsPerBackwardBlock) {
    int64_t rowStart = row * width;
    // scaled[p] is dy * scale of pack p.
    float values[kPacks][kPack], scaled[kPacks][kPack];
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      int64_t j = (p * 32 + lane) * kPack;
      if (j < width) {
        loadPack(x, xType, rowStart + j, values[p]);
        loadPack(dy, dyType, rowStart + j, scaled[p]);
      }
    }
    RowStatistics statistics = warpRowStatistics(values, width, epsilon, rms);
    double sumScaled = 0.0, sumScaledTimesOther = 0.0;
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      int64_t j = (p * 32 + lane) * kPack;
      if (j >= width)
        continue;
      float scales[kPack];
      if (scale)
        loadPack(scale, scaleType, j, scales);
      float(&upstream)[kPack] = scaled[p];
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        float normalized =
            rms ? values[p][k] * statistics.reciprocalStd
                : (values[p][k] - statistics.mean) * statistics.reciprocalStd;
        if constexpr (kPartials) {
          scaleSums[(p * kPack + k) * 32] += upstream[k] * normalized;
          biasSums[(p * kPack + k) * 32] += upstream[k];
        }
        if (scale)
          upstream[k] *= scales[k];
        float other = rms ? values[p][k] : normalized;
        sumScaled += upstream[k];
        sumScaledTimesOther += static_cast<double>(upstream[k]) * other;
      }
    }
    double widthD = static_cast<double>(width);
    float meanScaled = static_cast<float>(warpSum(sumScaled) / widthD);
    double meanProduct = warpSum(sumScaledTimesOther) / widthD;
    float correction =
        rms ? static_cast<float>(statistics.reciprocalStd *
                                 statistics.reciprocalStd * meanProduct)
            : static_cast<float>(meanProduct);
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      int64_t j = (p * 32 + lane) * kPack;
      if (j >= width)
        continue;
      float residuals[kPack];
      if (residual)
        loadPack(residual, residualType, rowStart + j, residuals);
      float(&upstream)[kPack] = scaled[p];
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        float value = values[p][k];
        float result;
        if (rms) {
          result =
              statistics.reciprocalStd * (upstream[k] - value * correction);
        } else {
          float normalized =
              (value - statistics.mean) * statistics.reciprocalStd;
          result = statistics.reciprocalStd *
                   (upstream[k] - meanScaled - normalized * correction);
        }
        values[p][k] = residual ? residuals[k] + result : result;
      }
      storePack(dx, dxType, rowStart + j, values[p]);
    }
    if (lane == 0 && savedStatistics)
      savedStatistics[row] = statistics;
  }
  if constexpr (kPartials) {
    // Each column's sums over the block's warps, in warp order.
    __syncthreads();
    float *chunk = partials + blockIdx.x * 2 * width;
    for (int64_t c = threadIdx.x; c < 2 * width; c += blockDim.x) {
      // Column j of pack p of lane l is j = (p 32 + l) kPack + k.
      int64_t j = c < width ? c : c - width;
      int slot =
          static_cast<int>(((j / (32 * kPack)) * kPack + j % kPack) * 32 +
                           (j / kPack) % 32) +
          (c < width ? 0 : kSlots);
      float sum = warpSums[slot];
      for (int w = 1; w < kWarpsPerBackwardBlock; ++w)
        sum += warpSums[w * 2 * kSlots + slot];
      chunk[c] = sum;
    }
  }
}

//===--- Wide rows: a block across the row, a pack a thread --------------===//
//
// Rows wider than the warp path's fused partials (1024 elements: Llama's
// 2048, 4096 and 8192) are held across a block instead, kPacks packs a
// thread, so the row's sums are one block-wide reduction. What bounds these
// kernels is how many blocks an SM holds while a block waits at a barrier
// with no load in flight, and the f64 pipe: on an H200 at [16384, 2048]
// bf16, a backward of 119 registers (x, dy and the residual of the next row
// prefetched; two blocks an SM) and f64 products per element ran at a third
// of DRAM bandwidth whether it reduced one row at a time or four. So each
// thread sums its own elements in f32 (8 in the backward, at most 32 in the
// forward) and only those partial sums go to f64, the backward reads a row at a
// time without prefetch, and its registers are capped for four blocks an SM
// at one pack a thread. Measured (2026-12-04, llama_kernels_bench): see
// bench/RESULTS.md.

/// Threads of a wide-row block.
constexpr int kRowThreads = 256;
/// Rows of a wide-row backward block, the chunk its parameter-gradient
/// partials cover: enough for one wave of blocks, at least this many (so
/// the partials stay small beside the rows), and more when that would
/// make more than kMaxRowChunks.
constexpr int64_t kMinRowsPerRowChunk = 4;
constexpr int64_t kMaxRowChunks = 2048;
/// The most packs a thread of the wide-row forward holds (8192 elements at
/// kRowThreads). The backward holds one pack a thread (its x, dy, residual
/// and parameter-gradient sums in 64 registers) with 256, 512 or 1024
/// threads, the same 8192 elements.
constexpr int kRowMaxPacks = 4;

/// The block-wide sums of kCount values (every thread gets them); `shared`
/// holds 32 x kCount. Every thread of the block must call it.
template <int kCount>
__device__ __forceinline__ void blockSums(double (&values)[kCount],
                                          double (*shared)[kCount]) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int warps = (blockDim.x + 31) / 32;
#pragma unroll
  for (int v = 0; v < kCount; ++v)
    values[v] = warpSum(values[v]);
  __syncthreads(); // `shared` may still be read by a previous call
  if (lane == 0)
#pragma unroll
    for (int v = 0; v < kCount; ++v)
      shared[warp][v] = values[v];
  __syncthreads();
#pragma unroll
  for (int v = 0; v < kCount; ++v)
    values[v] = warpSum(lane < warps ? shared[lane][v] : 0.0);
}

/// Column of element k of this thread's pack p.
__device__ __forceinline__ int64_t rowColumn(int p, int k = 0) {
  return (static_cast<int64_t>(p) * blockDim.x + threadIdx.x) * kPack + k;
}

/// The statistics of a row held as values[p] (pack p of this thread at
/// rowColumn(p); zeros past `width`): layer_norm's mean, then the sum of
/// squared deviations from it (rms_norm's sum of squares), each thread's
/// share summed in f32 and the block's in f64. Two more per-thread sums
/// that do not depend on the mean (the backward's sums of dy * scale and of
/// its product with x) ride on the first reduction: `sums` comes in as
/// this thread's, goes out as the row's. inverseWidth is 1 / width (f64
/// division is slow and register-hungry; the reciprocal square root is
/// rsqrt for the same reason).
template <int kPacks>
__device__ RowStatistics rowBlockStatistics(
    const float (&values)[kPacks][kPack], int64_t width, double inverseWidth,
    double epsilon, bool rms, double (&sums)[2], double (*shared)[3]) {
  float mean = 0.0f;
  if (!rms) {
    float sum = 0.0f;
#pragma unroll
    for (int p = 0; p < kPacks; ++p)
#pragma unroll
      for (int k = 0; k < kPack; ++k)
        sum += values[p][k];
    double first[3] = {sum, sums[0], sums[1]};
    blockSums(first, shared);
    mean = static_cast<float>(first[0] * inverseWidth);
    sums[0] = first[1], sums[1] = first[2];
  }
  float squares = 0.0f;
#pragma unroll
  for (int p = 0; p < kPacks; ++p)
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      if (rowColumn(p, k) < width) {
        float deviation = values[p][k] - mean;
        squares += deviation * deviation;
      }
  double second[3] = {squares, rms ? sums[0] : 0.0, rms ? sums[1] : 0.0};
  blockSums(second, shared);
  if (rms)
    sums[0] = second[1], sums[1] = second[2];
  double variance = second[0] * inverseWidth;
  return {mean, static_cast<float>(rsqrt(variance + epsilon))};
}

/// Asks L2 for this thread's packs of row `row` (past `width`: nothing), so
/// that a row-at-a-time kernel's next row streams in from DRAM while its
/// block is busy with this row's reductions: without it, a block's loads
/// and its barriers alternate and DRAM idles between them.
template <int kPacks>
__device__ __forceinline__ void prefetchRow(const void *data, int dtype,
                                            int64_t row, int64_t width) {
  const char *bytes = static_cast<const char *>(data);
  int64_t elementBytes = dtype == TESSERA_F32 ? 4 : 2;
#pragma unroll
  for (int p = 0; p < kPacks; ++p)
    if (rowColumn(p) < width)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(
          bytes + (row * width + rowColumn(p)) * elementBytes));
}

/// Loads pack p of this thread from row `row`, or zeros past `width`.
template <int kPacks>
__device__ __forceinline__ void loadRow(const void *data, int dtype,
                                        int64_t row, int64_t width,
                                        float (&packs)[kPacks][kPack]) {
#pragma unroll
  for (int p = 0; p < kPacks; ++p)
    if (rowColumn(p) < width) {
      loadPack(data, dtype, row * width + rowColumn(p), packs[p]);
    } else {
#pragma unroll
      for (int k = 0; k < kPack; ++k)
        packs[p][k] = 0.0f;
    }
}

template <int kPacks>
__global__ void __launch_bounds__(kRowThreads)
    normForwardRowKernel(const void *x, int xType, const void *scale,
                         int scaleType, const void *bias, int biasType, void *y,
                         int yType, int64_t width, double epsilon, bool rms) {
  __shared__ double shared[32][3];
  int64_t row = blockIdx.x;
  float values[kPacks][kPack];
  loadRow(x, xType, row, width, values);
  double unused[2] = {0.0, 0.0};
  RowStatistics statistics = rowBlockStatistics(values, width, 1.0 / width,
                                                epsilon, rms, unused, shared);
#pragma unroll
  for (int p = 0; p < kPacks; ++p) {
    int64_t j = rowColumn(p);
    if (j >= width)
      continue;
    normalizePack(values[p], statistics, rms, scale, scaleType, bias, biasType,
                  j);
    storePack(y, yType, row * width + j, values[p]);
  }
}

/// The backward of rows [blockIdx.x rowsPerBlock, + rowsPerBlock), one at
/// a time, with normBackwardKernel's formulas: dx = (residual +) the
/// norm's gradient, one rounding. With `partials`, each thread also sums
/// dy * xhat and dy of its columns over the block's rows in f32, in row
/// order, and writes them to partials[blockIdx.x][0 .. 2 width) for
/// reducePartials. A pack a thread, kThreads threads (a block of kThreads
/// is at most 64 registers a thread: 1024 threads an SM). kPrefetch: each
/// row first asks L2 for the block's next row of x, dy and the residual
/// (prefetchRow),
/// which needs a few registers more: 768 threads an SM (used for blocks of
/// 256 only).
template <int kThreads, bool kPrefetch>
__global__ void __launch_bounds__(kThreads,
                                  (kPrefetch ? 768 : 1024) / kThreads)
    normBackwardRowKernel(const void *x, int xType, const void *scale,
                          int scaleType, const void *dy, int dyType,
                          const void *residual, int residualType, void *dx,
                          int dxType, int64_t rows, int64_t width,
                          double epsilon, bool rms, int64_t rowsPerBlock,
                          float *partials) {
  constexpr int kPacks = 1;
  __shared__ double shared[32][3];
  int64_t firstRow = static_cast<int64_t>(blockIdx.x) * rowsPerBlock;
  int64_t lastRow = min(rows, firstRow + rowsPerBlock);
  const double inverseWidth = 1.0 / static_cast<double>(width);
  float scaleSums[kPacks][kPack], biasSums[kPacks][kPack];
#pragma unroll
  for (int p = 0; p < kPacks; ++p)
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      scaleSums[p][k] = biasSums[p][k] = 0.0f;
  for (int64_t row = firstRow; row < lastRow; ++row) {
    // scale is read each row (from L1) rather than held in registers.
    float values[kPacks][kPack], upstream[kPacks][kPack],
        residuals[kPacks][kPack], scales[kPacks][kPack];
    if (scale) {
      loadRow(scale, scaleType, 0, width, scales);
    } else {
#pragma unroll
      for (int p = 0; p < kPacks; ++p)
#pragma unroll
        for (int k = 0; k < kPack; ++k)
          scales[p][k] = 1.0f;
    }
    // Before this row's loads, while few registers are live (the kernel is
    // held to 64 a thread).
    if (kPrefetch && row + 1 < lastRow) {
      prefetchRow<kPacks>(x, xType, row + 1, width);
      prefetchRow<kPacks>(dy, dyType, row + 1, width);
      if (residual)
        prefetchRow<kPacks>(residual, residualType, row + 1, width);
    }
    loadRow(x, xType, row, width, values);
    loadRow(dy, dyType, row, width, upstream);
    if (residual)
      loadRow(residual, residualType, row, width, residuals);
    // layer_norm: dx = rstd (h - mean(h) - xhat mean(h xhat))
    // rms_norm:   dx = rstd (h - x rstd^2 mean(h x)),  h = dy * scale;
    // sum h xhat = rstd (sum h x - mean sum h).
    float scaledSum = 0.0f, productSum = 0.0f;
#pragma unroll
    for (int p = 0; p < kPacks; ++p)
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        float scaled = upstream[p][k] * scales[p][k];
        scaledSum += scaled;
        productSum += scaled * values[p][k];
      }
    double sums[2] = {scaledSum, productSum};
    RowStatistics statistics = rowBlockStatistics(values, width, inverseWidth,
                                                  epsilon, rms, sums, shared);
    float meanScaled = static_cast<float>(sums[0] * inverseWidth);
    float correction;
    if (rms) {
      correction = static_cast<float>(statistics.reciprocalStd *
                                      statistics.reciprocalStd *
                                      (sums[1] * inverseWidth));
    } else {
      double mean = static_cast<double>(statistics.mean);
      correction =
          static_cast<float>(statistics.reciprocalStd *
                             ((sums[1] - mean * sums[0]) * inverseWidth));
    }
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      int64_t j = rowColumn(p);
      if (j >= width)
        continue;
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        float value = values[p][k], up = upstream[p][k];
        float normalized =
            rms ? value * statistics.reciprocalStd
                : (value - statistics.mean) * statistics.reciprocalStd;
        scaleSums[p][k] += up * normalized;
        biasSums[p][k] += up;
        float scaled = up * scales[p][k];
        float result =
            rms ? statistics.reciprocalStd * (scaled - value * correction)
                : statistics.reciprocalStd *
                      (scaled - meanScaled - normalized * correction);
        values[p][k] = residual ? residuals[p][k] + result : result;
      }
      storePack(dx, dxType, row * width + j, values[p]);
    }
  }
  if (!partials)
    return;
  float *scaleRow = partials + blockIdx.x * 2 * width;
  float *biasRow = scaleRow + width;
#pragma unroll
  for (int p = 0; p < kPacks; ++p) {
    int64_t j = rowColumn(p);
    if (j >= width)
      continue;
#pragma unroll
    for (int k = 0; k < kPack; k += 4) {
      *reinterpret_cast<float4 *>(scaleRow + j + k) =
          make_float4(scaleSums[p][k], scaleSums[p][k + 1], scaleSums[p][k + 2],
                      scaleSums[p][k + 3]);
      *reinterpret_cast<float4 *>(biasRow + j + k) =
          make_float4(biasSums[p][k], biasSums[p][k + 1], biasSums[p][k + 2],
                      biasSums[p][k + 3]);
    }
  }
}

/// Packs a thread (1, 2 or 4) the wide-row kernels need for rows of
/// `width`, or 0 when the rows do not fit them: widths that are not whole
/// packs, more than `maxPacks` packs a thread, f64, or data not 16-byte
/// aligned.
int rowPathPacks(int64_t width, int maxPacks,
                 std::initializer_list<const tessera_tensor *> tensors) {
  if (width % kPack != 0 || width > int64_t{maxPacks} * kRowThreads * kPack)
    return 0;
  for (const tessera_tensor *tensor : tensors)
    if (tensor && (tensor->dtype == TESSERA_F64 ||
                   reinterpret_cast<uintptr_t>(tensor->data) % 16 != 0))
      return 0;
  int64_t packs = (width / kPack + kRowThreads - 1) / kRowThreads;
  return packs <= 2 ? static_cast<int>(packs) : 4;
}

/// Calls `launch` with std::integral_constant<int, packs> for 1, 2 or (up
/// to kMax) 4.
template <int kMax, typename Launch>
void withRowPacks(int packs, Launch &&launch) {
  if (packs == 1)
    launch(std::integral_constant<int, 1>{});
  else if (packs == 2 || kMax < 4)
    launch(std::integral_constant<int, 2>{});
  else if constexpr (kMax >= 4)
    launch(std::integral_constant<int, 4>{});
}

/// Packs per lane the warp path needs for rows of `width`, or 0 when the
/// rows do not fit it: widths that are not whole packs, more than
/// kMaxPacksPerLane packs a lane, f64, or data not 16-byte aligned.
int warpPathPacks(int64_t width,
                  std::initializer_list<const tessera_tensor *> tensors) {
  if (width % kPack != 0 || width > int64_t(kMaxPacksPerLane) * 32 * kPack)
    return 0;
  for (const tessera_tensor *tensor : tensors)
    if (tensor && (tensor->dtype == TESSERA_F64 ||
                   reinterpret_cast<uintptr_t>(tensor->data) % 16 != 0))
      return 0;
  int64_t packs = (width / kPack + 31) / 32;
  // Instantiated for 1, 2, 3, 4, 6, 8 (hidden sizes 768 and 1536 use 3 and
  // 6 packs; a rounded-up pack still costs its registers): round up.
  return packs <= 4 ? static_cast<int>(packs) : packs <= 6 ? 6 : 8;
}

/// Calls `launch` with std::integral_constant<int, packs>, for packs to
/// kMax.
template <int kMax = 8, typename Launch>
void withPacks(int packs, Launch &&launch) {
  switch (packs) {
  case 1:
    launch(std::integral_constant<int, 1>{});
    break;
  case 2:
    launch(std::integral_constant<int, 2>{});
    break;
  case 3:
    launch(std::integral_constant<int, 3>{});
    break;
  case 4:
    launch(std::integral_constant<int, 4>{});
    break;
  default:
    if constexpr (kMax > 4) {
      if (packs == 6)
        launch(std::integral_constant<int, 6>{});
      else
        launch(std::integral_constant<int, 8>{});
    }
    break;
  }
}

unsigned warpPathBlocks(int64_t rows) {
  return static_cast<unsigned>((rows + kWarpsPerNormBlock - 1) /
                               kWarpsPerNormBlock);
}

/// partials[c][j] = the sum over rows chunk c (rowsPerChunk rows) of
/// dy * xhat, partials[c][width + j] that of dy.
__global__ void parameterGradientKernel(const void *x, int xType,
                                        const void *dy, int dyType,
                                        const RowStatistics *statistics,
                                        int64_t rows, int64_t width, bool rms,
                                        int64_t rowsPerChunk,
                                        double *partials) {
  int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= width)
    return;
  int64_t firstRow = static_cast<int64_t>(blockIdx.y) * rowsPerChunk;
  int64_t lastRow = min(rows, firstRow + rowsPerChunk);
  double scaleSum = 0.0, biasSum = 0.0;
  for (int64_t row = firstRow; row < lastRow; ++row) {
    float value = loadFloat(x, xType, row * width + j);
    float upstream = loadFloat(dy, dyType, row * width + j);
    RowStatistics s = statistics[row];
    float normalized =
        rms ? value * s.reciprocalStd : (value - s.mean) * s.reciprocalStd;
    // The CPU kernel's rms product is dy * x * rstd, in f64: keep the order.
    scaleSum += rms ? static_cast<double>(upstream) * value * s.reciprocalStd
                    : static_cast<double>(upstream) * normalized;
    biasSum += upstream;
  }
  double *chunk = partials + blockIdx.y * 2 * width;
  chunk[j] = scaleSum;
  chunk[width + j] = biasSum;
}

/// The warp path's parameter gradients for rows wider than
/// kMaxFusedPartialPacks packs a lane: thread t of block (c, r) sums
/// dy * xhat and dy of columns [8 (c blockDim + t), +8) over rows chunk r,
/// in f32, and writes them to partials[r][0 .. 2 width).
__global__ void parameterPartialsKernel(const void *x, int xType,
                                        const void *dy, int dyType,
                                        const RowStatistics *statistics,
                                        int64_t rows, int64_t width, bool rms,
                                        int64_t rowsPerChunk, float *partials) {
  int64_t j =
      (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) * kPack;
  if (j >= width)
    return;
  int64_t firstRow = static_cast<int64_t>(blockIdx.y) * rowsPerChunk;
  int64_t lastRow = min(rows, firstRow + rowsPerChunk);
  float scaleSums[kPack] = {}, biasSums[kPack] = {};
#pragma unroll 4
  for (int64_t row = firstRow; row < lastRow; ++row) {
    float values[kPack], upstream[kPack];
    loadPack(x, xType, row * width + j, values);
    loadPack(dy, dyType, row * width + j, upstream);
    RowStatistics s = statistics[row];
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      float normalized = rms ? values[k] * s.reciprocalStd
                             : (values[k] - s.mean) * s.reciprocalStd;
      scaleSums[k] += upstream[k] * normalized;
      biasSums[k] += upstream[k];
    }
  }
  float *scaleRow = partials + blockIdx.y * 2 * width + j;
  float *biasRow = scaleRow + width;
#pragma unroll
  for (int k = 0; k < kPack; k += 4) {
    *reinterpret_cast<float4 *>(scaleRow + k) = make_float4(
        scaleSums[k], scaleSums[k + 1], scaleSums[k + 2], scaleSums[k + 3]);
    *reinterpret_cast<float4 *>(biasRow + k) = make_float4(
        biasSums[k], biasSums[k + 1], biasSums[k + 2], biasSums[k + 3]);
  }
}

constexpr int kReduceColumns = 16; // columns of a reduce block
constexpr int kReduceSlices = 16;  // slices of the chunks in a reduce block

/// Column c < 2 width of the [chunks][2 width] partials, summed in f64 in
/// chunk order (slice s of the block's threads sums its contiguous span of
/// chunks, then the slice sums are added in slice order) and stored into
/// dscale[c] (c < width) or dbias[c - width]; a null output is skipped.
template <typename Partial>
__global__ void
reducePartialsKernel(const Partial *partials, int64_t chunks, int64_t width,
                     void *dscale, int dscaleType, void *dbias, int dbiasType) {
  __shared__ double sliceSums[kReduceSlices][kReduceColumns];
  int columnInBlock = threadIdx.x % kReduceColumns;
  int slice = threadIdx.x / kReduceColumns;
  int64_t columns = 2 * width;
  int64_t column =
      static_cast<int64_t>(blockIdx.x) * kReduceColumns + columnInBlock;
  int64_t span = (chunks + kReduceSlices - 1) / kReduceSlices;
  int64_t first = slice * span, last = min(chunks, first + span);
  double sum = 0.0;
  if (column < columns) {
#pragma unroll 4
    for (int64_t c = first; c < last; ++c)
      sum += partials[c * columns + column];
  }
  sliceSums[slice][columnInBlock] = sum;
  __syncthreads();
  if (slice != 0 || column >= columns)
    return;
  double total = 0.0;
  for (int k = 0; k < kReduceSlices; ++k)
    total += sliceSums[k][columnInBlock];
  if (column < width) {
    if (dscale)
      storeFloat(dscale, dscaleType, column, static_cast<float>(total));
  } else if (dbias) {
    storeFloat(dbias, dbiasType, column - width, static_cast<float>(total));
  }
}

/// Launches reducePartialsKernel over all 2 width columns.
template <typename Partial>
void reducePartials(const Partial *partials, int64_t chunks, int64_t width,
                    tessera_tensor *dscale, tessera_tensor *dbias,
                    cudaStream_t stream) {
  unsigned blocks =
      static_cast<unsigned>((2 * width + kReduceColumns - 1) / kReduceColumns);
  reducePartialsKernel<<<blocks, kReduceColumns * kReduceSlices, 0, stream>>>(
      partials, chunks, width, dscale ? dscale->data : nullptr,
      dscale ? dscale->dtype : TESSERA_F32, dbias ? dbias->data : nullptr,
      dbias ? dbias->dtype : TESSERA_F32);
  cudaCheckLaunch();
}

struct RowLayout {
  int64_t rows;
  int64_t width;
  Shape normalizedShape;
};

RowLayout rowLayout(const tessera_tensor &x, int64_t axis) {
  requireAxis(axis, x.rank, "axis");
  Shape shape = shapeOf(x);
  return {product(shape, 0, static_cast<size_t>(axis)),
          product(shape, static_cast<size_t>(axis), shape.size()),
          Shape(shape.begin() + axis, shape.end())};
}

/// The data pointer and dtype of an optional parameter, checked.
const tessera_tensor *parameter(const tessera_tensor *tensor, const char *name,
                                const RowLayout &layout) {
  if (!tensor)
    return nullptr;
  requireShape(requireTensor(tensor, name), layout.normalizedShape, name);
  requireKernelFloat(*tensor, name);
  return tensor;
}

void checkEpsilon(double epsilon) {
  if (!(epsilon >= 0.0))
    fail("epsilon " + std::to_string(epsilon) + " must be >= 0");
}

const void *dataOf(const tessera_tensor *tensor) {
  return tensor ? tensor->data : nullptr;
}
int typeOf(const tessera_tensor *tensor) {
  return tensor ? tensor->dtype : TESSERA_F32;
}

void normForward(const tessera_tensor *x, const tessera_tensor *scale,
                 const tessera_tensor *bias, tessera_tensor *y, int64_t axis,
                 double epsilon, bool rms, cudaStream_t stream) {
  const tessera_tensor &input = requireTensor(x, "x");
  tessera_tensor &output = requireTensor(y, "y");
  requireShape(output, shapeOf(input), "y");
  requireKernelFloat(input, "x");
  requireKernelFloat(output, "y");
  checkEpsilon(epsilon);
  RowLayout layout = rowLayout(input, axis);
  const tessera_tensor *scaleTensor = parameter(scale, "scale", layout);
  const tessera_tensor *biasTensor = parameter(bias, "bias", layout);
  if (layout.rows == 0 || layout.width == 0)
    return;
  if (layout.rows > INT32_MAX)
    fail("more than 2^31 rows");
  if (int packs = warpPathPacks(layout.width,
                                {&input, &output, scaleTensor, biasTensor})) {
    withPacks(packs, [&](auto packCount) {
      normForwardWarpKernel<decltype(packCount)::value>
          <<<warpPathBlocks(layout.rows), kWarpsPerNormBlock * 32, 0, stream>>>(
              input.data, input.dtype, dataOf(scaleTensor), typeOf(scaleTensor),
              dataOf(biasTensor), typeOf(biasTensor), output.data, output.dtype,
              layout.rows, layout.width, epsilon, rms);
    });
  } else if (int rowPacks =
                 rowPathPacks(layout.width, kRowMaxPacks,
                              {&input, &output, scaleTensor, biasTensor})) {
    withRowPacks<kRowMaxPacks>(rowPacks, [&](auto packCount) {
      normForwardRowKernel<decltype(packCount)::value>
          <<<static_cast<unsigned>(layout.rows), kRowThreads, 0, stream>>>(
              input.data, input.dtype, dataOf(scaleTensor), typeOf(scaleTensor),
              dataOf(biasTensor), typeOf(biasTensor), output.data, output.dtype,
              layout.width, epsilon, rms);
    });
  } else {
    normForwardKernel<<<static_cast<unsigned>(layout.rows), kNormThreads, 0,
                        stream>>>(input.data, input.dtype, dataOf(scaleTensor),
                                  typeOf(scaleTensor), dataOf(biasTensor),
                                  typeOf(biasTensor), output.data, output.dtype,
                                  layout.width, epsilon, rms);
  }
  cudaCheckLaunch();
}

/// Whether the warp path's backward kernel sums the parameter gradients
/// itself (the default) or leaves them to parameterPartialsKernel:
/// TESSERA_NORM_FUSED_PARTIALS=0 picks the latter, for A/B measurements.
bool fusePartials() {
  static const bool fuse = [] {
    const char *value = std::getenv("TESSERA_NORM_FUSED_PARTIALS");
    return !(value && std::string(value) == "0");
  }();
  return fuse;
}

/// Whether the wide-row backward prefetches its block's next row into L2
/// (the default) or not: TESSERA_NORM_PREFETCH=0, for A/B measurements.
bool prefetchRows() {
  static const bool prefetch = [] {
    const char *value = std::getenv("TESSERA_NORM_PREFETCH");
    return !(value && std::string(value) == "0");
  }();
  return prefetch;
}

/// dx = (residual +) the norm's gradient; dscale and dbias optional.
void normBackward(const tessera_tensor *x, const tessera_tensor *scale,
                  const tessera_tensor *dy, const tessera_tensor *residual,
                  tessera_tensor *dx, tessera_tensor *dscale,
                  tessera_tensor *dbias, int64_t axis, double epsilon, bool rms,
                  cudaStream_t stream) {
  const tessera_tensor &input = requireTensor(x, "x");
  const tessera_tensor &upstream = requireTensor(dy, "dy");
  tessera_tensor &inputGradient = requireTensor(dx, "dx");
  requireShape(upstream, shapeOf(input), "dy");
  requireShape(inputGradient, shapeOf(input), "dx");
  requireKernelFloat(input, "x");
  requireKernelFloat(upstream, "dy");
  requireKernelFloat(inputGradient, "dx");
  if (residual) {
    requireShape(*residual, shapeOf(input), "residual");
    requireKernelFloat(*residual, "residual");
  }
  checkEpsilon(epsilon);
  RowLayout layout = rowLayout(input, axis);
  const tessera_tensor *scaleTensor = parameter(scale, "scale", layout);
  if (dscale && !scale)
    fail("dscale was requested without a scale");
  parameter(dscale, "dscale", layout);
  parameter(dbias, "dbias", layout);
  if (layout.width == 0)
    return;
  if (layout.rows > INT32_MAX)
    fail("more than 2^31 rows");
  bool parameterGradients = dscale || dbias;
  // Rows wider than the warp path sums its partials for take the wide-row
  // kernel, which always does.
  if (layout.width > int64_t{kMaxFusedPartialPacks} * 32 * kPack)
    if (int rowPacks = rowPathPacks(
            layout.width, kRowMaxPacks,
            {&input, &upstream, &inputGradient, scaleTensor, residual})) {
      int64_t chunks = 0;
      float *partials = nullptr;
      withRowPacks<kRowMaxPacks>(rowPacks, [&](auto packCount) {
        constexpr int kThreads = decltype(packCount)::value * kRowThreads;
        // One wave: as many chunks as blocks fit on the device at once (a
        // second, partial wave left SMs idle: 16-row chunks of [16384,
        // 2048] ran 0.144 ms, one wave of 32-row chunks 0.137).
        // Prefetching takes a few registers more: 3 blocks of 256 an SM
        // instead of 4; blocks of 512 would drop from 2 to 1, so wider rows
        // (4 packs a row a thread and up) do without.
        auto kernel = kThreads == 256 && prefetchRows()
                          ? normBackwardRowKernel<kThreads, kThreads == 256>
                          : normBackwardRowKernel<kThreads, false>;
        int device = 0, sms = 0, blocksPerSm = 0;
        cudaCheck(cudaGetDevice(&device));
        cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount,
                                         device));
        cudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &blocksPerSm, kernel, kThreads, 0));
        int64_t wave = std::max<int64_t>(1, int64_t{sms} * blocksPerSm);
        int64_t rowsPerChunk = std::max<int64_t>(
            {kMinRowsPerRowChunk, (layout.rows + wave - 1) / wave,
             (layout.rows + kMaxRowChunks - 1) / kMaxRowChunks});
        chunks = (layout.rows + rowsPerChunk - 1) / rowsPerChunk;
        if (parameterGradients)
          partials = static_cast<float *>(
              streamScratch(stream, chunks * 2 * layout.width * sizeof(float),
                            kParameterGradientSlot));
        if (layout.rows == 0)
          return;
        kernel<<<static_cast<unsigned>(chunks), kThreads, 0, stream>>>(
            input.data, input.dtype, dataOf(scaleTensor), typeOf(scaleTensor),
            upstream.data, upstream.dtype, dataOf(residual), typeOf(residual),
            inputGradient.data, inputGradient.dtype, layout.rows, layout.width,
            epsilon, rms, rowsPerChunk, partials);
        cudaCheckLaunch();
      });
      if (parameterGradients)
        reducePartials(partials, chunks, layout.width, dscale, dbias, stream);
      return;
    }
  int packs = warpPathPacks(
      layout.width, {&input, &upstream, &inputGradient, scaleTensor, residual});
  if (packs > kMaxFusedPartialPacks) // (the wide-row path took those)
    packs = 0;
  bool fusedPartials = parameterGradients && packs && fusePartials();
  // Rows per chunk of the partials: the warp path's kRowsPerPartial, the
  // block path's kRowsPerColumnChunk, or more where that would make more
  // chunks than a grid's y dimension holds or (block path) more than
  // max(16, 2^21 / width), which keeps its f64 partials within 32 MB.
  int64_t maxChunks = 65535;
  if (!packs)
    maxChunks = std::min<int64_t>(
        maxChunks, std::max<int64_t>(16, (int64_t{1} << 21) / layout.width));
  int64_t rowsPerChunk =
      std::max<int64_t>(packs ? kRowsPerPartial : kRowsPerColumnChunk,
                        (layout.rows + maxChunks - 1) / maxChunks);
  int64_t chunks = (layout.rows + rowsPerChunk - 1) / rowsPerChunk;
  RowStatistics *statistics = nullptr;
  void *partials = nullptr;
  if (parameterGradients) {
    size_t partialsBytes =
        chunks * 2 * layout.width * (packs ? sizeof(float) : sizeof(double));
    partialsBytes = (partialsBytes + 255) / 256 * 256;
    // The partials (16-byte aligned for float4 stores), then, unless the
    // backward kernel sums them itself, the statistics.
    size_t statisticsBytes =
        fusedPartials ? 0 : layout.rows * sizeof(RowStatistics);
    char *scratch = static_cast<char *>(streamScratch(
        stream, partialsBytes + statisticsBytes, kParameterGradientSlot));
    partials = scratch;
    if (!fusedPartials)
      statistics = reinterpret_cast<RowStatistics *>(scratch + partialsBytes);
  }
  if (layout.rows > 0) {
    if (packs) {
      withPacks<kMaxFusedPartialPacks>(packs, [&](auto packCount) {
        constexpr int kPacks = decltype(packCount)::value;
        // One row a warp, or a chunk of rows a block with the sums.
        int64_t rowsPerBlock =
            fusedPartials ? rowsPerChunk : kWarpsPerBackwardBlock;
        unsigned blocks = static_cast<unsigned>(
            (layout.rows + rowsPerBlock - 1) / rowsPerBlock);
        auto kernel = fusedPartials ? normBackwardWarpKernel<kPacks, true>
                                    : normBackwardWarpKernel<kPacks, false>;
        size_t sharedBytes = fusedPartials
                                 ? kWarpsPerBackwardBlock * 2 * kPacks * 32 *
                                       kPack * sizeof(float)
                                 : 0;
        // Past the 48 KB a launch gets without asking.
        if (sharedBytes > 48 * 1024)
          cudaCheck(cudaFuncSetAttribute(
              kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
              static_cast<int>(sharedBytes)));
        kernel<<<blocks, kWarpsPerBackwardBlock * 32, sharedBytes, stream>>>(
            input.data, input.dtype, dataOf(scaleTensor), typeOf(scaleTensor),
            upstream.data, upstream.dtype, dataOf(residual), typeOf(residual),
            inputGradient.data, inputGradient.dtype, layout.rows, layout.width,
            epsilon, rms, rowsPerBlock, static_cast<float *>(partials),
            statistics);
      });
    } else {
      normBackwardKernel<<<static_cast<unsigned>(layout.rows), kNormThreads, 0,
                           stream>>>(
          input.data, input.dtype, dataOf(scaleTensor), typeOf(scaleTensor),
          upstream.data, upstream.dtype, dataOf(residual), typeOf(residual),
          inputGradient.data, inputGradient.dtype, layout.width, epsilon, rms,
          statistics);
    }
    cudaCheckLaunch();
  }
  if (!parameterGradients)
    return;
  if (packs) {
    float *floatPartials = static_cast<float *>(partials);
    if (layout.rows > 0 && !fusedPartials) {
      constexpr unsigned kPartialThreads = 128;
      dim3 grid(
          static_cast<unsigned>((layout.width / kPack + kPartialThreads - 1) /
                                kPartialThreads),
          static_cast<unsigned>(chunks));
      parameterPartialsKernel<<<grid, kPartialThreads, 0, stream>>>(
          input.data, input.dtype, upstream.data, upstream.dtype, statistics,
          layout.rows, layout.width, rms, rowsPerChunk, floatPartials);
      cudaCheckLaunch();
    }
    reducePartials(floatPartials, chunks, layout.width, dscale, dbias, stream);
  } else {
    double *doublePartials = static_cast<double *>(partials);
    if (layout.rows > 0) {
      dim3 grid(static_cast<unsigned>((layout.width + kNormThreads - 1) /
                                      kNormThreads),
                static_cast<unsigned>(chunks));
      parameterGradientKernel<<<grid, kNormThreads, 0, stream>>>(
          input.data, input.dtype, upstream.data, upstream.dtype, statistics,
          layout.rows, layout.width, rms, rowsPerChunk, doublePartials);
      cudaCheckLaunch();
    }
    reducePartials(doublePartials, chunks, layout.width, dscale, dbias, stream);
  }
}

} // namespace

extern "C" int tessera_cuda_layer_norm(const tessera_tensor *x,
                                       const tessera_tensor *scale,
                                       const tessera_tensor *bias,
                                       tessera_tensor *y, int64_t axis,
                                       double epsilon, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_layer_norm", [&] {
    normForward(x, scale, bias, y, axis, epsilon, /*rms=*/false, stream);
  });
}

extern "C" int tessera_cuda_layer_norm_grad(
    const tessera_tensor *x, const tessera_tensor *scale,
    const tessera_tensor *dy, tessera_tensor *dx, tessera_tensor *dscale,
    tessera_tensor *dbias, int64_t axis, double epsilon, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_layer_norm_grad", [&] {
    normBackward(x, scale, dy, /*residual=*/nullptr, dx, dscale, dbias, axis,
                 epsilon, /*rms=*/false, stream);
  });
}

extern "C" int tessera_cuda_layer_norm_grad_add(
    const tessera_tensor *x, const tessera_tensor *scale,
    const tessera_tensor *dy, const tessera_tensor *residual,
    tessera_tensor *dx, tessera_tensor *dscale, tessera_tensor *dbias,
    int64_t axis, double epsilon, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_layer_norm_grad_add", [&] {
    normBackward(x, scale, dy, &requireTensor(residual, "residual"), dx, dscale,
                 dbias, axis, epsilon, /*rms=*/false, stream);
  });
}

extern "C" int tessera_cuda_rms_norm(const tessera_tensor *x,
                                     const tessera_tensor *scale,
                                     tessera_tensor *y, int64_t axis,
                                     double epsilon, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_rms_norm", [&] {
    normForward(x, scale, nullptr, y, axis, epsilon, /*rms=*/true, stream);
  });
}

extern "C" int tessera_cuda_rms_norm_grad(const tessera_tensor *x,
                                          const tessera_tensor *scale,
                                          const tessera_tensor *dy,
                                          tessera_tensor *dx,
                                          tessera_tensor *dscale, int64_t axis,
                                          double epsilon, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_rms_norm_grad", [&] {
    normBackward(x, scale, dy, /*residual=*/nullptr, dx, dscale, nullptr, axis,
                 epsilon, /*rms=*/true, stream);
  });
}

extern "C" int tessera_cuda_rms_norm_grad_add(
    const tessera_tensor *x, const tessera_tensor *scale,
    const tessera_tensor *dy, const tessera_tensor *residual,
    tessera_tensor *dx, tessera_tensor *dscale, int64_t axis, double epsilon,
    cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_rms_norm_grad_add", [&] {
    normBackward(x, scale, dy, &requireTensor(residual, "residual"), dx, dscale,
                 nullptr, axis, epsilon, /*rms=*/true, stream);
  });
}
