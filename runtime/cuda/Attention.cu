//===- Attention.cu - Scaled dot-product attention, forward and backward --===//
//
// The correct-first version: one warp per query row (b, h, i). The warp
// holds q_i and the output accumulator in registers (head dims up to 256,
// eight values per lane), walks the visible keys, and computes each score
// as a warp-reduced dot product. The forward is FlashAttention's online
// softmax: a running max m and sum l, the accumulator rescaled by
// exp(m_old - m_new) when the max grows, so no [Sq, Skv] matrix exists and
// K/V are streamed once per query row (from L2: heads share them).
// Causal rows stop at their last visible key (the "causal skip"); grouped-
// query heads read K/V head h / (Hq / Hkv); the additive mask is read
// through broadcast strides; dropout multiplies the weight by the shared
// generator's keep factor at index ((b TESSERA_ATTENTION_DROPOUT_HEADS + h)
// Sq + i) Skv + j, so masks match runtime/cpu/Attention.cpp bit for bit.
//
// The backward is two kernels, so that every gradient element is one
// thread's sum in a fixed order (atomics would add the query rows' terms in
// whatever order the warps ran, and repeated steps would differ in the last
// bits). The query-major kernel, one warp per query row as the forward,
// recomputes the probabilities in three passes over the keys: the row's
// max and sum; per key p_j, dp_j = keep_j (dy_i . v_j) and the row's
// D = sum_j p_j dp_j (f64); then ds_j = scale p_j (dp_j - D), accumulating
// dq_i in registers. It leaves (max, 1 / sum, D) per row in scratch. The
// key-major kernel, one warp per key row (b, kv head, j) holding k_j and v_j
// in registers, walks every query head of the K/V head's group and every
// query row that sees key j, in ascending order, recomputes s, p and dp
// from those statistics with the same float operations (so p is the first
// kernel's p bit for bit), and accumulates dv_j += p keep dy_i and
// dk_j += ds q_i in registers; each is stored once, rounded into its
// storage type, so no f32 scratch and no memset. The cost is two more dot
// products per (query, key) than the one-kernel version, no atomics.
//
// The fast paths are cuDNN's fused engines (CudnnAttention.cpp: 16-bit, no
// mask, no dropout), then FlashAttention.cu (tiled, tensor cores, a KV-major
// backward): both entry points try them first, and these kernels run every
// call outside its limits (f32, an additive mask, dropout, head dims other
// than 64 and 128).
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "AttentionKernels.h"
#include "OperandChecks.h"

using namespace tessera::cuda;
using tessera::cpu::elementCount;
using tessera::cpu::formatShape;
using tessera::cpu::requireShape;
using tessera::cpu::requireTensor;
using tessera::cpu::shapeOf;

namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kValuesPerLane = 8; // head dims up to 8 * 32 = 256
constexpr int kMaxHeadDim = kValuesPerLane * 32;

struct AttentionParams {
  const void *q, *k, *v, *mask;
  int qType, kType, vType, maskType;
  int64_t batch, queryHeads, keyHeads, querySeq, keySeq, headDim, valueDim;
  int64_t maskStrides[4];
  bool causal;
  /// A sliding window's length (0: none; with causal): query i sees keys
  /// i + keySeq - querySeq - window < j <= i + keySeq - querySeq.
  int64_t window;
  /// Gemma-2's logit softcapping (0: none): a score s becomes
  /// softcap * tanh(s / softcap) before the mask is added.
  float softcap;
  float scale;
  bool dropout;
  float keptScale;
  DropoutMask dropoutMask;
};

struct RowPosition {
  /// The row sees keys [first, visible).
  int64_t b, h, i, row, keyHeadRow, first, visible;
};

__device__ RowPosition rowPosition(const AttentionParams &p, int64_t row) {
  RowPosition r;
  r.row = row;
  r.i = row % p.querySeq;
  r.h = (row / p.querySeq) % p.queryHeads;
  r.b = row / (p.querySeq * p.queryHeads);
  r.keyHeadRow =
      (r.b * p.keyHeads + r.h / (p.queryHeads / p.keyHeads)) * p.keySeq;
  r.visible = p.causal ? min(p.keySeq, r.i + p.keySeq - p.querySeq + 1)
                       : p.keySeq;
  r.first = p.window ? max(int64_t{0}, r.visible - p.window) : 0;
  return r;
}

