//===- FlashAttention.cu - Tiled tensor-core attention, forward and backward -===//
//
// Why: the correct-first kernels of Attention.cu give every query row one
// warp and stream K/V from L2 with scalar loads; at GPT-2 training shapes
// (16 x 1024 tokens, 12-16 heads of 64) attention then costs more than all
// the matmuls together. These kernels are FlashAttention-2's algorithm,
// written here from the paper's description: tiles of Q, K and V in shared
// memory, QK^T and PV on the tensor cores (mma.sync m16n8k16 through inline
// PTX, ldmatrix for operands), an online softmax in registers, f32
// accumulation throughout.
//
// Forward: one block of 4 warps per (batch * query head, query tile); each
// warp owns 32 query rows at head dim 64 (a 128-query tile), 16 at 128. K/V tiles of 64 keys are double-buffered
// with cp.async. Causal tiles past the diagonal are never loaded; only
// tiles that straddle the diagonal (or the sequence end) are masked.
//
// Backward: tessera_cuda_attention_grad receives q, k, v and dy but neither
// the forward's output nor its softmax statistics, so it first reruns the
// forward tile loop in a "statistics" mode that writes, per query row, the
// log-sum-exp (base 2) and D = rowsum(dO * O) (O kept in f32 registers,
// never rounded), and zeroes an f32 dQ accumulator. The packed entry
// (tess.packed_attention_grad) has the forward's O and log-sum-exp, so a
// light pass computes D from O as FlashAttention-2 does, and the rerun is
// gone. The main kernel is
// KV-major: one block per (batch * K/V head, 64-key tile), each warp owning
// 16 keys, looping over every query head of the K/V head's group and every
// query tile the keys are visible to. It recomputes P^T = exp2(S^T - LSE),
// accumulates dV += P^T dO and dK += dS^T Q in registers (no atomics into
// dK/dV: the block owns its keys for all grouped heads), and adds dQ = dS K
// into the f32 accumulator with float2 atomics (sm_90). A last pass rounds
// dQ to the storage type. The statistics pass costs about one forward, so
// an unpacked backward call is ~3.5 forwards of work, a packed one 2.5.
//
// Layouts: every operand is addressed through a HeadLayout (element strides
// of a batch, a head and a row, head dim contiguous), so the same kernels
// read [B, H, T, D] tensors and the heads of a packed [B, T, (Hq + 2 Hkv) D]
// qkv, and write y, dq, dk, dv in either layout, without transposes.
//
// A forward that also writes the log-sum-exp (the packed forward) needs
// head dim 64: at 128 it would spill registers.
//
// Limits (anything else runs Attention.cu's kernels): q, k, v, y and the
// gradients all bf16 or all f16; head dim == value dim, 64 or 128; no
// additive mask; no dropout; 16-byte aligned data. Scratch (LSE, D, the dQ
// accumulator) comes from streamScratch, so steady-state calls allocate
// nothing.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "AttentionKernels.h"

#include <cstring>

using tessera::cpu::elementCount;

namespace tessera::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kKeysPerTile = 64;   // both passes: 16 per warp in the backward
constexpr int kScratchSlot = 2000; // streamScratch slot for LSE, D and dQ
constexpr float kLog2e = 1.4426950408889634f;

/// Where a head's rows are: element (b, h, t, d) of an operand is at
/// b * batch + h * head + t * row + d.
struct HeadLayout {
  int64_t batch, head;
  int row; // 32 bits: the forward kernel has no registers to spare

  /// The first element of head `index` (batch * heads + h).
  __device__ __forceinline__ int64_t start(int64_t index,
                                           int64_t heads) const {
    return (index / heads) * batch + (index % heads) * head;
  }
};

/// [B, H, T, D], contiguous.
HeadLayout contiguousHeads(int64_t heads, int64_t seq, int64_t dim) {
  return {heads * seq * dim, seq * dim, static_cast<int>(dim)};
}

struct FlashParams {
  const void *q, *k, *v;
  // q's layout is dq's, k's dk's, v's dv's; `output` is y's and dy's.
  HeadLayout queryLayout, keyLayout, valueLayout, outputLayout;
  int64_t queryHeads, keyHeads;
  int querySeq, keySeq;
  int groupSize; // query heads per K/V head
  bool causal;
  float scale;     // softmax scale
  float scaleLog2; // scale * log2(e): scores go to exp2
};

//===--- Tensor-core and shared-memory primitives -------------------------===//

template <typename T> __device__ __forceinline__ uint32_t packPair(float low,
                                                                   float high);
template <>
__device__ __forceinline__ uint32_t packPair<__nv_bfloat16>(float low,
                                                            float high) {
  __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  uint32_t bits;
  memcpy(&bits, &pair, sizeof(bits));
  return bits;
}
template <>
__device__ __forceinline__ uint32_t packPair<__half>(float low, float high) {
  __half2 pair = __floats2half2_rn(low, high);
  uint32_t bits;
  memcpy(&bits, &pair, sizeof(bits));
  return bits;
}

template <typename T> __device__ __forceinline__ float2 unpackPair(uint32_t);
template <>
__device__ __forceinline__ float2 unpackPair<__nv_bfloat16>(uint32_t bits) {
  __nv_bfloat162 pair;
  memcpy(&pair, &bits, sizeof(bits));
  return __bfloat1622float2(pair);
}
template <> __device__ __forceinline__ float2 unpackPair<__half>(uint32_t bits) {
  __half2 pair;
  memcpy(&pair, &bits, sizeof(bits));
  return __half22float2(pair);
}

/// c += a b for a 16x16 A (row-major fragment), 16x8 B, 16x8 f32 C.
template <typename T>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4],
                                    uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma<__nv_bfloat16>(float (&c)[4],
                                                   const uint32_t (&a)[4],
                                                   uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma<__half>(float (&c)[4],
                                            const uint32_t (&a)[4], uint32_t b0,
                                            uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// Four 8x8 16-bit matrices; lanes 8i..8i+7 address matrix i's rows.
__device__ __forceinline__ void loadMatrices(uint32_t (&r)[4],
                                             uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
/// The same, each matrix transposed.
__device__ __forceinline__ void loadMatricesTransposed(uint32_t (&r)[4],
                                                       uint32_t address) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(address));
}

/// Copies `bytes` (4 or 16) global -> shared asynchronously; a copy that is
/// not `valid` zero-fills the destination and reads nothing.
template <int Bytes>
__device__ __forceinline__ void copyAsync(uint32_t destination,
                                          const void *source, bool valid) {
  int sourceBytes = valid ? Bytes : 0;
  if constexpr (Bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(
                     destination),
                 "l"(source), "r"(sourceBytes));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(
                     destination),
                 "l"(source), "r"(sourceBytes));
}
__device__ __forceinline__ void commitAsync() {
  asm volatile("cp.async.commit_group;");
}
template <int Pending> __device__ __forceinline__ void waitAsync() {
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending));
}

