//===- Elementwise.cu - Unary, binary, where, cast and dropout ------------===//
//
// Elementwise ops are memory-bound: one grid-stride kernel per op family,
// the op code and dtypes passed as arguments (uniform branches cost little
// next to a DRAM access). Broadcasting uses StridedLayout, the device twin of
// the CPU's StridedWalker: each output index is decomposed once into per-
// operand offsets with stride 0 on stretched dims, so every broadcast
// pattern is the same kernel.
//
// The math mirrors runtime/cpu/Unary.cpp and Binary.cpp line for line: f32
// arithmetic for f32/bf16/f16 storage, f64 for f64, int64 with C semantics for
// integers (division by zero and 0^negative are recorded as device errors
// and write 0). Dropout draws from the shared SplitMix64 generator
// (Common.cuh), so its masks are bit-identical to the CPU's.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "OperandChecks.h"
#include "UnaryConstants.h"

using namespace tessera::cuda;
using tessera::cpu::broadcastStrides;
using tessera::cpu::dtypeSize;
using tessera::cpu::elementCount;
using tessera::cpu::isFloatType;
using tessera::cpu::isIntegerType;
using tessera::cpu::kGeluTanhCubic;
using tessera::cpu::kSqrtHalf;
using tessera::cpu::kSqrtTwoOverPi;
using tessera::cpu::kTwoOverSqrtPi;
using tessera::cpu::requireBinaryOperands;
using tessera::cpu::requireSameDtype;
using tessera::cpu::requireShape;
using tessera::cpu::requireTensor;
using tessera::cpu::requireUnaryGradOperands;
using tessera::cpu::requireUnaryOperands;
using tessera::cpu::shapeOf;

