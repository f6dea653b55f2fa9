//===- AttentionTest.cpp - tessera_cpu_attention and its gradient ---------===//

#include "TestUtil.h"
#include "tessera/runtime/lowering_support.h"
#include "reference/TorchReferences.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace tessera_test;

namespace {

template <size_t N>
Tensor fromReference(const float (&values)[N], const int64_t *shape,
                     size_t rank) {
  return Tensor::floats(Shape(shape, shape + rank),
                        std::vector<float>(values, values + N));
}
#define REFERENCE_TENSOR(name)                                                 \
  fromReference(torch_reference::name, torch_reference::name##_shape,          \
                std::size(torch_reference::name##_shape))

TEST(Attention, CausalMatchesPyTorch) {
  Tensor q = REFERENCE_TENSOR(attention_causal_q);
  Tensor k = REFERENCE_TENSOR(attention_causal_k);
  Tensor v = REFERENCE_TENSOR(attention_causal_v);
  Tensor y(TESSERA_F32, {1, 2, 5, 4});
  EXPECT_KERNEL_OK(tessera_cpu_attention(q.get(), k.get(), v.get(), nullptr,
                                         y.get(), 1, 0.5, 0.0, 0));
  expectAllNear(y.values(), torch_reference::attention_causal_y,
                std::size(torch_reference::attention_causal_y), 2e-6, "causal");
}

TEST(Attention, GroupedQueryWithBottomRightCausalMatchesPyTorch) {
  Tensor q = REFERENCE_TENSOR(attention_gqa_q);
  Tensor k = REFERENCE_TENSOR(attention_gqa_k);
  Tensor v = REFERENCE_TENSOR(attention_gqa_v);
  Tensor y(TESSERA_F32, {2, 4, 3, 6});
  EXPECT_KERNEL_OK(tessera_cpu_attention(q.get(), k.get(), v.get(), nullptr,
                                         y.get(), 1, 0.3, 0.0, 0));
  expectAllNear(y.values(), torch_reference::attention_gqa_y,
                std::size(torch_reference::attention_gqa_y), 2e-6, "gqa");
}

TEST(Attention, AdditiveMaskMatchesPyTorch) {
  Tensor q = REFERENCE_TENSOR(attention_mask_q);
  Tensor k = REFERENCE_TENSOR(attention_mask_k);
  Tensor v = REFERENCE_TENSOR(attention_mask_v);
  Tensor mask = REFERENCE_TENSOR(attention_mask_mask);
  Tensor y(TESSERA_F32, {2, 2, 4, 3});
  EXPECT_KERNEL_OK(tessera_cpu_attention(q.get(), k.get(), v.get(), mask.get(),
                                         y.get(), 0, 1.0 / std::sqrt(3.0), 0.0,
                                         0));
  expectAllNear(y.values(), torch_reference::attention_mask_y,
                std::size(torch_reference::attention_mask_y), 2e-6, "mask");
}

struct GradientCase {
  const char *name;
  int64_t batch, queryHeads, keyHeads, querySeq, keySeq, headDim, valueDim;
  bool causal, withMask;
  double dropout;
};

void checkAttentionGradient(const GradientCase &c) {
  SCOPED_TRACE(c.name);
  Shape qShape = {c.batch, c.queryHeads, c.querySeq, c.headDim};
  Shape kShape = {c.batch, c.keyHeads, c.keySeq, c.headDim};
  Shape vShape = {c.batch, c.keyHeads, c.keySeq, c.valueDim};
  Shape yShape = {c.batch, c.queryHeads, c.querySeq, c.valueDim};
  Tensor q = randomTensor(qShape, 1, -1.5f, 1.5f);
  Tensor k = randomTensor(kShape, 2, -1.5f, 1.5f);
  Tensor v = randomTensor(vShape, 3);
  // A [Sq, Skv] additive mask broadcast over batch and heads.
  Tensor mask = randomTensor({c.querySeq, c.keySeq}, 4, -1, 1);
  const tessera_tensor *maskArgument = c.withMask ? mask.get() : nullptr;
  std::vector<float> weights = randomFloats(countOf(yShape), 5);
  Tensor dy = Tensor::floats(yShape, weights);
  Tensor y(TESSERA_F32, yShape);
  Tensor dq(TESSERA_F32, qShape), dk(TESSERA_F32, kShape),
      dv(TESSERA_F32, vShape);
  const double scale = 0.7;
  const uint64_t seed = 99;
  EXPECT_KERNEL_OK(tessera_cpu_attention_grad(
      q.get(), k.get(), v.get(), maskArgument, dy.get(), dq.get(), dk.get(),
      dv.get(), c.causal, scale, c.dropout, seed));
  auto objective = [&] {
    EXPECT_KERNEL_OK(tessera_cpu_attention(q.get(), k.get(), v.get(),
                                           maskArgument, y.get(), c.causal,
                                           scale, c.dropout, seed));
    return weightedSum(y, weights);
  };
  expectGradientNear(dq, numericGradient(q, objective), "dq");
  expectGradientNear(dk, numericGradient(k, objective), "dk");
  expectGradientNear(dv, numericGradient(v, objective), "dv");
}

TEST(AttentionGrad, CausalMatchesFiniteDifferences) {
  checkAttentionGradient({"causal", 2, 2, 2, 4, 4, 3, 3, true, false, 0.0});
}

TEST(AttentionGrad, MaskedGroupedQueryMatchesFiniteDifferences) {
  checkAttentionGradient(
      {"mask, Hq 4, Hkv 2", 1, 4, 2, 3, 5, 4, 2, false, true, 0.0});
}

TEST(AttentionGrad, CausalGroupedQueryWithShorterQueries) {
  checkAttentionGradient(
      {"causal, Sq 3 < Skv 5, GQA", 2, 4, 2, 3, 5, 3, 4, true, false, 0.0});
}

TEST(AttentionGrad, DropoutMatchesFiniteDifferences) {
  // With a fixed seed the mask is fixed, so the forward is a smooth function.
  checkAttentionGradient(
      {"dropout 0.3, causal, GQA", 1, 4, 2, 4, 4, 3, 3, true, true, 0.3});
}

TEST(Attention, DropoutUsesTheMaskOfTessera_cpu_dropout) {
  // With v = identity, y[b, h, i, :] is row i of the dropped weights. Batch
  // row b's weights are tessera_cpu_dropout's on [heads, seq, seq] from the
  // stream advanced by b * TESSERA_ATTENTION_DROPOUT_HEADS * seq * seq.
  const int64_t batch = 2, heads = 2, seq = 6;
  Tensor q = randomTensor({batch, heads, seq, seq}, 6);
  Tensor k = randomTensor({batch, heads, seq, seq}, 7);
  Tensor v(TESSERA_F32, {batch, heads, seq, seq});
  for (int64_t head = 0; head < batch * heads; ++head)
    for (int64_t j = 0; j < seq; ++j)
      v.f32()[(head * seq + j) * seq + j] = 1.0f;
  Tensor y(TESSERA_F32, {batch, heads, seq, seq});
  EXPECT_KERNEL_OK(tessera_cpu_attention(q.get(), k.get(), v.get(), nullptr,
                                         y.get(), 0, 1.0, 0.5, 2024));
  const int64_t rowElements = heads * seq * seq;
  int64_t kept = 0;
  for (int64_t b = 0; b < batch; ++b) {
    Tensor ones = Tensor::floats({heads, seq, seq},
                                 std::vector<float>(rowElements, 1.0f));
    Tensor mask(TESSERA_F32, {heads, seq, seq});
    EXPECT_KERNEL_OK(tessera_cpu_dropout(
        ones.get(), mask.get(), 0.5,
        tessera_advance_seed(2024, static_cast<uint64_t>(
                                       b * TESSERA_ATTENTION_DROPOUT_HEADS *
                                       seq * seq))));
    for (int64_t i = 0; i < rowElements; ++i) {
      EXPECT_EQ(y.at(b * rowElements + i) != 0.0f, mask.at(i) != 0.0f)
          << "batch row " << b << ", weight " << i;
      kept += mask.at(i) != 0.0f;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, batch * rowElements);
}

/// Heads [first, first + count) of every batch row of `whole` [B, H, S, D].
Tensor headBlock(const Tensor &whole, int64_t first, int64_t count) {
  const Shape &shape = whole.dims();
  int64_t inner = shape[2] * shape[3];
  Shape blockShape = {shape[0], count, shape[2], shape[3]};
  std::vector<float> values;
  for (int64_t b = 0; b < shape[0]; ++b)
    for (int64_t h = first; h < first + count; ++h)
      for (int64_t e = 0; e < inner; ++e)
        values.push_back(whole.at((b * shape[1] + h) * inner + e));
  return Tensor::floats(blockShape, values);
}

TEST(Attention, ABlockOfHeadsWithAnAdvancedSeedIsTheWholeOpsHeads) {
  // A tensor-parallel rank holds heads [first, first + count) of every batch
  // row (GQA 4/2: its K/V groups are [first / 2, ...)); from the whole op's
  // seed advanced by first * Sq * Skv it draws those heads' masks, so its
  // output and gradients are the whole op's heads bit for bit.
  const int64_t batch = 2, heads = 4, kvHeads = 2, seq = 5, dim = 3;
  const uint64_t seed = 77;
  Tensor q = randomTensor({batch, heads, seq, dim}, 21);
  Tensor k = randomTensor({batch, kvHeads, seq, dim}, 22);
  Tensor v = randomTensor({batch, kvHeads, seq, dim}, 23);
  Tensor dy = randomTensor({batch, heads, seq, dim}, 24);
  Tensor y(TESSERA_F32, {batch, heads, seq, dim});
  Tensor dq(TESSERA_F32, {batch, heads, seq, dim}),
      dk(TESSERA_F32, {batch, kvHeads, seq, dim}),
      dv(TESSERA_F32, {batch, kvHeads, seq, dim});
  EXPECT_KERNEL_OK(tessera_cpu_attention(q.get(), k.get(), v.get(), nullptr,
                                         y.get(), 1, 0.5, 0.4, seed));
  EXPECT_KERNEL_OK(tessera_cpu_attention_grad(
      q.get(), k.get(), v.get(), nullptr, dy.get(), dq.get(), dk.get(),
      dv.get(), 1, 0.5, 0.4, seed));
  for (int64_t rank = 0; rank < 2; ++rank) {
    const int64_t first = rank * 2;
    uint64_t rankSeed =
        tessera_advance_seed(seed, static_cast<uint64_t>(first * seq * seq));
    Tensor bq = headBlock(q, first, 2), bk = headBlock(k, rank, 1),
           bv = headBlock(v, rank, 1), bdy = headBlock(dy, first, 2);
    Tensor by(TESSERA_F32, {batch, 2, seq, dim});
    Tensor bdq(TESSERA_F32, {batch, 2, seq, dim}),
        bdk(TESSERA_F32, {batch, 1, seq, dim}),
        bdv(TESSERA_F32, {batch, 1, seq, dim});
    EXPECT_KERNEL_OK(tessera_cpu_attention(bq.get(), bk.get(), bv.get(),
                                           nullptr, by.get(), 1, 0.5, 0.4,
                                           rankSeed));
    EXPECT_KERNEL_OK(tessera_cpu_attention_grad(
        bq.get(), bk.get(), bv.get(), nullptr, bdy.get(), bdq.get(),
        bdk.get(), bdv.get(), 1, 0.5, 0.4, rankSeed));
    EXPECT_EQ(by.values(), headBlock(y, first, 2).values()) << "rank " << rank;
    EXPECT_EQ(bdq.values(), headBlock(dq, first, 2).values())
        << "rank " << rank;
    EXPECT_EQ(bdk.values(), headBlock(dk, rank, 1).values())
        << "rank " << rank;
    EXPECT_EQ(bdv.values(), headBlock(dv, rank, 1).values())
        << "rank " << rank;
  }
}

TEST(Attention, DropoutRefusesMoreHeadsThanTheIndexStride) {
  const int64_t heads = TESSERA_ATTENTION_DROPOUT_HEADS + 1;
  Tensor q(TESSERA_F32, {1, heads, 1, 1}), k(TESSERA_F32, {1, 1, 1, 1}),
      v(TESSERA_F32, {1, 1, 1, 1}), y(TESSERA_F32, {1, heads, 1, 1});
  EXPECT_NE(tessera_cpu_attention(q.get(), k.get(), v.get(), nullptr, y.get(),
                                  0, 1.0, 0.1, 1),
            0);
  EXPECT_KERNEL_OK(tessera_cpu_attention(q.get(), k.get(), v.get(), nullptr,
                                         y.get(), 0, 1.0, 0.0, 1));
}

TEST(Attention, AFullyMaskedQueryAttendsToNothing) {
  Tensor q = randomTensor({1, 1, 2, 4}, 11), k = randomTensor({1, 1, 3, 4}, 12);
  Tensor v = randomTensor({1, 1, 3, 4}, 13);
  const float hidden = -std::numeric_limits<float>::infinity();
  Tensor mask = Tensor::floats({2, 3}, {hidden, hidden, hidden, 0, 0, hidden});
  Tensor y(TESSERA_F32, {1, 1, 2, 4});
  EXPECT_KERNEL_OK(tessera_cpu_attention(q.get(), k.get(), v.get(), mask.get(),
                                         y.get(), 0, 0.5, 0.0, 0));
  for (int64_t d = 0; d < 4; ++d)
    EXPECT_EQ(y.at(d), 0.0f);
  EXPECT_FALSE(std::isnan(y.at(4)));
  Tensor dy = randomTensor({1, 1, 2, 4}, 14);
  Tensor dq(TESSERA_F32, {1, 1, 2, 4}), dk(TESSERA_F32, {1, 1, 3, 4}),
      dv(TESSERA_F32, {1, 1, 3, 4});
  EXPECT_KERNEL_OK(tessera_cpu_attention_grad(
      q.get(), k.get(), v.get(), mask.get(), dy.get(), dq.get(), dk.get(),
      dv.get(), 0, 0.5, 0.0, 0));
  for (int64_t d = 0; d < 4; ++d)
    EXPECT_EQ(dq.at(d), 0.0f);
}

/// The sliding-window kernels against tessera_cpu_attention with the same
/// band written out as an additive mask (-inf outside it): the window is
/// that mask, computed without one.
void checkSlidingWindowIsTheBandMask(int64_t querySeq, int64_t keySeq,
                                     int64_t window) {
  SCOPED_TRACE("Sq " + std::to_string(querySeq) + ", Skv " +
               std::to_string(keySeq) + ", window " + std::to_string(window));
  const int64_t batch = 2, queryHeads = 4, keyHeads = 2, headDim = 3;
  Shape qShape = {batch, queryHeads, querySeq, headDim};
  Shape kShape = {batch, keyHeads, keySeq, headDim};
  Tensor q = randomTensor(qShape, 21, -1.5f, 1.5f);
  Tensor k = randomTensor(kShape, 22, -1.5f, 1.5f);
  Tensor v = randomTensor(kShape, 23);
  std::vector<float> band(querySeq * keySeq);
  int64_t offset = keySeq - querySeq;
  for (int64_t i = 0; i < querySeq; ++i)
    for (int64_t j = 0; j < keySeq; ++j)
      band[i * keySeq + j] = j <= i + offset && j > i + offset - window
                                 ? 0.0f
                                 : -std::numeric_limits<float>::infinity();
  Tensor mask = Tensor::floats({querySeq, keySeq}, band);
  Tensor y(TESSERA_F32, qShape), expected(TESSERA_F32, qShape);
  EXPECT_KERNEL_OK(tessera_cpu_sliding_window_attention(
      q.get(), k.get(), v.get(), nullptr, y.get(), window, 0.6, 0.0, 0));
  EXPECT_KERNEL_OK(tessera_cpu_attention(q.get(), k.get(), v.get(), mask.get(),
                                         expected.get(), 0, 0.6, 0.0, 0));
  expectAllNear(y.values(), expected.values().data(), expected.count(), 1e-6,
                "y");

  Tensor dy = randomTensor(qShape, 24);
  Tensor dq(TESSERA_F32, qShape), dk(TESSERA_F32, kShape),
      dv(TESSERA_F32, kShape);
  Tensor dqExpected(TESSERA_F32, qShape), dkExpected(TESSERA_F32, kShape),
      dvExpected(TESSERA_F32, kShape);
  EXPECT_KERNEL_OK(tessera_cpu_sliding_window_attention_grad(
      q.get(), k.get(), v.get(), nullptr, dy.get(), dq.get(), dk.get(),
      dv.get(), window, 0.6, 0.0, 0));
  EXPECT_KERNEL_OK(tessera_cpu_attention_grad(
      q.get(), k.get(), v.get(), mask.get(), dy.get(), dqExpected.get(),
      dkExpected.get(), dvExpected.get(), 0, 0.6, 0.0, 0));
  expectAllNear(dq.values(), dqExpected.values().data(), dq.count(), 1e-6,
                "dq");
  expectAllNear(dk.values(), dkExpected.values().data(), dk.count(), 1e-6,
                "dk");
  expectAllNear(dv.values(), dvExpected.values().data(), dv.count(), 1e-6,
                "dv");
}

TEST(SlidingWindowAttention, IsTheCausalBandMask) {
  checkSlidingWindowIsTheBandMask(7, 7, 3);
  // Fewer queries than keys: the band follows the shifted diagonal.
  checkSlidingWindowIsTheBandMask(4, 7, 2);
  // A window of one: each query sees only itself.
  checkSlidingWindowIsTheBandMask(5, 5, 1);
  // A window as long as the sequence is plain causal attention.
  checkSlidingWindowIsTheBandMask(5, 5, 5);
}

TEST(SlidingWindowAttention, RejectsAWindowBelowOne) {
  Tensor q(TESSERA_F32, {1, 1, 2, 4}), k(TESSERA_F32, {1, 1, 2, 4});
  Tensor v(TESSERA_F32, {1, 1, 2, 4}), y(TESSERA_F32, {1, 1, 2, 4});
  EXPECT_NE(tessera_cpu_sliding_window_attention(q.get(), k.get(), v.get(),
                                                 nullptr, y.get(), 0, 1.0,
                                                 0.0, 0),
            0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("at least 1"),
            std::string::npos)
      << tessera_cpu_last_error();
}

/// Gemma-2's softcapped attention written out: every score of query row
/// (b, h, i) computed, scaled, tanh-capped, masked (the causal band and the
/// additive mask), then softmaxed in f64 and applied to V.
std::vector<float> softcappedReference(const Tensor &q, const Tensor &k,
                                       const Tensor &v, const Tensor *mask,
                                       bool causal, int64_t window,
                                       double scale, double cap) {
  const Shape &qs = q.dims(), &ks = k.dims();
  int64_t batch = qs[0], queryHeads = qs[1], querySeq = qs[2], headDim = qs[3];
  int64_t keyHeads = ks[1], keySeq = ks[2], valueDim = v.dims()[3];
  int64_t offset = keySeq - querySeq;
  std::vector<float> y(batch * queryHeads * querySeq * valueDim, 0.0f);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < queryHeads; ++h) {
      int64_t kvHead = h / (queryHeads / keyHeads);
      for (int64_t i = 0; i < querySeq; ++i) {
        std::vector<double> scores(keySeq);
        for (int64_t j = 0; j < keySeq; ++j) {
          double dot = 0.0;
          for (int64_t d = 0; d < headDim; ++d)
            dot += q.at(((b * queryHeads + h) * querySeq + i) * headDim + d) *
                   k.at(((b * keyHeads + kvHead) * keySeq + j) * headDim + d);
          double score = cap * std::tanh(scale * dot / cap);
          if (mask)
            score += mask->at(i * keySeq + j);
          bool hidden = (causal && j > i + offset) ||
                        (window > 0 && j <= i + offset - window);
          scores[j] = hidden ? -std::numeric_limits<double>::infinity() : score;
        }
        double maximum = *std::max_element(scores.begin(), scores.end());
        double sum = 0.0;
        for (double &score : scores)
          sum += (score = std::exp(score - maximum));
        for (int64_t j = 0; j < keySeq; ++j)
          for (int64_t d = 0; d < valueDim; ++d)
            y[((b * queryHeads + h) * querySeq + i) * valueDim + d] +=
                static_cast<float>(
                    scores[j] / sum *
                    v.at(((b * keyHeads + kvHead) * keySeq + j) * valueDim +
                         d));
      }
    }
  return y;
}

struct SoftcapCase {
  const char *name;
  int64_t queryHeads, keyHeads, querySeq, keySeq;
  bool causal, withMask;
  int64_t window;
  double cap;
};

/// The softcapped forward against softcappedReference, and its gradient
/// against finite differences of the forward. The scores reach several
/// times the cap, so the tanh is far from linear.
void checkSoftcappedAttention(const SoftcapCase &c) {
  SCOPED_TRACE(c.name);
  const int64_t batch = 2, headDim = 3;
  Shape qShape = {batch, c.queryHeads, c.querySeq, headDim};
  Shape kShape = {batch, c.keyHeads, c.keySeq, headDim};
  Tensor q = randomTensor(qShape, 31, -2.0f, 2.0f);
  Tensor k = randomTensor(kShape, 32, -2.0f, 2.0f);
  Tensor v = randomTensor(kShape, 33);
  Tensor mask = randomTensor({c.querySeq, c.keySeq}, 34, -1, 1);
  const Tensor *maskTensor = c.withMask ? &mask : nullptr;
  const tessera_tensor *maskArgument = c.withMask ? mask.get() : nullptr;
  const double scale = 0.8;
  Tensor y(TESSERA_F32, qShape);
  EXPECT_KERNEL_OK(tessera_cpu_softcapped_attention(
      q.get(), k.get(), v.get(), maskArgument, y.get(), c.causal, c.window,
      scale, c.cap, 0.0, 0));
  std::vector<float> expected =
      softcappedReference(q, k, v, maskTensor, c.causal, c.window, scale, c.cap);
  expectAllNear(y.values(), expected.data(), expected.size(), 2e-6, "y");

  std::vector<float> weights = randomFloats(countOf(qShape), 35);
  Tensor dy = Tensor::floats(qShape, weights);
  Tensor dq(TESSERA_F32, qShape), dk(TESSERA_F32, kShape),
      dv(TESSERA_F32, kShape);
  EXPECT_KERNEL_OK(tessera_cpu_softcapped_attention_grad(
      q.get(), k.get(), v.get(), maskArgument, dy.get(), dq.get(), dk.get(),
      dv.get(), c.causal, c.window, scale, c.cap, 0.0, 0));
  auto objective = [&] {
    EXPECT_KERNEL_OK(tessera_cpu_softcapped_attention(
        q.get(), k.get(), v.get(), maskArgument, y.get(), c.causal, c.window,
        scale, c.cap, 0.0, 0));
    return weightedSum(y, weights);
  };
  expectGradientNear(dq, numericGradient(q, objective), "dq");
  expectGradientNear(dk, numericGradient(k, objective), "dk");
  expectGradientNear(dv, numericGradient(v, objective), "dv");
}

TEST(SoftcappedAttention, MatchesTheCappedScoresAndFiniteDifferences) {
  checkSoftcappedAttention({"causal", 2, 2, 5, 5, true, false, 0, 1.5});
  checkSoftcappedAttention(
      {"mask, GQA, Sq < Skv", 4, 2, 3, 5, false, true, 0, 2.0});
  // Gemma-2's local layers: a softcap and a sliding window together.
  checkSoftcappedAttention(
      {"causal, window 2, GQA", 4, 2, 6, 6, true, false, 2, 1.0});
}

TEST(SoftcappedAttention, ALargeCapIsPlainAttention) {
  // cap * tanh(s / cap) -> s as cap grows: the kernels meet the plain ones.
  Shape shape = {1, 2, 4, 3};
  Tensor q = randomTensor(shape, 41), k = randomTensor(shape, 42);
  Tensor v = randomTensor(shape, 43);
  Tensor y(TESSERA_F32, shape), plain(TESSERA_F32, shape);
  EXPECT_KERNEL_OK(tessera_cpu_softcapped_attention(
      q.get(), k.get(), v.get(), nullptr, y.get(), 1, 0, 0.5, 1e4, 0.0, 0));
  EXPECT_KERNEL_OK(tessera_cpu_attention(q.get(), k.get(), v.get(), nullptr,
                                         plain.get(), 1, 0.5, 0.0, 0));
  expectAllNear(y.values(), plain.values().data(), plain.count(), 1e-6, "y");
}

TEST(SoftcappedAttention, RejectsANonPositiveCapAndAWindowWithoutCausal) {
  Tensor q(TESSERA_F32, {1, 1, 2, 4}), k(TESSERA_F32, {1, 1, 2, 4});
  Tensor v(TESSERA_F32, {1, 1, 2, 4}), y(TESSERA_F32, {1, 1, 2, 4});
  EXPECT_NE(tessera_cpu_softcapped_attention(q.get(), k.get(), v.get(),
                                             nullptr, y.get(), 1, 0, 1.0, 0.0,
                                             0.0, 0),
            0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("must be positive"),
            std::string::npos)
      << tessera_cpu_last_error();
  EXPECT_NE(tessera_cpu_softcapped_attention(q.get(), k.get(), v.get(),
                                             nullptr, y.get(), 0, 2, 1.0, 5.0,
                                             0.0, 0),
            0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("needs causal"),
            std::string::npos)
      << tessera_cpu_last_error();
}

TEST(Attention, RejectsHeadCountsThatDoNotGroup) {
  Tensor q(TESSERA_F32, {1, 3, 2, 4}), k(TESSERA_F32, {1, 2, 2, 4});
  Tensor v(TESSERA_F32, {1, 2, 2, 4}), y(TESSERA_F32, {1, 3, 2, 4});
  EXPECT_NE(tessera_cpu_attention(q.get(), k.get(), v.get(), nullptr, y.get(),
                                  0, 1.0, 0.0, 0),
            0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("not a multiple"),
            std::string::npos)
      << tessera_cpu_last_error();
}

TEST(Attention, Bf16IsTheF32ResultRounded) {
  Tensor q = Tensor::floats({1, 2, 4, 8}, randomFloats(64, 8), TESSERA_BF16);
  Tensor k = Tensor::floats({1, 1, 4, 8}, randomFloats(32, 9), TESSERA_BF16);
  Tensor v = Tensor::floats({1, 1, 4, 8}, randomFloats(32, 10), TESSERA_BF16);
  Tensor y(TESSERA_BF16, {1, 2, 4, 8}), yF32(TESSERA_F32, {1, 2, 4, 8});
  Tensor qF32 = Tensor::floats({1, 2, 4, 8}, q.values());
  Tensor kF32 = Tensor::floats({1, 1, 4, 8}, k.values());
  Tensor vF32 = Tensor::floats({1, 1, 4, 8}, v.values());
  EXPECT_KERNEL_OK(tessera_cpu_attention(q.get(), k.get(), v.get(), nullptr,
                                         y.get(), 1, 0.35, 0.0, 0));
  EXPECT_KERNEL_OK(tessera_cpu_attention(qF32.get(), kF32.get(), vF32.get(),
                                         nullptr, yF32.get(), 1, 0.35, 0.0, 0));
  for (int64_t i = 0; i < 64; ++i)
    EXPECT_EQ(y.at(i),
              tessera::cpu::bf16ToFloat(tessera::cpu::floatToBf16(yF32.at(i))));
}

} // namespace