/// Byte offset of the 8-element chunk `chunk` of row `row` in a shared tile
/// of 16-bit values with `Columns` per row. Chunks are XOR-swizzled by row so
/// that the eight rows one ldmatrix reads at one logical chunk fall in eight
/// different 16-byte bank groups (no bank conflicts).
template <int Columns>
__device__ __forceinline__ uint32_t tileOffset(int row, int chunk) {
  constexpr int kChunks = Columns / 8;
  constexpr int kRowsPerLine = kChunks >= 8 ? 1 : 8 / kChunks;
  constexpr int kMask = (kChunks >= 8 ? 8 : kChunks) - 1;
  return static_cast<uint32_t>(
      (row * kChunks + (chunk ^ ((row / kRowsPerLine) & kMask))) * 16);
}

/// Starts loading rows [first, first + Rows) of a [*, Columns] matrix whose
/// rows are `rowStride` elements apart into a swizzled tile; rows at or past
/// `limit` become zeros.
template <int Rows, int Columns, typename T>
__device__ __forceinline__ void loadTile(uint32_t tile, const T *source,
                                         int rowStride, int first, int limit) {
  constexpr int kChunks = Columns / 8;
  for (int i = threadIdx.x; i < Rows * kChunks; i += kThreads) {
    int row = i / kChunks, chunk = i % kChunks;
    bool valid = first + row < limit;
    const T *from =
        valid ? source + static_cast<int64_t>(first + row) * rowStride +
                    chunk * 8
              : source;
    copyAsync<16>(tile + tileOffset<Columns>(row, chunk), from, valid);
  }
}

/// Starts loading floats [first, first + Count) into shared; zeros past
/// `limit`.
template <int Count>
__device__ __forceinline__ void loadFloats(uint32_t destination,
                                           const float *source, int first,
                                           int limit) {
  for (int i = threadIdx.x; i < Count; i += kThreads) {
    bool valid = first + i < limit;
    copyAsync<4>(destination + 4 * i, valid ? source + first + i : source,
                 valid);
  }
}

/// The A fragment of rows [16 w, 16 w + 16) x columns [16 kk, 16 kk + 16)
/// of a swizzled tile (row-major A).
template <int Columns>
__device__ __forceinline__ void loadRowFragment(uint32_t (&a)[4], uint32_t tile,
                                                int firstRow, int kk) {
  int lane = threadIdx.x % 32;
  loadMatrices(a, tile + tileOffset<Columns>(firstRow + lane % 16,
                                             kk * 2 + lane / 16));
}

/// B fragments of two 8-column n-blocks (n0, n0 + 8) for k-step kk when the
/// tile stores B^T row-major (rows = n, columns = k): b[0..1] for n0,
/// b[2..3] for n0 + 8.
template <int Columns>
__device__ __forceinline__ void loadTransposedB(uint32_t (&b)[4], uint32_t tile,
                                                int n0, int kk) {
  int lane = threadIdx.x % 32;
  loadMatrices(b, tile + tileOffset<Columns>(n0 + lane % 8 + (lane / 16) * 8,
                                             kk * 2 + (lane / 8) % 2));
}

/// B fragments of two 8-column n-blocks (chunks c0, c0 + 1) for rows
/// [k0, k0 + 16) when the tile stores B row-major (rows = k, columns = n).
template <int Columns>
__device__ __forceinline__ void loadRowMajorB(uint32_t (&b)[4], uint32_t tile,
                                              int k0, int c0) {
  int lane = threadIdx.x % 32;
  loadMatricesTransposed(
      b, tile + tileOffset<Columns>(k0 + lane % 8 + ((lane / 8) % 2) * 8,
                                    c0 + lane / 16));
}

/// The A fragment for k-step kk from two accumulator n-blocks (2 kk, 2 kk + 1)
/// of a 16-row C: C's layout is A's, two n-blocks per k-step.
template <typename T, int Blocks>
__device__ __forceinline__ void accumulatorFragment(uint32_t (&a)[4],
                                                    const float (&c)[Blocks][4],
                                                    int kk) {
  a[0] = packPair<T>(c[2 * kk][0], c[2 * kk][1]);
  a[1] = packPair<T>(c[2 * kk][2], c[2 * kk][3]);
  a[2] = packPair<T>(c[2 * kk + 1][0], c[2 * kk + 1][1]);
  a[3] = packPair<T>(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

/// 2^x by the SFU's approximation (2 ulp; exp2(-inf) = 0), without the
/// denormal handling of exp2f: the softmax's hot loop.
__device__ __forceinline__ float fastExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float quadMax(float value) {
  value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 1));
  return fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 2));
}
__device__ __forceinline__ float quadSum(float value) {
  value += __shfl_xor_sync(0xffffffffu, value, 1);
  return value + __shfl_xor_sync(0xffffffffu, value, 2);
}

//===--- Forward (and the backward's statistics pass) ---------------------===//

/// Forward tiling: each warp owns kRowBlocks blocks of 16 query rows, so one
/// K/V fragment read from shared memory feeds kRowBlocks MMAs. Head dim 64
/// takes two (128-query tiles: 202 TFLOP/s on an H200 at GPT-2's shape,
/// against 182 with one); 128 takes one, its output accumulator already
/// filling half the registers.
template <int D> struct ForwardShape {
  static constexpr int kRowBlocks = D == 64 ? 2 : 1;
  static constexpr int kRowsPerWarp = 16 * kRowBlocks;
  static constexpr int kQueries = kWarps * kRowsPerWarp;
  static constexpr uint32_t kQueryBytes = kQueries * D * 2;
  static constexpr uint32_t kKeyBytes = kKeysPerTile * D * 2;
  // Q, then two K buffers, then two V buffers.
  static constexpr uint32_t kBytes = kQueryBytes + 4 * kKeyBytes;
};

/// What a forward tile loop writes.
enum class ForwardPass {
  Output,        // y
  OutputAndLse,  // y and each row's natural-log log-sum-exp
  Statistics,    // the unpacked backward's base-2 log-sum-exp, D = dO . O,
                 // and zeros in the f32 dQ accumulator's rows
};