/// Loads values [0, dim) of row `start` of `data`: lane l holds l + 32 t.
__device__ void loadRow(const void *data, int dtype, int64_t start, int64_t dim,
                        float (&values)[kValuesPerLane]) {
  int lane = threadIdx.x % 32;
  for (int t = 0; t < kValuesPerLane; ++t) {
    int64_t d = lane + 32 * t;
    values[t] = d < dim ? loadFloat(data, dtype, start + d) : 0.0f;
  }
}

/// The warp-reduced dot product of lane-held `values` with row `start`.
__device__ float dotRow(const float (&values)[kValuesPerLane], const void *data,
                        int dtype, int64_t start, int64_t dim) {
  int lane = threadIdx.x % 32;
  float sum = 0.0f;
  for (int t = 0; t < kValuesPerLane; ++t) {
    int64_t d = lane + 32 * t;
    if (d < dim)
      sum = fmaf(values[t], loadFloat(data, dtype, start + d), sum);
  }
  return warpSum(sum);
}

/// dotRow of two lane-held rows: the same operations, so the same bits as
/// dotRow(a, <b's row>) and dotRow(b, <a's row>).
__device__ float dotRegisters(const float (&a)[kValuesPerLane],
                              const float (&b)[kValuesPerLane], int64_t dim) {
  int lane = threadIdx.x % 32;
  float sum = 0.0f;
  for (int t = 0; t < kValuesPerLane; ++t) {
    int64_t d = lane + 32 * t;
    if (d < dim)
      sum = fmaf(a[t], b[t], sum);
  }
  return warpSum(sum);
}

/// The score of (row r, key j) from the warp-reduced q_i . k_j (dotRow in
/// the forward and the query-major backward, dotRegisters in the key-major
/// one: the same products and sums, so the same bits).
__device__ float scoreFromDot(const AttentionParams &p, const RowPosition &r,
                              float dot, int64_t j) {
  float score = p.scale * dot;
  if (p.softcap != 0.0f)
    score = p.softcap * tanhf(score / p.softcap);
  if (p.mask)
    score += loadFloat(p.mask, p.maskType,
                       r.b * p.maskStrides[0] + r.h * p.maskStrides[1] +
                           r.i * p.maskStrides[2] + j * p.maskStrides[3]);
  return score;
}

/// d score / d (scale q.k): 1 without softcapping, else 1 - tanh^2 of the
/// capped argument (the mask is added after the cap and does not enter).
__device__ float capSlope(const AttentionParams &p, float dot) {
  if (p.softcap == 0.0f)
    return 1.0f;
  float t = tanhf(p.scale * dot / p.softcap);
  return 1.0f - t * t;
}

__device__ float scoreOf(const AttentionParams &p, const RowPosition &r,
                         const float (&q)[kValuesPerLane], int64_t j) {
  return scoreFromDot(
      p, r,
      dotRow(q, p.k, p.kType, (r.keyHeadRow + j) * p.headDim, p.headDim), j);
}

__device__ float dropoutFactor(const AttentionParams &p, const RowPosition &r,
                               int64_t j) {
  if (!p.dropout)
    return 1.0f;
  uint64_t index = static_cast<uint64_t>(
      ((r.b * TESSERA_ATTENTION_DROPOUT_HEADS + r.h) * p.querySeq + r.i) *
          p.keySeq +
      j);
  return p.dropoutMask.keeps(index) ? p.keptScale : 0.0f;
}

/// The row's softmax max and sum of exp(s - max) (sum 0: all masked).
__device__ void rowNormalizer(const AttentionParams &p, const RowPosition &r,
                              const float (&q)[kValuesPerLane], float &maximum,
                              float &sum) {
  maximum = -INFINITY;
  sum = 0.0f;
  for (int64_t j = r.first; j < r.visible; ++j) {
    float score = scoreOf(p, r, q, j);
    if (score == -INFINITY)
      continue;
    if (score > maximum) {
      sum = sum * expf(maximum - score) + 1.0f;
      maximum = score;
    } else {
      sum += expf(score - maximum);
    }
  }
}

