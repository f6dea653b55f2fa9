//===- PackedAttentionTest.cpp - tessera_cpu_packed_attention and its grad ===//
//
// The packed kernels are defined as tessera_cpu_attention(_grad) on the
// unpacked [B, H, T, D] views, so the tests build those views here (from the
// layout as the header states it) and expect the same numbers; lse, which
// tessera_cpu_attention does not produce, is checked against a direct sum,
// and the gradient's packing once more against finite differences.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <limits>

using namespace tessera_test;

namespace {

struct PackedCase {
  const char *name;
  int64_t batch, seq, queryHeads, keyHeads, headDim;
  bool causal;

  int64_t packedWidth() const { return (queryHeads + 2 * keyHeads) * headDim; }
  Shape packedShape() const { return {batch, seq, packedWidth()}; }
  Shape outputShape() const { return {batch, seq, queryHeads * headDim}; }
  Shape lseShape() const { return {batch, queryHeads, seq}; }
  Shape headShape(int64_t heads) const { return {batch, heads, seq, headDim}; }
};

const double kScale = 0.6;

/// Element (b, h, t, d) of a [B, H, T, D] tensor's token-major packing, as
/// the packed kernels lay it out (rows of `rowWidth`, head h at firstHead + h).
int64_t packedIndex(const PackedCase &c, int64_t rowWidth, int64_t firstHead,
                    int64_t b, int64_t h, int64_t t, int64_t d) {
  return (b * c.seq + t) * rowWidth + (firstHead + h) * c.headDim + d;
}

/// Heads [firstHead, firstHead + heads) of token-major `packed` (rows of
/// `rowWidth`) as an f32 [B, heads, T, D] tensor.
Tensor unpackHeads(const PackedCase &c, const Tensor &packed, int64_t rowWidth,
                   int64_t firstHead, int64_t heads) {
  Tensor result(TESSERA_F32, c.headShape(heads));
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t t = 0; t < c.seq; ++t)
        for (int64_t d = 0; d < c.headDim; ++d)
          result.f32()[((b * heads + h) * c.seq + t) * c.headDim + d] =
              packed.at(packedIndex(c, rowWidth, firstHead, b, h, t, d));
  return result;
}

/// Expects packed[...] == heads[b, h, t, d] for every element of `heads`.
void expectPackedEqual(const PackedCase &c, const Tensor &packed,
                       int64_t rowWidth, int64_t firstHead, const Tensor &heads,
                       const std::string &what) {
  int64_t headCount = heads.dims()[1];
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < headCount; ++h)
      for (int64_t t = 0; t < c.seq; ++t)
        for (int64_t d = 0; d < c.headDim; ++d)
          EXPECT_EQ(packed.at(packedIndex(c, rowWidth, firstHead, b, h, t, d)),
                    heads.at(((b * headCount + h) * c.seq + t) * c.headDim + d))
              << what << " at [" << b << ", " << h << ", " << t << ", " << d
              << "]";
}

Tensor randomQkv(const PackedCase &c, uint32_t seed) {
  return randomTensor(c.packedShape(), seed, -1.5f, 1.5f);
}

