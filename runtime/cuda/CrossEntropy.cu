//===- CrossEntropy.cu - Fused softmax cross-entropy over the vocabulary ---===//
//
// The language-model loss over logits [N, V] (V = 50257 for GPT-2). Logits
// stay in their storage type (bf16 in mixed precision): one block per row
// reads the row for its max and again for the f64 sum of exp(x - max) (the
// second read mostly hits L2: a bf16 row is 100 KB), and nothing of size
// [N, V] is written in the forward. The backward reads the row for the same
// log-normalizer and writes dlogits = dloss/count * (softmax - onehot) in one
// pass, so fp32 logits are never materialized at all.
//
// The mean needs a cross-row sum: each row writes its loss (and whether it
// counts) into scratch and one block adds them in a fixed order, so the loss
// is deterministic run to run (atomics would not be). Targets outside [0, V)
// that are not ignore_index are recorded as device errors (the row then
// counts as ignored).
//
// A later fused kernel can produce loss and dlogits in one pass (llm.c's
// fused classifier); the ABI keeps them separate for now.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

using namespace tessera::cuda;
using tessera::cpu::requireIndexType;
using tessera::cpu::requireShape;
using tessera::cpu::requireTensor;
using tessera::cpu::shapeOf;

namespace {

constexpr int kRowThreads = 512;

struct RowResult {
  double loss;
  double counted; // 1 or 0
};

/// The target of `row`, or -1 when ignored or (recorded) out of range.
__device__ int64_t targetOf(const void *targets, int targetType, int64_t row,
                            int64_t classes, int64_t ignoreIndex,
                            DeviceErrorRecord *errors, const char *kernel) {
  int64_t target = loadInteger(targets, targetType, row);
  if (target == ignoreIndex)
    return -1;
  if (target < 0 || target >= classes) {
    reportDeviceError(errors, kIndexOutOfRange, target, row, 0, classes,
                      kernel);
    return -1;
  }
  return target;
}

/// log(sum(exp(row))), max subtracted first; every thread gets it.
__device__ double logSumExp(const void *logits, int logitType, int64_t start,
                            int64_t classes, float *sharedMax,
                            double *sharedSum) {
  float maximum = -INFINITY;
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
    maximum = fmaxf(maximum, loadFloat(logits, logitType, start + j));
  maximum = blockMax(maximum, sharedMax);
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
    sum += exp(static_cast<double>(loadFloat(logits, logitType, start + j)) -
               maximum);
  return maximum + log(blockSum(sum, sharedSum));
}

__global__ void rowLossKernel(const void *logits, int logitType,
                              const void *targets, int targetType,
                              int64_t classes, int64_t ignoreIndex,
                              RowResult *results, DeviceErrorRecord *errors) {
  __shared__ float sharedMax[32];
  __shared__ double sharedSum[32];
  int64_t row = blockIdx.x;
  int64_t target = targetOf(targets, targetType, row, classes, ignoreIndex,
                            errors, "tessera_cuda_cross_entropy");
  if (target < 0) {
    if (threadIdx.x == 0)
      results[row] = {0.0, 0.0};
    return;
  }
  int64_t start = row * classes;
  double normalizer = logSumExp(logits, logitType, start, classes, sharedMax,
                                sharedSum);
  if (threadIdx.x == 0)
    results[row] = {normalizer - loadFloat(logits, logitType, start + target),
                    1.0};
}

__global__ void meanLossKernel(const RowResult *results, int64_t rows,
                               void *loss, int lossType) {
  __shared__ double shared[32];
  double total = 0.0, count = 0.0;
  for (int64_t row = threadIdx.x; row < rows; row += blockDim.x) {
    total += results[row].loss;
    count += results[row].counted;
  }
  total = blockSum(total, shared);
  count = blockSum(count, shared);
  if (threadIdx.x == 0)
    storeFloat(loss, lossType, 0, static_cast<float>(total / count));
}

__global__ void countTargetsKernel(const void *targets, int targetType,
                                   int64_t rows, int64_t classes,
                                   int64_t ignoreIndex, double *count,
                                   DeviceErrorRecord *errors) {
  __shared__ double shared[32];
  double counted = 0.0;
  for (int64_t row = threadIdx.x; row < rows; row += blockDim.x)
    counted += targetOf(targets, targetType, row, classes, ignoreIndex, errors,
                        "tessera_cuda_cross_entropy_grad") >= 0;
  counted = blockSum(counted, shared);
  if (threadIdx.x == 0)
    *count = counted;
}

__global__ void rowGradientKernel(const void *logits, int logitType,
                                  const void *targets, int targetType,
                                  const void *dloss, int dlossType,
                                  const double *count, void *dlogits,
                                  int dlogitType, int64_t classes,
                                  int64_t ignoreIndex,
                                  DeviceErrorRecord *errors) {
  __shared__ float sharedMax[32];
  __shared__ double sharedSum[32];
  int64_t row = blockIdx.x;
  int64_t start = row * classes;
  int64_t target = targetOf(targets, targetType, row, classes, ignoreIndex,
                            errors, "tessera_cuda_cross_entropy_grad");
  if (target < 0) {
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
      storeFloat(dlogits, dlogitType, start + j, 0.0f);
    return;
  }
  // As the CPU kernel: an f32 upstream divided by the f32 count.
  float rowWeight =
      loadFloat(dloss, dlossType, 0) / static_cast<float>(*count);
  double normalizer = logSumExp(logits, logitType, start, classes, sharedMax,
                                sharedSum);
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
    float probability = static_cast<float>(
        exp(static_cast<double>(loadFloat(logits, logitType, start + j)) -
            normalizer));
    storeFloat(dlogits, dlogitType, start + j,
               rowWeight * (probability - (j == target ? 1.0f : 0.0f)));
  }
}

