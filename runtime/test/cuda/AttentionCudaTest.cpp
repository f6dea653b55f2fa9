//===- AttentionCudaTest.cpp - Fused attention forward and backward -------===//

#include "CudaTestUtil.h"

#include "AttentionKernels.h"

using namespace tessera_test;
using tessera::cuda::cudnnAttentionAvailable;
using tessera::cuda::cudnnAttentionCalls;
using tessera::cuda::setCudnnAttentionEnabled;

namespace {

/// Ends the test as skipped where the cuDNN path cannot run.
#define SKIP_WITHOUT_CUDNN()                                                   \
  if (!cudnnAttentionAvailable())                                              \
  GTEST_SKIP() << "cuDNN attention is not in this build or libcudnn.so.9 "    \
                  "did not open"

/// Turns cuDNN's engines back on when a test that chose the path ends.
struct CudnnDefault {
  ~CudnnDefault() { setCudnnAttentionEnabled(true); }
};

struct AttentionCase {
  const char *name;
  int64_t batch, queryHeads, keyHeads, querySeq, keySeq, headDim, valueDim;
  bool causal;
  bool mask;
  double dropout;
  int32_t dtype;
  float querySpread = 1.0f; // q in [-spread, spread]: larger, peakier scores
  int64_t window = 0;       // a sliding window (causal): the *_sliding_window_* entries
  double softcap = 0.0;     // Gemma-2's logit cap: the *_softcapped_* entries
};

void checkAttention(const AttentionCase &c) {
  SCOPED_TRACE(c.name);
  Shape qShape = {c.batch, c.queryHeads, c.querySeq, c.headDim};
  Shape kShape = {c.batch, c.keyHeads, c.keySeq, c.headDim};
  Shape vShape = {c.batch, c.keyHeads, c.keySeq, c.valueDim};
  Shape yShape = {c.batch, c.queryHeads, c.querySeq, c.valueDim};
  Shape maskShape = {c.batch, 1, c.querySeq, c.keySeq};
  Tensor q =
      randomTensor(c.dtype, qShape, 1, -c.querySpread, c.querySpread);
  Tensor k = randomTensor(c.dtype, kShape, 2);
  Tensor v = randomTensor(c.dtype, vShape, 3);
  Tensor dy = randomTensor(c.dtype, yShape, 4);
  std::vector<float> maskValues = randomFloats(countOf(maskShape), 5, -2, 1);
  // Hide some keys entirely, and one whole query row of batch 0.
  for (size_t i = 0; i < maskValues.size(); ++i)
    if (i % 7 == 2 || i < static_cast<size_t>(c.keySeq))
      maskValues[i] = -INFINITY;
  Tensor mask = Tensor::floats(maskShape, maskValues, c.dtype);
  double scale = 1.0 / std::sqrt(static_cast<double>(c.headDim));
  uint64_t seed = 99;
  const tessera_tensor *maskArg = c.mask ? mask.get() : nullptr;
  Tensor y(c.dtype, yShape), dq(c.dtype, qShape), dk(c.dtype, kShape),
      dv(c.dtype, vShape);
  if (c.softcap != 0.0) {
    EXPECT_CPU_KERNEL_OK(tessera_cpu_softcapped_attention(
        q.get(), k.get(), v.get(), maskArg, y.get(), c.causal, c.window, scale,
        c.softcap, c.dropout, seed));
    EXPECT_CPU_KERNEL_OK(tessera_cpu_softcapped_attention_grad(
        q.get(), k.get(), v.get(), maskArg, dy.get(), dq.get(), dk.get(),
        dv.get(), c.causal, c.window, scale, c.softcap, c.dropout, seed));
  } else if (c.window) {
    EXPECT_CPU_KERNEL_OK(tessera_cpu_sliding_window_attention(
        q.get(), k.get(), v.get(), maskArg, y.get(), c.window, scale,
        c.dropout, seed));
    EXPECT_CPU_KERNEL_OK(tessera_cpu_sliding_window_attention_grad(
        q.get(), k.get(), v.get(), maskArg, dy.get(), dq.get(), dk.get(),
        dv.get(), c.window, scale, c.dropout, seed));
  } else {
    EXPECT_CPU_KERNEL_OK(tessera_cpu_attention(q.get(), k.get(), v.get(),
                                               maskArg, y.get(), c.causal,
                                               scale, c.dropout, seed));
    EXPECT_CPU_KERNEL_OK(tessera_cpu_attention_grad(
        q.get(), k.get(), v.get(), maskArg, dy.get(), dq.get(), dk.get(),
        dv.get(), c.causal, scale, c.dropout, seed));
  }
  DeviceTensor gq(q), gk(k), gv(v), gmask(mask), gdy(dy), gy(c.dtype, yShape),
      gdq(c.dtype, qShape), gdk(c.dtype, kShape), gdv(c.dtype, vShape);
  const tessera_tensor *gmaskArg = c.mask ? gmask.get() : nullptr;
  if (c.softcap != 0.0) {
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_softcapped_attention(
        gq.get(), gk.get(), gv.get(), gmaskArg, gy.get(), c.causal, c.window,
        scale, c.softcap, c.dropout, seed, nullptr));
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_softcapped_attention_grad(
        gq.get(), gk.get(), gv.get(), gmaskArg, gdy.get(), gdq.get(),
        gdk.get(), gdv.get(), c.causal, c.window, scale, c.softcap, c.dropout,
        seed, nullptr));
  } else if (c.window) {
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_sliding_window_attention(
        gq.get(), gk.get(), gv.get(), gmaskArg, gy.get(), c.window, scale,
        c.dropout, seed, nullptr));
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_sliding_window_attention_grad(
        gq.get(), gk.get(), gv.get(), gmaskArg, gdy.get(), gdq.get(),
        gdk.get(), gdv.get(), c.window, scale, c.dropout, seed, nullptr));
  } else {
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_attention(
        gq.get(), gk.get(), gv.get(), gmaskArg, gy.get(), c.causal, scale,
        c.dropout, seed, nullptr));
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_attention_grad(
        gq.get(), gk.get(), gv.get(), gmaskArg, gdy.get(), gdq.get(),
        gdk.get(), gdv.get(), c.causal, scale, c.dropout, seed, nullptr));
  }
  expectDeviceClean();
  double rtol = c.dtype == TESSERA_F32 ? 1e-4 : toleranceFor(c.dtype);
  expectTensorsNear(gy.download(), y, rtol, attentionAbsoluteTolerance(c.dtype, y),
                    "attention y");
  expectTensorsNear(gdq.download(), dq, rtol, attentionAbsoluteTolerance(c.dtype, dq),
                    "attention dq");
  expectTensorsNear(gdk.download(), dk, rtol, attentionAbsoluteTolerance(c.dtype, dk),
                    "attention dk");
  expectTensorsNear(gdv.download(), dv, rtol, attentionAbsoluteTolerance(c.dtype, dv),
                    "attention dv");
}

