//===- Attention.cpp - Scaled dot-product attention, forward and backward -===//
//
// The reference is the textbook formula, one query row at a time:
//   s_j = scale * q_i . k_j                  (j hidden by causal or by the
//                                             sliding window: dropped)
//   s_j = cap * tanh(s_j / cap) + mask_ij    (the softcap only when cap > 0)
//   p_j = softmax(s)_j                        (f64 sum, max subtracted)
//   w_j = p_j * keep_ij / (1 - dropout)       (keep from Random.h)
//   y_i = sum_j w_j v_j
// Query head h reads K/V head h / (Hq / Hkv): grouped-query attention when
// K/V have fewer heads. No [Sq, Skv] score matrix is kept: a row of
// probabilities is Skv floats of scratch, and the backward kernel recomputes
// it (as FlashAttention's backward does) rather than taking it from the
// forward. Per row, with dy_i the output gradient:
//   dv_j += w_j dy_i
//   dw_j  = dy_i . v_j,  dp_j = dw_j * keep_ij / (1 - dropout)
//   ds_j  = p_j (dp_j - sum_l p_l dp_l) (1 - tanh^2(s_j / cap))
//   dq_i  = scale * sum_j ds_j k_j,   dk_j += scale * ds_j q_i
// dk and dv sum over the query heads that share a K/V head. A query whose
// keys are all masked to -inf gets weights 0 (output 0), as in PyTorch.
//
// The sliding window (Mistral's) is a band of the causal mask: query i sees
// keys [i + o - window + 1, i + o], o = Skv - Sq. Like causal, it is a
// range of j per row, so the loops visit only the band: the cost is
// O(S * window), not O(S^2), and no [S, S] mask exists.
//
// The softcap (Gemma-2's attn_logit_softcapping) squashes the scaled scores
// into (-cap, cap) before the mask, so an added -inf still hides a key. Its
// derivative is taken from the same tanh the forward computes, which the
// backward keeps per row beside the probabilities.
//
// The dropout index of weight (b, h, i, j) is ((b * TESSERA_ATTENTION_
// DROPOUT_HEADS + h) * Sq + i) * Skv + j: one batch row's weights are its
// row-major positions (tessera_cpu_dropout on [1, Hq, Sq, Skv] with the same
// seed draws the same mask), and a block of heads or batch rows starts at a
// fixed offset, so a tensor-parallel rank draws its heads' masks from the
// whole op's stream advanced to them.
//
//===----------------------------------------------------------------------===//

#include "Errors.h"
#include "OperandChecks.h"
#include "Random.h"
#include "TensorAccess.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

using namespace tessera::cpu;

namespace {

/// Shapes, inputs and options of one attention call, checked once; shared
/// by the forward and backward kernels.
class AttentionProblem {
public:
  AttentionProblem(const tessera_tensor *q, const tessera_tensor *k,
                   const tessera_tensor *v, const tessera_tensor *mask,
                   int32_t causal, int64_t window, double scale, double softcap,
                   double dropout, uint64_t seed)
      : query(requireTensor(q, "q")), key(requireTensor(k, "k")),
        value(requireTensor(v, "v")), isCausal(causal != 0 || window > 0),
        windowKeys(window), scoreScale(static_cast<float>(scale)),
        scoreCap(static_cast<float>(softcap)), dropoutRate(dropout),
        dropoutMask(seed, dropout) {
    checkShapes();
    requireAttentionOptions(causal != 0, window, softcap, scale, dropout,
                            queryHeads);
    keptScale = static_cast<float>(1.0 / (1.0 - dropout));
    queryValues.emplace(query, "q");
    keyValues.emplace(key, "k");
    valueValues.emplace(value, "v");
    if (mask) {
      const tessera_tensor &maskTensor = requireTensor(mask, "mask");
      maskStrides = broadcastStrides(maskTensor, "mask",
                                     {batch, queryHeads, querySeq, keySeq});
      maskValues.emplace(maskTensor, "mask");
    }
  }

  int64_t batch = 0, queryHeads = 0, keyHeads = 0, querySeq = 0, keySeq = 0,
          headDim = 0, valueDim = 0;

  Shape outputShape() const { return {batch, queryHeads, querySeq, valueDim}; }