namespace {

template <typename T> __device__ T sigmoidOf(T x) {
  return T(1) / (T(1) + exp(-x));
}
template <typename T> __device__ T normalCdf(T x) {
  return T(0.5) * (T(1) + erf(x * T(kSqrtHalf)));
}
template <typename T> __device__ T normalPdf(T x) {
  return exp(T(-0.5) * x * x) * T(0.5 * kSqrtTwoOverPi);
}

template <typename T> __device__ T applyUnary(int op, T x) {
  switch (op) {
  case TESSERA_NEG:
    return -x;
  case TESSERA_ABS:
    return fabs(x);
  case TESSERA_EXP:
    return exp(x);
  case TESSERA_LOG:
    return log(x);
  case TESSERA_SQRT:
    return sqrt(x);
  case TESSERA_RSQRT:
    return T(1) / sqrt(x);
  case TESSERA_RECIPROCAL:
    return T(1) / x;
  case TESSERA_TANH:
    return tanh(x);
  case TESSERA_ERF:
    return erf(x);
  case TESSERA_SIGMOID:
    return sigmoidOf(x);
  case TESSERA_RELU:
    return x > T(0) ? x : T(0);
  case TESSERA_SILU:
    return x * sigmoidOf(x);
  case TESSERA_GELU_ERF:
    return x * normalCdf(x);
  case TESSERA_GELU_TANH: {
    T inner = T(kSqrtTwoOverPi) * (x + T(kGeluTanhCubic) * x * x * x);
    return T(0.5) * x * (T(1) + tanh(inner));
  }
  case TESSERA_COS:
    return cos(x);
  default: // TESSERA_SIN (the host rejects everything else)
    return sin(x);
  }
}

template <typename T> __device__ T applyUnaryDerivative(int op, T x) {
  switch (op) {
  case TESSERA_NEG:
    return T(-1);
  case TESSERA_ABS:
    return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
  case TESSERA_EXP:
    return exp(x);
  case TESSERA_LOG:
    return T(1) / x;
  case TESSERA_SQRT:
    return T(0.5) / sqrt(x);
  case TESSERA_RSQRT:
    return T(-0.5) / (x * sqrt(x));
  case TESSERA_RECIPROCAL:
    return T(-1) / (x * x);
  case TESSERA_TANH: {
    T t = tanh(x);
    return T(1) - t * t;
  }
  case TESSERA_ERF:
    return T(kTwoOverSqrtPi) * exp(-x * x);
  case TESSERA_SIGMOID: {
    T s = sigmoidOf(x);
    return s * (T(1) - s);
  }
  case TESSERA_RELU:
    return x > T(0) ? T(1) : T(0);
  case TESSERA_SILU: {
    T s = sigmoidOf(x);
    return s * (T(1) + x * (T(1) - s));
  }
  case TESSERA_GELU_ERF:
    return normalCdf(x) + x * normalPdf(x);
  case TESSERA_GELU_TANH: {
    T inner = T(kSqrtTwoOverPi) * (x + T(kGeluTanhCubic) * x * x * x);
    T t = tanh(inner);
    T innerDerivative = T(kSqrtTwoOverPi) * (T(1) + T(3 * kGeluTanhCubic) * x * x);
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * innerDerivative;
  }
  case TESSERA_COS:
    return -sin(x);
  default: // TESSERA_SIN
    return cos(x);
  }
}

/// GELU's tanh form for a 16-bit result: 0.5 x (1 + tanh u) = x sigmoid(2u)
/// with the hardware exp and divide. Their few-ulp f32 error is far below
/// a bf16 / f16 ulp, and, unlike 1 + tanh(u), the form does not cancel for
/// negative x. With the accurate tanhf these kernels were compute-bound on
/// an H200 (2.1 TB/s, against 3 TB/s for a residual add): a tenth of GPT-2
/// 124M's step went to the GELU and its gradient.
__device__ __forceinline__ float geluTanhFast(float x) {
  float u = float(kSqrtTwoOverPi) * (x + float(kGeluTanhCubic) * x * x * x);
  return __fdividef(x, 1.0f + __expf(-2.0f * u));
}
__device__ __forceinline__ float geluTanhDerivativeFast(float x) {
  float square = x * x;
  float u = float(kSqrtTwoOverPi) * (x + float(kGeluTanhCubic) * square * x);
  float s = __fdividef(1.0f, 1.0f + __expf(-2.0f * u));
  return s + x * s * (1.0f - s) * float(2.0 * kSqrtTwoOverPi) *
                 (1.0f + float(3.0 * kGeluTanhCubic) * square);
}

/// Whether a result of `dtype` takes the fast GELU (geluTanhFast).
__device__ __forceinline__ bool fastGeluFor(int op, int dtype) {
  return op == TESSERA_GELU_TANH &&
         (dtype == TESSERA_BF16 || dtype == TESSERA_F16);
}

/// The unary op and its derivative in f32 as every f32-arithmetic kernel
/// computes them for a result of `dtype`.
__device__ __forceinline__ float unaryValue(int op, float x, int dtype) {
  return fastGeluFor(op, dtype) ? geluTanhFast(x) : applyUnary<float>(op, x);
}
__device__ __forceinline__ float unaryDerivative(int op, float x, int dtype) {
  return fastGeluFor(op, dtype) ? geluTanhDerivativeFast(x)
                                : applyUnaryDerivative<float>(op, x);
}

template <typename T>
__global__ void unaryKernel(int op, const void *x, int xType, void *y,
                            int yType, int64_t count) {
  TESSERA_GRID_STRIDE_LOOP(i, count) {
    if (op == TESSERA_LOGICAL_NOT) {
      storeInteger(y, yType, i, loadNumber(x, xType, i) == 0.0);
    } else if (isIntegerDtype(xType)) {
      int64_t value = loadInteger(x, xType, i);
      // Unsigned negation wraps instead of overflowing on INT64_MIN.
      uint64_t magnitude = static_cast<uint64_t>(value);
      int64_t negated = static_cast<int64_t>(0 - magnitude);
      storeInteger(y, yType, i,
                   op == TESSERA_NEG ? negated : (value < 0 ? negated : value));
    } else if (sizeof(T) == 8) {
      storeNumber(y, yType, i, applyUnary<T>(op, T(loadNumber(x, xType, i))));
    } else {
      storeFloat(y, yType, i, unaryValue(op, loadFloat(x, xType, i), yType));
    }
  }
}

template <typename T>
__global__ void unaryGradKernel(int op, const void *x, int xType,
                                const void *dy, int dyType, void *dx,
                                int dxType, int64_t count) {
  TESSERA_GRID_STRIDE_LOOP(i, count) {
    T value = T(loadNumber(x, xType, i));
    T upstream = T(loadNumber(dy, dyType, i));
    if constexpr (sizeof(T) == 8)
      storeNumber(dx, dxType, i, upstream * applyUnaryDerivative<T>(op, value));
    else
      storeNumber(dx, dxType, i, upstream * unaryDerivative(op, value, dxType));
  }
}

/// The value of a comparison or logical op, for any arithmetic type.
template <typename T> __device__ bool applyPredicate(int op, T a, T b) {
  switch (op) {
  case TESSERA_LOGICAL_AND:
    return a != T(0) && b != T(0);
  case TESSERA_LOGICAL_OR:
    return a != T(0) || b != T(0);
  case TESSERA_EQ:
    return a == b;
  case TESSERA_NE:
    return a != b;
  case TESSERA_LT:
    return a < b;
  case TESSERA_LE:
    return a <= b;
  case TESSERA_GT:
    return a > b;
  default:
    return a >= b;
  }
}

template <typename T> __device__ T applyFloat(int op, T a, T b) {
  switch (op) {
  case TESSERA_ADD:
    return a + b;
  case TESSERA_SUB:
    return a - b;
  case TESSERA_MUL:
    return a * b;
  case TESSERA_DIV:
    return a / b;
  case TESSERA_POW:
    return pow(a, b);
  case TESSERA_MAXIMUM:
    return isnan(a) || isnan(b) ? a + b : (a > b ? a : b);
  default:
    return isnan(a) || isnan(b) ? a + b : (a < b ? a : b);
  }
}

__device__ int64_t applyInteger(int op, int64_t a, int64_t b, int64_t position,
                                DeviceErrorRecord *errors) {
  uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
  case TESSERA_ADD:
    return static_cast<int64_t>(ua + ub);
  case TESSERA_SUB:
    return static_cast<int64_t>(ua - ub);
  case TESSERA_MUL:
    return static_cast<int64_t>(ua * ub);
  case TESSERA_DIV:
    if (b == 0) {
      reportDeviceError(errors, kIntegerDivisionByZero, 0, position, 0, 0,
                        "tessera_cuda_binary");
      return 0;
    }
    if (b == -1)
      return static_cast<int64_t>(0 - ua);
    return a / b;
  case TESSERA_POW: {
    if (b < 0) {
      if (a == 1)
        return 1;
      if (a == -1)
        return b % 2 == 0 ? 1 : -1;
      if (a == 0)
        reportDeviceError(errors, kIntegerPowerOfZero, 0, position, 0, 0,
                          "tessera_cuda_binary");
      return 0;
    }
    uint64_t result = 1, factor = ua;
    for (uint64_t remaining = ub; remaining; remaining >>= 1) {
      if (remaining & 1)
        result *= factor;
      factor *= factor;
    }
    return static_cast<int64_t>(result);
  }
  case TESSERA_MAXIMUM:
    return a > b ? a : b;
  default:
    return a < b ? a : b;
  }
}

