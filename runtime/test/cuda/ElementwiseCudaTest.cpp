//===- ElementwiseCudaTest.cpp - Unary, binary, where, cast, dropout ------===//

#include "CudaTestUtil.h"
#include "TensorAccess.h"

#include <cmath>

using namespace tessera_test;

namespace {

/// Inputs where every unary op is defined (log, sqrt, rsqrt need x > 0).
float lowFor(int32_t op) {
  return op == TESSERA_LOG || op == TESSERA_SQRT || op == TESSERA_RSQRT
             ? 0.1f
             : -3.0f;
}

TEST(ElementwiseCuda, UnaryOpsAndGradients) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16, TESSERA_F64}) {
    for (int32_t op = TESSERA_NEG; op < TESSERA_LOGICAL_NOT; ++op) {
      SCOPED_TRACE("dtype " + std::to_string(dtype) + " op " +
                   std::to_string(op));
      Shape shape = {7, 129};
      Tensor x = randomTensor(dtype, shape, 100 + op, lowFor(op), 3.0f);
      Tensor dy = randomTensor(dtype, shape, 200 + op);
      Tensor expected(dtype, shape), expectedGrad(dtype, shape);
      EXPECT_CPU_KERNEL_OK(tessera_cpu_unary(op, x.get(), expected.get()));
      EXPECT_CPU_KERNEL_OK(
          tessera_cpu_unary_grad(op, x.get(), dy.get(), expectedGrad.get()));
      DeviceTensor dx(x), ddy(dy), y(dtype, shape), grad(dtype, shape);
      EXPECT_CUDA_KERNEL_OK(tessera_cuda_unary(op, dx.get(), y.get(), nullptr));
      EXPECT_CUDA_KERNEL_OK(tessera_cuda_unary_grad(op, dx.get(), ddy.get(),
                                                    grad.get(), nullptr));
      expectDeviceClean();
      double rtol = dtype == TESSERA_F32 ? 1e-5 : toleranceFor(dtype);
      if (dtype == TESSERA_F64)
        rtol = 1e-12;
      expectTensorsNear(y.download(), expected, rtol, rtol, "unary");
      expectTensorsNear(grad.download(), expectedGrad, rtol, rtol,
                        "unary_grad");
    }
  }
}

/// GELU (tanh form) with a bf16 or f16 result takes the fast sigmoid form
/// (Elementwise.cu's geluTanhFast): against the f64 CPU kernel on the same
/// inputs, within one rounding of the result type plus the f32 arithmetic,
/// over the whole range (very negative x, where 1 + tanh cancels, and inputs
/// past where exp overflows), and never NaN.
TEST(ElementwiseCuda, FastGeluForHalfPrecisionResultsIsAccurate) {
  REQUIRE_GPU();
  std::vector<float> values;
  for (int i = -2000; i <= 2000; ++i)
    values.push_back(i / 100.0f);
  for (float extreme : {-1e4f, -300.0f, -60.0f, 60.0f, 300.0f, 1e4f})
    values.push_back(extreme);
  Shape shape = {static_cast<int64_t>(values.size())};
  for (int32_t dtype : {TESSERA_BF16, TESSERA_F16}) {
    SCOPED_TRACE("dtype " + std::to_string(dtype));
    Tensor x = Tensor::floats(shape, values, dtype);
    Tensor dy = Tensor::floats(shape, std::vector<float>(values.size(), 1.0f),
                               dtype);
    // The reference: the same (rounded) inputs in f64.
    Tensor x64 = Tensor::floats(shape, x.values(), TESSERA_F64);
    Tensor dy64 = Tensor::floats(shape, dy.values(), TESSERA_F64);
    Tensor expected(TESSERA_F64, shape), expectedGrad(TESSERA_F64, shape);
    EXPECT_CPU_KERNEL_OK(
        tessera_cpu_unary(TESSERA_GELU_TANH, x64.get(), expected.get()));
    EXPECT_CPU_KERNEL_OK(tessera_cpu_unary_grad(
        TESSERA_GELU_TANH, x64.get(), dy64.get(), expectedGrad.get()));
    DeviceTensor dx(x), ddy(dy), y(dtype, shape), grad(dtype, shape);
    EXPECT_CUDA_KERNEL_OK(
        tessera_cuda_unary(TESSERA_GELU_TANH, dx.get(), y.get(), nullptr));
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_unary_grad(
        TESSERA_GELU_TANH, dx.get(), ddy.get(), grad.get(), nullptr));
    expectDeviceClean();
    // One rounding to the result type (2^-8 bf16, 2^-11 f16), and subnormal
    // f16 results near 0 absolutely.
    double ulp = dtype == TESSERA_BF16 ? 1.0 / 256 : 1.0 / 2048;
    std::vector<float> gelu = y.download().values(),
                       derivative = grad.download().values();
    for (size_t i = 0; i < values.size(); ++i) {
      SCOPED_TRACE("x = " + std::to_string(x.values()[i]));
      ASSERT_FALSE(std::isnan(gelu[i]));
      ASSERT_FALSE(std::isnan(derivative[i]));
      EXPECT_NEAR(gelu[i], expected.at(i),
                  ulp * std::fabs(expected.at(i)) + 1e-7);
      EXPECT_NEAR(derivative[i], expectedGrad.at(i),
                  ulp * std::fabs(expectedGrad.at(i)) + 1e-4);
    }
  }
}