  const float *queryRow(int64_t b, int64_t h, int64_t i) const {
    return queryValues->data() +
           ((b * queryHeads + h) * querySeq + i) * headDim;
  }
  /// Offset of the first key/value row of the K/V head that query head h reads.
  int64_t keyHeadRow(int64_t b, int64_t h) const {
    return (b * keyHeads + h / (queryHeads / keyHeads)) * keySeq;
  }
  const float *keyRow(int64_t headRow, int64_t j) const {
    return keyValues->data() + (headRow + j) * headDim;
  }
  const float *valueRow(int64_t headRow, int64_t j) const {
    return valueValues->data() + (headRow + j) * valueDim;
  }
  /// Keys j < visibleKeys(i) are visible to query i.
  int64_t visibleKeys(int64_t i) const {
    return isCausal ? std::min(keySeq, i + keySeq - querySeq + 1) : keySeq;
  }
  /// Keys j < firstVisibleKey(i) are before query i's window.
  int64_t firstVisibleKey(int64_t i) const {
    return windowKeys > 0 ? std::max<int64_t>(0, visibleKeys(i) - windowKeys)
                          : 0;
  }

  /// Whether the scores are softcapped.
  bool softcapped() const { return scoreCap > 0.0f; }

  /// The softmax probabilities of query row (b, h, i) into p[0, keySeq)
  /// (0 where hidden). With a softcap, `capTanh` (when given) receives
  /// tanh(s_j / cap) over the visible keys, the backward's derivative.
  void probabilities(int64_t b, int64_t h, int64_t i, float *p,
                     float *capTanh = nullptr) const {
    const float *q = queryRow(b, h, i);
    int64_t headRow = keyHeadRow(b, h);
    int64_t first = firstVisibleKey(i), visible = visibleKeys(i);
    std::fill(p, p + first, 0.0f);
    float maximum = -std::numeric_limits<float>::infinity();
    for (int64_t j = first; j < visible; ++j) {
      const float *k = keyRow(headRow, j);
      float dot = 0.0f;
      for (int64_t d = 0; d < headDim; ++d)
        dot += q[d] * k[d];
      float score = scoreScale * dot;
      if (softcapped()) {
        float squashed = std::tanh(score / scoreCap);
        if (capTanh)
          capTanh[j] = squashed;
        score = scoreCap * squashed;
      }
      if (maskValues)
        score += (*maskValues)[b * maskStrides[0] + h * maskStrides[1] +
                               i * maskStrides[2] + j * maskStrides[3]];
      p[j] = score;
      maximum = std::fmax(maximum, score);
    }
    if (maximum == -std::numeric_limits<float>::infinity()) {
      // Every key is masked out: attend to nothing (output 0), as PyTorch's
      // scaled_dot_product_attention does, rather than 0/0.
      std::fill(p, p + keySeq, 0.0f);
      return;
    }
    double sum = 0.0;
    for (int64_t j = first; j < visible; ++j) {
      p[j] = std::exp(p[j] - maximum);
      sum += p[j];
    }
    float reciprocalSum = static_cast<float>(1.0 / sum);
    for (int64_t j = first; j < visible; ++j)
      p[j] *= reciprocalSum;
    std::fill(p + visible, p + keySeq, 0.0f);
  }

  /// The factor dropout multiplies weight (b, h, i, j) by: 0 or 1/(1-rate).
  float dropoutFactor(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (dropoutRate == 0.0)
      return 1.0f;
    uint64_t index = static_cast<uint64_t>(
        ((b * TESSERA_ATTENTION_DROPOUT_HEADS + h) * querySeq + i) * keySeq +
        j);
    return dropoutMask.keeps(index) ? keptScale : 0.0f;
  }

private:
  void checkShapes() {
    if (query.rank != 4 || key.rank != 4 || value.rank != 4)
      fail("q, k and v need rank 4 ([batch, heads, seq, head_dim]), got q " +
           formatShape(shapeOf(query)) + ", k " + formatShape(shapeOf(key)) +
           ", v " + formatShape(shapeOf(value)));
    batch = query.shape[0];
    queryHeads = query.shape[1];
    querySeq = query.shape[2];
    headDim = query.shape[3];
    keyHeads = key.shape[1];
    keySeq = key.shape[2];
    valueDim = value.shape[3];
    requireShape(key, {batch, keyHeads, keySeq, headDim}, "k");
    requireShape(value, {batch, keyHeads, keySeq, valueDim}, "v");
    if (keyHeads < 1 || queryHeads % keyHeads != 0)
      fail("q's " + std::to_string(queryHeads) +
           " heads are not a multiple of k/v's " + std::to_string(keyHeads));
    if (isCausal && querySeq > keySeq)
      fail("causal attention needs q_seq (" + std::to_string(querySeq) +
           ") <= kv_seq (" + std::to_string(keySeq) + ")");
  }

