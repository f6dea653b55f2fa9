//===- CrossEntropy.cu - Fused softmax cross-entropy over the vocabulary ---===//
//
// The language-model loss over logits [N, V] (V = 50257 for GPT-2). Logits
// stay in their storage type (bf16 in mixed precision) and nothing of size
// [N, V] is written in the forward. One block per row reads the row once
// with 16-byte loads (a scalar head reaches 16-byte alignment: rows of an odd
// length start anywhere; a scalar tail finishes) and keeps an online
// max / sum of exp(x - max) per thread in f32, combined across the block in
// f64. The backward keeps the vectors it loaded in shared memory (a bf16 row
// of up to 53248 classes fits in 104 KiB), so after the block agrees on the
// log-normalizer it writes dlogits = dloss/count * (softmax - onehot) without
// reading the row again; fp32 logits are never materialized. The row goes
// to shared memory by cp.async, without passing through registers, so two
// blocks fit an SM and one row's reductions and stores overlap the other's
// loads: kept in registers instead, as this kernel first did, the cache
// allowed one block per SM, idle while it reduced (1.8 ms for GPT-2 124M's
// 16 x 1024 rows of 50304 on an H200).
//
// The mean needs a cross-row sum: each row writes its loss (and whether it
// counts) into scratch and one block adds them in a fixed order, so the loss
// is deterministic run to run (atomics would not be). Targets outside [0, V)
// that are not ignore_index are recorded as device errors (the row then
// counts as ignored).
//
// tessera_cuda_cross_entropy_with_grad is llm.c's fused classifier: the
// gradient kernel, which computes each row's log-normalizer anyway, also
// writes the row's loss, so the forward's pass over the logits (a sixth of a
// GB per thousand tokens of GPT-2) is not made at all. Its loss is the
// separate kernel's to the bit (the same normalizer, the same mean).
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "OperandChecks.h"

#include <cuda_pipeline.h>

using namespace tessera::cuda;
using tessera::cpu::ClassLayout;
using tessera::cpu::requireLossGradOperands;
using tessera::cpu::requireLossOperands;
using tessera::cpu::requireShape;
using tessera::cpu::requireTensor;
using tessera::cpu::shapeOf;

namespace {

/// Threads per row and 16-byte vectors each thread keeps in shared memory:
/// 512 threads x 13 vectors x 8 bf16 = 53248 classes in 104 KiB, two blocks
/// to an SM's 228 KiB.
constexpr int kRowThreads = 512;
constexpr int kCachedVectors = 13;
constexpr size_t kCacheBytes =
    sizeof(uint4) * static_cast<size_t>(kCachedVectors) * kRowThreads;

struct RowResult {
  double loss;
  double counted; // 1 or 0
};

__device__ __forceinline__ float toFloat(float value) { return value; }
__device__ __forceinline__ float toFloat(__nv_bfloat16 value) {
  return __bfloat162float(value);
}
__device__ __forceinline__ float toFloat(__half value) {
  return __half2float(value);
}
template <typename T> __device__ __forceinline__ T fromFloat(float value);
template <> __device__ __forceinline__ float fromFloat<float>(float value) {
  return value;
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float value) {
  return __float2bfloat16_rn(value);
}
template <> __device__ __forceinline__ __half fromFloat<__half>(float value) {
  return __float2half_rn(value);
}

template <typename T> constexpr int kPerVector = 16 / sizeof(T);

template <typename T>
__device__ __forceinline__ void unpack(const uint4 &vector,
                                       float (&values)[kPerVector<T>]) {
  const T *elements = reinterpret_cast<const T *>(&vector);
#pragma unroll
  for (int k = 0; k < kPerVector<T>; ++k)
    values[k] = toFloat(elements[k]);
}

template <typename T>
__device__ __forceinline__ uint4 pack(const float (&values)[kPerVector<T>]) {
  uint4 vector;
  T *elements = reinterpret_cast<T *>(&vector);
#pragma unroll
  for (int k = 0; k < kPerVector<T>; ++k)
    elements[k] = fromFloat<T>(values[k]);
  return vector;
}

/// A row as a scalar head up to the first 16-byte boundary, whole vectors,
/// and a scalar tail from `tailStart`.
struct RowSplit {
  int64_t head;
  int64_t vectors;
  int64_t tailStart;
};

template <typename T>
__device__ RowSplit splitRow(const T *row, int64_t classes) {
  uintptr_t misalignment = reinterpret_cast<uintptr_t>(row) % 16;
  int64_t head = static_cast<int64_t>((16 - misalignment) % 16 / sizeof(T));
  head = head < classes ? head : classes;
  int64_t vectors = (classes - head) / kPerVector<T>;
  return {head, vectors, head + vectors * kPerVector<T>};
}

/// A running max and sum of exp(x - max) over the values a thread has seen.
struct OnlineSum {
  float maximum = -INFINITY;
  float sum = 0.0f;

