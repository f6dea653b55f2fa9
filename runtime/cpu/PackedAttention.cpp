//===- PackedAttention.cpp - Attention on a QKV-packed tensor -------------===//
//
// GPT-2's fused c_attn projection (FlashAttention's "qkvpacked" layout)
// produces q, k and v as one [B, T, (Hq + 2 Hkv) D] tensor: per token, Hq
// query heads, then Hkv key heads, then Hkv value heads. The CUDA kernel reads
// that layout in place, saving the head-split copies; this reference instead
// reuses the attention it must agree with. It unpacks the three [B, H, T, D]
// views into f32 scratch (exact for every float storage type), calls
// tessera_cpu_attention / tessera_cpu_attention_grad on them (no mask, no
// dropout) and packs the results back, rounding once into the output's
// storage. So a packed call computes bit for bit what the unpacked kernels
// compute, and their semantics (grouped-query heads, causal hiding) carry
// over without a second copy of the math.
//
// The forward's second output, lse[b, h, i] = log sum_j exp(scale q_i . k_j)
// over the visible keys, is what a fused backward needs to rebuild the
// probabilities without another max/sum pass. tessera_cpu_attention does not
// expose it, so it is a direct loop here, in f64 with the maximum subtracted.
// The backward takes y and lse because the CUDA kernel reads them; this
// reference only checks their shapes and recomputes the forward, as
// tessera_cpu_attention_grad always does.
//
//===----------------------------------------------------------------------===//

#include "DataTypes.h"
#include "Errors.h"
#include "OperandChecks.h"
#include "TensorAccess.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace tessera::cpu;

namespace {

/// The layout and options of one packed call, checked by OperandChecks.h
/// (the same checks and words as the CUDA kernels); shared by the forward
/// and backward kernels.
struct PackedProblem {
  PackedProblem(const tessera_tensor &qkvTensor,
                const PackedAttentionLayout &layout, int32_t causal,
                double scale)
      : qkv(qkvTensor), queryHeads(layout.queryHeads),
        keyHeads(layout.keyHeads), isCausal(causal != 0), scoreScale(scale),
        batch(layout.batch), seq(layout.seq), headDim(layout.headDim) {}

  const tessera_tensor &qkv;
  int64_t queryHeads, keyHeads;
  bool isCausal;
  double scoreScale;
  int64_t batch, seq, headDim;

  int64_t packedWidth() const { return (queryHeads + 2 * keyHeads) * headDim; }
  int64_t outputWidth() const { return queryHeads * headDim; }
  /// Where each section's first head sits among a token's packed heads.
  int64_t firstKeyHead() const { return queryHeads; }
  int64_t firstValueHead() const { return queryHeads + keyHeads; }
};

/// f32 scratch of shape [B, H, T, D]: the unpacked view tessera_cpu_attention
/// takes.
class HeadMajor {
public:
  HeadMajor(const PackedProblem &problem, int64_t headCount)
      : batch(problem.batch), heads(headCount), seq(problem.seq),
        headDim(problem.headDim),
        values(static_cast<size_t>(problem.batch * headCount * problem.seq *
                                   problem.headDim)) {
    descriptor.dtype = TESSERA_F32;
    descriptor.rank = 4;
    descriptor.shape[0] = batch;
    descriptor.shape[1] = headCount;
    descriptor.shape[2] = seq;
    descriptor.shape[3] = headDim;
  }

  tessera_tensor *get() {
    descriptor.data = values.data();
    return &descriptor;
  }
  const float *row(int64_t b, int64_t h, int64_t t) const {
    return values.data() + ((b * heads + h) * seq + t) * headDim;
  }

  /// Calls moveRow(tokenOffset, headOffset) for every head row (b, h, t),
  /// where token-major storage gives token (b, t) a row of `rowWidth` floats
  /// and this tensor's head h starts at column (firstHead + h) D of it.
  template <typename MoveRow>
  void forEachRow(int64_t rowWidth, int64_t firstHead, MoveRow moveRow) const {
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t t = 0; t < seq; ++t)
          moveRow((b * seq + t) * rowWidth + (firstHead + h) * headDim,
                  ((b * heads + h) * seq + t) * headDim);
  }

  /// Copies this tensor's heads out of token-major `tokens`.
  void unpack(const float *tokens, int64_t rowWidth, int64_t firstHead) {
    forEachRow(rowWidth, firstHead, [&](int64_t token, int64_t head) {
      std::copy_n(tokens + token, headDim, values.data() + head);
    });
  }
  /// Copies this tensor's heads into token-major `tokens`.
  void pack(float *tokens, int64_t rowWidth, int64_t firstHead) const {
    forEachRow(rowWidth, firstHead, [&](int64_t token, int64_t head) {
      std::copy_n(values.data() + head, headDim, tokens + token);
    });
  }

private:
  int64_t batch, heads, seq, headDim;
  std::vector<float> values;
  tessera_tensor descriptor{};
};

/// The q, k and v heads of a packed qkv.
struct UnpackedHeads {
  HeadMajor query, key, value;