/// `lse` (may be null) gets each row's natural-log log-sum-exp, -inf for a
/// row that sees no key.
__global__ void attentionForwardKernel(AttentionParams p, void *y, int yType,
                                       float *lse) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock +
                threadIdx.x / 32;
  if (row >= p.batch * p.queryHeads * p.querySeq)
    return;
  RowPosition r = rowPosition(p, row);
  float q[kValuesPerLane], accumulator[kValuesPerLane] = {};
  loadRow(p.q, p.qType, row * p.headDim, p.headDim, q);
  float maximum = -INFINITY, sum = 0.0f;
  for (int64_t j = r.first; j < r.visible; ++j) {
    float score = scoreOf(p, r, q, j);
    if (score == -INFINITY)
      continue;
    float weight;
    if (score > maximum) {
      float rescale = expf(maximum - score);
      sum *= rescale;
      for (int t = 0; t < kValuesPerLane; ++t)
        accumulator[t] *= rescale;
      maximum = score;
      weight = 1.0f;
    } else {
      weight = expf(score - maximum);
    }
    sum += weight;
    float dropped = weight * dropoutFactor(p, r, j);
    if (dropped == 0.0f)
      continue;
    float vRow[kValuesPerLane];
    loadRow(p.v, p.vType, (r.keyHeadRow + j) * p.valueDim, p.valueDim, vRow);
    for (int t = 0; t < kValuesPerLane; ++t)
      accumulator[t] += dropped * vRow[t];
  }
  float reciprocal = sum > 0.0f ? 1.0f / sum : 0.0f;
  int lane = threadIdx.x % 32;
  if (lse && lane == 0)
    lse[row] = sum > 0.0f ? maximum + logf(sum) : -INFINITY;
  for (int t = 0; t < kValuesPerLane; ++t) {
    int64_t d = lane + 32 * t;
    if (d < p.valueDim)
      storeFloat(y, yType, row * p.valueDim + d, accumulator[t] * reciprocal);
  }
}

/// What the key-major kernel needs of a query row's softmax: p_j =
/// exp(s_j - maximum) * reciprocal (reciprocal 0: the row sees no key) and
/// D = sum_j p_j dp_j.
struct RowSoftmax {
  float maximum, reciprocal, correction;
};

/// dq, and each row's RowSoftmax for attentionKeyGradientKernel.
__global__ void attentionQueryGradientKernel(AttentionParams p, const void *dy,
                                             int dyType, void *dq, int dqType,
                                             RowSoftmax *softmax) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock +
                threadIdx.x / 32;
  if (row >= p.batch * p.queryHeads * p.querySeq)
    return;
  int lane = threadIdx.x % 32;
  RowPosition r = rowPosition(p, row);
  float q[kValuesPerLane], upstream[kValuesPerLane];
  float queryGradient[kValuesPerLane] = {};
  loadRow(p.q, p.qType, row * p.headDim, p.headDim, q);
  loadRow(dy, dyType, row * p.valueDim, p.valueDim, upstream);
  float maximum, sum;
  rowNormalizer(p, r, q, maximum, sum);
  float reciprocal = 0.0f, correction = 0.0f;
  if (sum > 0.0f) {
    reciprocal = 1.0f / sum;
    // Pass 2: sum_j p_j dp_j.
    double weightedSum = 0.0;
    for (int64_t j = r.first; j < r.visible; ++j) {
      float score = scoreOf(p, r, q, j);
      if (score == -INFINITY)
        continue;
      float probability = expf(score - maximum) * reciprocal;
      float factor = dropoutFactor(p, r, j);
      float dWeight = dotRow(upstream, p.v, p.vType,
                             (r.keyHeadRow + j) * p.valueDim, p.valueDim);
      weightedSum += static_cast<double>(probability) * (dWeight * factor);
    }
    correction = static_cast<float>(weightedSum);
    // Pass 3: ds_j and dq_i.
    for (int64_t j = r.first; j < r.visible; ++j) {
      float dot =
          dotRow(q, p.k, p.kType, (r.keyHeadRow + j) * p.headDim, p.headDim);
      float score = scoreFromDot(p, r, dot, j);
      if (score == -INFINITY)
        continue;
      float probability = expf(score - maximum) * reciprocal;
      float factor = dropoutFactor(p, r, j);
      float dWeight = dotRow(upstream, p.v, p.vType,
                             (r.keyHeadRow + j) * p.valueDim, p.valueDim);
      float dScore = p.scale * capSlope(p, dot) * probability *
                     (dWeight * factor - correction);
      if (dScore == 0.0f)
        continue;
      int64_t keyStart = (r.keyHeadRow + j) * p.headDim;
      for (int t = 0; t < kValuesPerLane; ++t) {
        int64_t d = lane + 32 * t;
        if (d < p.headDim)
          queryGradient[t] += dScore * loadFloat(p.k, p.kType, keyStart + d);
      }
    }
  }
  if (lane == 0)
    softmax[row] = {maximum, reciprocal, correction};
  for (int t = 0; t < kValuesPerLane; ++t) {
    int64_t d = lane + 32 * t;
    if (d < p.headDim)
      storeFloat(dq, dqType, row * p.headDim + d, queryGradient[t]);
  }
}