TEST(AttentionCuda, MatchesTheCpuReference) {
  REQUIRE_GPU();
  const AttentionCase cases[] = {
      {"plain", 2, 3, 3, 17, 17, 16, 16, false, false, 0.0, TESSERA_F32},
      {"causal", 2, 2, 2, 33, 33, 64, 64, true, false, 0.0, TESSERA_F32},
      {"causal shorter queries", 1, 2, 2, 9, 20, 32, 24, true, false, 0.0,
       TESSERA_F32},
      {"grouped-query", 2, 6, 2, 12, 15, 40, 40, false, false, 0.0,
       TESSERA_F32},
      {"mask with hidden rows", 2, 2, 2, 10, 14, 16, 16, false, true, 0.0,
       TESSERA_F32},
      {"dropout", 1, 2, 1, 16, 16, 32, 32, true, false, 0.2, TESSERA_F32},
      {"head dim 128", 1, 2, 2, 20, 20, 128, 128, true, false, 0.0,
       TESSERA_F32},
      {"bf16 causal", 2, 4, 4, 64, 64, 64, 64, true, false, 0.0, TESSERA_BF16},
  };
  for (const AttentionCase &c : cases)
    checkAttention(c);
}

// bf16/f16 with head dim 64 or 128 and neither mask nor dropout take the
// tiled tensor-core kernels (FlashAttention.cu): sequence lengths that are
// not multiples of the 64-row tiles, causal with fewer queries than keys,
// grouped-query heads, and scores spread enough to exercise the online
// softmax's rescaling. The last cases keep 16-bit calls that fall back.
const AttentionCase kFlashCases[] = {
      {"flash bf16 causal 77", 2, 3, 3, 77, 77, 64, 64, true, false, 0.0,
       TESSERA_BF16, 4.0f},
      {"flash f16 plain 77", 1, 2, 2, 77, 77, 64, 64, false, false, 0.0,
       TESSERA_F16},
      {"flash bf16 grouped causal 1000", 1, 4, 2, 1000, 1000, 64, 64, true,
       false, 0.0, TESSERA_BF16, 2.0f},
      {"flash f16 grouped plain 1000 keys", 2, 4, 1, 50, 1000, 64, 64, false,
       false, 0.0, TESSERA_F16, 4.0f},
      {"flash f16 causal head dim 128", 1, 2, 2, 200, 200, 128, 128, true,
       false, 0.0, TESSERA_F16, 2.0f},
      {"flash bf16 grouped causal shorter queries 128", 1, 6, 2, 77, 130, 128,
       128, true, false, 0.0, TESSERA_BF16, 4.0f},
      {"flash bf16 causal 1000 head dim 128", 1, 2, 1, 1000, 1000, 128, 128,
       true, false, 0.0, TESSERA_BF16},
      {"flash bf16 plain 128 one row", 1, 1, 1, 1, 65, 128, 128, false, false,
       0.0, TESSERA_BF16},
      {"bf16 mask falls back", 1, 2, 2, 33, 33, 64, 64, false, true, 0.0,
       TESSERA_BF16},
      {"f16 dropout falls back", 1, 2, 2, 33, 33, 64, 64, true, false, 0.1,
       TESSERA_F16},
      {"bf16 head dim 32 falls back", 1, 2, 2, 33, 33, 32, 32, true, false,
       0.0, TESSERA_BF16},
};

