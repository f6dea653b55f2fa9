//===- Reduction.cpp - Sum, mean, max, min over dims; sum of squares ------===//
//
// One pass over x in row-major order: StridedWalker carries, for each x
// element, the offset of the y element it reduces into (stride 0 on reduced
// dims), so every reduction, over any set of dims, is the same loop.
// Accumulators are f64 for float tensors (a sum over a long axis in f32 loses
// digits) and int64 for integer tensors, and are rounded once into y. max
// and min propagate NaN, as torch.amax does.
//
// y's rank says whether reduced dims were kept (as size 1) or dropped.
//
// sum_squares feeds gradient-norm clipping: it adds into a caller-owned f64
// so that the norm over many gradient tensors needs no intermediate tensor.
//
//===----------------------------------------------------------------------===//

#include "DataTypes.h"
#include "Errors.h"
#include "OperandChecks.h"
#include "TensorAccess.h"

#include <cmath>
#include <limits>
#include <vector>

using namespace tessera::cpu;

namespace {

template <typename T> T initialValue(int32_t op) {
  switch (op) {
  case TESSERA_REDUCE_MAX:
    return std::numeric_limits<T>::has_infinity
               ? -std::numeric_limits<T>::infinity()
               : std::numeric_limits<T>::lowest();
  case TESSERA_REDUCE_MIN:
    return std::numeric_limits<T>::has_infinity
               ? std::numeric_limits<T>::infinity()
               : std::numeric_limits<T>::max();
  default:
    return T(0);
  }
}

template <typename T> bool isNan(T value) { return value != value; }

template <typename T> T combine(int32_t op, T accumulator, T value) {
  switch (op) {
  case TESSERA_REDUCE_MAX:
    if (isNan(accumulator) || isNan(value))
      return accumulator + value;
    return value > accumulator ? value : accumulator;
  case TESSERA_REDUCE_MIN:
    if (isNan(accumulator) || isNan(value))
      return accumulator + value;
    return value < accumulator ? value : accumulator;
  default:
    return accumulator + value;
  }
}

/// Reduces x into y with accumulators of type T, read and written by the
/// given element accessors.
template <typename T, typename Load, typename Store>
void reduceInto(int32_t op, const tessera_tensor &x, tessera_tensor &y,
                const Shape &xToYStrides, int64_t reducedCount, Load load,
                Store store) {
  std::vector<T> accumulators(static_cast<size_t>(elementCount(y)),
                              initialValue<T>(op));
  StridedWalker walker(shapeOf(x), {xToYStrides});
  int64_t count = elementCount(x);
  for (int64_t i = 0; i < count; ++i, walker.advance()) {
    T &accumulator = accumulators[walker.offset(0)];
    accumulator = combine(op, accumulator, load(i));
  }
  for (size_t j = 0; j < accumulators.size(); ++j) {
    T value = accumulators[j];
    if (op == TESSERA_REDUCE_MEAN)
      value = static_cast<T>(value / static_cast<T>(reducedCount));
    store(static_cast<int64_t>(j), value);
  }
}

} // namespace

extern "C" int tessera_cpu_reduce(int32_t op, const tessera_tensor *x,
                                  tessera_tensor *y, const int64_t *dims,
                                  int32_t dim_count) {
  return runKernel("tessera_cpu_reduce", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    ReducedDims reduction = requireReduction(op, input, output, dims, dim_count);
    const std::vector<bool> &reduced = reduction.reduced;
    // The stride in y of each x dim (0 on reduced dims).
    Shape yStrides = rowMajorStrides(shapeOf(output));
    Shape xToYStrides(static_cast<size_t>(input.rank), 0);
    int64_t reducedCount = 1;
    for (int32_t dim = 0, yDim = 0; dim < input.rank; ++dim) {
      if (reduced[dim])
        reducedCount *= input.shape[dim];
      else
        xToYStrides[dim] = yStrides[yDim];
      if (!reduced[dim] || reduction.keepDims)
        ++yDim;
    }

    if (isFloatType(input.dtype))
      reduceInto<double>(
          op, input, output, xToYStrides, reducedCount,
          [&](int64_t i) { return loadNumber(input.data, input.dtype, i); },
          [&](int64_t j, double value) {
            storeNumber(output.data, output.dtype, j, value);
          });
    else
      reduceInto<int64_t>(
          op, input, output, xToYStrides, reducedCount,
          [&](int64_t i) { return loadInteger(input.data, input.dtype, i); },
          [&](int64_t j, int64_t value) {
            storeInteger(output.data, output.dtype, j, value);
          });
  });
}

extern "C" int tessera_cpu_sum_squares(const tessera_tensor *x,
                                       double *accumulator) {
  return runKernel("tessera_cpu_sum_squares", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    requireFloatType(input, "x");
    if (!accumulator)
      fail("accumulator is null");
    double sum = 0.0;
    int64_t count = elementCount(input);
    for (int64_t i = 0; i < count; ++i) {
      double value = loadNumber(input.data, input.dtype, i);
      sum += value * value;
    }
    *accumulator += sum;
  });
}