/// dk and dv: one warp per key row (b, kv head, j), summing over the query
/// heads of its group and the query rows that see key j, both ascending.
__global__ void attentionKeyGradientKernel(AttentionParams p, const void *dy,
                                           int dyType,
                                           const RowSoftmax *softmax, void *dk,
                                           int dkType, void *dv, int dvType) {
  int64_t keyRow = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock +
                   threadIdx.x / 32;
  if (keyRow >= p.batch * p.keyHeads * p.keySeq)
    return;
  int lane = threadIdx.x % 32;
  int64_t j = keyRow % p.keySeq;
  int64_t keyHead = (keyRow / p.keySeq) % p.keyHeads;
  int64_t b = keyRow / (p.keySeq * p.keyHeads);
  int64_t group = p.queryHeads / p.keyHeads;
  float key[kValuesPerLane], value[kValuesPerLane];
  float keyGradient[kValuesPerLane] = {}, valueGradient[kValuesPerLane] = {};
  loadRow(p.k, p.kType, keyRow * p.headDim, p.headDim, key);
  loadRow(p.v, p.vType, keyRow * p.valueDim, p.valueDim, value);
  // Row i sees key j when j < visible(i) = i + keySeq - querySeq + 1 and,
  // with a window, j >= visible(i) - window.
  int64_t offset = p.keySeq - p.querySeq;
  int64_t firstQuery = p.causal ? max(int64_t{0}, j - offset) : 0;
  int64_t endQuery =
      p.window ? min(p.querySeq, j - offset + p.window) : p.querySeq;
  RowPosition r{}; // first and visible are unused here
  r.b = b;
  r.keyHeadRow = keyRow - j;
  for (r.h = keyHead * group; r.h < (keyHead + 1) * group; ++r.h) {
    for (r.i = firstQuery; r.i < endQuery; ++r.i) {
      r.row = (b * p.queryHeads + r.h) * p.querySeq + r.i;
      RowSoftmax s = softmax[r.row];
      if (s.reciprocal == 0.0f)
        continue; // the row sees no key
      float query[kValuesPerLane], upstream[kValuesPerLane];
      loadRow(p.q, p.qType, r.row * p.headDim, p.headDim, query);
      loadRow(dy, dyType, r.row * p.valueDim, p.valueDim, upstream);
      float dot = dotRegisters(query, key, p.headDim);
      float score = scoreFromDot(p, r, dot, j);
      if (score == -INFINITY)
        continue;
      float probability = expf(score - s.maximum) * s.reciprocal;
      float factor = dropoutFactor(p, r, j);
      float weight = probability * factor;
      if (weight != 0.0f)
        for (int t = 0; t < kValuesPerLane; ++t)
          valueGradient[t] += weight * upstream[t];
      float dWeight = dotRegisters(upstream, value, p.valueDim);
      float dScore = p.scale * capSlope(p, dot) * probability *
                     (dWeight * factor - s.correction);
      if (dScore == 0.0f)
        continue;
      for (int t = 0; t < kValuesPerLane; ++t)
        keyGradient[t] += dScore * query[t];
    }
  }
  for (int t = 0; t < kValuesPerLane; ++t) {
    int64_t d = lane + 32 * t;
    if (d < p.headDim)
      storeFloat(dk, dkType, keyRow * p.headDim + d, keyGradient[t]);
    if (d < p.valueDim)
      storeFloat(dv, dvType, keyRow * p.valueDim + d, valueGradient[t]);
  }
}

