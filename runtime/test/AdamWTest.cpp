//===- AdamWTest.cpp - tessera_cpu_adamw against torch.optim.AdamW --------===//

#include "TestUtil.h"
#include "reference/TorchReferences.h"

using namespace tessera_test;

namespace {

constexpr double kLearningRate = 1e-3, kBeta1 = 0.9, kBeta2 = 0.95,
                 kEpsilon = 1e-8, kWeightDecay = 0.1;

template <size_t N> std::vector<float> vec(const float (&values)[N]) {
  return std::vector<float>(values, values + N);
}

TEST(AdamW, MatchesPyTorchAfterOneAndThreeSteps) {
  using namespace torch_reference;
  struct Parameter {
    Shape shape;
    std::vector<float> initial;
    std::vector<std::vector<float>> grads;
    std::vector<float> afterOne, afterThree;
  };
  Parameter parameters[] = {
      {{5},
       vec(adamw_param0_initial),
       {vec(adamw_param0_grad1), vec(adamw_param0_grad2),
        vec(adamw_param0_grad3)},
       vec(adamw_param0_after1),
       vec(adamw_param0_after3)},
      {{3, 4},
       vec(adamw_param1_initial),
       {vec(adamw_param1_grad1), vec(adamw_param1_grad2),
        vec(adamw_param1_grad3)},
       vec(adamw_param1_after1),
       vec(adamw_param1_after3)},
  };
  for (Parameter &parameter : parameters) {
    Tensor param = Tensor::floats(parameter.shape, parameter.initial);
    Tensor m(TESSERA_F32, parameter.shape), v(TESSERA_F32, parameter.shape);
    for (int64_t step = 1; step <= 3; ++step) {
      Tensor grad = Tensor::floats(parameter.shape, parameter.grads[step - 1]);
      EXPECT_KERNEL_OK(tessera_cpu_adamw(param.get(), grad.get(), m.get(),
                                         v.get(), step, kLearningRate, kBeta1,
                                         kBeta2, kEpsilon, kWeightDecay, 1.0));
      if (step == 1)
        expectAllNear(param.values(), parameter.afterOne.data(),
                      parameter.afterOne.size(), 1e-6, "after step 1");
      if (step == 3)
        expectAllNear(param.values(), parameter.afterThree.data(),
                      parameter.afterThree.size(), 1e-6, "after step 3");
    }
  }
}

TEST(AdamW, GradScaleMultipliesTheGradient) {
  Tensor paramA = randomTensor({8}, 1), paramB = randomTensor({8}, 1);
  Tensor grad = randomTensor({8}, 2);
  Tensor doubled = Tensor::floats({8}, grad.values());
  for (int64_t i = 0; i < 8; ++i)
    doubled.f32()[i] *= 2;
  Tensor mA(TESSERA_F32, {8}), vA(TESSERA_F32, {8}), mB(TESSERA_F32, {8}),
      vB(TESSERA_F32, {8});
  EXPECT_KERNEL_OK(tessera_cpu_adamw(paramA.get(), grad.get(), mA.get(),
                                     vA.get(), 1, kLearningRate, kBeta1, kBeta2,
                                     kEpsilon, kWeightDecay, 1.0));
  EXPECT_KERNEL_OK(tessera_cpu_adamw(paramB.get(), doubled.get(), mB.get(),
                                     vB.get(), 1, kLearningRate, kBeta1, kBeta2,
                                     kEpsilon, kWeightDecay, 0.5));
  EXPECT_EQ(paramA.values(), paramB.values());
  EXPECT_EQ(mA.values(), mB.values());
}

TEST(AdamW, Bf16ParametersAreTheF32ResultRounded) {
  Tensor param = Tensor::floats({32}, randomFloats(32, 3), TESSERA_BF16);
  Tensor paramF32 = Tensor::floats({32}, param.values());
  Tensor grad = randomTensor({32}, 4);
  Tensor m(TESSERA_F32, {32}), v(TESSERA_F32, {32}), mF32(TESSERA_F32, {32}),
      vF32(TESSERA_F32, {32});
  EXPECT_KERNEL_OK(tessera_cpu_adamw(param.get(), grad.get(), m.get(), v.get(),
                                     1, 1e-2, kBeta1, kBeta2, kEpsilon,
                                     kWeightDecay, 1.0));
  EXPECT_KERNEL_OK(tessera_cpu_adamw(paramF32.get(), grad.get(), mF32.get(),
                                     vF32.get(), 1, 1e-2, kBeta1, kBeta2,
                                     kEpsilon, kWeightDecay, 1.0));
  for (int64_t i = 0; i < 32; ++i)
    EXPECT_EQ(param.at(i), tessera::cpu::bf16ToFloat(
                               tessera::cpu::floatToBf16(paramF32.at(i))));
  EXPECT_EQ(m.values(), mF32.values());
}

TEST(AdamW, RejectsStepZeroAndBf16Moments) {
  Tensor param(TESSERA_F32, {2}), grad(TESSERA_F32, {2}), m(TESSERA_F32, {2}),
      v(TESSERA_F32, {2});
  EXPECT_NE(tessera_cpu_adamw(param.get(), grad.get(), m.get(), v.get(), 0,
                              1e-3, 0.9, 0.95, 1e-8, 0.1, 1.0),
            0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("step 0 must be >= 1"),
            std::string::npos);
  Tensor mBf16(TESSERA_BF16, {2});
  EXPECT_NE(tessera_cpu_adamw(param.get(), grad.get(), mBf16.get(), v.get(), 1,
                              1e-3, 0.9, 0.95, 1e-8, 0.1, 1.0),
            0);
}

} // namespace