/// The pack kernels (16-byte aligned float tensors) against the general
/// kernels (the same tensors one element past alignment): the arithmetic is
/// the same, so the bytes must be too. Counts leave a tail of 1..7 elements.
TEST(ElementwiseCuda, PackKernelsMatchTheGeneralKernelsBitForBit) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16, TESSERA_F16}) {
    size_t shift = tessera::cpu::dtypeSize(dtype);
    for (const Shape &shape : std::vector<Shape>{{3, 1001}, {5}, {2, 8}}) {
      SCOPED_TRACE("dtype " + std::to_string(dtype) + " shape " +
                   tessera::cpu::formatShape(shape));
      for (int32_t op = TESSERA_NEG; op < TESSERA_LOGICAL_NOT; ++op) {
        SCOPED_TRACE("unary op " + std::to_string(op));
        Tensor x = randomTensor(dtype, shape, 500 + op, lowFor(op), 3.0f);
        Tensor dy = randomTensor(dtype, shape, 600 + op);
        DeviceTensor px(x), pdy(dy), py(dtype, shape), pdx(dtype, shape);
        DeviceTensor gx(x, shift), gdy(dy, shift), gy(dtype, shape, shift),
            gdx(dtype, shape, shift);
        EXPECT_CUDA_KERNEL_OK(
            tessera_cuda_unary(op, px.get(), py.get(), nullptr));
        EXPECT_CUDA_KERNEL_OK(
            tessera_cuda_unary(op, gx.get(), gy.get(), nullptr));
        EXPECT_CUDA_KERNEL_OK(tessera_cuda_unary_grad(
            op, px.get(), pdy.get(), pdx.get(), nullptr));
        EXPECT_CUDA_KERNEL_OK(tessera_cuda_unary_grad(
            op, gx.get(), gdy.get(), gdx.get(), nullptr));
        expectDeviceClean();
        expectTensorsEqual(py.download(), gy.download(), "unary");
        expectTensorsEqual(pdx.download(), gdx.download(), "unary_grad");
      }
      for (int32_t to : {TESSERA_F32, TESSERA_BF16, TESSERA_F16}) {
        Tensor x = randomTensor(dtype, shape, 700, -70000.0f, 70000.0f);
        Tensor expected(to, shape);
        EXPECT_CPU_KERNEL_OK(tessera_cpu_cast(x.get(), expected.get()));
        DeviceTensor px(x), py(to, shape);
        DeviceTensor gx(x, shift), gy(to, shape, tessera::cpu::dtypeSize(to));
        EXPECT_CUDA_KERNEL_OK(tessera_cuda_cast(px.get(), py.get(), nullptr));
        EXPECT_CUDA_KERNEL_OK(tessera_cuda_cast(gx.get(), gy.get(), nullptr));
        expectDeviceClean();
        expectTensorsEqual(py.download(), expected, "cast (pack)");
        expectTensorsEqual(gy.download(), expected, "cast (general)");
      }
    }
  }
}

