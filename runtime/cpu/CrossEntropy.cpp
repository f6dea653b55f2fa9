//===- CrossEntropy.cpp - Mean softmax cross-entropy over classes ---------===//
//
// The language-model loss, fused: logits [N, V] and integer targets [N] give
//   loss = mean over counted rows of (logsumexp(logits[n]) - logits[n, t_n])
// where a row counts unless its target is ignore_index (padding). This never
// forms log-softmax for the whole [N, V] tensor, and logsumexp subtracts the
// row max first so that large logits cannot overflow; sums are f64.
//
// The gradient is softmax minus one-hot, times dloss / count, and 0 on
// ignored rows. With no counted row the loss is 0/0 = NaN, as in PyTorch, and
// the gradient is 0 (there is nothing to push on).
//
// A target outside [0, V) that is not ignore_index is an error naming the
// target, its row and the valid range.
//
//===----------------------------------------------------------------------===//

#include "Errors.h"
#include "OperandChecks.h"
#include "TensorAccess.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace tessera::cpu;

namespace {

/// The target of row `row`, or -1 when the row is ignored.
int64_t targetOf(const tessera_tensor &targets, int64_t row, int64_t classes,
                 int64_t ignoreIndex) {
  int64_t target = loadIndexValue(targets, row);
  if (target == ignoreIndex)
    return -1;
  if (target < 0 || target >= classes)
    fail("target " + std::to_string(target) + " at position [" +
         std::to_string(row) + "] is outside the classes [0, " +
         std::to_string(classes) + ") and is not ignore_index (" +
         std::to_string(ignoreIndex) + ")");
  return target;
}

double logSumExp(const float *row, int64_t classes) {
  float maximum = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < classes; ++j)
    maximum = std::fmax(maximum, row[j]);
  double sum = 0.0;
  for (int64_t j = 0; j < classes; ++j)
    sum += std::exp(static_cast<double>(row[j]) - maximum);
  return maximum + std::log(sum);
}

/// The mean's denominator: the counted targets among `countTargets` (the
/// whole batch this block of rows is part of) when given, else among the
/// rows' own.
int64_t countedRows(const tessera_tensor &targets,
                    const tessera_tensor *countTargets,
                    const ClassLayout &layout, int64_t ignoreIndex) {
  const tessera_tensor &counted = countTargets ? *countTargets : targets;
  requireCountTargets(countTargets, targets);
  int64_t rows = countTargets ? elementCount(*countTargets) : layout.rows;
  int64_t count = 0;
  for (int64_t row = 0; row < rows; ++row)
    if (targetOf(counted, row, layout.classes, ignoreIndex) >= 0)
      ++count;
  return count;
}

} // namespace

extern "C" int tessera_cpu_cross_entropy(const tessera_tensor *logits,
                                         const tessera_tensor *targets,
                                         const tessera_tensor *count_targets,
                                         tessera_tensor *loss,
                                         int64_t ignore_index) {
  return runKernel("tessera_cpu_cross_entropy", [&] {
    const tessera_tensor &scores = requireTensor(logits, "logits");
    const tessera_tensor &labels = requireTensor(targets, "targets");
    tessera_tensor &output = requireTensor(loss, "loss");
    ClassLayout layout = requireLossOperands(scores, labels);
    requireShape(output, {}, "loss");
    FloatInput values(scores, "logits");
    double total = 0.0;
    int64_t count = 0;
    for (int64_t row = 0; row < layout.rows; ++row) {
      int64_t target = targetOf(labels, row, layout.classes, ignore_index);
      if (target < 0)
        continue;
      const float *rowValues = values.data() + row * layout.classes;
      total += logSumExp(rowValues, layout.classes) - rowValues[target];
      ++count;
    }
    // A block of a larger batch divides by the batch's count (its loss is
    // 0 when none of its own rows counts).
    if (count_targets)
      count = countedRows(labels, count_targets, layout, ignore_index);
    FloatOutput result(output, "loss");
    result[0] = static_cast<float>(total / static_cast<double>(count));
    result.commit();
  });
}

extern "C" int tessera_cpu_cross_entropy_grad(const tessera_tensor *logits,
                                              const tessera_tensor *targets,
                                              const tessera_tensor *count_targets,
                                              const tessera_tensor *dloss,
                                              tessera_tensor *dlogits,
                                              int64_t ignore_index) {
  return runKernel("tessera_cpu_cross_entropy_grad", [&] {
    const tessera_tensor &scores = requireTensor(logits, "logits");
    const tessera_tensor &labels = requireTensor(targets, "targets");
    const tessera_tensor &upstream = requireTensor(dloss, "dloss");
    tessera_tensor &output = requireTensor(dlogits, "dlogits");
    ClassLayout layout =
        requireLossGradOperands(scores, labels, upstream, output);
    FloatInput values(scores, "logits");
    FloatInput upstreamValue(upstream, "dloss");
    FloatOutput result(output, "dlogits");
    int64_t count = countedRows(labels, count_targets, layout, ignore_index);
    float rowWeight =
        count > 0 ? static_cast<float>(upstreamValue[0] / count) : 0.0f;
    for (int64_t row = 0; row < layout.rows; ++row) {
      const float *rowValues = values.data() + row * layout.classes;
      float *gradientRow = result.data() + row * layout.classes;
      int64_t target = targetOf(labels, row, layout.classes, ignore_index);
      if (target < 0) {
        std::fill(gradientRow, gradientRow + layout.classes, 0.0f);
        continue;
      }
      double logNormalizer = logSumExp(rowValues, layout.classes);
      for (int64_t j = 0; j < layout.classes; ++j) {
        float probability = static_cast<float>(
            std::exp(static_cast<double>(rowValues[j]) - logNormalizer));
        gradientRow[j] =
            rowWeight * (probability - (j == target ? 1.0f : 0.0f));
      }
    }
    result.commit();
  });
}

extern "C" int tessera_cpu_cross_entropy_with_grad(
    const tessera_tensor *logits, const tessera_tensor *targets,
    const tessera_tensor *count_targets, const tessera_tensor *dloss,
    tessera_tensor *loss, tessera_tensor *dlogits, int64_t ignore_index) {
  // The host has no second pass over memory to save: the two kernels, in
  // this order, so that dlogits may be the logits' own storage (the arena
  // planner writes it in place): the loss reads the logits first, and the
  // gradient reads each row whole before it overwrites it.
  if (int status = tessera_cpu_cross_entropy(logits, targets, count_targets,
                                             loss, ignore_index))
    return status;
  return tessera_cpu_cross_entropy_grad(logits, targets, count_targets, dloss,
                                        dlogits, ignore_index);
}