constexpr float kLn2 = 0.6931471805599453f;

template <typename T, int D, ForwardPass Pass>
__global__ void __launch_bounds__(kThreads)
    flashForwardKernel(FlashParams p, T *output, const T *outputGradient,
                       float *logSumExp, float *rowDots,
                       float *queryGradientAccumulator) {
  constexpr bool Statistics = Pass == ForwardPass::Statistics;
  using Shape = ForwardShape<D>;
  constexpr int kBlocks = Shape::kRowBlocks;
  constexpr int kRows = 2 * kBlocks; // rows per thread
  extern __shared__ __align__(128) unsigned char shared[];
  const uint32_t queryTile =
      static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  const uint32_t keyTiles = queryTile + Shape::kQueryBytes;
  const uint32_t valueTiles = keyTiles + 2 * Shape::kKeyBytes;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int group = lane / 4, thread = lane % 4;

  const int64_t head = blockIdx.x; // batch * queryHeads + query head
  const int64_t keyHead = (head / p.queryHeads) * p.keyHeads +
                          (head % p.queryHeads) / p.groupSize;
  // Causal: the heaviest (last) query tiles start first.
  const int queryStart = (gridDim.y - 1 - blockIdx.y) * Shape::kQueries;
  const T *q = static_cast<const T *>(p.q) +
               p.queryLayout.start(head, p.queryHeads);
  const T *k =
      static_cast<const T *>(p.k) + p.keyLayout.start(keyHead, p.keyHeads);
  const T *v =
      static_cast<const T *>(p.v) + p.valueLayout.start(keyHead, p.keyHeads);
  const int offset = p.keySeq - p.querySeq; // causal: i sees j <= i + offset
  const int keyEnd = p.causal ? min(p.keySeq, queryStart + Shape::kQueries +
                                                  offset)
                              : p.keySeq;
  const int keyTileCount = (keyEnd + kKeysPerTile - 1) / kKeysPerTile;

  loadTile<Shape::kQueries, D>(queryTile, q, p.queryLayout.row, queryStart,
                               p.querySeq);
  loadTile<kKeysPerTile, D>(keyTiles, k, p.keyLayout.row, 0, p.keySeq);
  loadTile<kKeysPerTile, D>(valueTiles, v, p.valueLayout.row, 0, p.keySeq);
  commitAsync();

  uint32_t queryFragments[kBlocks][D / 16][4];
  float accumulator[kBlocks][D / 8][4] = {};
  // Row r of this thread is query firstRow + 16 (r / 2) + 8 (r % 2): the C
  // fragment's rows group and group + 8 of each 16-row block.
  const int firstWarpRow = warp * Shape::kRowsPerWarp;
  const int firstRow = queryStart + firstWarpRow + group;
  float rowMax[kRows], rowSum[kRows], rowBase[kRows];
  for (int r = 0; r < kRows; ++r) {
    rowMax[r] = -INFINITY;
    rowSum[r] = 0.0f;
    rowBase[r] = 0.0f;
  }

  for (int tile = 0; tile < keyTileCount; ++tile) {
    const int buffer = tile & 1;
    if (tile + 1 < keyTileCount) {
      int next = (tile + 1) * kKeysPerTile;
      loadTile<kKeysPerTile, D>(keyTiles + (buffer ^ 1) * Shape::kKeyBytes, k,
                                p.keyLayout.row, next, p.keySeq);
      loadTile<kKeysPerTile, D>(valueTiles + (buffer ^ 1) * Shape::kKeyBytes,
                                v, p.valueLayout.row, next, p.keySeq);
      commitAsync();
      waitAsync<1>();
    } else {
      waitAsync<0>();
    }
    __syncthreads();
    if (tile == 0)
      for (int m = 0; m < kBlocks; ++m)
        for (int kk = 0; kk < D / 16; ++kk)
          loadRowFragment<D>(queryFragments[m][kk], queryTile,
                             firstWarpRow + 16 * m, kk);
    const uint32_t keyTile = keyTiles + buffer * Shape::kKeyBytes;
    const uint32_t valueTile = valueTiles + buffer * Shape::kKeyBytes;

    // S = Q K^T for this warp's rows and the tile's 64 keys.
    float score[kBlocks][kKeysPerTile / 8][4] = {};
    for (int kk = 0; kk < D / 16; ++kk)
      for (int n = 0; n < kKeysPerTile / 8; n += 2) {
        uint32_t b[4];
        loadTransposedB<D>(b, keyTile, n * 8, kk);
        for (int m = 0; m < kBlocks; ++m) {
          mma<T>(score[m][n], queryFragments[m][kk], b[0], b[1]);
          mma<T>(score[m][n + 1], queryFragments[m][kk], b[2], b[3]);
        }
      }

    const int keyStart = tile * kKeysPerTile;
    if (keyStart + kKeysPerTile > p.keySeq ||
        (p.causal && keyStart + kKeysPerTile - 1 > queryStart + offset))
      for (int m = 0; m < kBlocks; ++m)
        for (int n = 0; n < kKeysPerTile / 8; ++n)
          for (int e = 0; e < 4; ++e) {
            int key = keyStart + n * 8 + 2 * thread + (e & 1);
            int row = firstRow + 16 * m + (e / 2) * 8;
            if (key >= p.keySeq || (p.causal && key > row + offset))
              score[m][n][e] = -INFINITY;
          }

    // Online softmax: scores in base-2 units, the running max as exponent
    // base, earlier sums and outputs rescaled when the max grows.
    float tileMax[kRows];
    for (int r = 0; r < kRows; ++r)
      tileMax[r] = -INFINITY;
    for (int m = 0; m < kBlocks; ++m)
      for (int n = 0; n < kKeysPerTile / 8; ++n)
        for (int e = 0; e < 4; ++e)
          tileMax[2 * m + e / 2] = fmaxf(tileMax[2 * m + e / 2], score[m][n][e]);
    float rescale[kRows];
    for (int r = 0; r < kRows; ++r) {
      float newMax = fmaxf(rowMax[r], quadMax(tileMax[r]) * p.scaleLog2);
      // A row with every key so far hidden keeps base 0: exp2 gives 0s, not
      // NaNs.
      rowBase[r] = newMax == -INFINITY ? 0.0f : newMax;
      rescale[r] = fastExp2(rowMax[r] - rowBase[r]);
      rowMax[r] = newMax;
      rowSum[r] *= rescale[r];
    }
    for (int m = 0; m < kBlocks; ++m)
      for (int n = 0; n < kKeysPerTile / 8; ++n)
        for (int e = 0; e < 4; ++e) {
          int r = 2 * m + e / 2;
          float weight =
              fastExp2(fmaf(score[m][n][e], p.scaleLog2, -rowBase[r]));
          score[m][n][e] = weight;
          rowSum[r] += weight;
        }
    for (int m = 0; m < kBlocks; ++m)
      for (int d = 0; d < D / 8; ++d)
        for (int e = 0; e < 4; ++e)
          accumulator[m][d][e] *= rescale[2 * m + e / 2];

    // O += P V.
    for (int kk = 0; kk < kKeysPerTile / 16; ++kk) {
      uint32_t a[kBlocks][4];
      for (int m = 0; m < kBlocks; ++m)
        accumulatorFragment<T>(a[m], score[m], kk);
      for (int d = 0; d < D / 8; d += 2) {
        uint32_t b[4];
        loadRowMajorB<D>(b, valueTile, kk * 16, d);
        for (int m = 0; m < kBlocks; ++m) {
          mma<T>(accumulator[m][d], a[m], b[0], b[1]);
          mma<T>(accumulator[m][d + 1], a[m], b[2], b[3]);
        }
      }
    }
    __syncthreads(); // the next iteration's loads overwrite this buffer
  }

  // Computed here, not with q/k/v, to keep a register free in the loop.
  const int64_t outputStart = p.outputLayout.start(head, p.queryHeads);
  for (int r = 0; r < kRows; ++r) {
    const int m = r / 2, half = r % 2;
    const int row = firstRow + 16 * m + 8 * half;
    rowSum[r] = quadSum(rowSum[r]);
    if (Pass == ForwardPass::OutputAndLse && thread == 0 && row < p.querySeq)
      logSumExp[head * p.querySeq + row] =
          rowSum[r] > 0.0f ? (rowBase[r] + log2f(rowSum[r])) * kLn2
                           : -INFINITY;
    const float inverse = rowSum[r] > 0.0f ? 1.0f / rowSum[r] : 0.0f;
    const float(&values)[D / 8][4] = accumulator[m];
    if constexpr (!Statistics) {
      if (row >= p.querySeq)
        continue;
      T *out = output + outputStart +
               static_cast<int64_t>(row) * p.outputLayout.row + 2 * thread;
      for (int d = 0; d < D / 8; ++d)
        *reinterpret_cast<uint32_t *>(out + d * 8) =
            packPair<T>(values[d][2 * half] * inverse,
                        values[d][2 * half + 1] * inverse);
    } else {
      float dot = 0.0f;
      if (row < p.querySeq) {
        const T *gradient = outputGradient + outputStart +
                            static_cast<int64_t>(row) * p.outputLayout.row +
                            2 * thread;
        for (int d = 0; d < D / 8; ++d) {
          float2 g = unpackPair<T>(
              *reinterpret_cast<const uint32_t *>(gradient + d * 8));
          dot += g.x * values[d][2 * half] + g.y * values[d][2 * half + 1];
        }
      }
      dot = quadSum(dot) * inverse;
      if (row < p.querySeq && thread == 0) {
        int64_t index = head * p.querySeq + row;
        // An empty row (sum 0) gets +inf so that recomputed weights are 0.
        logSumExp[index] =
            rowSum[r] > 0.0f ? rowBase[r] + log2f(rowSum[r]) : INFINITY;
        rowDots[index] = dot;
      }
    }
  }
  if constexpr (Statistics) {
    constexpr int kVectorsPerRow = D / 4;
    float4 *accumulatorRows = reinterpret_cast<float4 *>(
        queryGradientAccumulator + (head * p.querySeq + queryStart) * D);
    int rows = min(Shape::kQueries, p.querySeq - queryStart);
    for (int i = threadIdx.x; i < rows * kVectorsPerRow; i += kThreads)
      accumulatorRows[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

//===--- Backward ----------------------------------------------------------===//

/// Queries per inner step: 64 for head dim 64; 32 for 128, which keeps the
/// register-resident dK and dV accumulators within the register file.
template <int D> constexpr int backwardQueries() { return D == 64 ? 64 : 32; }

template <int D> struct BackwardLayout {
  static constexpr int kQueries = backwardQueries<D>();
  static constexpr uint32_t kKeyBytes = kKeysPerTile * D * 2;
  static constexpr uint32_t kQueryBytes = kQueries * D * 2;
  static constexpr uint32_t kStatBytes = kQueries * 4;
  static constexpr uint32_t kKey = 0;
  static constexpr uint32_t kValue = kKey + kKeyBytes;
  static constexpr uint32_t kQuery = kValue + kKeyBytes;          // x2
  static constexpr uint32_t kGradient = kQuery + 2 * kQueryBytes; // x2
  static constexpr uint32_t kScoreGradient = kGradient + 2 * kQueryBytes;
  static constexpr uint32_t kLogSumExp =
      kScoreGradient + kKeysPerTile * kQueries * 2;           // x2
  static constexpr uint32_t kRowDot = kLogSumExp + 2 * kStatBytes; // x2
  static constexpr uint32_t kBytes = kRowDot + 2 * kStatBytes;
};

/// c += A B^T for a warp's 16 rows: A (16 x D) is `fragments` when Held,
/// else rows [firstRow, firstRow + 16) of the swizzled `aTile`; `bTile`
/// holds B row-major (one row of D per column of c).
template <typename T, int D, bool Held, int Blocks>
__device__ __forceinline__ void
multiplyByTransposed(float (&c)[Blocks][4],
                     const uint32_t (&fragments)[Held ? D / 16 : 1][4],
                     uint32_t aTile, int firstRow, uint32_t bTile) {
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t a[4];
    if constexpr (Held)
      for (int i = 0; i < 4; ++i)
        a[i] = fragments[kk][i];
    else
      loadRowFragment<D>(a, aTile, firstRow, kk);
    for (int n = 0; n < Blocks; n += 2) {
      uint32_t b[4];
      loadTransposedB<D>(b, bTile, n * 8, kk);
      mma<T>(c[n], a, b[0], b[1]);
      mma<T>(c[n + 1], a, b[2], b[3]);
    }
  }
}

/// c += A B for a warp's 16 rows: A is the f32 accumulator `source` (16 x
/// 8 Blocks, rounded to T), `bTile` holds B row-major (8 Blocks rows of D).
template <typename T, int D, int Blocks>
__device__ __forceinline__ void accumulateProduct(float (&c)[D / 8][4],
                                                  const float (&source)[Blocks][4],
                                                  uint32_t bTile) {
  for (int kk = 0; kk < Blocks / 2; ++kk) {
    uint32_t a[4];
    accumulatorFragment<T>(a, source, kk);
    for (int d = 0; d < D / 8; d += 2) {
      uint32_t b[4];
      loadRowMajorB<D>(b, bTile, kk * 16, d);
      mma<T>(c[d], a, b[0], b[1]);
      mma<T>(c[d + 1], a, b[2], b[3]);
    }
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    flashBackwardKernel(FlashParams p, const T *outputGradient,
                        const float *logSumExp, const float *rowDots,
                        float *queryGradientAccumulator, T *keyGradient,
                        T *valueGradient) {
  using Layout = BackwardLayout<D>;
  constexpr int kQueries = Layout::kQueries;
  // K and V fragments stay in registers when they fit (head dim 64).
  constexpr bool kHoldKeyValue = D == 64;
  extern __shared__ __align__(128) unsigned char shared[];
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  const uint32_t keyTile = base + Layout::kKey;
  const uint32_t valueTile = base + Layout::kValue;
  const uint32_t scoreGradientTile = base + Layout::kScoreGradient;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int group = lane / 4, thread = lane % 4;

  const int64_t keyHead = blockIdx.x; // batch * keyHeads + K/V head
  const int64_t firstQueryHead = (keyHead / p.keyHeads) * p.queryHeads +
                                 (keyHead % p.keyHeads) * p.groupSize;
  const int keyStart = blockIdx.y * kKeysPerTile; // causal: heavy tiles first
  const int64_t keyBase = p.keyLayout.start(keyHead, p.keyHeads);
  const int64_t valueBase = p.valueLayout.start(keyHead, p.keyHeads);
  const T *k = static_cast<const T *>(p.k) + keyBase;
  const T *v = static_cast<const T *>(p.v) + valueBase;
  const int offset = p.keySeq - p.querySeq;
  const int firstQueryTile =
      p.causal ? max(0, keyStart - offset) / kQueries : 0;
  const int tilesPerHead =
      (p.querySeq + kQueries - 1) / kQueries - firstQueryTile;
  const int steps = p.groupSize * tilesPerHead;

  loadTile<kKeysPerTile, D>(keyTile, k, p.keyLayout.row, keyStart, p.keySeq);
  loadTile<kKeysPerTile, D>(valueTile, v, p.valueLayout.row, keyStart,
                            p.keySeq);
  auto loadStep = [&](int step, int buffer) {
    int64_t head = firstQueryHead + step / tilesPerHead;
    int queryStart = (firstQueryTile + step % tilesPerHead) * kQueries;
    int64_t rows = head * p.querySeq;
    loadTile<kQueries, D>(base + Layout::kQuery + buffer * Layout::kQueryBytes,
                          static_cast<const T *>(p.q) +
                              p.queryLayout.start(head, p.queryHeads),
                          p.queryLayout.row, queryStart, p.querySeq);
    loadTile<kQueries, D>(base + Layout::kGradient +
                              buffer * Layout::kQueryBytes,
                          outputGradient +
                              p.outputLayout.start(head, p.queryHeads),
                          p.outputLayout.row, queryStart, p.querySeq);
    loadFloats<kQueries>(base + Layout::kLogSumExp + buffer * Layout::kStatBytes,
                         logSumExp + rows, queryStart, p.querySeq);
    loadFloats<kQueries>(base + Layout::kRowDot + buffer * Layout::kStatBytes,
                         rowDots + rows, queryStart, p.querySeq);
  };
  loadStep(0, 0);
  commitAsync();

  uint32_t keyFragments[kHoldKeyValue ? D / 16 : 1][4];
  uint32_t valueFragments[kHoldKeyValue ? D / 16 : 1][4];
  float keyAccumulator[D / 8][4] = {}, valueAccumulator[D / 8][4] = {};
  const int firstKey = keyStart + warp * 16 + group; // and + 8

  for (int step = 0; step < steps; ++step) {
    const int buffer = step & 1;
    if (step + 1 < steps) {
      loadStep(step + 1, buffer ^ 1);
      commitAsync();
      waitAsync<1>();
    } else {
      waitAsync<0>();
    }
    __syncthreads();
    if constexpr (kHoldKeyValue) {
      if (step == 0)
        for (int kk = 0; kk < D / 16; ++kk) {
          loadRowFragment<D>(keyFragments[kk], keyTile, warp * 16, kk);
          loadRowFragment<D>(valueFragments[kk], valueTile, warp * 16, kk);
        }
    }
    const int64_t head = firstQueryHead + step / tilesPerHead;
    const int queryStart = (firstQueryTile + step % tilesPerHead) * kQueries;
    const uint32_t queryTile =
        base + Layout::kQuery + buffer * Layout::kQueryBytes;
    const uint32_t gradientTile =
        base + Layout::kGradient + buffer * Layout::kQueryBytes;
    const float *rowLogSumExp = reinterpret_cast<const float *>(
        shared + Layout::kLogSumExp + buffer * Layout::kStatBytes);
    const float *rowDot = reinterpret_cast<const float *>(
        shared + Layout::kRowDot + buffer * Layout::kStatBytes);

    // S^T = K Q^T: this warp's 16 keys x the step's queries.
    float weight[kQueries / 8][4] = {};
    multiplyByTransposed<T, D, kHoldKeyValue>(weight, keyFragments, keyTile,
                                              warp * 16, queryTile);
    // P^T from the forward's log-sum-exp; hidden pairs get 0.
    const bool masked =
        keyStart + kKeysPerTile > p.keySeq ||
        (p.causal && keyStart + kKeysPerTile - 1 > queryStart + offset);
    for (int n = 0; n < kQueries / 8; ++n)
      for (int e = 0; e < 4; ++e) {
        int column = n * 8 + 2 * thread + (e & 1);
        float probability = fastExp2(
            fmaf(weight[n][e], p.scaleLog2, -rowLogSumExp[column]));
        if (masked) {
          int key = firstKey + (e / 2) * 8, query = queryStart + column;
          if (key >= p.keySeq || (p.causal && key > query + offset))
            probability = 0.0f;
        }
        weight[n][e] = probability;
      }

    // dV += P^T dO.
    accumulateProduct<T, D>(valueAccumulator, weight, gradientTile);

    // dP^T = V dO^T, then dS^T = scale P^T (dP^T - D).
    float scoreGradient[kQueries / 8][4] = {};
    multiplyByTransposed<T, D, kHoldKeyValue>(scoreGradient, valueFragments,
                                              valueTile, warp * 16,
                                              gradientTile);
    for (int n = 0; n < kQueries / 8; ++n)
      for (int e = 0; e < 4; ++e) {
        int column = n * 8 + 2 * thread + (e & 1);
        scoreGradient[n][e] =
            p.scale * weight[n][e] * (scoreGradient[n][e] - rowDot[column]);
      }

    // dK += dS^T Q.
    accumulateProduct<T, D>(keyAccumulator, scoreGradient, queryTile);

    // dS^T to shared: dQ = dS K sums over all four warps' keys.
    for (int n = 0; n < kQueries / 8; ++n)
      for (int r = 0; r < 2; ++r) {
        int row = warp * 16 + group + 8 * r, column = n * 8 + 2 * thread;
        uint32_t address = scoreGradientTile +
                           tileOffset<kQueries>(row, column / 8) +
                           (column % 8) * 2;
        asm volatile("st.shared.u32 [%0], %1;" ::"r"(address),
                     "r"(packPair<T>(scoreGradient[n][2 * r],
                                     scoreGradient[n][2 * r + 1])));
      }
    __syncthreads();

    // dQ += dS K: warp w takes 16 queries and a share of the columns.
    constexpr int kRowBlocks = kQueries / 16;
    constexpr int kColumns = D / (kWarps / kRowBlocks);
    const int rowBlock = warp % kRowBlocks;
    const int firstColumn = (warp / kRowBlocks) * kColumns;
    float queryGradient[kColumns / 8][4] = {};
    for (int kk = 0; kk < kKeysPerTile / 16; ++kk) {
      uint32_t a[4];
      // A = dS (queries x keys), stored transposed: ldmatrix.trans.
      loadMatricesTransposed(
          a, scoreGradientTile +
                 tileOffset<kQueries>(kk * 16 + lane % 8 + (lane / 16) * 8,
                                      rowBlock * 2 + (lane / 8) % 2));
      for (int d = 0; d < kColumns / 8; d += 2) {
        uint32_t b[4];
        loadRowMajorB<D>(b, keyTile, kk * 16, firstColumn / 8 + d);
        mma<T>(queryGradient[d], a, b[0], b[1]);
        mma<T>(queryGradient[d + 1], a, b[2], b[3]);
      }
    }
    for (int r = 0; r < 2; ++r) {
      int query = queryStart + rowBlock * 16 + group + 8 * r;
      if (query >= p.querySeq)
        continue;
      float *row = queryGradientAccumulator + (head * p.querySeq + query) * D +
                   firstColumn + 2 * thread;
      for (int d = 0; d < kColumns / 8; ++d)
        atomicAdd(reinterpret_cast<float2 *>(row + d * 8),
                  make_float2(queryGradient[d][2 * r],
                              queryGradient[d][2 * r + 1]));
    }
    __syncthreads(); // buffers and the dS tile are reused next step
  }

  for (int r = 0; r < 2; ++r) {
    int key = firstKey + 8 * r;
    if (key >= p.keySeq)
      continue;
    T *keyRow = keyGradient + keyBase +
                static_cast<int64_t>(key) * p.keyLayout.row + 2 * thread;
    T *valueRow = valueGradient + valueBase +
                  static_cast<int64_t>(key) * p.valueLayout.row + 2 * thread;
    for (int d = 0; d < D / 8; ++d) {
      *reinterpret_cast<uint32_t *>(keyRow + d * 8) = packPair<T>(
          keyAccumulator[d][2 * r], keyAccumulator[d][2 * r + 1]);
      *reinterpret_cast<uint32_t *>(valueRow + d * 8) = packPair<T>(
          valueAccumulator[d][2 * r], valueAccumulator[d][2 * r + 1]);
    }
  }
}

/// dQ's f32 accumulator ([B Hq T, D]) to the storage type in q's layout,
/// four values at a time.
template <typename T, int D>
__global__ void roundQueryGradient(FlashParams p, const float4 *accumulator,
                                   T *destination, int64_t vectors) {
  constexpr int kVectorsPerRow = D / 4;
  TESSERA_GRID_STRIDE_LOOP(i, vectors) {
    float4 value = accumulator[i];
    int64_t row = i / kVectorsPerRow;
    int64_t head = row / p.querySeq, query = row % p.querySeq;
    T *out = destination + p.queryLayout.start(head, p.queryHeads) +
             query * p.queryLayout.row + (i % kVectorsPerRow) * 4;
    *reinterpret_cast<uint2 *>(out) = make_uint2(
        packPair<T>(value.x, value.y), packPair<T>(value.z, value.w));
  }
}

/// The packed backward's first pass (FlashAttention-2's): per query row,
/// D = dO . O from the forward's output, the log-sum-exp in the kernels'
/// base 2 (+inf for a row that saw no key, so its weights recompute to 0),
/// and zeros in the row of the f32 dQ accumulator. One warp per row.
template <typename T, int D>
__global__ void prepareBackward(FlashParams p, const T *output,
                                const T *outputGradient,
                                const float *naturalLogSumExp,
                                float *logSumExp, float *rowDots,
                                float *queryGradientAccumulator,
                                int64_t rows) {
  constexpr int kPerLane = D / 32;
  const int lane = threadIdx.x % 32;
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x +
                      threadIdx.x) / 32;
       row < rows; row += static_cast<int64_t>(gridDim.x) * blockDim.x / 32) {
    int64_t head = row / p.querySeq, query = row % p.querySeq;
    int64_t at = p.outputLayout.start(head, p.queryHeads) +
                 query * p.outputLayout.row + lane * kPerLane;
    float dot = 0.0f;
    for (int e = 0; e < kPerLane; e += 2) {
      float2 o = unpackPair<T>(
          *reinterpret_cast<const uint32_t *>(output + at + e));
      float2 g = unpackPair<T>(
          *reinterpret_cast<const uint32_t *>(outputGradient + at + e));
      dot += o.x * g.x + o.y * g.y;
    }
    for (int width = 16; width > 0; width /= 2)
      dot += __shfl_xor_sync(0xffffffffu, dot, width);
    float *accumulatorRow = queryGradientAccumulator + row * D;
    for (int e = 0; e < kPerLane; ++e)
      accumulatorRow[lane * kPerLane + e] = 0.0f;
    if (lane == 0) {
      float lse = naturalLogSumExp[row];
      logSumExp[row] = lse == -INFINITY ? INFINITY : lse * kLog2e;
      rowDots[row] = dot;
    }
  }
}

//===--- Host side ---------------------------------------------------------===//

bool aligned(const void *data) {
  return reinterpret_cast<uintptr_t>(data) % 16 == 0;
}

/// The checks every flash call shares: storage type, head dim, grid limits.
bool withinLimits(int dtype, int64_t headDim, int64_t batch, int64_t heads,
                  int64_t querySeq, int64_t keySeq) {
  if (dtype != TESSERA_BF16 && dtype != TESSERA_F16)
    return false;
  if (headDim != 64 && headDim != 128)
    return false;
  // Grid y counts 64-row tiles (at most 65535); heads go in grid x.
  constexpr int64_t kMaxSeq = int64_t{65535} * kKeysPerTile;
  return querySeq >= 1 && keySeq >= 1 && querySeq <= kMaxSeq &&
         keySeq <= kMaxSeq && batch >= 1 && heads >= 1 &&
         batch * heads <= INT32_MAX;
}

void describeProblem(FlashParams &p, int64_t queryHeads, int64_t keyHeads,
                     int64_t querySeq, int64_t keySeq, bool causal,
                     double scale) {
  p.queryHeads = queryHeads;
  p.keyHeads = keyHeads;
  p.querySeq = static_cast<int>(querySeq);
  p.keySeq = static_cast<int>(keySeq);
  p.groupSize = static_cast<int>(queryHeads / keyHeads);
  p.causal = causal;
  p.scale = static_cast<float>(scale);
  p.scaleLog2 = static_cast<float>(scale) * kLog2e;
}

/// The flash kernels' parameters for [B, H, T, D] operands, or false when
/// the call is outside what they cover (the caller then runs the general
/// kernels).
bool describe(const tessera_tensor &q, const tessera_tensor &k,
              const tessera_tensor &v, bool hasMask, double dropout,
              bool causal, double scale,
              std::initializer_list<const tessera_tensor *> others,
              FlashParams &p) {
  if (hasMask || dropout != 0.0)
    return false;
  for (const tessera_tensor *tensor : {&q, &k, &v})
    if (tensor->dtype != q.dtype || !aligned(tensor->data))
      return false;
  for (const tessera_tensor *tensor : others)
    if (tensor->dtype != q.dtype || !aligned(tensor->data))
      return false;
  int64_t headDim = q.shape[3];
  if (v.shape[3] != headDim ||
      !withinLimits(q.dtype, headDim, q.shape[0], q.shape[1], q.shape[2],
                    k.shape[2]))
    return false;
  p.q = q.data;
  p.k = k.data;
  p.v = v.data;
  p.queryLayout = contiguousHeads(q.shape[1], q.shape[2], headDim);
  p.keyLayout = contiguousHeads(k.shape[1], k.shape[2], headDim);
  p.valueLayout = p.keyLayout;
  p.outputLayout = p.queryLayout;
  describeProblem(p, q.shape[1], k.shape[1], q.shape[2], k.shape[2], causal,
                  scale);
  return true;
}

/// The same for the heads of a packed qkv [B, T, (Hq + 2 Hkv) D] and
/// y-shaped operands [B, T, Hq D] (shapes already checked).
bool describePacked(const tessera_tensor &qkv, int64_t queryHeads,
                    int64_t keyHeads, bool causal, double scale,
                    std::initializer_list<const tessera_tensor *> others,
                    FlashParams &p) {
  int64_t batch = qkv.shape[0], seq = qkv.shape[1], width = qkv.shape[2];
  int64_t headDim = width / (queryHeads + 2 * keyHeads);
  if (!aligned(qkv.data) || !withinLimits(qkv.dtype, headDim, batch,
                                          queryHeads, seq, seq))
    return false;
  for (const tessera_tensor *tensor : others)
    if (tensor->dtype != qkv.dtype || !aligned(tensor->data))
      return false;
  // Rows of 16-byte chunks: the widths are multiples of the head dim.
  const char *base = static_cast<const char *>(qkv.data);
  size_t element = qkv.dtype == TESSERA_F32 ? 4 : 2;
  p.q = base;
  p.k = base + queryHeads * headDim * element;
  p.v = base + (queryHeads + keyHeads) * headDim * element;
  if (width > INT32_MAX)
    return false;
  p.queryLayout = {seq * width, headDim, static_cast<int>(width)};
  p.keyLayout = p.queryLayout;
  p.valueLayout = p.queryLayout;
  p.outputLayout = {seq * queryHeads * headDim, headDim,
                    static_cast<int>(queryHeads * headDim)};
  describeProblem(p, queryHeads, keyHeads, seq, seq, causal, scale);
  return true;
}

unsigned tilesOf(int rows, int tile) {
  return static_cast<unsigned>((rows + tile - 1) / tile);
}

template <typename Kernel>
void allowSharedBytes(Kernel kernel, uint32_t bytes) {
  cudaCheck(cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(bytes)));
}

template <typename T, int D, ForwardPass Pass>
void launchForward(const FlashParams &p, int64_t batch, T *output,
                   const T *outputGradient, float *logSumExp, float *rowDots,
                   float *queryGradientAccumulator, cudaStream_t stream) {
  using Shape = ForwardShape<D>;
  auto kernel = flashForwardKernel<T, D, Pass>;
  allowSharedBytes(kernel, Shape::kBytes);
  dim3 grid(static_cast<unsigned>(batch * p.queryHeads),
            tilesOf(p.querySeq, Shape::kQueries));
  kernel<<<grid, kThreads, Shape::kBytes, stream>>>(
      p, output, outputGradient, logSumExp, rowDots, queryGradientAccumulator);
  cudaCheckLaunch();
}

/// The backward. With the forward's `output` and natural-log `lse` it
/// derives the statistics from them; without, it reruns the forward.
template <typename T, int D>
void runBackward(const FlashParams &p, int64_t batch, const void *output,
                 const float *lse, const void *dy, void *dq, void *dk,
                 void *dv, cudaStream_t stream) {
  int64_t rows = batch * p.queryHeads * p.querySeq;
  size_t statBytes = (static_cast<size_t>(rows) * sizeof(float) + 255) / 256 *
                     256;
  char *scratch = static_cast<char *>(streamScratch(
      stream, 2 * statBytes + static_cast<size_t>(rows) * D * sizeof(float),
      kScratchSlot));
  float *logSumExp = reinterpret_cast<float *>(scratch);
  float *rowDots = reinterpret_cast<float *>(scratch + statBytes);
  float *accumulator = reinterpret_cast<float *>(scratch + 2 * statBytes);
  const T *outputGradient = static_cast<const T *>(dy);
  if (output) {
    prepareBackward<T, D><<<gridFor(rows * 32), kThreadsPerBlock, 0, stream>>>(
        p, static_cast<const T *>(output), outputGradient, lse, logSumExp,
        rowDots, accumulator, rows);
    cudaCheckLaunch();
  } else {
    launchForward<T, D, ForwardPass::Statistics>(p, batch, nullptr,
                                                 outputGradient, logSumExp,
                                                 rowDots, accumulator, stream);
  }

  auto kernel = flashBackwardKernel<T, D>;
  allowSharedBytes(kernel, BackwardLayout<D>::kBytes);
  dim3 grid(static_cast<unsigned>(batch * p.keyHeads),
            tilesOf(p.keySeq, kKeysPerTile));
  kernel<<<grid, kThreads, BackwardLayout<D>::kBytes, stream>>>(
      p, outputGradient, logSumExp, rowDots, accumulator, static_cast<T *>(dk),
      static_cast<T *>(dv));
  cudaCheckLaunch();

  int64_t vectors = rows * D / 4;
  roundQueryGradient<T, D><<<gridFor(vectors), kThreadsPerBlock, 0, stream>>>(
      p, reinterpret_cast<const float4 *>(accumulator), static_cast<T *>(dq),
      vectors);
  cudaCheckLaunch();
}

/// Runs Action<T, D>::run(arguments...) for the call's storage type and
/// head dim (both already checked by describe).
template <template <typename, int> class Action, typename... Arguments>
void dispatch(int dtype, int64_t headDim, Arguments &&...arguments) {
  if (dtype == TESSERA_BF16) {
    if (headDim == 64)
      Action<__nv_bfloat16, 64>::run(arguments...);
    else
      Action<__nv_bfloat16, 128>::run(arguments...);
  } else {
    if (headDim == 64)
      Action<__half, 64>::run(arguments...);
    else
      Action<__half, 128>::run(arguments...);
  }
}

template <typename T, int D> struct Forward {
  static void run(const FlashParams &p, int64_t batch, void *y, float *lse,
                  cudaStream_t stream) {
    // Head dim 128 has no registers left for the log-sum-exp (ptxas
    // spills): the entries below send those calls to the general kernels.
    if constexpr (D == 64)
      if (lse) {
        launchForward<T, D, ForwardPass::OutputAndLse>(
            p, batch, static_cast<T *>(y), nullptr, lse, nullptr, nullptr,
            stream);
        return;
      }
      launchForward<T, D, ForwardPass::Output>(p, batch, static_cast<T *>(y),
                                               nullptr, nullptr, nullptr,
                                               nullptr, stream);
  }
};

template <typename T, int D> struct Backward {
  static void run(const FlashParams &p, int64_t batch, const void *y,
                  const float *lse, const void *dy, void *dq, void *dk,
                  void *dv, cudaStream_t stream) {
    runBackward<T, D>(p, batch, y, lse, dy, dq, dk, dv, stream);
  }
};

} // namespace