  explicit UnpackedHeads(const PackedProblem &problem)
      : query(problem, problem.queryHeads), key(problem, problem.keyHeads),
        value(problem, problem.keyHeads) {
    FloatInput packed(problem.qkv, "qkv");
    int64_t width = problem.packedWidth();
    query.unpack(packed.data(), width, 0);
    key.unpack(packed.data(), width, problem.firstKeyHead());
    value.unpack(packed.data(), width, problem.firstValueHead());
  }
};

/// lse[b, h, i] over the keys query i sees (j <= i when causal: Sq = Skv).
void logSumExp(const PackedProblem &problem, const UnpackedHeads &heads,
               float *lse) {
  int64_t group = problem.queryHeads / problem.keyHeads;
  std::vector<double> scores(static_cast<size_t>(problem.seq));
  for (int64_t b = 0; b < problem.batch; ++b) {
    for (int64_t h = 0; h < problem.queryHeads; ++h) {
      for (int64_t i = 0; i < problem.seq; ++i) {
        const float *q = heads.query.row(b, h, i);
        int64_t visible = problem.isCausal ? i + 1 : problem.seq;
        double maximum = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < visible; ++j) {
          const float *k = heads.key.row(b, h / group, j);
          double dot = 0.0;
          for (int64_t d = 0; d < problem.headDim; ++d)
            dot += static_cast<double>(q[d]) * k[d];
          scores[j] = problem.scoreScale * dot;
          maximum = std::fmax(maximum, scores[j]);
        }
        float &result = lse[(b * problem.queryHeads + h) * problem.seq + i];
        if (maximum == -std::numeric_limits<double>::infinity()) {
          // No visible key (or every score -inf): log of an empty sum.
          result = -std::numeric_limits<float>::infinity();
          continue;
        }
        double sum = 0.0;
        for (int64_t j = 0; j < visible; ++j)
          sum += std::exp(scores[j] - maximum);
        result = static_cast<float>(maximum + std::log(sum));
      }
    }
  }
}

} // namespace

extern "C" int
tessera_cpu_packed_attention(const tessera_tensor *qkv, tessera_tensor *y,
                             tessera_tensor *lse, int64_t query_heads,
                             int64_t key_heads, int32_t causal, double scale) {
  return runKernel("tessera_cpu_packed_attention", [&] {
    const tessera_tensor &packed = requireTensor(qkv, "qkv");
    tessera_tensor &output = requireTensor(y, "y");
    tessera_tensor &logSums = requireTensor(lse, "lse");
    PackedProblem problem(packed,
                          requirePackedAttentionOperands(packed, output,
                                                         logSums, query_heads,
                                                         key_heads, scale),
                          causal, scale);
    UnpackedHeads heads(problem);
    HeadMajor attended(problem, problem.queryHeads);
    requireSuccess(tessera_cpu_attention(
        heads.query.get(), heads.key.get(), heads.value.get(), nullptr,
        attended.get(), causal, scale, 0.0, 0), tessera_cpu_last_error);
    FloatOutput result(output, "y");
    attended.pack(result.data(), problem.outputWidth(), 0);
    result.commit();
    logSumExp(problem, heads, static_cast<float *>(logSums.data));
  });
}

extern "C" int tessera_cpu_packed_attention_grad(
    const tessera_tensor *qkv, const tessera_tensor *y,
    const tessera_tensor *lse, const tessera_tensor *dy, tessera_tensor *dqkv,
    int64_t query_heads, int64_t key_heads, int32_t causal, double scale) {
  return runKernel("tessera_cpu_packed_attention_grad", [&] {
    const tessera_tensor &packed = requireTensor(qkv, "qkv");
    const tessera_tensor &upstream = requireTensor(dy, "dy");
    tessera_tensor &gradient = requireTensor(dqkv, "dqkv");
    PackedProblem problem(
        packed,
        requirePackedAttentionGradOperands(
            packed, requireTensor(y, "y"), requireTensor(lse, "lse"), upstream,
            gradient, query_heads, key_heads, scale),
        causal, scale);
    UnpackedHeads heads(problem);
    HeadMajor upstreamHeads(problem, problem.queryHeads);
    upstreamHeads.unpack(FloatInput(upstream, "dy").data(),
                         problem.outputWidth(), 0);
    HeadMajor dq(problem, problem.queryHeads), dk(problem, problem.keyHeads),
        dv(problem, problem.keyHeads);
    requireSuccess(tessera_cpu_attention_grad(
        heads.query.get(), heads.key.get(), heads.value.get(), nullptr,
        upstreamHeads.get(), dq.get(), dk.get(), dv.get(), causal, scale, 0.0,
        0), tessera_cpu_last_error);
    // Written only now, after every read of qkv: dqkv may alias it.
    FloatOutput result(gradient, "dqkv");
    int64_t width = problem.packedWidth();
    dq.pack(result.data(), width, 0);
    dk.pack(result.data(), width, problem.firstKeyHead());
    dv.pack(result.data(), width, problem.firstValueHead());
    result.commit();
  });
}