TEST(AttentionCuda, FlashPathMatchesTheCpuReference) {
  REQUIRE_GPU();
  CudnnDefault restore;
  setCudnnAttentionEnabled(false);
  for (const AttentionCase &c : kFlashCases)
    checkAttention(c);
}

// With cuDNN on, every 16-bit call without mask or dropout whose queries
// and keys have one length runs on its engines (forward 1 call, backward 2:
// the recomputed forward, then the backward); the rest still fall back.
// Llama-family forms: grouped and multi-query K/V heads read as they are,
// head dims 64, 128 and 256.
TEST(AttentionCuda, CudnnMatchesTheCpuReference) {
  REQUIRE_GPU();
  SKIP_WITHOUT_CUDNN();
  CudnnDefault restore;
  const AttentionCase llamaCases[] = {
      {"cudnn bf16 grouped 4:1 causal 256", 2, 8, 2, 256, 256, 64, 64, true,
       false, 0.0, TESSERA_BF16, 2.0f},
      {"cudnn bf16 multi-query causal head dim 128", 1, 4, 1, 200, 200, 128,
       128, true, false, 0.0, TESSERA_BF16, 2.0f},
      {"cudnn f16 plain head dim 256", 1, 2, 2, 96, 96, 256, 256, false, false,
       0.0, TESSERA_F16},
  };
  auto expectedCalls = [](const AttentionCase &c) -> int64_t {
    bool eligible = c.dtype != TESSERA_F32 && !c.mask && c.dropout == 0.0 &&
                    c.querySeq == c.keySeq && c.headDim == c.valueDim &&
                    c.headDim % 8 == 0;
    return eligible ? 3 : 0;
  };
  for (const AttentionCase &c : kFlashCases) {
    int64_t before = cudnnAttentionCalls();
    checkAttention(c);
    EXPECT_EQ(cudnnAttentionCalls() - before, expectedCalls(c)) << c.name;
  }
  for (const AttentionCase &c : llamaCases) {
    int64_t before = cudnnAttentionCalls();
    checkAttention(c);
    // Head dim 256 may be refused by an older cuDNN (then the general
    // kernels ran and matched the reference above).
    if (c.headDim <= 128) {
      EXPECT_EQ(cudnnAttentionCalls() - before, expectedCalls(c)) << c.name;
    }
  }
}