  const tessera_tensor &query, &key, &value;
  bool isCausal;
  /// 0: no window.
  int64_t windowKeys;
  float scoreScale;
  /// 0: no softcap.
  float scoreCap;
  double dropoutRate;
  float keptScale = 1.0f;
  DropoutMask dropoutMask;
  std::optional<FloatInput> queryValues, keyValues, valueValues, maskValues;
  Shape maskStrides;
};

/// The problem of a sliding-window entry point: causal, and a window of at
/// least one key (0, no window, is the plain entry points').
AttentionProblem slidingWindowProblem(const tessera_tensor *q,
                                      const tessera_tensor *k,
                                      const tessera_tensor *v,
                                      const tessera_tensor *mask,
                                      int64_t window, double scale,
                                      double dropout, uint64_t seed) {
  requireSlidingWindow(window);
  return AttentionProblem(q, k, v, mask, /*causal=*/1, window, scale,
                          /*softcap=*/0.0, dropout, seed);
}

/// The problem of a softcapped entry point: a positive cap (0, none, is the
/// other entry points'), and a window only on a causal attention, as
/// tess.attention's rule C8 has it.
AttentionProblem softcappedProblem(const tessera_tensor *q,
                                   const tessera_tensor *k,
                                   const tessera_tensor *v,
                                   const tessera_tensor *mask, int32_t causal,
                                   int64_t window, double scale, double softcap,
                                   double dropout, uint64_t seed) {
  requireSoftcap(softcap);
  return AttentionProblem(q, k, v, mask, causal, window, scale, softcap,
                          dropout, seed);
}

void attentionForward(const AttentionProblem &problem, tessera_tensor *y) {
  tessera_tensor &output = requireTensor(y, "y");
  requireShape(output, problem.outputShape(), "y");
  FloatOutput result(output, "y");
  std::vector<float> p(static_cast<size_t>(problem.keySeq));
  for (int64_t b = 0; b < problem.batch; ++b) {
    for (int64_t h = 0; h < problem.queryHeads; ++h) {
      int64_t headRow = problem.keyHeadRow(b, h);
      for (int64_t i = 0; i < problem.querySeq; ++i) {
        problem.probabilities(b, h, i, p.data());
        float *yRow = result.data() +
                      ((b * problem.queryHeads + h) * problem.querySeq + i) *
                          problem.valueDim;
        std::fill(yRow, yRow + problem.valueDim, 0.0f);
        for (int64_t j = problem.firstVisibleKey(i); j < problem.visibleKeys(i);
             ++j) {
          float weight = p[j] * problem.dropoutFactor(b, h, i, j);
          if (weight == 0.0f)
            continue;
          const float *vRow = problem.valueRow(headRow, j);
          for (int64_t d = 0; d < problem.valueDim; ++d)
            yRow[d] += weight * vRow[d];
        }
      }
    }
  }
  result.commit();
}

void attentionBackward(const AttentionProblem &problem, const tessera_tensor *q,
                       const tessera_tensor *k, const tessera_tensor *v,
                       const tessera_tensor *dy, tessera_tensor *dq,
                       tessera_tensor *dk, tessera_tensor *dv, double scale) {
  const tessera_tensor &upstream = requireTensor(dy, "dy");
  requireShape(upstream, problem.outputShape(), "dy");
  tessera_tensor &queryGradient = requireTensor(dq, "dq");
  tessera_tensor &keyGradient = requireTensor(dk, "dk");
  tessera_tensor &valueGradient = requireTensor(dv, "dv");
  requireShape(queryGradient, shapeOf(*q), "dq");
  requireShape(keyGradient, shapeOf(*k), "dk");
  requireShape(valueGradient, shapeOf(*v), "dv");
  FloatInput upstreamValues(upstream, "dy");
  FloatOutput dqValues(queryGradient, "dq");
  FloatOutput dkValues(keyGradient, "dk");
  FloatOutput dvValues(valueGradient, "dv");
  dkValues.fill(0.0f);
  dvValues.fill(0.0f);
  float scale32 = static_cast<float>(scale);
  std::vector<float> p(static_cast<size_t>(problem.keySeq));
  std::vector<float> dp(static_cast<size_t>(problem.keySeq));
  std::vector<float> capTanh(
      problem.softcapped() ? static_cast<size_t>(problem.keySeq) : 0);
  for (int64_t b = 0; b < problem.batch; ++b) {
    for (int64_t h = 0; h < problem.queryHeads; ++h) {
      int64_t headRow = problem.keyHeadRow(b, h);
      for (int64_t i = 0; i < problem.querySeq; ++i) {
        int64_t row = (b * problem.queryHeads + h) * problem.querySeq + i;
        const float *dyRow = upstreamValues.data() + row * problem.valueDim;
        const float *qRow = problem.queryRow(b, h, i);
        float *dqRow = dqValues.data() + row * problem.headDim;
        problem.probabilities(b, h, i, p.data(), capTanh.data());
        int64_t first = problem.firstVisibleKey(i);
        int64_t visible = problem.visibleKeys(i);
        double sumPdp = 0.0;
        for (int64_t j = first; j < visible; ++j) {
          float factor = problem.dropoutFactor(b, h, i, j);
          const float *vRow = problem.valueRow(headRow, j);
          float *dvRow = dvValues.data() + (headRow + j) * problem.valueDim;
          float weight = p[j] * factor;
          float dWeight = 0.0f;
          for (int64_t d = 0; d < problem.valueDim; ++d) {
            dvRow[d] += weight * dyRow[d];
            dWeight += dyRow[d] * vRow[d];
          }
          dp[j] = dWeight * factor;
          sumPdp += static_cast<double>(p[j]) * dp[j];
        }
        std::fill(dqRow, dqRow + problem.headDim, 0.0f);
        float correction = static_cast<float>(sumPdp);
        for (int64_t j = first; j < visible; ++j) {
          float dScore = scale32 * p[j] * (dp[j] - correction);
          if (problem.softcapped())
            dScore *= 1.0f - capTanh[j] * capTanh[j];
          if (dScore == 0.0f)
            continue;
          const float *kRow = problem.keyRow(headRow, j);
          float *dkRow = dkValues.data() + (headRow + j) * problem.headDim;
          for (int64_t d = 0; d < problem.headDim; ++d) {
            dqRow[d] += dScore * kRow[d];
            dkRow[d] += dScore * qRow[d];
          }
        }
      }
    }
  }
  dqValues.commit();
  dkValues.commit();
  dvValues.commit();
}

} // namespace