bool flashAttentionForward(const tessera_tensor &q, const tessera_tensor &k,
                           const tessera_tensor &v, bool hasMask,
                           double dropout, tessera_tensor &y, float *lse,
                           bool causal, double scale, cudaStream_t stream) {
  FlashParams p{};
  if ((lse && q.shape[3] != 64) ||
      !describe(q, k, v, hasMask, dropout, causal, scale, {&y}, p))
    return false;
  dispatch<Forward>(q.dtype, q.shape[3], p, q.shape[0], y.data, lse, stream);
  return true;
}

bool flashAttentionBackward(const tessera_tensor &q, const tessera_tensor &k,
                            const tessera_tensor &v, bool hasMask,
                            double dropout, const tessera_tensor &dy,
                            tessera_tensor &dq, tessera_tensor &dk,
                            tessera_tensor &dv, bool causal, double scale,
                            cudaStream_t stream) {
  FlashParams p{};
  if (!describe(q, k, v, hasMask, dropout, causal, scale, {&dy, &dq, &dk, &dv},
                p))
    return false;
  dispatch<Backward>(q.dtype, q.shape[3], p, q.shape[0], nullptr, nullptr,
                     dy.data, dq.data, dk.data, dv.data, stream);
  return true;
}

bool flashPackedAttentionForward(const tessera_tensor &qkv,
                                 int64_t queryHeads, int64_t keyHeads,
                                 tessera_tensor &y, tessera_tensor &lse,
                                 bool causal, double scale,
                                 cudaStream_t stream) {
  FlashParams p{};
  if (y.shape[2] != 64 * queryHeads ||
      !describePacked(qkv, queryHeads, keyHeads, causal, scale, {&y}, p))
    return false;
  dispatch<Forward>(qkv.dtype, y.shape[2] / queryHeads, p, qkv.shape[0],
                    y.data, static_cast<float *>(lse.data), stream);
  return true;
}

bool flashPackedAttentionBackward(const tessera_tensor &qkv,
                                  int64_t queryHeads, int64_t keyHeads,
                                  const tessera_tensor &y,
                                  const tessera_tensor &lse,
                                  const tessera_tensor &dy,
                                  tessera_tensor &dqkv, bool causal,
                                  double scale, cudaStream_t stream) {
  FlashParams p{};
  if (!describePacked(qkv, queryHeads, keyHeads, causal, scale,
                      {&y, &dy, &dqkv}, p))
    return false;
  // dq, dk, dv land in dqkv at q's, k's and v's places.
  const char *source = static_cast<const char *>(qkv.data);
  char *gradient = static_cast<char *>(dqkv.data);
  auto at = [&](const void *operand) {
    return gradient + (static_cast<const char *>(operand) - source);
  };
  dispatch<Backward>(qkv.dtype, y.shape[2] / queryHeads, p, qkv.shape[0],
                     y.data, static_cast<const float *>(lse.data), dy.data,
                     at(p.q), at(p.k), at(p.v), stream);
  return true;
}

} // namespace tessera::cuda