void checkForward(const PackedCase &c) {
  SCOPED_TRACE(c.name);
  Tensor qkv = randomQkv(c, 21);
  Tensor y(TESSERA_F32, c.outputShape()), lse(TESSERA_F32, c.lseShape());
  EXPECT_KERNEL_OK(tessera_cpu_packed_attention(qkv.get(), y.get(), lse.get(),
                                                c.queryHeads, c.keyHeads,
                                                c.causal, kScale));

  int64_t width = c.packedWidth();
  Tensor q = unpackHeads(c, qkv, width, 0, c.queryHeads);
  Tensor k = unpackHeads(c, qkv, width, c.queryHeads, c.keyHeads);
  Tensor v = unpackHeads(c, qkv, width, c.queryHeads + c.keyHeads, c.keyHeads);
  Tensor expected(TESSERA_F32, c.headShape(c.queryHeads));
  EXPECT_KERNEL_OK(tessera_cpu_attention(q.get(), k.get(), v.get(), nullptr,
                                         expected.get(), c.causal, kScale, 0.0,
                                         0));
  expectPackedEqual(c, y, c.queryHeads * c.headDim, 0, expected, "y");

  // lse directly: log sum_j exp(scale q_i . k_j), no max subtracted (the
  // scores are small), query head h reading K head h / (Hq / Hkv).
  int64_t group = c.queryHeads / c.keyHeads;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.queryHeads; ++h)
      for (int64_t i = 0; i < c.seq; ++i) {
        double sum = 0.0;
        for (int64_t j = 0; j < (c.causal ? i + 1 : c.seq); ++j) {
          double dot = 0.0;
          for (int64_t d = 0; d < c.headDim; ++d)
            dot +=
                static_cast<double>(
                    qkv.at(packedIndex(c, width, 0, b, h, i, d))) *
                qkv.at(packedIndex(c, width, c.queryHeads, b, h / group, j, d));
          sum += std::exp(kScale * dot);
        }
        double expectedLse = std::log(sum);
        EXPECT_NEAR(lse.at((b * c.queryHeads + h) * c.seq + i), expectedLse,
                    1e-6 * (1.0 + std::fabs(expectedLse)))
            << "lse at [" << b << ", " << h << ", " << i << "]";
      }
}

void checkGradient(const PackedCase &c) {
  SCOPED_TRACE(c.name);
  Tensor qkv = randomQkv(c, 31);
  Tensor y(TESSERA_F32, c.outputShape()), lse(TESSERA_F32, c.lseShape());
  EXPECT_KERNEL_OK(tessera_cpu_packed_attention(qkv.get(), y.get(), lse.get(),
                                                c.queryHeads, c.keyHeads,
                                                c.causal, kScale));
  Tensor dy = randomTensor(c.outputShape(), 32);
  Tensor dqkv(TESSERA_F32, c.packedShape());
  EXPECT_KERNEL_OK(tessera_cpu_packed_attention_grad(
      qkv.get(), y.get(), lse.get(), dy.get(), dqkv.get(), c.queryHeads,
      c.keyHeads, c.causal, kScale));

  int64_t width = c.packedWidth();
  Tensor q = unpackHeads(c, qkv, width, 0, c.queryHeads);
  Tensor k = unpackHeads(c, qkv, width, c.queryHeads, c.keyHeads);
  Tensor v = unpackHeads(c, qkv, width, c.queryHeads + c.keyHeads, c.keyHeads);
  Tensor dyHeads =
      unpackHeads(c, dy, c.queryHeads * c.headDim, 0, c.queryHeads);
  Tensor dq(TESSERA_F32, c.headShape(c.queryHeads));
  Tensor dk(TESSERA_F32, c.headShape(c.keyHeads));
  Tensor dv(TESSERA_F32, c.headShape(c.keyHeads));
  EXPECT_KERNEL_OK(tessera_cpu_attention_grad(
      q.get(), k.get(), v.get(), nullptr, dyHeads.get(), dq.get(), dk.get(),
      dv.get(), c.causal, kScale, 0.0, 0));
  expectPackedEqual(c, dqkv, width, 0, dq, "dq");
  expectPackedEqual(c, dqkv, width, c.queryHeads, dk, "dk");
  expectPackedEqual(c, dqkv, width, c.queryHeads + c.keyHeads, dv, "dv");
}

const PackedCase kCausalGrouped = {"causal, Hq 4, Hkv 2", 2, 5, 4, 2, 8, true};
const PackedCase kGrouped = {"Hq 4, Hkv 2", 2, 5, 4, 2, 8, false};
const PackedCase kCausalMultiHead = {
    "causal, Hq 4, Hkv 4", 2, 5, 4, 4, 8, true};