struct ClassLayout {
  int64_t rows;
  int64_t classes;
};

ClassLayout checkLogitsAndTargets(const tessera_tensor &logits,
                                  const tessera_tensor &targets) {
  if (logits.rank != 2)
    fail("logits must have rank 2 ([N, V]), got " +
         tessera::cpu::formatShape(shapeOf(logits)));
  requireKernelFloat(logits, "logits");
  requireIndexType(targets, "targets");
  requireShape(targets, {logits.shape[0]}, "targets");
  if (logits.shape[0] > INT32_MAX)
    fail("more than 2^31 rows");
  return {logits.shape[0], logits.shape[1]};
}

} // namespace

extern "C" int tessera_cuda_cross_entropy(const tessera_tensor *logits,
                                          const tessera_tensor *targets,
                                          tessera_tensor *loss,
                                          int64_t ignore_index,
                                          cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_cross_entropy", [&] {
    const tessera_tensor &scores = requireTensor(logits, "logits");
    const tessera_tensor &labels = requireTensor(targets, "targets");
    tessera_tensor &output = requireTensor(loss, "loss");
    ClassLayout layout = checkLogitsAndTargets(scores, labels);
    requireShape(output, {}, "loss");
    requireKernelFloat(output, "loss");
    DeviceErrorRecord *errors = deviceErrorRecord();
    RowResult *results = static_cast<RowResult *>(streamScratch(
        stream, std::max<int64_t>(layout.rows, 1) * sizeof(RowResult)));
    if (layout.rows > 0) {
      rowLossKernel<<<static_cast<unsigned>(layout.rows), kRowThreads, 0,
                      stream>>>(scores.data, scores.dtype, labels.data,
                                labels.dtype, layout.classes, ignore_index,
                                results, errors);
      cudaCheckLaunch();
    }
    meanLossKernel<<<1, 1024, 0, stream>>>(results, layout.rows, output.data,
                                           output.dtype);
    cudaCheckLaunch();
  });
}

extern "C" int tessera_cuda_cross_entropy_grad(const tessera_tensor *logits,
                                               const tessera_tensor *targets,
                                               const tessera_tensor *dloss,
                                               tessera_tensor *dlogits,
                                               int64_t ignore_index,
                                               cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_cross_entropy_grad", [&] {
    const tessera_tensor &scores = requireTensor(logits, "logits");
    const tessera_tensor &labels = requireTensor(targets, "targets");
    const tessera_tensor &upstream = requireTensor(dloss, "dloss");
    tessera_tensor &output = requireTensor(dlogits, "dlogits");
    ClassLayout layout = checkLogitsAndTargets(scores, labels);
    requireShape(upstream, {}, "dloss");
    requireShape(output, shapeOf(scores), "dlogits");
    requireKernelFloat(upstream, "dloss");
    requireKernelFloat(output, "dlogits");
    if (layout.rows == 0)
      return;
    DeviceErrorRecord *errors = deviceErrorRecord();
    double *count = static_cast<double *>(streamScratch(stream, sizeof(double)));
    countTargetsKernel<<<1, 1024, 0, stream>>>(labels.data, labels.dtype,
                                               layout.rows, layout.classes,
                                               ignore_index, count, errors);
    cudaCheckLaunch();
    rowGradientKernel<<<static_cast<unsigned>(layout.rows), kRowThreads, 0,
                        stream>>>(scores.data, scores.dtype, labels.data,
                                  labels.dtype, upstream.data, upstream.dtype,
                                  count, output.data, output.dtype,
                                  layout.classes, ignore_index, errors);
    cudaCheckLaunch();
  });
}