__global__ void binaryKernel(int op, StridedLayout<2> layout, const void *a,
                             const void *b, int inType, void *y, int yType,
                             int64_t count, DeviceErrorRecord *errors) {
  bool writesBool = op >= TESSERA_LOGICAL_AND;
  TESSERA_GRID_STRIDE_LOOP(i, count) {
    int64_t offsets[2];
    layout.offsets(i, offsets);
    if (isIntegerDtype(inType)) {
      int64_t va = loadInteger(a, inType, offsets[0]);
      int64_t vb = loadInteger(b, inType, offsets[1]);
      if (writesBool)
        storeInteger(y, yType, i, applyPredicate<int64_t>(op, va, vb));
      else
        storeInteger(y, yType, i, applyInteger(op, va, vb, i, errors));
    } else if (inType == TESSERA_F64) {
      double va = loadNumber(a, inType, offsets[0]);
      double vb = loadNumber(b, inType, offsets[1]);
      if (writesBool)
        storeInteger(y, yType, i, applyPredicate<double>(op, va, vb));
      else
        storeNumber(y, yType, i, applyFloat<double>(op, va, vb));
    } else {
      float va = loadFloat(a, inType, offsets[0]);
      float vb = loadFloat(b, inType, offsets[1]);
      if (writesBool)
        storeInteger(y, yType, i, applyPredicate<double>(op, va, vb));
      else
        storeFloat(y, yType, i, applyFloat<float>(op, va, vb));
    }
  }
}

template <typename Element>
__global__ void whereKernel(StridedLayout<3> layout, const void *condition,
                            int conditionType, const Element *onTrue,
                            const Element *onFalse, Element *y, int64_t count) {
  TESSERA_GRID_STRIDE_LOOP(i, count) {
    int64_t offsets[3];
    layout.offsets(i, offsets);
    bool chosen = loadNumber(condition, conditionType, offsets[0]) != 0.0;
    y[i] = chosen ? onTrue[offsets[1]] : onFalse[offsets[2]];
  }
}