const PackedCase kMultiHead = {"Hq 4, Hkv 4", 2, 5, 4, 4, 8, false};

TEST(PackedAttention, CausalGroupedQueryMatchesUnpackedAttention) {
  checkForward(kCausalGrouped);
}
TEST(PackedAttention, GroupedQueryMatchesUnpackedAttention) {
  checkForward(kGrouped);
}
TEST(PackedAttention, CausalMultiHeadMatchesUnpackedAttention) {
  checkForward(kCausalMultiHead);
}
TEST(PackedAttention, MultiHeadMatchesUnpackedAttention) {
  checkForward(kMultiHead);
}

TEST(PackedAttentionGrad, CausalGroupedQueryMatchesUnpackedGradient) {
  checkGradient(kCausalGrouped);
}
TEST(PackedAttentionGrad, GroupedQueryMatchesUnpackedGradient) {
  checkGradient(kGrouped);
}
TEST(PackedAttentionGrad, CausalMultiHeadMatchesUnpackedGradient) {
  checkGradient(kCausalMultiHead);
}
TEST(PackedAttentionGrad, MultiHeadMatchesUnpackedGradient) {
  checkGradient(kMultiHead);
}

TEST(PackedAttentionGrad, MatchesFiniteDifferences) {
  // Differentiates the packed forward itself, so the test does not rely on
  // its own unpacking for where dq, dk and dv land in dqkv.
  const PackedCase c = {"fd", 1, 4, 2, 1, 3, true};
  Tensor qkv = randomQkv(c, 41);
  Tensor y(TESSERA_F32, c.outputShape()), lse(TESSERA_F32, c.lseShape());
  std::vector<float> weights = randomFloats(countOf(c.outputShape()), 42);
  Tensor dy = Tensor::floats(c.outputShape(), weights);
  Tensor dqkv(TESSERA_F32, c.packedShape());
  EXPECT_KERNEL_OK(tessera_cpu_packed_attention(
      qkv.get(), y.get(), lse.get(), c.queryHeads, c.keyHeads, 1, kScale));
  EXPECT_KERNEL_OK(tessera_cpu_packed_attention_grad(
      qkv.get(), y.get(), lse.get(), dy.get(), dqkv.get(), c.queryHeads,
      c.keyHeads, 1, kScale));
  auto objective = [&] {
    EXPECT_KERNEL_OK(tessera_cpu_packed_attention(
        qkv.get(), y.get(), lse.get(), c.queryHeads, c.keyHeads, 1, kScale));
    return weightedSum(y, weights);
  };
  expectGradientNear(dqkv, numericGradient(qkv, objective), "dqkv");
}

TEST(PackedAttention, Bf16IsTheF32ResultRounded) {
  const PackedCase c = kCausalGrouped;
  Tensor qkv =
      Tensor::floats(c.packedShape(),
                     randomFloats(countOf(c.packedShape()), 51), TESSERA_BF16);
  Tensor qkvF32 = Tensor::floats(c.packedShape(), qkv.values());
  Tensor dy =
      Tensor::floats(c.outputShape(),
                     randomFloats(countOf(c.outputShape()), 52), TESSERA_BF16);
  Tensor dyF32 = Tensor::floats(c.outputShape(), dy.values());
  Tensor y(TESSERA_BF16, c.outputShape()), yF32(TESSERA_F32, c.outputShape());
  Tensor lse(TESSERA_F32, c.lseShape()), lseF32(TESSERA_F32, c.lseShape());
  Tensor dqkv(TESSERA_BF16, c.packedShape());
  Tensor dqkvF32(TESSERA_F32, c.packedShape());
  EXPECT_KERNEL_OK(tessera_cpu_packed_attention(
      qkv.get(), y.get(), lse.get(), c.queryHeads, c.keyHeads, 1, kScale));
  EXPECT_KERNEL_OK(tessera_cpu_packed_attention(qkvF32.get(), yF32.get(),
                                                lseF32.get(), c.queryHeads,
                                                c.keyHeads, 1, kScale));
  EXPECT_KERNEL_OK(tessera_cpu_packed_attention_grad(
      qkv.get(), y.get(), lse.get(), dy.get(), dqkv.get(), c.queryHeads,
      c.keyHeads, 1, kScale));
  EXPECT_KERNEL_OK(tessera_cpu_packed_attention_grad(
      qkvF32.get(), yF32.get(), lseF32.get(), dyF32.get(), dqkvF32.get(),
      c.queryHeads, c.keyHeads, 1, kScale));
  auto rounded = [](float value) {
    return tessera::cpu::bf16ToFloat(tessera::cpu::floatToBf16(value));
  };
  for (int64_t i = 0; i < y.count(); ++i)
    EXPECT_EQ(y.at(i), rounded(yF32.at(i))) << "y at " << i;
  // lse stays f32: the same values as the f32 call's.
  for (int64_t i = 0; i < lse.count(); ++i)
    EXPECT_EQ(lse.at(i), lseF32.at(i)) << "lse at " << i;
  for (int64_t i = 0; i < dqkv.count(); ++i)
    EXPECT_EQ(dqkv.at(i), rounded(dqkvF32.at(i))) << "dqkv at " << i;
}