/// Binary ops whose operands repeat along leading dims (a bias row, a
/// scalar) or match the output take the pack kernel; other broadcasts and
/// unaligned data take the general one. Both match the CPU.
TEST(ElementwiseCuda, BinaryPackKernelBroadcasts) {
  REQUIRE_GPU();
  struct Case {
    Shape a, b, y;
  };
  const Case cases[] = {
      {{37, 24}, {24}, {37, 24}},       // a bias row: period 24
      {{5, 203}, {5, 203}, {5, 203}},   // same shape, a tail of 7
      {{3, 4, 16}, {1}, {3, 4, 16}},    // a scalar
      {{1}, {2, 3, 8}, {2, 3, 8}},      // a scalar on the left
      {{7, 13}, {13}, {7, 13}},         // a period of 13: general kernel
      {{4, 1, 16}, {3, 16}, {4, 3, 16}} // both broadcast
  };
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16, TESSERA_F16}) {
    for (const Case &shapes : cases) {
      for (int32_t op : {TESSERA_ADD, TESSERA_MUL, TESSERA_DIV,
                         TESSERA_MAXIMUM}) {
        for (size_t shift : {size_t(0), tessera::cpu::dtypeSize(dtype)}) {
          SCOPED_TRACE("dtype " + std::to_string(dtype) + " op " +
                       std::to_string(op) + " y " +
                       tessera::cpu::formatShape(shapes.y) + " shift " +
                       std::to_string(shift));
          Tensor a = randomTensor(dtype, shapes.a, 800 + op, -2.0f, 2.0f);
          Tensor b = randomTensor(dtype, shapes.b, 900 + op, 0.1f, 2.0f);
          Tensor expected(dtype, shapes.y);
          EXPECT_CPU_KERNEL_OK(
              tessera_cpu_binary(op, a.get(), b.get(), expected.get()));
          DeviceTensor da(a, shift), db(b, shift), y(dtype, shapes.y, shift);
          EXPECT_CUDA_KERNEL_OK(
              tessera_cuda_binary(op, da.get(), db.get(), y.get(), nullptr));
          expectDeviceClean();
          double rtol = toleranceFor(dtype);
          expectTensorsNear(y.download(), expected, rtol, rtol, "binary");
        }
      }
    }
  }
}

TEST(ElementwiseCuda, IntegerUnaryAndLogicalNot) {
  REQUIRE_GPU();
  Tensor x = Tensor::integers({5}, {-3, 0, 7, -9, 2}, TESSERA_I32);
  for (int32_t op : {TESSERA_NEG, TESSERA_ABS}) {
    Tensor expected(TESSERA_I32, {5});
    EXPECT_CPU_KERNEL_OK(tessera_cpu_unary(op, x.get(), expected.get()));
    DeviceTensor dx(x), y(TESSERA_I32, {5});
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_unary(op, dx.get(), y.get(), nullptr));
    expectDeviceClean();
    expectTensorsEqual(y.download(), expected, "integer unary");
  }
  Tensor expected(TESSERA_BOOL, {5});
  EXPECT_CPU_KERNEL_OK(
      tessera_cpu_unary(TESSERA_LOGICAL_NOT, x.get(), expected.get()));
  DeviceTensor dx(x), y(TESSERA_BOOL, {5});
  EXPECT_CUDA_KERNEL_OK(
      tessera_cuda_unary(TESSERA_LOGICAL_NOT, dx.get(), y.get(), nullptr));
  expectDeviceClean();
  expectTensorsEqual(y.download(), expected, "logical_not");
}

TEST(ElementwiseCuda, BinaryFloatOpsBroadcast) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16, TESSERA_F16}) {
    for (int32_t op = TESSERA_ADD; op <= TESSERA_GE; ++op) {
      SCOPED_TRACE("dtype " + std::to_string(dtype) + " op " +
                   std::to_string(op));
      float low = op == TESSERA_POW ? 0.1f : -2.0f;
      Tensor a = randomTensor(dtype, {3, 1, 40}, 300 + op, low, 2.0f);
      Tensor b = randomTensor(dtype, {5, 1}, 400 + op, 0.1f, 2.0f);
      bool writesBool = op >= TESSERA_LOGICAL_AND;
      int32_t yType = writesBool ? TESSERA_BOOL : dtype;
      Tensor expected(yType, {3, 5, 40});
      EXPECT_CPU_KERNEL_OK(
          tessera_cpu_binary(op, a.get(), b.get(), expected.get()));
      DeviceTensor da(a), db(b), y(yType, {3, 5, 40});
      EXPECT_CUDA_KERNEL_OK(
          tessera_cuda_binary(op, da.get(), db.get(), y.get(), nullptr));
      expectDeviceClean();
      double rtol = writesBool ? 0.0 : toleranceFor(dtype);
      expectTensorsNear(y.download(), expected, rtol, rtol, "binary");
    }
  }
}

