//===- PackedAttentionCudaTest.cpp - tess.packed_attention on the GPU -----===//
//
// The packed kernels against the CPU reference (runtime/cpu/
// PackedAttention.cpp), which is itself checked against the unpacked
// attention: y, lse and dqkv. Every case runs twice: with cuDNN's fused
// attention off, where the bf16/f16 cases at head dim 64 take the flash
// kernels through their strided head layouts (GPT-2's shape among them,
// grouped heads too) and f32 and other head dims take the unpack-and-pack
// fallback; and with it on, where cuDNN must serve every 16-bit case. The
// backward reads the forward's y and lse, so the GPU's own forward results
// feed it, as in a training step; one case feeds cuDNN's statistics to the
// flash backward, the mix a shape cuDNN refuses only backward would run.
//
//===----------------------------------------------------------------------===//

#include "AttentionKernels.h"
#include "CudaTestUtil.h"

using namespace tessera_test;

namespace {

struct PackedCase {
  const char *name;
  int64_t batch, seq, queryHeads, keyHeads, headDim;
  bool causal;
  int32_t dtype;
};

using tessera::cuda::cudnnAttentionAvailable;
using tessera::cuda::cudnnAttentionCalls;
using tessera::cuda::setCudnnAttentionEnabled;

/// Which library may run each direction: cuDNN when on, else Tessera's.
struct Libraries {
  bool cudnnForward, cudnnBackward;
};

/// Restores the process default (cuDNN on) when a test ends.
struct CudnnDefault {
  ~CudnnDefault() { setCudnnAttentionEnabled(true); }
};

void checkPacked(const PackedCase &c, Libraries libraries) {
  SCOPED_TRACE(c.name);
  int64_t width = (c.queryHeads + 2 * c.keyHeads) * c.headDim;
  Shape qkvShape = {c.batch, c.seq, width};
  Shape yShape = {c.batch, c.seq, c.queryHeads * c.headDim};
  Shape lseShape = {c.batch, c.queryHeads, c.seq};
  Tensor qkv = randomTensor(c.dtype, qkvShape, 11, -2.0f, 2.0f);
  Tensor dy = randomTensor(c.dtype, yShape, 12);
  double scale = 1.0 / std::sqrt(static_cast<double>(c.headDim));
  Tensor y(c.dtype, yShape), lse(TESSERA_F32, lseShape),
      dqkv(c.dtype, qkvShape);
  EXPECT_CPU_KERNEL_OK(tessera_cpu_packed_attention(
      qkv.get(), y.get(), lse.get(), c.queryHeads, c.keyHeads, c.causal,
      scale));
  EXPECT_CPU_KERNEL_OK(tessera_cpu_packed_attention_grad(
      qkv.get(), y.get(), lse.get(), dy.get(), dqkv.get(), c.queryHeads,
      c.keyHeads, c.causal, scale));

  DeviceTensor gqkv(qkv), gdy(dy), gy(c.dtype, yShape),
      glse(TESSERA_F32, lseShape), gdqkv(c.dtype, qkvShape);
  setCudnnAttentionEnabled(libraries.cudnnForward);
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_packed_attention(
      gqkv.get(), gy.get(), glse.get(), c.queryHeads, c.keyHeads, c.causal,
      scale, nullptr));
  setCudnnAttentionEnabled(libraries.cudnnBackward);
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_packed_attention_grad(
      gqkv.get(), gy.get(), glse.get(), gdy.get(), gdqkv.get(), c.queryHeads,
      c.keyHeads, c.causal, scale, nullptr));
  expectDeviceClean();
  double rtol = c.dtype == TESSERA_F32 ? 1e-4 : toleranceFor(c.dtype);
  expectTensorsNear(gy.download(), y, rtol, attentionAbsoluteTolerance(c.dtype, y),
                    "packed y");
  // The log-sum-exp is f32 on both sides; the GPU's scores come from
  // rounded 16-bit operands through exp2/log2, a few ulps of |lse|.
  expectTensorsNear(glse.download(), lse, 1e-4, 1e-4, "packed lse");
  expectTensorsNear(gdqkv.download(), dqkv, rtol,
                    attentionAbsoluteTolerance(c.dtype, dqkv), "packed dqkv");
}

const PackedCase kCases[] = {
      {"flash bf16 causal GPT-2 heads", 2, 256, 12, 12, 64, true,
       TESSERA_BF16},
      {"flash f16 plain 77", 1, 77, 2, 2, 64, false, TESSERA_F16},
      {"flash bf16 grouped causal 130", 2, 130, 4, 2, 64, true, TESSERA_BF16},
      {"bf16 head dim 128 falls back", 1, 200, 2, 1, 128, true,
       TESSERA_BF16},
      {"f32 causal falls back", 2, 33, 2, 2, 16, true, TESSERA_F32},
      {"f32 grouped falls back", 1, 20, 4, 2, 64, false, TESSERA_F32},
      {"bf16 head dim 32 falls back", 1, 40, 2, 2, 32, true, TESSERA_BF16},
};

TEST(PackedAttentionCuda, MatchesTheCpuReference) {
  REQUIRE_GPU();
  CudnnDefault restore;
  for (const PackedCase &c : kCases)
    checkPacked(c, {false, false});
}