/// Expects a failed call whose message names the kernel and holds `fragment`.
void expectRejected(int status, const char *kernel,
                    const std::string &fragment) {
  EXPECT_NE(status, 0);
  std::string message = tessera_cpu_last_error();
  EXPECT_EQ(message.rfind(std::string(kernel) + ": ", 0), 0u) << message;
  EXPECT_NE(message.find(fragment), std::string::npos) << message;
}

/// Well-formed operands of kCausalGrouped, for the calls below to spoil one.
struct Operands {
  PackedCase c = kCausalGrouped;
  Tensor qkv = randomQkv(c, 61);
  Tensor y{TESSERA_F32, c.outputShape()};
  Tensor lse{TESSERA_F32, c.lseShape()};
  Tensor dy{TESSERA_F32, c.outputShape()};
  Tensor dqkv{TESSERA_F32, c.packedShape()};

  int forward(const Tensor &qkvArgument, Tensor &yArgument, Tensor &lseArgument,
              int64_t queryHeads, int64_t keyHeads, double scale = kScale) {
    return tessera_cpu_packed_attention(qkvArgument.get(), yArgument.get(),
                                        lseArgument.get(), queryHeads, keyHeads,
                                        1, scale);
  }
  int backward(const Tensor &yArgument, const Tensor &lseArgument,
               const Tensor &dyArgument, Tensor &dqkvArgument,
               double scale = kScale) {
    return tessera_cpu_packed_attention_grad(
        qkv.get(), yArgument.get(), lseArgument.get(), dyArgument.get(),
        dqkvArgument.get(), c.queryHeads, c.keyHeads, 1, scale);
  }
};

const char *const kForward = "tessera_cpu_packed_attention";
const char *const kBackward = "tessera_cpu_packed_attention_grad";

TEST(PackedAttention, TheWellFormedOperandsAreAccepted) {
  // The rejections below then owe to the one operand each of them spoils.
  Operands o;
  EXPECT_KERNEL_OK(o.forward(o.qkv, o.y, o.lse, 4, 2));
  EXPECT_KERNEL_OK(o.backward(o.y, o.lse, o.dy, o.dqkv));
}

TEST(PackedAttention, RejectsAWrongYShape) {
  Operands o;
  Tensor wrongY(TESSERA_F32, {2, 5, 16});
  expectRejected(o.forward(o.qkv, wrongY, o.lse, 4, 2), kForward,
                 "y has shape [2, 5, 16], expected [2, 5, 32]");
  expectRejected(o.backward(wrongY, o.lse, o.dy, o.dqkv), kBackward,
                 "y has shape [2, 5, 16], expected [2, 5, 32]");
  Tensor bf16Y(TESSERA_BF16, o.c.outputShape());
  expectRejected(o.forward(o.qkv, bf16Y, o.lse, 4, 2), kForward,
                 "y (bf16) and qkv (f32) must have one dtype");
}