  template <int N> __device__ __forceinline__ void add(const float (&values)[N]) {
    float largest = maximum;
#pragma unroll
    for (int k = 0; k < N; ++k)
      largest = fmaxf(largest, values[k]);
    if (largest > maximum) {
      sum *= expf(maximum - largest);
      maximum = largest;
    }
    // Values of -inf add nothing (and must not make -inf - -inf).
    if (maximum == -INFINITY)
      return;
#pragma unroll
    for (int k = 0; k < N; ++k)
      sum += expf(values[k] - maximum);
  }
};

/// The block's row cache in dynamic shared memory: thread t's k-th vector
/// (the row's vector t + k * blockDim.x) at k * blockDim.x + t.
__device__ __forceinline__ uint4 *rowCache() {
  extern __shared__ uint4 cache[];
  return cache;
}

/// How many of the row's vectors rowCache() holds (32-bit: at most
/// kCachedVectors * blockDim.x).
__device__ __forceinline__ int cachedVectors(const RowSplit &split) {
  int64_t capacity = kCachedVectors * static_cast<int64_t>(blockDim.x);
  return static_cast<int>(split.vectors < capacity ? split.vectors : capacity);
}

/// log(sum(exp(row))) for every thread of the block; reads the row once and
/// leaves this thread's first kCachedVectors vectors in rowCache() (each
/// thread reads back only its own: no barrier needed).
template <typename T>
__device__ double rowLogNormalizer(const T *row, int64_t classes,
                                   const RowSplit &split, float *sharedMax,
                                   double *sharedSum) {
  const uint4 *vectors = reinterpret_cast<const uint4 *>(row + split.head);
  uint4 *cache = rowCache();
  // All copies first, so each thread has several in flight (a cp.async
  // holds no register: no unrolling needed).
  const int cached = cachedVectors(split);
#pragma unroll 1
  for (int v = threadIdx.x; v < cached; v += blockDim.x)
    __pipeline_memcpy_async(&cache[v], &vectors[v], sizeof(uint4));
  __pipeline_commit();
  __pipeline_wait_prior(0);
  OnlineSum online;
  float values[kPerVector<T>];
#pragma unroll 1
  for (int v = threadIdx.x; v < cached; v += blockDim.x) {
    unpack<T>(cache[v], values);
    online.add(values);
  }
  for (int64_t v = threadIdx.x + static_cast<int64_t>(kCachedVectors) *
                                     blockDim.x;
       v < split.vectors; v += blockDim.x) {
    unpack<T>(vectors[v], values);
    online.add(values);
  }
  for (int64_t j = threadIdx.x; j < split.head; j += blockDim.x) {
    float value[1] = {toFloat(row[j])};
    online.add(value);
  }
  for (int64_t j = split.tailStart + threadIdx.x; j < classes;
       j += blockDim.x) {
    float value[1] = {toFloat(row[j])};
    online.add(value);
  }
  float maximum = blockMax(online.maximum, sharedMax);
  double scaled = online.sum == 0.0f
                      ? 0.0
                      : static_cast<double>(online.sum) *
                            exp(static_cast<double>(online.maximum) - maximum);
  return maximum + log(blockSum(scaled, sharedSum));
}

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

template <typename T>
__global__ void __launch_bounds__(kRowThreads, 2)
    rowLossKernel(const T *logits, const void *targets, int targetType,
                  int64_t classes, int64_t ignoreIndex, RowResult *results,
                  DeviceErrorRecord *errors) {
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
  const T *rowLogits = logits + row * classes;
  double normalizer = rowLogNormalizer(
      rowLogits, classes, splitRow(rowLogits, classes), sharedMax, sharedSum);
  if (threadIdx.x == 0)
    results[row] = {normalizer - toFloat(rowLogits[target]), 1.0};
}

/// The mean over the rows' results; divided by `*batchCount` instead of
/// the rows' own count when given (count_targets: a block of a batch).
__global__ void meanLossKernel(const RowResult *results, int64_t rows,
                               const double *batchCount, void *loss,
                               int lossType) {
  __shared__ double shared[32];
  double total = 0.0, count = 0.0;
  for (int64_t row = threadIdx.x; row < rows; row += blockDim.x) {
    total += results[row].loss;
    count += results[row].counted;
  }
  total = blockSum(total, shared);
  count = blockSum(count, shared);
  if (threadIdx.x == 0)
    storeFloat(loss, lossType, 0,
               static_cast<float>(total / (batchCount ? *batchCount : count)));
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

/// Writes one vector's worth of gradients: as a vector when dlogits has the
/// logits' type and alignment, else element by element.
template <typename T, bool VectorStore>
__device__ __forceinline__ void
storeGradients(void *dlogits, int dlogitType, int64_t start, int64_t column,
               const float (&values)[kPerVector<T>]) {
  if (VectorStore) {
    *reinterpret_cast<uint4 *>(static_cast<T *>(dlogits) + start + column) =
        pack<T>(values);
  } else {
#pragma unroll
    for (int k = 0; k < kPerVector<T>; ++k)
      storeFloat(dlogits, dlogitType, start + column + k, values[k]);
  }
}

/// The gradient of one logit: rowWeight * (softmax - onehot), as the CPU
/// kernel (an f32 probability from the f64 log-normalizer).
__device__ __forceinline__ float logitGradient(float logit, double normalizer,
                                               float rowWeight, bool isTarget) {
  float probability =
      expf(static_cast<float>(static_cast<double>(logit) - normalizer));
  return rowWeight * (probability - (isTarget ? 1.0f : 0.0f));
}

template <typename T, bool VectorStore>
__global__ void __launch_bounds__(kRowThreads, 2)
    rowGradientKernel(const T *logits, const void *targets, int targetType,
                      const void *dloss, int dlossType, const double *count,
                      void *dlogits, int dlogitType, int64_t classes,
                      int64_t ignoreIndex, RowResult *results,
                      DeviceErrorRecord *errors) {
  __shared__ float sharedMax[32];
  __shared__ double sharedSum[32];
  int64_t row = blockIdx.x;
  int64_t start = row * classes;
  const T *rowLogits = logits + start;
  RowSplit split = splitRow(rowLogits, classes);
  int64_t target = targetOf(targets, targetType, row, classes, ignoreIndex,
                            errors, "tessera_cuda_cross_entropy_grad");
  float values[kPerVector<T>];
  if (target < 0) {
    if (results && threadIdx.x == 0)
      results[row] = {0.0, 0.0};
    for (int k = 0; k < kPerVector<T>; ++k)
      values[k] = 0.0f;
    for (int64_t v = threadIdx.x; v < split.vectors; v += blockDim.x)
      storeGradients<T, VectorStore>(dlogits, dlogitType, start,
                                     split.head + v * kPerVector<T>, values);
    for (int64_t j = threadIdx.x; j < split.head; j += blockDim.x)
      storeFloat(dlogits, dlogitType, start + j, 0.0f);
    for (int64_t j = split.tailStart + threadIdx.x; j < classes;
         j += blockDim.x)
      storeFloat(dlogits, dlogitType, start + j, 0.0f);
    return;
  }
  // As the CPU kernel: an f32 upstream divided by the f32 count.
  float rowWeight =
      loadFloat(dloss, dlossType, 0) / static_cast<float>(*count);
  // dlogits may be the logits' own storage (the arena planner writes the
  // gradient in place): the target's logit is read before the block's
  // barriers in the normalizer, after which other threads overwrite the
  // row. Every other element is read by the thread that writes it.
  float targetLogit = results && threadIdx.x == 0 ? toFloat(rowLogits[target])
                                                  : 0.0f;
  double normalizer =
      rowLogNormalizer(rowLogits, classes, split, sharedMax, sharedSum);
  const uint4 *cache = rowCache();
  // The fused loss: rowLossKernel's value from the same normalizer.
  if (results && threadIdx.x == 0)
    results[row] = {normalizer - targetLogit, 1.0};
  const uint4 *vectors = reinterpret_cast<const uint4 *>(rowLogits + split.head);
  auto writeVector = [&](int64_t v, const uint4 &vector) {
    unpack<T>(vector, values);
    int64_t column = split.head + v * kPerVector<T>;
#pragma unroll
    for (int k = 0; k < kPerVector<T>; ++k)
      values[k] = logitGradient(values[k], normalizer, rowWeight,
                                column + k == target);
    storeGradients<T, VectorStore>(dlogits, dlogitType, start, column, values);
  };
  const int cached = cachedVectors(split);
#pragma unroll 1
  for (int v = threadIdx.x; v < cached; v += blockDim.x)
    writeVector(v, cache[v]);
  for (int64_t v = threadIdx.x + static_cast<int64_t>(kCachedVectors) *
                                     blockDim.x;
       v < split.vectors; v += blockDim.x)
    writeVector(v, vectors[v]);
  for (int64_t j = threadIdx.x; j < split.head; j += blockDim.x)
    storeFloat(dlogits, dlogitType, start + j,
               logitGradient(toFloat(rowLogits[j]), normalizer, rowWeight,
                             j == target));
  for (int64_t j = split.tailStart + threadIdx.x; j < classes;
       j += blockDim.x)
    storeFloat(dlogits, dlogitType, start + j,
               logitGradient(toFloat(rowLogits[j]), normalizer, rowWeight,
                             j == target));
}

/// Lets `kernel` take the row cache's dynamic shared memory (more than the
/// default 48 KiB), preferring shared memory to L1 so that two blocks fit an
/// SM. Set on every launch: cheap, and right on whichever device is current.
template <typename Kernel> void allowRowCache(Kernel kernel) {
  cudaCheck(cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(kCacheBytes)));
  cudaCheck(cudaFuncSetAttribute(
      kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
      cudaSharedmemCarveoutMaxShared));
}

template <typename T>
void launchRowLoss(const tessera_tensor &logits, const tessera_tensor &targets,
                   int64_t rows, int64_t classes, int64_t ignoreIndex,
                   RowResult *results, DeviceErrorRecord *errors,
                   cudaStream_t stream) {
  allowRowCache(rowLossKernel<T>);
  rowLossKernel<T><<<static_cast<unsigned>(rows), kRowThreads, kCacheBytes,
                     stream>>>(
      static_cast<const T *>(logits.data), targets.data, targets.dtype,
      classes, ignoreIndex, results, errors);
}

template <typename T>
void launchRowGradient(const tessera_tensor &logits,
                       const tessera_tensor &targets,
                       const tessera_tensor &dloss, const double *count,
                       tessera_tensor &dlogits, int64_t rows, int64_t classes,
                       int64_t ignoreIndex, RowResult *results,
                       DeviceErrorRecord *errors, cudaStream_t stream) {
  // Rows of dlogits start at the same offset from a 16-byte boundary as rows
  // of logits when the two share a type and a base alignment.
  bool vectorStore =
      dlogits.dtype == logits.dtype &&
      (reinterpret_cast<uintptr_t>(dlogits.data) -
       reinterpret_cast<uintptr_t>(logits.data)) % 16 == 0;
  auto launch = vectorStore ? rowGradientKernel<T, true>
                            : rowGradientKernel<T, false>;
  allowRowCache(launch);
  launch<<<static_cast<unsigned>(rows), kRowThreads, kCacheBytes, stream>>>(
      static_cast<const T *>(logits.data), targets.data, targets.dtype,
      dloss.data, dloss.dtype, count, dlogits.data, dlogits.dtype, classes,
      ignoreIndex, results, errors);
}

/// With `countTargets` (a block of a batch), counts the batch's counted
/// targets into `*count` and returns it; else null (each kernel counts its
/// own rows).
const double *countBatchTargets(const tessera_tensor *countTargets,
                                const tessera_tensor &targets, int64_t classes,
                                int64_t ignoreIndex, double *count,
                                DeviceErrorRecord *errors,
                                cudaStream_t stream) {
  if (!countTargets)
    return nullptr;
  tessera::cpu::requireCountTargets(countTargets, targets);
  int64_t rows = 1;
  for (int32_t i = 0; i < countTargets->rank; ++i)
    rows *= countTargets->shape[i];
  countTargetsKernel<<<1, 1024, 0, stream>>>(countTargets->data,
                                             countTargets->dtype, rows,
                                             classes, ignoreIndex, count,
                                             errors);
  cudaCheckLaunch();
  return count;
}

/// What the kernels add to the CPU's checks (OperandChecks.h): logits of a
/// kernel float type, and rows that fit a grid.
ClassLayout kernelLayout(const tessera_tensor &logits, ClassLayout layout) {
  requireKernelFloat(logits, "logits");
  if (layout.rows > INT32_MAX)
    fail("more than 2^31 rows");
  return layout;
}

} // namespace