AttentionParams checkProblem(const tessera_tensor *q, const tessera_tensor *k,
                             const tessera_tensor *v,
                             const tessera_tensor *mask, int32_t causal,
                             int64_t window, double softcap, double scale,
                             double dropout, uint64_t seed) {
  const tessera_tensor &query = requireTensor(q, "q");
  const tessera_tensor &key = requireTensor(k, "k");
  const tessera_tensor &value = requireTensor(v, "v");
  if (query.rank != 4 || key.rank != 4 || value.rank != 4)
    fail("q, k and v need rank 4 ([batch, heads, seq, head_dim]), got q " +
         formatShape(shapeOf(query)) + ", k " + formatShape(shapeOf(key)) +
         ", v " + formatShape(shapeOf(value)));
  requireKernelFloat(query, "q");
  requireKernelFloat(key, "k");
  requireKernelFloat(value, "v");
  AttentionParams p{};
  p.q = query.data;
  p.k = key.data;
  p.v = value.data;
  p.qType = query.dtype;
  p.kType = key.dtype;
  p.vType = value.dtype;
  p.batch = query.shape[0];
  p.queryHeads = query.shape[1];
  p.querySeq = query.shape[2];
  p.headDim = query.shape[3];
  p.keyHeads = key.shape[1];
  p.keySeq = key.shape[2];
  p.valueDim = value.shape[3];
  requireShape(key, {p.batch, p.keyHeads, p.keySeq, p.headDim}, "k");
  requireShape(value, {p.batch, p.keyHeads, p.keySeq, p.valueDim}, "v");
  if (p.keyHeads < 1 || p.queryHeads % p.keyHeads != 0)
    fail("q's " + std::to_string(p.queryHeads) +
         " heads are not a multiple of k/v's " + std::to_string(p.keyHeads));
  if (causal && p.querySeq > p.keySeq)
    fail("causal attention needs q_seq (" + std::to_string(p.querySeq) +
         ") <= kv_seq (" + std::to_string(p.keySeq) + ")");
  if (p.headDim > kMaxHeadDim || p.valueDim > kMaxHeadDim)
    fail("head dims above " + std::to_string(kMaxHeadDim) +
         " are not supported on the GPU yet (q " + formatShape(shapeOf(query)) +
         ", v " + formatShape(shapeOf(value)) + ")");
  tessera::cpu::requireAttentionOptions(causal != 0, window, softcap, scale,
                                        dropout, p.queryHeads);
  p.causal = causal != 0;
  p.window = window;
  p.softcap = static_cast<float>(softcap);
  p.scale = static_cast<float>(scale);
  p.dropout = dropout != 0.0;
  p.keptScale = static_cast<float>(1.0 / (1.0 - dropout));
  p.dropoutMask = DropoutMask(seed, dropout);
  if (mask) {
    const tessera_tensor &maskTensor = requireTensor(mask, "mask");
    requireKernelFloat(maskTensor, "mask");
    Shape strides = tessera::cpu::broadcastStrides(
        maskTensor, "mask", {p.batch, p.queryHeads, p.querySeq, p.keySeq});
    for (int dim = 0; dim < 4; ++dim)
      p.maskStrides[dim] = strides[dim];
    p.mask = maskTensor.data;
    p.maskType = maskTensor.dtype;
  }
  return p;
}

constexpr int kSoftmaxSlot = 2200; // streamScratch slot of the RowSoftmax

/// Blocks of kWarpsPerBlock warps for one warp per row.
unsigned warpRowGrid(int64_t rows) {
  int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > INT32_MAX)
    fail("too many rows (" + std::to_string(rows) + ")");
  return static_cast<unsigned>(blocks);
}