// Mistral's sliding window against the CPU's banded kernels: the general
// kernels (f32, and 16-bit with cuDNN off) over the band only, including
// fewer queries than keys, a window of 1 and one past the sequence; then,
// with cuDNN on, 16-bit grouped heads on its engines (the diagonal band:
// forward 1 call, backward 2), and a mask or dropout falling back.
TEST(AttentionCuda, SlidingWindowMatchesTheCpuReference) {
  REQUIRE_GPU();
  CudnnDefault restore;
  const AttentionCase general[] = {
      {"window 16 f32 grouped", 2, 4, 2, 100, 100, 32, 32, true, false, 0.0,
       TESSERA_F32, 2.0f, 16},
      {"window 5 f32 shorter queries", 1, 2, 2, 20, 37, 16, 16, true, false,
       0.0, TESSERA_F32, 1.0f, 5},
      {"window 1 f32", 1, 2, 1, 24, 24, 16, 16, true, false, 0.0, TESSERA_F32,
       1.0f, 1},
      {"window past the sequence f32", 1, 2, 2, 24, 24, 16, 16, true, false,
       0.0, TESSERA_F32, 1.0f, 500},
      {"window 8 f32 mask and dropout", 1, 2, 2, 30, 30, 16, 16, true, true,
       0.1, TESSERA_F32, 1.0f, 8},
      {"window 40 bf16 grouped", 1, 4, 1, 130, 130, 64, 64, true, false, 0.0,
       TESSERA_BF16, 2.0f, 40},
  };
  setCudnnAttentionEnabled(false);
  for (const AttentionCase &c : general)
    checkAttention(c);
  setCudnnAttentionEnabled(true);
  SKIP_WITHOUT_CUDNN();
  const AttentionCase cudnn[] = {
      {"cudnn window 64 bf16 grouped 4:1", 2, 8, 2, 256, 256, 64, 64, true,
       false, 0.0, TESSERA_BF16, 2.0f, 64},
      {"cudnn window 100 f16 head dim 128", 1, 4, 2, 300, 300, 128, 128, true,
       false, 0.0, TESSERA_F16, 2.0f, 100},
  };
  for (const AttentionCase &c : cudnn) {
    int64_t before = cudnnAttentionCalls();
    checkAttention(c);
    EXPECT_EQ(cudnnAttentionCalls() - before, 3) << c.name;
  }
  AttentionCase masked = cudnn[0];
  masked.name = "cudnn window with a mask falls back";
  masked.mask = true;
  int64_t before = cudnnAttentionCalls();
  checkAttention(masked);
  EXPECT_EQ(cudnnAttentionCalls() - before, 0);
}