TEST(ElementwiseCuda, BinaryIntegerOps) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_I64, TESSERA_I32, TESSERA_I8}) {
    for (int32_t op = TESSERA_ADD; op <= TESSERA_GE; ++op) {
      SCOPED_TRACE("dtype " + std::to_string(dtype) + " op " +
                   std::to_string(op));
      Tensor a = Tensor::integers({2, 4}, {-7, 5, 0, 9, 3, -2, 8, 1}, dtype);
      Tensor b = Tensor::integers({4}, {2, -3, 1, 4}, dtype);
      int32_t yType = op >= TESSERA_LOGICAL_AND ? TESSERA_BOOL : dtype;
      Tensor expected(yType, {2, 4});
      EXPECT_CPU_KERNEL_OK(
          tessera_cpu_binary(op, a.get(), b.get(), expected.get()));
      DeviceTensor da(a), db(b), y(yType, {2, 4});
      EXPECT_CUDA_KERNEL_OK(
          tessera_cuda_binary(op, da.get(), db.get(), y.get(), nullptr));
      expectDeviceClean();
      expectTensorsEqual(y.download(), expected, "integer binary");
    }
  }
}

TEST(ElementwiseCuda, IntegerDivisionByZeroIsADeviceError) {
  REQUIRE_GPU();
  Tensor a = Tensor::integers({3}, {1, 2, 3});
  Tensor b = Tensor::integers({3}, {1, 0, 1});
  DeviceTensor da(a), db(b), y(TESSERA_I64, {3});
  EXPECT_CUDA_KERNEL_OK(
      tessera_cuda_binary(TESSERA_DIV, da.get(), db.get(), y.get(), nullptr));
  EXPECT_EQ(tessera_cuda_check_device_errors(nullptr), 1);
  EXPECT_NE(std::string(tessera_cuda_last_error()).find("division by zero"),
            std::string::npos)
      << tessera_cuda_last_error();
  // The record is cleared once reported.
  EXPECT_EQ(tessera_cuda_check_device_errors(nullptr), 0);
}

TEST(ElementwiseCuda, WhereBroadcasts) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16, TESSERA_I64, TESSERA_BOOL}) {
    Tensor condition =
        Tensor::integers({4, 1}, {1, 0, 0, 1}, TESSERA_BOOL);
    Tensor onTrue = Tensor::integers({1, 6}, {1, 2, 3, 4, 5, 6}, dtype);
    Tensor onFalse = Tensor::integers({4, 6}, std::vector<int64_t>(24, 0), dtype);
    Tensor expected(dtype, {4, 6});
    EXPECT_CPU_KERNEL_OK(tessera_cpu_where(condition.get(), onTrue.get(),
                                           onFalse.get(), expected.get()));
    DeviceTensor dc(condition), dt(onTrue), df(onFalse), y(dtype, {4, 6});
    EXPECT_CUDA_KERNEL_OK(
        tessera_cuda_where(dc.get(), dt.get(), df.get(), y.get(), nullptr));
    expectDeviceClean();
    expectTensorsEqual(y.download(), expected, "where");
  }
}

TEST(ElementwiseCuda, CastBetweenEveryPairOfTypes) {
  REQUIRE_GPU();
  std::vector<float> values = {-300.7f, -2.5f, -1.0f, -0.4f, 0.0f,  0.6f,
                               1.0f,    2.5f,  3.49f, 127.9f, 1e5f, 70000.0f};
  Tensor source = Tensor::floats({12}, values, TESSERA_F32);
  for (int32_t from = TESSERA_F32; from <= TESSERA_BOOL; ++from) {
    Tensor x(from, {12});
    EXPECT_CPU_KERNEL_OK(tessera_cpu_cast(source.get(), x.get()));
    for (int32_t to = TESSERA_F32; to <= TESSERA_BOOL; ++to) {
      SCOPED_TRACE("cast " + std::to_string(from) + " -> " +
                   std::to_string(to));
      Tensor expected(to, {12});
      EXPECT_CPU_KERNEL_OK(tessera_cpu_cast(x.get(), expected.get()));
      DeviceTensor dx(x), y(to, {12});
      EXPECT_CUDA_KERNEL_OK(tessera_cuda_cast(dx.get(), y.get(), nullptr));
      expectDeviceClean();
      expectTensorsEqual(y.download(), expected, "cast");
    }
  }
}

