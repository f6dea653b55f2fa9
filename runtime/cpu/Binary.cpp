//===- Binary.cpp - Elementwise ops of two tensors, and where -------------===//
//
// Broadcasting is numpy's and is handled once, by StridedWalker: each output
// index carries an offset into `a` and one into `b` (stride 0 on stretched
// dims). The per-element math is then a switch on the op in one of two
// arithmetic domains, chosen by the inputs' dtype:
// - floats: f32 arithmetic (f64 for f64 storage), as PyTorch computes;
//   maximum/minimum propagate NaN like torch.maximum;
// - integers and bool: int64 arithmetic with C semantics (division truncates
//   toward zero); division by zero is an error rather than undefined
//   behaviour. pow with a negative exponent is 1/b^n truncated.
// Comparisons and logical ops write bool; the others write the input dtype.
//
//===----------------------------------------------------------------------===//

#include "DataTypes.h"
#include "Errors.h"
#include "OperandChecks.h"
#include "TensorAccess.h"

#include <cmath>
#include <cstring>

using namespace tessera::cpu;

namespace {

bool writesBool(int32_t op) { return op >= TESSERA_LOGICAL_AND; }

/// The value of a comparison or logical op, for any arithmetic type.
template <typename T> bool applyPredicate(int32_t op, T a, T b) {
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
  default: // TESSERA_GE
    return a >= b;
  }
}

template <typename T> T applyFloat(int32_t op, T a, T b) {
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
    return std::pow(a, b);
  case TESSERA_MAXIMUM:
    return std::isnan(a) || std::isnan(b) ? a + b : (a > b ? a : b);
  default: // TESSERA_MINIMUM
    return std::isnan(a) || std::isnan(b) ? a + b : (a < b ? a : b);
  }
}

int64_t integerPower(int64_t base, int64_t exponent) {
  if (exponent < 0) {
    if (base == 1)
      return 1;
    if (base == -1)
      return exponent % 2 == 0 ? 1 : -1;
    if (base == 0)
      fail("integer pow: 0 to a negative power");
    return 0;
  }
  // Square-and-multiply in unsigned arithmetic: overflow wraps (defined).
  uint64_t result = 1, factor = static_cast<uint64_t>(base);
  for (uint64_t remaining = static_cast<uint64_t>(exponent); remaining;
       remaining >>= 1) {
    if (remaining & 1)
      result *= factor;
    factor *= factor;
  }
  return static_cast<int64_t>(result);
}

int64_t applyInteger(int32_t op, int64_t a, int64_t b, const Shape &shape,
                     const Shape &position) {
  // Unsigned add/sub/mul wrap instead of overflowing (undefined for int64).
  uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
  case TESSERA_ADD:
    return static_cast<int64_t>(ua + ub);
  case TESSERA_SUB:
    return static_cast<int64_t>(ua - ub);
  case TESSERA_MUL:
    return static_cast<int64_t>(ua * ub);
  case TESSERA_DIV:
    if (b == 0)
      fail("integer division by zero at position " + formatShape(position) +
           " of the result " + formatShape(shape));
    if (b == -1) // INT64_MIN / -1 overflows; negate with wrapping instead.
      return static_cast<int64_t>(0 - ua);
    return a / b;
  case TESSERA_POW:
    return integerPower(a, b);
  case TESSERA_MAXIMUM:
    return a > b ? a : b;
  default: // TESSERA_MINIMUM
    return a < b ? a : b;
  }
}

} // namespace

extern "C" int tessera_cpu_binary(int32_t op, const tessera_tensor *a,
                                  const tessera_tensor *b, tessera_tensor *y) {
  return runKernel("tessera_cpu_binary", [&] {
    const tessera_tensor &lhs = requireTensor(a, "a");
    const tessera_tensor &rhs = requireTensor(b, "b");
    tessera_tensor &output = requireTensor(y, "y");
    requireBinaryOperands(op, lhs, rhs, output);
    Shape shape = shapeOf(output);
    StridedWalker walker(shape, {broadcastStrides(lhs, "a", shape),
                                 broadcastStrides(rhs, "b", shape)});
    int64_t count = elementCount(output);
    bool integerDomain = isIntegerType(lhs.dtype);
    bool doublePrecision = lhs.dtype == TESSERA_F64;
    for (int64_t i = 0; i < count; ++i, walker.advance()) {
      int64_t offsetA = walker.offset(0), offsetB = walker.offset(1);
      if (integerDomain) {
        int64_t valueA = loadInteger(lhs.data, lhs.dtype, offsetA);
        int64_t valueB = loadInteger(rhs.data, rhs.dtype, offsetB);
        if (writesBool(op))
          storeInteger(output.data, output.dtype, i,
                       applyPredicate(op, valueA, valueB));
        else
          storeInteger(output.data, output.dtype, i,
                       applyInteger(op, valueA, valueB, shape, walker.index()));
      } else if (doublePrecision) {
        double valueA = loadNumber(lhs.data, lhs.dtype, offsetA);
        double valueB = loadNumber(rhs.data, rhs.dtype, offsetB);
        if (writesBool(op))
          storeInteger(output.data, output.dtype, i,
                       applyPredicate(op, valueA, valueB));
        else
          storeNumber(output.data, output.dtype, i,
                      applyFloat(op, valueA, valueB));
      } else {
        float valueA = loadFloat(lhs.data, lhs.dtype, offsetA);
        float valueB = loadFloat(rhs.data, rhs.dtype, offsetB);
        if (writesBool(op))
          storeInteger(output.data, output.dtype, i,
                       applyPredicate(op, valueA, valueB));
        else
          storeFloat(output.data, output.dtype, i,
                     applyFloat(op, valueA, valueB));
      }
    }
  });
}

extern "C" int tessera_cpu_where(const tessera_tensor *condition,
                                 const tessera_tensor *on_true,
                                 const tessera_tensor *on_false,
                                 tessera_tensor *y) {
  return runKernel("tessera_cpu_where", [&] {
    const tessera_tensor &choice = requireTensor(condition, "condition");
    const tessera_tensor &whenTrue = requireTensor(on_true, "on_true");
    const tessera_tensor &whenFalse = requireTensor(on_false, "on_false");
    tessera_tensor &output = requireTensor(y, "y");
    requireSameDtype(whenTrue, "on_true", output, "y");
    requireSameDtype(whenFalse, "on_false", output, "y");
    Shape shape = shapeOf(output);
    StridedWalker walker(shape,
                         {broadcastStrides(choice, "condition", shape),
                          broadcastStrides(whenTrue, "on_true", shape),
                          broadcastStrides(whenFalse, "on_false", shape)});
    // The branches share y's dtype, so a selected element is copied as bytes.
    size_t elementSize = dtypeSize(output.dtype);
    int64_t count = elementCount(output);
    for (int64_t i = 0; i < count; ++i, walker.advance()) {
      bool takeTrue =
          loadNumber(choice.data, choice.dtype, walker.offset(0)) != 0.0;
      const tessera_tensor &source = takeTrue ? whenTrue : whenFalse;
      int64_t offset = walker.offset(takeTrue ? 1 : 2);
      std::memcpy(static_cast<char *>(output.data) + i * elementSize,
                  static_cast<const char *>(source.data) + offset * elementSize,
                  elementSize);
    }
  });
}