// Gemma-2's softcap against the CPU's softcapped kernels, on scores spread
// wide enough (q in [-6, 6]) for the cap to bend them: the general kernels
// (f32, and bf16 with cuDNN off) plain, causal with a window, with a mask
// and dropout, fewer queries than keys; then, with cuDNN on, grouped bf16
// heads with its Softcap score modifier, which also builds the causal mask
// and the window (the frontend refuses its own beside a modifier), plain,
// causal and windowed. Whether cuDNN builds those graphs depends on its
// version (a refused shape falls back to the general kernels): the values
// must match either way, and the calls it served are recorded.
TEST(AttentionCuda, SoftcapMatchesTheCpuReference) {
  REQUIRE_GPU();
  CudnnDefault restore;
  const AttentionCase general[] = {
      {"softcap 2 f32 grouped plain", 2, 4, 2, 40, 40, 32, 32, false, false,
       0.0, TESSERA_F32, 6.0f, 0, 2.0},
      {"softcap 3 f32 causal window 9", 1, 2, 1, 37, 37, 16, 16, true, false,
       0.0, TESSERA_F32, 6.0f, 9, 3.0},
      {"softcap 2 f32 mask and dropout", 1, 2, 2, 20, 20, 16, 16, true, true,
       0.1, TESSERA_F32, 6.0f, 0, 2.0},
      {"softcap 4 f32 shorter queries", 1, 2, 2, 12, 30, 16, 16, true, false,
       0.0, TESSERA_F32, 6.0f, 0, 4.0},
      {"softcap 5 bf16 causal", 1, 4, 2, 70, 70, 64, 64, true, false, 0.0,
       TESSERA_BF16, 6.0f, 0, 5.0},
  };
  setCudnnAttentionEnabled(false);
  for (const AttentionCase &c : general)
    checkAttention(c);
  setCudnnAttentionEnabled(true);
  SKIP_WITHOUT_CUDNN();
  const AttentionCase cudnn[] = {
      {"cudnn softcap 5 bf16 grouped", 2, 8, 2, 256, 256, 64, 64, false,
       false, 0.0, TESSERA_BF16, 6.0f, 0, 5.0},
      {"cudnn softcap 5 bf16 grouped causal", 2, 8, 2, 256, 256, 64, 64, true,
       false, 0.0, TESSERA_BF16, 6.0f, 0, 5.0},
      {"cudnn softcap 5 bf16 window 64", 1, 4, 2, 200, 200, 128, 128, true,
       false, 0.0, TESSERA_BF16, 6.0f, 64, 5.0},
  };
  for (const AttentionCase &c : cudnn) {
    int64_t before = cudnnAttentionCalls();
    checkAttention(c);
    ::testing::Test::RecordProperty(
        c.name, std::to_string(cudnnAttentionCalls() - before));
    std::printf("%s: %lld of 3 calls on cuDNN\n", c.name,
                static_cast<long long>(cudnnAttentionCalls() - before));
  }
}

// A softcap that is not positive is an error naming it, as on the CPU.
TEST(AttentionCuda, SoftcapNotPositiveIsAnError) {
  REQUIRE_GPU();
  DeviceTensor q(TESSERA_F32, {1, 1, 4, 8}), y(TESSERA_F32, {1, 1, 4, 8});
  EXPECT_NE(tessera_cuda_softcapped_attention(q.get(), q.get(), q.get(),
                                              nullptr, y.get(), 1, 0, 1.0,
                                              0.0, 0.0, 0, nullptr),
            0);
  EXPECT_NE(std::string(tessera_cuda_last_error()).find("softcap"),
            std::string::npos)
      << tessera_cuda_last_error();
}

// A window below 1 is an error naming it, as on the CPU.
TEST(AttentionCuda, SlidingWindowBelowOneIsAnError) {
  REQUIRE_GPU();
  DeviceTensor q(TESSERA_F32, {1, 1, 4, 8}), y(TESSERA_F32, {1, 1, 4, 8});
  EXPECT_NE(tessera_cuda_sliding_window_attention(q.get(), q.get(), q.get(),
                                                  nullptr, y.get(), 0, 1.0,
                                                  0.0, 0, nullptr),
            0);
  EXPECT_NE(std::string(tessera_cuda_last_error()).find("at least 1"),
            std::string::npos)
      << tessera_cuda_last_error();
}