TEST(ElementwiseCuda, DropoutMasksAreBitIdentical) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16}) {
    for (double rate : {0.0, 0.1, 0.5}) {
      Tensor x = randomTensor(dtype, {3, 1000}, 7);
      Tensor expected(dtype, {3, 1000});
      EXPECT_CPU_KERNEL_OK(
          tessera_cpu_dropout(x.get(), expected.get(), rate, 1234));
      DeviceTensor dx(x), y(dtype, {3, 1000});
      EXPECT_CUDA_KERNEL_OK(
          tessera_cuda_dropout(dx.get(), y.get(), rate, 1234, nullptr));
      expectDeviceClean();
      expectTensorsEqual(y.download(), expected, "dropout");
    }
  }
}

} // namespace

namespace {

// tess.rotary against the CPU kernel: Llama's [B, H, T, D] against a
// [1, 1, T, D] table, head dims 64 and 128, a per-batch table [B, 1, T, D],
// the adjoint, and a packed q/k/v [B, T, Hq + 2 Hkv, D] against [B, T, 1, D]
// that rotates only its first heads (rotated_heads), which runs a warp per
// token; f32, bf16 and f16.
TEST(ElementwiseCuda, RotaryMatchesTheCpuKernel) {
  REQUIRE_GPU();
  struct Case {
    Shape x, table;
    int64_t rotatedHeads;
  };
  const Case cases[] = {{{2, 4, 33, 64}, {1, 1, 33, 64}, 0},
                        {{1, 3, 17, 128}, {1, 1, 17, 128}, 0},
                        {{2, 2, 9, 16}, {2, 1, 9, 16}, 0},
                        {{2, 3, 5, 20}, {1, 1, 5, 20}, 0},
                        {{5, 6}, {1, 6}, 0},
                        {{2, 9, 6, 64}, {1, 9, 1, 64}, 4},
                        {{2, 9, 6, 20}, {2, 9, 1, 20}, 5},
                        // A warp per token (the tables broadcast over the
                        // heads): head dims 64, 128, 256 and 16, every head
                        // or the first ones, head counts that leave lanes
                        // idle, and more tokens than one block's warps.
                        {{2, 9, 6, 64}, {1, 9, 1, 64}, 0},
                        {{2, 37, 13, 64}, {1, 37, 1, 64}, 9},
                        {{1, 11, 10, 128}, {1, 11, 1, 128}, 8},
                        {{2, 5, 3, 256}, {2, 5, 1, 256}, 2},
                        {{3, 7, 5, 16}, {1, 7, 1, 16}, 3}};
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16, TESSERA_F16})
    for (const Case &c : cases)
      for (int32_t adjoint : {0, 1}) {
        SCOPED_TRACE("dtype " + std::to_string(dtype) + " rank " +
                     std::to_string(c.x.size()) + " adjoint " +
                     std::to_string(adjoint) + " rotated_heads " +
                     std::to_string(c.rotatedHeads));
        Tensor x = randomTensor(dtype, c.x, 11);
        Tensor cos = randomTensor(dtype, c.table, 12);
        Tensor sin = randomTensor(dtype, c.table, 13);
        Tensor expected(dtype, c.x);
        EXPECT_CPU_KERNEL_OK(tessera_cpu_rotary(x.get(), cos.get(), sin.get(),
                                                expected.get(), adjoint,
                                                c.rotatedHeads));
        DeviceTensor gx(x), gcos(cos), gsin(sin), gy(dtype, c.x);
        EXPECT_CUDA_KERNEL_OK(tessera_cuda_rotary(gx.get(), gcos.get(),
                                                  gsin.get(), gy.get(), adjoint,
                                                  c.rotatedHeads, nullptr));
        expectDeviceClean();
        double rtol = dtype == TESSERA_F32 ? 1e-6 : toleranceFor(dtype);
        expectTensorsNear(gy.download(), expected, rtol, rtol, "rotary");
        // In place (the arena's choice when x is dead after the rotation):
        // the same bits as into a separate y.
        EXPECT_CUDA_KERNEL_OK(tessera_cuda_rotary(gx.get(), gcos.get(),
                                                  gsin.get(), gx.get(), adjoint,
                                                  c.rotatedHeads, nullptr));
        expectDeviceClean();
        expectTensorsNear(gx.download(), gy.download(), 0.0, 0.0,
                          "rotary in place");
      }
}

} // namespace