__global__ void castKernel(const void *x, int xType, void *y, int yType,
                           int64_t count, bool integerToInteger) {
  TESSERA_GRID_STRIDE_LOOP(i, count) {
    if (integerToInteger)
      storeInteger(y, yType, i, loadInteger(x, xType, i));
    else
      storeNumber(y, yType, i, loadNumber(x, xType, i));
  }
}

__global__ void dropoutKernel(const void *x, int xType, void *y, int yType,
                              int64_t count, DropoutMask mask,
                              float keptScale) {
  TESSERA_GRID_STRIDE_LOOP(i, count) {
    float value = mask.keeps(static_cast<uint64_t>(i))
                      ? loadFloat(x, xType, i) * keptScale
                      : 0.0f;
    storeFloat(y, yType, i, value);
  }
}

//===--- Pack kernels: 8 elements per thread, 16-byte accesses -----------===//

/// An operand repeating every `period` elements of the output (the output's
/// count when shapes match; 1 for a scalar).
__device__ __forceinline__ void loadRepeated(const void *data, int dtype,
                                             int64_t period, int64_t i,
                                             float (&values)[kPack]) {
  if (period == 1) {
    float value = loadFloat(data, dtype, 0);
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      values[k] = value;
  } else {
    loadPack(data, dtype, i % period, values);
  }
}

__global__ void unaryPackKernel(int op, const void *x, int xType, void *y,
                                int yType, int64_t count) {
  TESSERA_GRID_STRIDE_LOOP(pack, count / kPack) {
    float values[kPack];
    loadPack(x, xType, pack * kPack, values);
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      values[k] = unaryValue(op, values[k], yType);
    storePack(y, yType, pack * kPack, values);
  }
  int64_t i = tailElement(count);
  if (i < count)
    storeFloat(y, yType, i, unaryValue(op, loadFloat(x, xType, i), yType));
}

__global__ void unaryGradPackKernel(int op, const void *x, int xType,
                                    const void *dy, int dyType, void *dx,
                                    int dxType, int64_t count) {
  TESSERA_GRID_STRIDE_LOOP(pack, count / kPack) {
    float values[kPack], upstream[kPack];
    loadPack(x, xType, pack * kPack, values);
    loadPack(dy, dyType, pack * kPack, upstream);
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      values[k] = upstream[k] * unaryDerivative(op, values[k], dxType);
    storePack(dx, dxType, pack * kPack, values);
  }
  int64_t i = tailElement(count);
  if (i < count)
    storeFloat(dx, dxType, i,
               loadFloat(dy, dyType, i) *
                   unaryDerivative(op, loadFloat(x, xType, i), dxType));
}

__global__ void binaryPackKernel(int op, const void *a, int64_t aPeriod,
                                 const void *b, int64_t bPeriod, int inType,
                                 void *y, int yType, int64_t count) {
  TESSERA_GRID_STRIDE_LOOP(pack, count / kPack) {
    float lhs[kPack], rhs[kPack];
    loadRepeated(a, inType, aPeriod, pack * kPack, lhs);
    loadRepeated(b, inType, bPeriod, pack * kPack, rhs);
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      lhs[k] = applyFloat<float>(op, lhs[k], rhs[k]);
    storePack(y, yType, pack * kPack, lhs);
  }
  int64_t i = tailElement(count);
  if (i < count)
    storeFloat(y, yType, i,
               applyFloat<float>(op, loadFloat(a, inType, i % aPeriod),
                                 loadFloat(b, inType, i % bPeriod)));
}

/// Between float storage types a cast is a load and a rounding store (what
/// storeNumber(loadNumber) computes: one rounding of the exact value).
__global__ void castPackKernel(const void *x, int xType, void *y, int yType,
                               int64_t count) {
  TESSERA_GRID_STRIDE_LOOP(pack, count / kPack) {
    float values[kPack];
    loadPack(x, xType, pack * kPack, values);
    storePack(y, yType, pack * kPack, values);
  }
  int64_t i = tailElement(count);
  if (i < count)
    storeFloat(y, yType, i, loadFloat(x, xType, i));
}

/// How often an operand repeats along the output's row-major order: its
/// element count when it spans trailing dims of the output contiguously and
/// broadcasts only along leading dims (1 for a scalar); 0 for any other
/// broadcast.
int64_t repeatPeriod(const Shape &shape, const Shape &strides) {
  int64_t period = 1;
  int dim = static_cast<int>(shape.size()) - 1;
  for (; dim >= 0; --dim) {
    if (shape[dim] == 1)
      continue;
    if (strides[dim] != period)
      break;
    period *= shape[dim];
  }
  for (; dim >= 0; --dim)
    if (shape[dim] != 1 && strides[dim] != 0)
      return 0;
  return period;
}