// The general kernels' dk and dv sum over every query row that sees a key
// (and every grouped query head): long sequences give each key hundreds of
// terms. Repeated calls must give the same bits (f32 atomics did not).
TEST(AttentionCuda, GeneralBackwardIsBitwiseDeterministic) {
  REQUIRE_GPU();
  const AttentionCase cases[] = {
      {"grouped causal 384", 2, 4, 2, 384, 384, 64, 64, true, false, 0.0,
       TESSERA_F32},
      {"mask 300", 1, 2, 2, 300, 300, 32, 32, false, true, 0.0, TESSERA_F32},
      {"dropout causal shorter queries", 1, 3, 1, 200, 333, 48, 40, true,
       false, 0.1, TESSERA_F32},
      {"bf16 head dim 32 causal 512", 1, 2, 2, 512, 512, 32, 32, true, false,
       0.0, TESSERA_BF16},
  };
  for (const AttentionCase &c : cases) {
    SCOPED_TRACE(c.name);
    checkAttention(c); // and the CPU reference agrees
    Shape qShape = {c.batch, c.queryHeads, c.querySeq, c.headDim};
    Shape kShape = {c.batch, c.keyHeads, c.keySeq, c.headDim};
    Shape vShape = {c.batch, c.keyHeads, c.keySeq, c.valueDim};
    Shape yShape = {c.batch, c.queryHeads, c.querySeq, c.valueDim};
    Shape maskShape = {c.batch, 1, c.querySeq, c.keySeq};
    DeviceTensor gq(randomTensor(c.dtype, qShape, 51, -2.0f, 2.0f)),
        gk(randomTensor(c.dtype, kShape, 52)),
        gv(randomTensor(c.dtype, vShape, 53)),
        gdy(randomTensor(c.dtype, yShape, 54)),
        gmask(randomTensor(c.dtype, maskShape, 55, -2.0f, 1.0f));
    const tessera_tensor *gmaskArg = c.mask ? gmask.get() : nullptr;
    double scale = 1.0 / std::sqrt(static_cast<double>(c.headDim));
    std::vector<Tensor> dqs, dks, dvs;
    for (int call = 0; call < 3; ++call) {
      DeviceTensor gdq(c.dtype, qShape), gdk(c.dtype, kShape),
          gdv(c.dtype, vShape);
      EXPECT_CUDA_KERNEL_OK(tessera_cuda_attention_grad(
          gq.get(), gk.get(), gv.get(), gmaskArg, gdy.get(), gdq.get(),
          gdk.get(), gdv.get(), c.causal, scale, c.dropout, 7, nullptr));
      expectDeviceClean();
      dqs.push_back(gdq.download());
      dks.push_back(gdk.download());
      dvs.push_back(gdv.download());
    }
    for (int call = 1; call < 3; ++call) {
      expectSameBits(dqs[call], dqs[0], "attention dq");
      expectSameBits(dks[call], dks[0], "attention dk");
      expectSameBits(dvs[call], dvs[0], "attention dv");
    }
  }
}

TEST(AttentionCuda, OversizedHeadDimIsAnError) {
  REQUIRE_GPU();
  DeviceTensor q(TESSERA_F32, {1, 1, 2, 300}), k(TESSERA_F32, {1, 1, 2, 300}),
      v(TESSERA_F32, {1, 1, 2, 300}), y(TESSERA_F32, {1, 1, 2, 300});
  EXPECT_NE(tessera_cuda_attention(q.get(), k.get(), v.get(), nullptr, y.get(),
                                   0, 0.1, 0.0, 0, nullptr),
            0);
  EXPECT_NE(std::string(tessera_cuda_last_error()).find("head dims above 256"),
            std::string::npos)
      << tessera_cuda_last_error();
}

} // namespace