extern "C" int tessera_cuda_cross_entropy(const tessera_tensor *logits,
                                          const tessera_tensor *targets,
                                          const tessera_tensor *count_targets,
                                          tessera_tensor *loss,
                                          int64_t ignore_index,
                                          cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_cross_entropy", [&] {
    const tessera_tensor &scores = requireTensor(logits, "logits");
    const tessera_tensor &labels = requireTensor(targets, "targets");
    tessera_tensor &output = requireTensor(loss, "loss");
    ClassLayout layout =
        kernelLayout(scores, requireLossOperands(scores, labels));
    requireShape(output, {}, "loss");
    requireKernelFloat(output, "loss");
    DeviceErrorRecord *errors = deviceErrorRecord();
    // Each row's result, then (with count_targets) the batch's count.
    int64_t resultRows = std::max<int64_t>(layout.rows, 1);
    RowResult *results = static_cast<RowResult *>(
        streamScratch(stream, (resultRows + 1) * sizeof(RowResult)));
    const double *batchCount =
        countBatchTargets(count_targets, labels, layout.classes, ignore_index,
                          &results[resultRows].loss, errors, stream);
    if (layout.rows > 0) {
      switch (scores.dtype) {
      case TESSERA_BF16:
        launchRowLoss<__nv_bfloat16>(scores, labels, layout.rows,
                                     layout.classes, ignore_index, results,
                                     errors, stream);
        break;
      case TESSERA_F16:
        launchRowLoss<__half>(scores, labels, layout.rows, layout.classes,
                              ignore_index, results, errors, stream);
        break;
      default:
        launchRowLoss<float>(scores, labels, layout.rows, layout.classes,
                             ignore_index, results, errors, stream);
        break;
      }
      cudaCheckLaunch();
    }
    meanLossKernel<<<1, 1024, 0, stream>>>(results, layout.rows, batchCount,
                                           output.data, output.dtype);
    cudaCheckLaunch();
  });
}