namespace {

// tess.swiglu and its gradient against the CPU kernels: pack-aligned
// sizes, a tail (8k + 5 elements), and an offset view that is not 16-byte
// aligned (the element path).
TEST(ElementwiseCuda, SwigluMatchesTheCpuKernels) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16, TESSERA_F16})
    for (Shape shape : {Shape{4, 1024}, Shape{3, 677}, Shape{5}}) {
      SCOPED_TRACE("dtype " + std::to_string(dtype) + " elements " +
                   std::to_string(countOf(shape)));
      Tensor gate = randomTensor(dtype, shape, 21, -6.0f, 6.0f);
      Tensor up = randomTensor(dtype, shape, 22);
      Tensor dy = randomTensor(dtype, shape, 23);
      Tensor y(dtype, shape), dgate(dtype, shape), dup(dtype, shape);
      EXPECT_CPU_KERNEL_OK(tessera_cpu_swiglu(gate.get(), up.get(), y.get()));
      EXPECT_CPU_KERNEL_OK(tessera_cpu_swiglu_grad(
          gate.get(), up.get(), dy.get(), dgate.get(), dup.get()));
      DeviceTensor ggate(gate), gup(up), gdy(dy), gy(dtype, shape),
          gdgate(dtype, shape), gdup(dtype, shape);
      EXPECT_CUDA_KERNEL_OK(
          tessera_cuda_swiglu(ggate.get(), gup.get(), gy.get(), nullptr));
      EXPECT_CUDA_KERNEL_OK(tessera_cuda_swiglu_grad(
          ggate.get(), gup.get(), gdy.get(), gdgate.get(), gdup.get(), nullptr));
      expectDeviceClean();
      double rtol = dtype == TESSERA_F32 ? 1e-5 : toleranceFor(dtype);
      expectTensorsNear(gy.download(), y, rtol, rtol, "swiglu");
      expectTensorsNear(gdgate.download(), dgate, rtol, rtol, "dgate");
      expectTensorsNear(gdup.download(), dup, rtol, rtol, "dup");
    }
}

// tess.packed_swiglu and its gradient (gate and up the strided halves of
// rows of 2F) against the CPU kernels: F a multiple of the 8-element pack
// (Llama's; the pack path, one row and many), F = 677 and F = 12 (the
// element path), and the gradient written over its input, as the arena
// planner places it.
TEST(ElementwiseCuda, PackedSwigluMatchesTheCpuKernels) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16, TESSERA_F16})
    for (Shape half : {Shape{4, 1024}, Shape{2, 3, 8}, Shape{3, 677},
                       Shape{5, 12}}) {
      Shape packed = half;
      packed.back() *= 2;
      SCOPED_TRACE("dtype " + std::to_string(dtype) + " rows of " +
                   std::to_string(packed.back()));
      Tensor input = randomTensor(dtype, packed, 24, -6.0f, 6.0f);
      Tensor dy = randomTensor(dtype, half, 25);
      Tensor y(dtype, half), dinput(dtype, packed);
      EXPECT_CPU_KERNEL_OK(tessera_cpu_packed_swiglu(input.get(), y.get()));
      EXPECT_CPU_KERNEL_OK(
          tessera_cpu_packed_swiglu_grad(input.get(), dy.get(), dinput.get()));
      DeviceTensor ginput(input), gdy(dy), gy(dtype, half),
          gdinput(dtype, packed), ginPlace(input);
      EXPECT_CUDA_KERNEL_OK(
          tessera_cuda_packed_swiglu(ginput.get(), gy.get(), nullptr));
      EXPECT_CUDA_KERNEL_OK(tessera_cuda_packed_swiglu_grad(
          ginput.get(), gdy.get(), gdinput.get(), nullptr));
      EXPECT_CUDA_KERNEL_OK(tessera_cuda_packed_swiglu_grad(
          ginPlace.get(), gdy.get(), ginPlace.get(), nullptr));
      expectDeviceClean();
      double rtol = dtype == TESSERA_F32 ? 1e-5 : toleranceFor(dtype);
      expectTensorsNear(gy.download(), y, rtol, rtol, "packed swiglu");
      expectTensorsNear(gdinput.download(), dinput, rtol, rtol, "dinput");
      expectTensorsNear(ginPlace.download(), dinput, rtol, rtol,
                        "dinput in place");
    }
}

} // namespace