unsigned attentionGrid(const AttentionParams &p) {
  return warpRowGrid(p.batch * p.queryHeads * p.querySeq);
}

} // namespace

void tessera::cuda::attentionForward(const tessera_tensor *q,
                                     const tessera_tensor *k,
                                     const tessera_tensor *v,
                                     const tessera_tensor *mask,
                                     tessera_tensor *y, float *lse,
                                     bool causal, int64_t window,
                                     double softcap, double scale,
                                     double dropout, uint64_t seed,
                                     cudaStream_t stream) {
  AttentionParams p = checkProblem(q, k, v, mask, causal, window, softcap,
                                   scale, dropout, seed);
  tessera_tensor &output = requireTensor(y, "y");
  requireShape(output, {p.batch, p.queryHeads, p.querySeq, p.valueDim}, "y");
  requireKernelFloat(output, "y");
  if (elementCount(output) == 0)
    return;
  if (!mask && dropout == 0.0 &&
      cudnnAttentionForward(*q, *k, *v, output, lse, p.causal, window, softcap,
                            scale, stream))
    return;
  // The flash kernels have no window or softcap: the general ones skip the
  // window's outside and cap each score.
  if (!window && softcap == 0.0 && flashAttentionForward(*q, *k, *v, mask != nullptr, dropout,
                                       output, lse, p.causal, scale, stream))
    return;
  attentionForwardKernel<<<attentionGrid(p), kWarpsPerBlock * 32, 0,
                           stream>>>(p, output.data, output.dtype, lse);
  cudaCheckLaunch();
}

namespace {

/// tessera_cuda_attention_grad's work, with the sliding window of
/// attentionForward.
void attentionBackward(const tessera_tensor *q, const tessera_tensor *k,
                       const tessera_tensor *v, const tessera_tensor *mask,
                       const tessera_tensor *dy, tessera_tensor *dq,
                       tessera_tensor *dk, tessera_tensor *dv, bool causal,
                       int64_t window, double softcap, double scale,
                       double dropout, uint64_t seed, cudaStream_t stream) {
  AttentionParams p = checkProblem(q, k, v, mask, causal, window, softcap,
                                   scale, dropout, seed);
  const tessera_tensor &upstream = requireTensor(dy, "dy");
  requireShape(upstream, {p.batch, p.queryHeads, p.querySeq, p.valueDim},
               "dy");
  tessera_tensor &queryGradient = requireTensor(dq, "dq");
  tessera_tensor &keyGradient = requireTensor(dk, "dk");
  tessera_tensor &valueGradient = requireTensor(dv, "dv");
  requireShape(queryGradient, shapeOf(*q), "dq");
  requireShape(keyGradient, shapeOf(*k), "dk");
  requireShape(valueGradient, shapeOf(*v), "dv");
  requireKernelFloat(upstream, "dy");
  requireKernelFloat(queryGradient, "dq");
  requireKernelFloat(keyGradient, "dk");
  requireKernelFloat(valueGradient, "dv");
  bool nonEmpty =
      elementCount(queryGradient) > 0 && elementCount(keyGradient) > 0;
  if (nonEmpty && !mask && dropout == 0.0 &&
      cudnnAttentionBackward(*q, *k, *v, upstream, queryGradient, keyGradient,
                             valueGradient, p.causal, window, softcap, scale,
                             stream))
    return;
  if (nonEmpty && !window && softcap == 0.0 &&
      flashAttentionBackward(*q, *k, *v, mask != nullptr, dropout, upstream,
                             queryGradient, keyGradient, valueGradient,
                             p.causal, scale, stream))
    return;
  int64_t queryRows = p.batch * p.queryHeads * p.querySeq;
  int64_t keyRows = p.batch * p.keyHeads * p.keySeq;
  RowSoftmax *softmax = static_cast<RowSoftmax *>(
      streamScratch(stream, queryRows * sizeof(RowSoftmax), kSoftmaxSlot));
  if (queryRows > 0) {
    attentionQueryGradientKernel<<<warpRowGrid(queryRows), kWarpsPerBlock * 32,
                                   0, stream>>>(p, upstream.data,
                                                upstream.dtype,
                                                queryGradient.data,
                                                queryGradient.dtype, softmax);
    cudaCheckLaunch();
  }
  if (keyRows > 0) {
    attentionKeyGradientKernel<<<warpRowGrid(keyRows), kWarpsPerBlock * 32, 0,
                                 stream>>>(
        p, upstream.data, upstream.dtype, softmax, keyGradient.data,
        keyGradient.dtype, valueGradient.data, valueGradient.dtype);
    cudaCheckLaunch();
  }
}

} // namespace

