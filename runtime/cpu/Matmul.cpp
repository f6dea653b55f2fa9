//===- Matmul.cpp - Batched matrix products and the linear layer ----------===//
//
// One inner kernel does all the arithmetic: y[M,N] += a[M,K] b[K,N] on
// contiguous row-major f32 matrices, in i-k-j order. That order walks a row
// of b and a row of y with unit stride in the innermost loop (an axpy the
// compiler vectorizes without reassociating sums), which is what makes a
// naive reference kernel fast enough for small models. Transposed operands
// are first copied into that layout: O(MK) work in front of O(MKN).
//
// Accumulation is f32, as in PyTorch's CPU GEMM; bf16/f16 inputs are widened
// once and the output is rounded once (TensorAccess.h).
//
//===----------------------------------------------------------------------===//

#include "Errors.h"
#include "OperandChecks.h"
#include "TensorAccess.h"

#include <algorithm>
#include <vector>

using namespace tessera::cpu;

namespace {

/// y[M,N] += a[M,K] * b[K,N].
void multiplyAccumulate(const float *a, const float *b, float *y, int64_t rows,
                        int64_t inner, int64_t columns) {
  for (int64_t i = 0; i < rows; ++i) {
    float *yRow = y + i * columns;
    for (int64_t k = 0; k < inner; ++k) {
      float aValue = a[i * inner + k];
      const float *bRow = b + k * columns;
      for (int64_t j = 0; j < columns; ++j)
        yRow[j] += aValue * bRow[j];
    }
  }
}

/// Writes the [columns, rows] transpose of the row-major [rows, columns]
/// matrix `source` into `destination`.
void transposeMatrix(const float *source, float *destination, int64_t rows,
                     int64_t columns) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < columns; ++c)
      destination[c * rows + r] = source[r * columns + c];
}

/// `tensor` without its last two dims: the batch dims of a matmul operand.
tessera_tensor batchDims(const tessera_tensor &tensor) {
  tessera_tensor batch = tensor;
  batch.rank -= 2;
  return batch;
}

} // namespace

extern "C" int tessera_cpu_matmul(const tessera_tensor *a,
                                  const tessera_tensor *b, tessera_tensor *y,
                                  int32_t transpose_a, int32_t transpose_b) {
  return runKernel("tessera_cpu_matmul", [&] {
    const tessera_tensor &lhs = requireTensor(a, "a");
    const tessera_tensor &rhs = requireTensor(b, "b");
    tessera_tensor &output = requireTensor(y, "y");
    if (lhs.rank < 2 || rhs.rank < 2 || output.rank < 2)
      fail("a, b and y need rank >= 2, got a " + formatShape(shapeOf(lhs)) +
           ", b " + formatShape(shapeOf(rhs)) + ", y " +
           formatShape(shapeOf(output)));
    int64_t rows = lhs.shape[lhs.rank - (transpose_a ? 1 : 2)];
    int64_t inner = lhs.shape[lhs.rank - (transpose_a ? 2 : 1)];
    int64_t rhsInner = rhs.shape[rhs.rank - (transpose_b ? 1 : 2)];
    int64_t columns = rhs.shape[rhs.rank - (transpose_b ? 2 : 1)];
    if (inner != rhsInner)
      fail("contracted dims differ: a " + formatShape(shapeOf(lhs)) +
           " and b " + formatShape(shapeOf(rhs)) + " (transpose_a " +
           std::to_string(transpose_a) + ", transpose_b " +
           std::to_string(transpose_b) + ")");
    Shape outputShape = shapeOf(output);
    Shape batchShape(outputShape.begin(), outputShape.end() - 2);
    Shape expected = batchShape;
    expected.push_back(rows);
    expected.push_back(columns);
    requireShape(output, expected, "y");

    FloatInput lhsValues(lhs, "a");
    FloatInput rhsValues(rhs, "b");
    FloatOutput result(output, "y");
    StridedWalker batches(
        batchShape,
        {broadcastStrides(batchDims(lhs), "a's batch dims", batchShape),
         broadcastStrides(batchDims(rhs), "b's batch dims", batchShape)});
    std::vector<float> lhsPacked(transpose_a ? rows * inner : 0);
    std::vector<float> rhsPacked(transpose_b ? inner * columns : 0);
    int64_t batchCount = product(batchShape, 0, batchShape.size());
    for (int64_t batch = 0; batch < batchCount; ++batch, batches.advance()) {
      const float *lhsMatrix =
          lhsValues.data() + batches.offset(0) * rows * inner;
      const float *rhsMatrix =
          rhsValues.data() + batches.offset(1) * inner * columns;
      if (transpose_a) {
        transposeMatrix(lhsMatrix, lhsPacked.data(), inner, rows);
        lhsMatrix = lhsPacked.data();
      }
      if (transpose_b) {
        transposeMatrix(rhsMatrix, rhsPacked.data(), columns, inner);
        rhsMatrix = rhsPacked.data();
      }
      float *outputMatrix = result.data() + batch * rows * columns;
      std::fill(outputMatrix, outputMatrix + rows * columns, 0.0f);
      multiplyAccumulate(lhsMatrix, rhsMatrix, outputMatrix, rows, inner,
                         columns);
    }
    result.commit();
  });
}

extern "C" int tessera_cpu_linear(const tessera_tensor *x,
                                  const tessera_tensor *weight,
                                  const tessera_tensor *bias, tessera_tensor *y,
                                  int32_t transpose_weight) {
  return runKernel("tessera_cpu_linear", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    const tessera_tensor &weights = requireTensor(weight, "weight");
    tessera_tensor &output = requireTensor(y, "y");
    LinearLayout layout =
        requireLinearOperands(input, weights, bias, output, transpose_weight);
    int64_t inner = layout.inner, columns = layout.columns;

    FloatInput inputValues(input, "x");
    FloatInput weightValues(weights, "weight");
    FloatOutput result(output, "y");
    const float *weightMatrix = weightValues.data();
    std::vector<float> weightPacked;
    if (transpose_weight) {
      weightPacked.resize(inner * columns);
      transposeMatrix(weightMatrix, weightPacked.data(), columns, inner);
      weightMatrix = weightPacked.data();
    }
    int64_t rows = elementCount(input) / std::max<int64_t>(inner, 1);
    if (inner == 0)
      rows = elementCount(output) / std::max<int64_t>(columns, 1);
    if (bias) {
      FloatInput biasValues(*bias, "bias");
      for (int64_t row = 0; row < rows; ++row)
        std::copy(biasValues.data(), biasValues.data() + columns,
                  result.data() + row * columns);
    } else {
      result.fill(0.0f);
    }
    multiplyAccumulate(inputValues.data(), weightMatrix, result.data(), rows,
                       inner, columns);
    result.commit();
  });
}

extern "C" int
tessera_cpu_matmul_bias_grad(const tessera_tensor *a, const tessera_tensor *b,
                             tessera_tensor *y, tessera_tensor *dbias,
                             int32_t transpose_a, int32_t transpose_b) {
  return runKernel("tessera_cpu_matmul_bias_grad", [&] {
    requireMatmulBiasGradOperands(
        requireTensor(a, "a"), requireTensor(b, "b"), requireTensor(y, "y"),
        requireTensor(dbias, "dbias"), transpose_a, transpose_b);
    requireSuccess(tessera_cpu_matmul(a, b, y, transpose_a, 0),
                   tessera_cpu_last_error);
    const int64_t rowsOfB[] = {0};
    requireSuccess(tessera_cpu_reduce(TESSERA_REDUCE_SUM, b, dbias, rowsOfB, 1),
                   tessera_cpu_last_error);
  });
}