TEST(PackedAttention, RejectsLseThatIsNotF32) {
  Operands o;
  Tensor bf16Lse(TESSERA_BF16, o.c.lseShape());
  expectRejected(o.forward(o.qkv, o.y, bf16Lse, 4, 2), kForward,
                 "lse must be f32, not bf16");
  expectRejected(o.backward(o.y, bf16Lse, o.dy, o.dqkv), kBackward,
                 "lse must be f32, not bf16");
  Tensor wrongLse(TESSERA_F32, {2, 5, 4});
  expectRejected(o.forward(o.qkv, o.y, wrongLse, 4, 2), kForward,
                 "lse has shape [2, 5, 4], expected [2, 4, 5]");
}

TEST(PackedAttention, RejectsAQkvWidthNotDivisibleByTheHeads) {
  Operands o;
  Tensor qkv(TESSERA_F32, {2, 5, 60});
  expectRejected(o.forward(qkv, o.y, o.lse, 4, 2), kForward,
                 "qkv's last dim 60 is not divisible by query_heads + 2 "
                 "key_heads = 8");
  Tensor flat(TESSERA_F32, {10, 64});
  expectRejected(o.forward(flat, o.y, o.lse, 4, 2), kForward,
                 "qkv needs rank 3");
}

TEST(PackedAttention, RejectsQueryHeadsNotAMultipleOfKeyHeads) {
  Operands o;
  // 3 + 2 * 2 = 7 heads of 8: the width fits, the grouping does not.
  Tensor qkv(TESSERA_F32, {2, 5, 56});
  Tensor y(TESSERA_F32, {2, 5, 24}), lse(TESSERA_F32, {2, 3, 5});
  expectRejected(o.forward(qkv, y, lse, 3, 2), kForward,
                 "query_heads 3 is not a multiple of key_heads 2");
  expectRejected(o.forward(o.qkv, o.y, o.lse, 0, 2), kForward,
                 "query_heads 0 must be >= 1");
  expectRejected(o.forward(o.qkv, o.y, o.lse, 4, 0), kForward,
                 "key_heads 0 must be >= 1");
}

TEST(PackedAttention, RejectsANonPositiveScale) {
  Operands o;
  for (double scale : {0.0, -0.5, std::numeric_limits<double>::infinity(),
                       std::numeric_limits<double>::quiet_NaN()}) {
    SCOPED_TRACE(scale);
    expectRejected(o.forward(o.qkv, o.y, o.lse, 4, 2, scale), kForward,
                   "must be positive and finite");
    expectRejected(o.backward(o.y, o.lse, o.dy, o.dqkv, scale), kBackward,
                   "must be positive and finite");
  }
  expectRejected(o.forward(o.qkv, o.y, o.lse, 4, 2, -0.5), kForward,
                 "scale -0.500000");
}

TEST(PackedAttentionGrad, RejectsGradientsOfTheWrongShape) {
  Operands o;
  Tensor wrongDy(TESSERA_F32, {2, 5, 31});
  expectRejected(o.backward(o.y, o.lse, wrongDy, o.dqkv), kBackward,
                 "dy has shape [2, 5, 31], expected [2, 5, 32]");
  Tensor wrongDqkv(TESSERA_F32, {2, 5, 32});
  expectRejected(o.backward(o.y, o.lse, o.dy, wrongDqkv), kBackward,
                 "dqkv has shape [2, 5, 32], expected [2, 5, 64]");
  Tensor bf16Dqkv(TESSERA_BF16, o.c.packedShape());
  expectRejected(o.backward(o.y, o.lse, o.dy, bf16Dqkv), kBackward,
                 "dqkv (bf16) and qkv (f32) must have one dtype");
}

} // namespace