extern "C" int
tessera_cpu_attention(const tessera_tensor *q, const tessera_tensor *k,
                      const tessera_tensor *v, const tessera_tensor *mask,
                      tessera_tensor *y, int32_t causal, double scale,
                      double dropout, uint64_t seed) {
  return runKernel("tessera_cpu_attention", [&] {
    attentionForward(AttentionProblem(q, k, v, mask, causal, /*window=*/0,
                                      scale, /*softcap=*/0.0, dropout, seed),
                     y);
  });
}

extern "C" int tessera_cpu_sliding_window_attention(
    const tessera_tensor *q, const tessera_tensor *k, const tessera_tensor *v,
    const tessera_tensor *mask, tessera_tensor *y, int64_t window, double scale,
    double dropout, uint64_t seed) {
  return runKernel("tessera_cpu_sliding_window_attention", [&] {
    attentionForward(
        slidingWindowProblem(q, k, v, mask, window, scale, dropout, seed), y);
  });
}

extern "C" int tessera_cpu_attention_grad(
    const tessera_tensor *q, const tessera_tensor *k, const tessera_tensor *v,
    const tessera_tensor *mask, const tessera_tensor *dy, tessera_tensor *dq,
    tessera_tensor *dk, tessera_tensor *dv, int32_t causal, double scale,
    double dropout, uint64_t seed) {
  return runKernel("tessera_cpu_attention_grad", [&] {
    attentionBackward(AttentionProblem(q, k, v, mask, causal, /*window=*/0,
                                       scale, /*softcap=*/0.0, dropout, seed),
                      q, k, v, dy, dq, dk, dv, scale);
  });
}

extern "C" int tessera_cpu_sliding_window_attention_grad(
    const tessera_tensor *q, const tessera_tensor *k, const tessera_tensor *v,
    const tessera_tensor *mask, const tessera_tensor *dy, tessera_tensor *dq,
    tessera_tensor *dk, tessera_tensor *dv, int64_t window, double scale,
    double dropout, uint64_t seed) {
  return runKernel("tessera_cpu_sliding_window_attention_grad", [&] {
    attentionBackward(
        slidingWindowProblem(q, k, v, mask, window, scale, dropout, seed), q, k,
        v, dy, dq, dk, dv, scale);
  });
}

extern "C" int tessera_cpu_softcapped_attention(
    const tessera_tensor *q, const tessera_tensor *k, const tessera_tensor *v,
    const tessera_tensor *mask, tessera_tensor *y, int32_t causal,
    int64_t window, double scale, double softcap, double dropout,
    uint64_t seed) {
  return runKernel("tessera_cpu_softcapped_attention", [&] {
    attentionForward(softcappedProblem(q, k, v, mask, causal, window, scale,
                                       softcap, dropout, seed),
                     y);
  });
}

extern "C" int tessera_cpu_softcapped_attention_grad(
    const tessera_tensor *q, const tessera_tensor *k, const tessera_tensor *v,
    const tessera_tensor *mask, const tessera_tensor *dy, tessera_tensor *dq,
    tessera_tensor *dk, tessera_tensor *dv, int32_t causal, int64_t window,
    double scale, double softcap, double dropout, uint64_t seed) {
  return runKernel("tessera_cpu_softcapped_attention_grad", [&] {
    attentionBackward(softcappedProblem(q, k, v, mask, causal, window, scale,
                                        softcap, dropout, seed),
                      q, k, v, dy, dq, dk, dv, scale);
  });
}