TEST(PackedAttentionCuda, CudnnMatchesTheCpuReference) {
  REQUIRE_GPU();
  if (!cudnnAttentionAvailable())
    GTEST_SKIP() << "cuDNN attention is not in this build or libcudnn.so.9 "
                    "did not open";
  CudnnDefault restore;
  for (const PackedCase &c : kCases) {
    int64_t before = cudnnAttentionCalls();
    checkPacked(c, {true, true});
    int64_t expected = c.dtype == TESSERA_F32 ? 0 : 2;
    EXPECT_EQ(cudnnAttentionCalls() - before, expected) << c.name;
  }
}

TEST(PackedAttentionCuda, CudnnStatisticsFeedTheFlashBackward) {
  REQUIRE_GPU();
  if (!cudnnAttentionAvailable())
    GTEST_SKIP() << "cuDNN attention is not in this build";
  CudnnDefault restore;
  int64_t before = cudnnAttentionCalls();
  checkPacked(kCases[0], {true, false});
  checkPacked(kCases[2], {true, false});
  EXPECT_EQ(cudnnAttentionCalls() - before, 2);
}

// tessera_cuda_set_deterministic: cuDNN's backward built with a fixed
// reduction order gives the same dqkv bits on every call (at a length of
// several key blocks, where the default's atomic dq additions vary), and
// still matches the CPU reference.
TEST(PackedAttentionCuda, DeterministicBackwardRepeatsItsBits) {
  REQUIRE_GPU();
  if (!cudnnAttentionAvailable())
    GTEST_SKIP() << "cuDNN attention is not in this build";
  CudnnDefault restore;
  struct Deterministic {
    Deterministic() { tessera_cuda_set_deterministic(1); }
    ~Deterministic() { tessera_cuda_set_deterministic(0); }
  } on;
  const PackedCase c = {"deterministic bf16 grouped causal 1024", 2, 1024, 8,
                        2, 64, true, TESSERA_BF16};
  int64_t before = cudnnAttentionCalls();
  checkPacked(c, {true, true});
  EXPECT_EQ(cudnnAttentionCalls() - before, 2);
  int64_t width = (c.queryHeads + 2 * c.keyHeads) * c.headDim;
  Shape qkvShape = {c.batch, c.seq, width};
  Shape yShape = {c.batch, c.seq, c.queryHeads * c.headDim};
  DeviceTensor qkv(randomTensor(c.dtype, qkvShape, 21, -2.0f, 2.0f)),
      dy(randomTensor(c.dtype, yShape, 22)), y(c.dtype, yShape),
      lse(TESSERA_F32, {c.batch, c.queryHeads, c.seq}),
      first(c.dtype, qkvShape), second(c.dtype, qkvShape);
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_packed_attention(
      qkv.get(), y.get(), lse.get(), c.queryHeads, c.keyHeads, true, 0.125,
      nullptr));
  for (DeviceTensor *out : {&first, &second})
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_packed_attention_grad(
        qkv.get(), y.get(), lse.get(), dy.get(), out->get(), c.queryHeads,
        c.keyHeads, true, 0.125, nullptr));
  expectDeviceClean();
  expectTensorsNear(first.download(), second.download(), 0.0, 0.0,
                    "dqkv of two deterministic calls");
}

// tessera_cuda_set_attention_autotune: a shape first seen with autotuning
// on is built with every configuration cuDNN's heuristics offer and runs
// the fastest, timed on its first (eager) call; each must still match the
// CPU reference, at the 1B Llama shape's heads (GQA 32/8 of 64) and at a
// length of several tiles, and cuDNN must still serve every call. The
// shapes are new to this process (plans are kept per shape), so these are
// the autotuned plans, not earlier tests' ones.
TEST(PackedAttentionCuda, AutotunedConfigurationsMatchTheCpuReference) {
  REQUIRE_GPU();
  if (!cudnnAttentionAvailable())
    GTEST_SKIP() << "cuDNN attention is not in this build";
  CudnnDefault restore;
  struct Autotune {
    Autotune() { tessera_cuda_set_attention_autotune(1); }
    ~Autotune() { tessera_cuda_set_attention_autotune(0); }
  } on;
  const PackedCase cases[] = {
      {"autotuned bf16 Llama 1B heads causal 512", 1, 512, 32, 8, 64, true,
       TESSERA_BF16},
      {"autotuned f16 plain 300", 2, 300, 4, 4, 64, false, TESSERA_F16},
  };
  for (const PackedCase &c : cases) {
    int64_t before = cudnnAttentionCalls();
    checkPacked(c, {true, true});
    EXPECT_EQ(cudnnAttentionCalls() - before, 2) << c.name;
  }
}

TEST(PackedAttentionCuda, RejectsBadOperandsNamingThem) {
  REQUIRE_GPU();
  Shape qkvShape = {1, 8, 96};
  DeviceTensor qkv(TESSERA_BF16, qkvShape), y(TESSERA_BF16, {1, 8, 32}),
      lse(TESSERA_BF16, {1, 2, 8});
  EXPECT_NE(tessera_cuda_packed_attention(qkv.get(), y.get(), lse.get(), 2, 2,
                                          1, 0.25, nullptr),
            0);
  EXPECT_NE(std::string(tessera_cuda_last_error()).find("lse must be f32"),
            std::string::npos)
      << tessera_cuda_last_error();
}

} // namespace