extern "C" int tessera_cuda_attention(const tessera_tensor *q,
                                      const tessera_tensor *k,
                                      const tessera_tensor *v,
                                      const tessera_tensor *mask,
                                      tessera_tensor *y, int32_t causal,
                                      double scale, double dropout,
                                      uint64_t seed, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_attention", [&] {
    attentionForward(q, k, v, mask, y, nullptr, causal != 0, /*window=*/0,
                     /*softcap=*/0.0, scale, dropout, seed, stream);
  });
}

extern "C" int tessera_cuda_attention_grad(
    const tessera_tensor *q, const tessera_tensor *k, const tessera_tensor *v,
    const tessera_tensor *mask, const tessera_tensor *dy, tessera_tensor *dq,
    tessera_tensor *dk, tessera_tensor *dv, int32_t causal, double scale,
    double dropout, uint64_t seed, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_attention_grad", [&] {
    attentionBackward(q, k, v, mask, dy, dq, dk, dv, causal != 0,
                      /*window=*/0, /*softcap=*/0.0, scale, dropout, seed,
                      stream);
  });
}

extern "C" int tessera_cuda_softcapped_attention(
    const tessera_tensor *q, const tessera_tensor *k, const tessera_tensor *v,
    const tessera_tensor *mask, tessera_tensor *y, int32_t causal,
    int64_t window, double scale, double softcap, double dropout,
    uint64_t seed, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_softcapped_attention", [&] {
    tessera::cpu::requireSoftcap(softcap);
    attentionForward(q, k, v, mask, y, nullptr, causal != 0, window, softcap,
                     scale, dropout, seed, stream);
  });
}

extern "C" int tessera_cuda_softcapped_attention_grad(
    const tessera_tensor *q, const tessera_tensor *k, const tessera_tensor *v,
    const tessera_tensor *mask, const tessera_tensor *dy, tessera_tensor *dq,
    tessera_tensor *dk, tessera_tensor *dv, int32_t causal, int64_t window,
    double scale, double softcap, double dropout, uint64_t seed,
    cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_softcapped_attention_grad", [&] {
    tessera::cpu::requireSoftcap(softcap);
    attentionBackward(q, k, v, mask, dy, dq, dk, dv, causal != 0, window,
                      softcap, scale, dropout, seed, stream);
  });
}

extern "C" int tessera_cuda_sliding_window_attention(
    const tessera_tensor *q, const tessera_tensor *k, const tessera_tensor *v,
    const tessera_tensor *mask, tessera_tensor *y, int64_t window,
    double scale, double dropout, uint64_t seed, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_sliding_window_attention", [&] {
    tessera::cpu::requireSlidingWindow(window);
    attentionForward(q, k, v, mask, y, nullptr, /*causal=*/true, window,
                     /*softcap=*/0.0, scale, dropout, seed, stream);
  });
}

extern "C" int tessera_cuda_sliding_window_attention_grad(
    const tessera_tensor *q, const tessera_tensor *k, const tessera_tensor *v,
    const tessera_tensor *mask, const tessera_tensor *dy, tessera_tensor *dq,
    tessera_tensor *dk, tessera_tensor *dv, int64_t window, double scale,
    double dropout, uint64_t seed, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_sliding_window_attention_grad", [&] {
    tessera::cpu::requireSlidingWindow(window);
    attentionBackward(q, k, v, mask, dy, dq, dk, dv, /*causal=*/true, window,
                      /*softcap=*/0.0, scale, dropout, seed, stream);
  });
}