namespace {

/// The gradient kernel's launch for both entry points; `loss` (null: only
/// the gradient) also gets the mean loss.
void crossEntropyGradient(const tessera_tensor *logits,
                          const tessera_tensor *targets,
                          const tessera_tensor *countTargets,
                          const tessera_tensor *dloss, tessera_tensor *loss,
                          tessera_tensor *dlogits, int64_t ignore_index,
                          cudaStream_t stream) {
  const tessera_tensor &scores = requireTensor(logits, "logits");
  const tessera_tensor &labels = requireTensor(targets, "targets");
  const tessera_tensor &upstream = requireTensor(dloss, "dloss");
  tessera_tensor &output = requireTensor(dlogits, "dlogits");
  ClassLayout layout = kernelLayout(
      scores, requireLossGradOperands(scores, labels, upstream, output));
  requireKernelFloat(upstream, "dloss");
  requireKernelFloat(output, "dlogits");
  if (loss) {
    requireShape(*loss, {}, "loss");
    requireKernelFloat(*loss, "loss");
  }
  // One scratch block: the count of rows with a target, then (with the
  // loss) each row's result for the mean.
  int64_t resultRows = loss ? std::max<int64_t>(layout.rows, 1) : 0;
  auto *scratch = static_cast<RowResult *>(
      streamScratch(stream, (1 + resultRows) * sizeof(RowResult)));
  double *count = &scratch[0].loss;
  RowResult *results = loss ? scratch + 1 : nullptr;
  DeviceErrorRecord *errors = deviceErrorRecord();
  // The row weight's count: the batch's with count_targets, else the rows'.
  const double *batchCount = countBatchTargets(
      countTargets, labels, layout.classes, ignore_index, count, errors, stream);
  if (layout.rows > 0) {
    if (!batchCount) {
      countTargetsKernel<<<1, 1024, 0, stream>>>(labels.data, labels.dtype,
                                                 layout.rows, layout.classes,
                                                 ignore_index, count, errors);
      cudaCheckLaunch();
    }
    switch (scores.dtype) {
    case TESSERA_BF16:
      launchRowGradient<__nv_bfloat16>(scores, labels, upstream, count, output,
                                       layout.rows, layout.classes,
                                       ignore_index, results, errors, stream);
      break;
    case TESSERA_F16:
      launchRowGradient<__half>(scores, labels, upstream, count, output,
                                layout.rows, layout.classes, ignore_index,
                                results, errors, stream);
      break;
    default:
      launchRowGradient<float>(scores, labels, upstream, count, output,
                               layout.rows, layout.classes, ignore_index,
                               results, errors, stream);
      break;
    }
    cudaCheckLaunch();
  }
  if (loss) {
    meanLossKernel<<<1, 1024, 0, stream>>>(results, layout.rows, batchCount,
                                           loss->data, loss->dtype);
    cudaCheckLaunch();
  }
}

} // namespace

extern "C" int tessera_cuda_cross_entropy_grad(const tessera_tensor *logits,
                                               const tessera_tensor *targets,
                                               const tessera_tensor *count_targets,
                                               const tessera_tensor *dloss,
                                               tessera_tensor *dlogits,
                                               int64_t ignore_index,
                                               cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_cross_entropy_grad", [&] {
    crossEntropyGradient(logits, targets, count_targets, dloss, nullptr,
                         dlogits, ignore_index, stream);
  });
}

extern "C" int tessera_cuda_cross_entropy_with_grad(
    const tessera_tensor *logits, const tessera_tensor *targets,
    const tessera_tensor *count_targets, const tessera_tensor *dloss,
    tessera_tensor *loss, tessera_tensor *dlogits, int64_t ignore_index,
    cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_cross_entropy_with_grad", [&] {
    crossEntropyGradient(logits, targets, count_targets, dloss,
                         &requireTensor(loss, "loss"), dlogits, ignore_index,
                         stream);
  });
}