/// A period the pack kernels handle: whole packs, or a scalar.
bool packablePeriod(int64_t period) {
  return period == 1 || (period > 0 && period % kPack == 0);
}

} // namespace

extern "C" int tessera_cuda_unary(int32_t op, const tessera_tensor *x,
                                  tessera_tensor *y, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_unary", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireUnaryOperands(op, input, output);
    if (op != TESSERA_LOGICAL_NOT && isIntegerType(input.dtype) &&
        op != TESSERA_NEG && op != TESSERA_ABS)
      fail(std::string("op ") + std::to_string(op) +
           " needs a float tensor, not " +
           tessera::cpu::dtypeName(input.dtype));
    int64_t count = elementCount(input);
    if (count == 0)
      return;
    if (op != TESSERA_LOGICAL_NOT && packable(input) && packable(output))
      unaryPackKernel<<<gridFor(count / kPack), kThreadsPerBlock, 0,
                        stream>>>(op, input.data, input.dtype, output.data,
                                  output.dtype, count);
    else if (input.dtype == TESSERA_F64)
      unaryKernel<double><<<gridFor(count), kThreadsPerBlock, 0, stream>>>(
          op, input.data, input.dtype, output.data, output.dtype, count);
    else
      unaryKernel<float><<<gridFor(count), kThreadsPerBlock, 0, stream>>>(
          op, input.data, input.dtype, output.data, output.dtype, count);
    cudaCheckLaunch();
  });
}

extern "C" int tessera_cuda_unary_grad(int32_t op, const tessera_tensor *x,
                                       const tessera_tensor *dy,
                                       tessera_tensor *dx,
                                       cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_unary_grad", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    const tessera_tensor &upstream = requireTensor(dy, "dy");
    tessera_tensor &result = requireTensor(dx, "dx");
    requireUnaryGradOperands(input, upstream, result);
    if (op < 0 || op >= TESSERA_LOGICAL_NOT)
      fail("op " + std::to_string(op) + " has no gradient");
    int64_t count = elementCount(input);
    if (count == 0)
      return;
    if (packable(input) && packable(upstream) && packable(result))
      unaryGradPackKernel<<<gridFor(count / kPack), kThreadsPerBlock, 0,
                            stream>>>(op, input.data, input.dtype,
                                      upstream.data, upstream.dtype,
                                      result.data, result.dtype, count);
    else if (input.dtype == TESSERA_F64)
      unaryGradKernel<double><<<gridFor(count), kThreadsPerBlock, 0, stream>>>(
          op, input.data, input.dtype, upstream.data, upstream.dtype,
          result.data, result.dtype, count);
    else
      unaryGradKernel<float><<<gridFor(count), kThreadsPerBlock, 0, stream>>>(
          op, input.data, input.dtype, upstream.data, upstream.dtype,
          result.data, result.dtype, count);
    cudaCheckLaunch();
  });
}

extern "C" int tessera_cuda_binary(int32_t op, const tessera_tensor *a,
                                   const tessera_tensor *b, tessera_tensor *y,
                                   cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_binary", [&] {
    const tessera_tensor &lhs = requireTensor(a, "a");
    const tessera_tensor &rhs = requireTensor(b, "b");
    tessera_tensor &output = requireTensor(y, "y");
    requireBinaryOperands(op, lhs, rhs, output);
    Shape shape = shapeOf(output);
    Shape strides[2] = {broadcastStrides(lhs, "a", shape),
                        broadcastStrides(rhs, "b", shape)};
    int64_t count = elementCount(output);
    if (count == 0)
      return;
    int64_t periods[2] = {repeatPeriod(shape, strides[0]),
                          repeatPeriod(shape, strides[1])};
    if (op < TESSERA_LOGICAL_AND && packable(lhs) && packable(rhs) &&
        packable(output) && packablePeriod(periods[0]) &&
        packablePeriod(periods[1])) {
      binaryPackKernel<<<gridFor(count / kPack), kThreadsPerBlock, 0,
                         stream>>>(op, lhs.data, periods[0], rhs.data,
                                   periods[1], lhs.dtype, output.data,
                                   output.dtype, count);
      cudaCheckLaunch();
      return;
    }
    DeviceErrorRecord *errors = deviceErrorRecord();
    binaryKernel<<<gridFor(count), kThreadsPerBlock, 0, stream>>>(
        op, makeLayout(shape, strides), lhs.data, rhs.data, lhs.dtype,
        output.data, output.dtype, count, errors);
    cudaCheckLaunch();
  });
}

extern "C" int tessera_cuda_where(const tessera_tensor *condition,
                                  const tessera_tensor *on_true,
                                  const tessera_tensor *on_false,
                                  tessera_tensor *y, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_where", [&] {
    const tessera_tensor &choice = requireTensor(condition, "condition");
    const tessera_tensor &whenTrue = requireTensor(on_true, "on_true");
    const tessera_tensor &whenFalse = requireTensor(on_false, "on_false");
    tessera_tensor &output = requireTensor(y, "y");
    requireSameDtype(whenTrue, "on_true", output, "y");
    requireSameDtype(whenFalse, "on_false", output, "y");
    Shape shape = shapeOf(output);
    Shape strides[3] = {broadcastStrides(choice, "condition", shape),
                        broadcastStrides(whenTrue, "on_true", shape),
                        broadcastStrides(whenFalse, "on_false", shape)};
    int64_t count = elementCount(output);
    if (count == 0)
      return;
    StridedLayout<3> layout = makeLayout(shape, strides);
    unsigned grid = gridFor(count);
    switch (dtypeSize(output.dtype)) {
    case 1:
      whereKernel<uint8_t><<<grid, kThreadsPerBlock, 0, stream>>>(
          layout, choice.data, choice.dtype,
          static_cast<const uint8_t *>(whenTrue.data),
          static_cast<const uint8_t *>(whenFalse.data),
          static_cast<uint8_t *>(output.data), count);
      break;
    case 2:
      whereKernel<uint16_t><<<grid, kThreadsPerBlock, 0, stream>>>(
          layout, choice.data, choice.dtype,
          static_cast<const uint16_t *>(whenTrue.data),
          static_cast<const uint16_t *>(whenFalse.data),
          static_cast<uint16_t *>(output.data), count);
      break;
    case 4:
      whereKernel<uint32_t><<<grid, kThreadsPerBlock, 0, stream>>>(
          layout, choice.data, choice.dtype,
          static_cast<const uint32_t *>(whenTrue.data),
          static_cast<const uint32_t *>(whenFalse.data),
          static_cast<uint32_t *>(output.data), count);
      break;
    default:
      whereKernel<uint64_t><<<grid, kThreadsPerBlock, 0, stream>>>(
          layout, choice.data, choice.dtype,
          static_cast<const uint64_t *>(whenTrue.data),
          static_cast<const uint64_t *>(whenFalse.data),
          static_cast<uint64_t *>(output.data), count);
      break;
    }
    cudaCheckLaunch();
  });
}

extern "C" int tessera_cuda_cast(const tessera_tensor *x, tessera_tensor *y,
                                 cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_cast", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireShape(output, shapeOf(input), "y");
    int64_t count = elementCount(input);
    if (count == 0)
      return;
    if (packable(input) && packable(output)) {
      castPackKernel<<<gridFor(count / kPack), kThreadsPerBlock, 0, stream>>>(
          input.data, input.dtype, output.data, output.dtype, count);
      cudaCheckLaunch();
      return;
    }
    bool integerToInteger =
        isIntegerType(input.dtype) && isIntegerType(output.dtype);
    castKernel<<<gridFor(count), kThreadsPerBlock, 0, stream>>>(
        input.data, input.dtype, output.data, output.dtype, count,
        integerToInteger);
    cudaCheckLaunch();
  });
}

extern "C" int tessera_cuda_dropout(const tessera_tensor *x, tessera_tensor *y,
                                    double rate, uint64_t seed,
                                    cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_dropout", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireShape(output, shapeOf(input), "y");
    requireKernelFloat(input, "x");
    requireKernelFloat(output, "y");
    if (!(rate >= 0.0 && rate < 1.0))
      fail("rate " + std::to_string(rate) + " is outside [0, 1)");
    int64_t count = elementCount(input);
    if (count == 0)
      return;
    dropoutKernel<<<gridFor(count), kThreadsPerBlock, 0, stream>>>(
        input.data, input.dtype, output.data, output.dtype, count,
        DropoutMask(seed, rate), static_cast<float>(1.0 / (1.0 - rate)));
    cudaCheckLaunch();
  });
}
