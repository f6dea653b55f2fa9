//===- Matmul.cu - Batched matrix products and linear through cuBLASLt ----===//
//
// Every contraction is one cuBLASLt call (or one per batch, below). cuBLASLt
// is column-major; a row-major y[M,N] = a[M,K] b[K,N] is the column-major
// y^T[N,M] = b^T a^T, so the operands are passed swapped and no data moves:
// a row-major matrix *is* its transpose in column-major, and transpose flags
// map onto cuBLASLt's op flags.
//
// Precision: f32 is computed in true f32 (CUBLAS_COMPUTE_32F, no TF32) so
// that it matches the CPU kernels to 1e-5; bf16/f16 inputs accumulate in
// f32 and write bf16/f16 (or f32); f64 computes in f64. The linear layer's
// bias is fused as cuBLASLt's BIAS epilogue (added to the f32 accumulator
// before the one rounding) where cuBLASLt offers it; otherwise y is filled
// with the bias rows and the product added with beta = 1.
//
// Batch dims broadcast (numpy). When each operand's batch offsets form an
// arithmetic sequence (contiguous batches, or one matrix reused with stride
// 0) the product is a single strided-batched call; other broadcast patterns
// fall back to one call per output batch.
//
// The workspace (32 MiB, what cuBLASLt's Hopper kernels like) is scratch of
// the (device, stream), allocated once; the handle is created once per
// device. Heuristic queries run per call: caching the chosen algorithm per
// shape is the next step when the host cost shows in a trace.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include <cublasLt.h>

#include <map>
#include <mutex>

using namespace tessera::cuda;
using tessera::cpu::broadcastStrides;
using tessera::cpu::elementCount;
using tessera::cpu::formatShape;
using tessera::cpu::product;
using tessera::cpu::requireShape;
using tessera::cpu::requireTensor;
using tessera::cpu::shapeOf;
using tessera::cpu::StridedWalker;

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;
constexpr int kWorkspaceSlot = 1000;

std::mutex handleMutex;
std::map<int, cublasLtHandle_t> handles;

cublasLtHandle_t handleForCurrentDevice() {
  int device = 0;
  cudaCheck(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(handleMutex);
  cublasLtHandle_t &handle = handles[device];
  if (!handle)
    cublasCheck(cublasLtCreate(&handle));
  return handle;
}

cudaDataType_t cudaTypeOf(int32_t dtype, const char *name) {
  switch (dtype) {
  case TESSERA_F32:
    return CUDA_R_32F;
  case TESSERA_BF16:
    return CUDA_R_16BF;
  case TESSERA_F16:
    return CUDA_R_16F;
  case TESSERA_F64:
    return CUDA_R_64F;
  default:
    fail(std::string(name) + " must be f32, bf16, f16 or f64, not " +
         tessera::cpu::dtypeName(dtype));
  }
}

/// The largest power of two (up to 256) dividing `pointer`.
uint32_t alignmentOf(const void *pointer) {
  uintptr_t address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0)
    alignment /= 2;
  return alignment;
}

/// One row-major product y = op(a) op(b) (+ bias), possibly batched with
/// constant batch strides (in elements; 0 reuses one matrix).
struct GemmProblem {
  const void *a;
  const void *b;
  void *y;
  const void *bias = nullptr; // fused epilogue: length N, y's dtype
  int32_t inputType;
  int32_t outputType;
  bool transposeA, transposeB;
  int64_t rows, inner, columns; // M, K, N
  int64_t batchCount = 1;
  int64_t batchStrideA = 0, batchStrideB = 0, batchStrideY = 0;
  bool accumulate = false; // beta = 1
};

/// RAII owners of the cuBLASLt descriptors of one call.
struct Descriptors {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, y = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~Descriptors() {
    if (preference)
      cublasLtMatmulPreferenceDestroy(preference);
    if (y)
      cublasLtMatrixLayoutDestroy(y);
    if (b)
      cublasLtMatrixLayoutDestroy(b);
    if (a)
      cublasLtMatrixLayoutDestroy(a);
    if (operation)
      cublasLtMatmulDescDestroy(operation);
  }
};

void setBatch(cublasLtMatrixLayout_t layout, int64_t count, int64_t stride) {
  int32_t batch = static_cast<int32_t>(count);
  cublasCheck(cublasLtMatrixLayoutSetAttribute(
      layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)));
  cublasCheck(cublasLtMatrixLayoutSetAttribute(
      layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
      sizeof(stride)));
}

/// Runs `problem`; returns false (nothing launched) when cuBLASLt has no
/// algorithm for it, e.g. a bias epilogue it does not offer for the types.
bool tryGemm(const GemmProblem &problem, cudaStream_t stream) {
  cublasLtHandle_t handle = handleForCurrentDevice();
  void *workspace = streamScratch(stream, kWorkspaceBytes, kWorkspaceSlot);
  bool doublePrecision = problem.inputType == TESSERA_F64;
  cudaDataType_t inputType = cudaTypeOf(problem.inputType, "the inputs");
  cudaDataType_t outputType = cudaTypeOf(problem.outputType, "y");
  cublasComputeType_t computeType =
      doublePrecision ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  cudaDataType_t scaleType = doublePrecision ? CUDA_R_64F : CUDA_R_32F;

  // Column-major view: D[N,M] = B'[N,K] A'[K,M] with B' = our b, A' = our a.
  uint64_t m = problem.columns, n = problem.rows, k = problem.inner;
  cublasOperation_t opFirst = problem.transposeB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opSecond = problem.transposeA ? CUBLAS_OP_T : CUBLAS_OP_N;
  uint64_t firstRows = problem.transposeB ? k : m;
  uint64_t firstColumns = problem.transposeB ? m : k;
  uint64_t secondRows = problem.transposeA ? n : k;
  uint64_t secondColumns = problem.transposeA ? k : n;

  Descriptors descriptors;
  cublasCheck(
      cublasLtMatmulDescCreate(&descriptors.operation, computeType, scaleType));
  cublasCheck(cublasLtMatmulDescSetAttribute(
      descriptors.operation, CUBLASLT_MATMUL_DESC_TRANSA, &opFirst,
      sizeof(opFirst)));
  cublasCheck(cublasLtMatmulDescSetAttribute(
      descriptors.operation, CUBLASLT_MATMUL_DESC_TRANSB, &opSecond,
      sizeof(opSecond)));
  if (problem.bias) {
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    cublasCheck(cublasLtMatmulDescSetAttribute(
        descriptors.operation, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
        sizeof(epilogue)));
    cublasCheck(cublasLtMatmulDescSetAttribute(
        descriptors.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &problem.bias,
        sizeof(problem.bias)));
    cublasCheck(cublasLtMatmulDescSetAttribute(
        descriptors.operation, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &outputType,
        sizeof(outputType)));
  }
  cublasCheck(cublasLtMatrixLayoutCreate(&descriptors.a, inputType, firstRows,
                                         firstColumns, firstRows));
  cublasCheck(cublasLtMatrixLayoutCreate(&descriptors.b, inputType, secondRows,
                                         secondColumns, secondRows));
  cublasCheck(cublasLtMatrixLayoutCreate(&descriptors.y, outputType, m, n, m));
  if (problem.batchCount > 1) {
    setBatch(descriptors.a, problem.batchCount, problem.batchStrideB);
    setBatch(descriptors.b, problem.batchCount, problem.batchStrideA);
    setBatch(descriptors.y, problem.batchCount, problem.batchStrideY);
  }

  cublasCheck(cublasLtMatmulPreferenceCreate(&descriptors.preference));
  size_t workspaceBytes = kWorkspaceBytes;
  cublasCheck(cublasLtMatmulPreferenceSetAttribute(
      descriptors.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
      &workspaceBytes, sizeof(workspaceBytes)));
  // Tell the heuristic the real alignment: batch loops and views can hand
  // cuBLASLt pointers that are not 256-byte aligned.
  uint32_t alignments[4] = {alignmentOf(problem.b), alignmentOf(problem.a),
                            alignmentOf(problem.y), alignmentOf(problem.y)};
  const cublasLtMatmulPreferenceAttributes_t alignmentAttributes[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(
        descriptors.preference, alignmentAttributes[i], &alignments[i],
        sizeof(alignments[i])));

  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle, descriptors.operation, descriptors.a, descriptors.b,
      descriptors.y, descriptors.y, descriptors.preference, 1, &heuristic,
      &found);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0)
    return false;

  float alpha32 = 1.0f, beta32 = problem.accumulate ? 1.0f : 0.0f;
  double alpha64 = 1.0, beta64 = problem.accumulate ? 1.0 : 0.0;
  const void *alpha = doublePrecision ? static_cast<const void *>(&alpha64)
                                      : static_cast<const void *>(&alpha32);
  const void *beta = doublePrecision ? static_cast<const void *>(&beta64)
                                     : static_cast<const void *>(&beta32);
  cublasCheck(cublasLtMatmul(handle, descriptors.operation, alpha, problem.b,
                             descriptors.a, problem.a, descriptors.b, beta,
                             problem.y, descriptors.y, problem.y,
                             descriptors.y, &heuristic.algo, workspace,
                             kWorkspaceBytes, stream));
  return true;
}

void gemm(const GemmProblem &problem, cudaStream_t stream) {
  if (!tryGemm(problem, stream))
    fail("cuBLASLt has no algorithm for a " + std::to_string(problem.rows) +
         "x" + std::to_string(problem.inner) + "x" +
         std::to_string(problem.columns) + " product of " +
         tessera::cpu::dtypeName(problem.inputType) + " into " +
         tessera::cpu::dtypeName(problem.outputType));
}

/// Copies the row `bias` (elementSize-byte elements) into each of `rows` rows
/// of `y`.
template <typename Element>
__global__ void fillRowsKernel(const Element *bias, Element *y, int64_t rows,
                               int64_t columns) {
  TESSERA_GRID_STRIDE_LOOP(i, rows * columns) { y[i] = bias[i % columns]; }
}

void fillRows(const tessera_tensor &bias, void *y, int64_t rows,
              int64_t columns, cudaStream_t stream) {
  int64_t count = rows * columns;
  unsigned grid = gridFor(count);
  switch (tessera::cpu::dtypeSize(bias.dtype)) {
  case 2:
    fillRowsKernel<<<grid, kThreadsPerBlock, 0, stream>>>(
        static_cast<const uint16_t *>(bias.data), static_cast<uint16_t *>(y),
        rows, columns);
    break;
  case 4:
    fillRowsKernel<<<grid, kThreadsPerBlock, 0, stream>>>(
        static_cast<const uint32_t *>(bias.data), static_cast<uint32_t *>(y),
        rows, columns);
    break;
  default:
    fillRowsKernel<<<grid, kThreadsPerBlock, 0, stream>>>(
        static_cast<const uint64_t *>(bias.data), static_cast<uint64_t *>(y),
        rows, columns);
    break;
  }
  cudaCheckLaunch();
}

/// Checks the dtype pairing: inputs alike; y alike or f32 for 16-bit inputs.
void checkTypes(const tessera_tensor &a, const tessera_tensor &b,
                const tessera_tensor &y) {
  tessera::cpu::requireSameDtype(a, "a", b, "b");
  cudaTypeOf(a.dtype, "a");
  bool halfToSingle = (a.dtype == TESSERA_BF16 || a.dtype == TESSERA_F16) &&
                      y.dtype == TESSERA_F32;
  if (y.dtype != a.dtype && !halfToSingle)
    fail(std::string("y must be ") + tessera::cpu::dtypeName(a.dtype) +
         (a.dtype == TESSERA_BF16 || a.dtype == TESSERA_F16 ? " or f32" : "") +
         " for " + tessera::cpu::dtypeName(a.dtype) + " inputs, not " +
         tessera::cpu::dtypeName(y.dtype));
}

/// Per-batch element offsets of one operand, and whether they are
/// `index * stride` for one stride.
struct BatchOffsets {
  std::vector<int64_t> offsets;
  bool uniform = true;
  int64_t stride = 0;
};

} // namespace

extern "C" int tessera_cuda_matmul(const tessera_tensor *a,
                                   const tessera_tensor *b, tessera_tensor *y,
                                   int32_t transpose_a, int32_t transpose_b,
                                   cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_matmul", [&] {
    const tessera_tensor &lhs = requireTensor(a, "a");
    const tessera_tensor &rhs = requireTensor(b, "b");
    tessera_tensor &output = requireTensor(y, "y");
    if (lhs.rank < 2 || rhs.rank < 2 || output.rank < 2)
      fail("a, b and y need rank >= 2, got a " + formatShape(shapeOf(lhs)) +
           ", b " + formatShape(shapeOf(rhs)) + ", y " +
           formatShape(shapeOf(output)));
    checkTypes(lhs, rhs, output);
    int64_t rows = lhs.shape[lhs.rank - (transpose_a ? 1 : 2)];
    int64_t inner = lhs.shape[lhs.rank - (transpose_a ? 2 : 1)];
    int64_t rhsInner = rhs.shape[rhs.rank - (transpose_b ? 1 : 2)];
    int64_t columns = rhs.shape[rhs.rank - (transpose_b ? 2 : 1)];
    if (inner != rhsInner)
      fail("contracted dims differ: a " + formatShape(shapeOf(lhs)) +
           " and b " + formatShape(shapeOf(rhs)));
    Shape outputShape = shapeOf(output);
    Shape batchShape(outputShape.begin(), outputShape.end() - 2);
    Shape expected = batchShape;
    expected.push_back(rows);
    expected.push_back(columns);
    requireShape(output, expected, "y");

    tessera_tensor lhsBatch = lhs, rhsBatch = rhs;
    lhsBatch.rank -= 2;
    rhsBatch.rank -= 2;
    StridedWalker walker(
        batchShape,
        {broadcastStrides(lhsBatch, "a's batch dims", batchShape),
         broadcastStrides(rhsBatch, "b's batch dims", batchShape)});
    int64_t batchCount = product(batchShape, 0, batchShape.size());
    if (batchCount == 0 || rows == 0 || columns == 0)
      return;
    size_t outputElementSize = tessera::cpu::dtypeSize(output.dtype);
    if (inner == 0) {
      cudaCheck(cudaMemsetAsync(output.data, 0,
                                elementCount(output) * outputElementSize,
                                stream));
      return;
    }
    BatchOffsets offsets[2];
    for (int64_t batch = 0; batch < batchCount; ++batch, walker.advance()) {
      for (int operand = 0; operand < 2; ++operand) {
        int64_t offset = walker.offset(operand);
        BatchOffsets &sequence = offsets[operand];
        if (batch == 1)
          sequence.stride = offset - sequence.offsets[0];
        if (batch >= 1 &&
            offset != sequence.offsets[0] + batch * sequence.stride)
          sequence.uniform = false;
        sequence.offsets.push_back(offset);
      }
    }
    int64_t lhsMatrix = rows * inner, rhsMatrix = inner * columns;
    int64_t outputMatrix = rows * columns;
    size_t inputElementSize = tessera::cpu::dtypeSize(lhs.dtype);
    GemmProblem problem{};
    problem.inputType = lhs.dtype;
    problem.outputType = output.dtype;
    problem.transposeA = transpose_a != 0;
    problem.transposeB = transpose_b != 0;
    problem.rows = rows;
    problem.inner = inner;
    problem.columns = columns;
    if (offsets[0].uniform && offsets[1].uniform) {
      problem.a = lhs.data;
      problem.b = rhs.data;
      problem.y = output.data;
      problem.batchCount = batchCount;
      problem.batchStrideA = offsets[0].stride * lhsMatrix;
      problem.batchStrideB = offsets[1].stride * rhsMatrix;
      problem.batchStrideY = outputMatrix;
      gemm(problem, stream);
      return;
    }
    for (int64_t batch = 0; batch < batchCount; ++batch) {
      problem.a = static_cast<const char *>(lhs.data) +
                  offsets[0].offsets[batch] * lhsMatrix * inputElementSize;
      problem.b = static_cast<const char *>(rhs.data) +
                  offsets[1].offsets[batch] * rhsMatrix * inputElementSize;
      problem.y = static_cast<char *>(output.data) +
                  batch * outputMatrix * outputElementSize;
      gemm(problem, stream);
    }
  });
}

extern "C" int tessera_cuda_linear(const tessera_tensor *x,
                                   const tessera_tensor *weight,
                                   const tessera_tensor *bias,
                                   tessera_tensor *y, int32_t transpose_weight,
                                   cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_linear", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    const tessera_tensor &weights = requireTensor(weight, "weight");
    tessera_tensor &output = requireTensor(y, "y");
    if (input.rank < 1 || weights.rank != 2)
      fail("x needs rank >= 1 and weight rank 2, got x " +
           formatShape(shapeOf(input)) + " and weight " +
           formatShape(shapeOf(weights)));
    checkTypes(input, weights, output);
    int64_t inner = input.shape[input.rank - 1];
    int64_t columns = weights.shape[transpose_weight ? 0 : 1];
    if (weights.shape[transpose_weight ? 1 : 0] != inner)
      fail("x " + formatShape(shapeOf(input)) + " does not match weight " +
           formatShape(shapeOf(weights)) +
           (transpose_weight ? " ([out, in])" : " ([in, out])"));
    Shape expected = shapeOf(input);
    expected.back() = columns;
    requireShape(output, expected, "y");
    if (bias) {
      requireShape(requireTensor(bias, "bias"), {columns}, "bias");
      if (bias->dtype != output.dtype)
        fail(std::string("bias must have y's dtype ") +
             tessera::cpu::dtypeName(output.dtype) + ", not " +
             tessera::cpu::dtypeName(bias->dtype));
    }
    int64_t rows = elementCount(output) / std::max<int64_t>(columns, 1);
    if (rows == 0 || columns == 0)
      return;
    if (inner == 0) {
      if (bias)
        fillRows(*bias, output.data, rows, columns, stream);
      else
        cudaCheck(cudaMemsetAsync(
            output.data, 0,
            elementCount(output) * tessera::cpu::dtypeSize(output.dtype),
            stream));
      return;
    }
    GemmProblem problem{};
    problem.a = input.data;
    problem.b = weights.data;
    problem.y = output.data;
    problem.inputType = input.dtype;
    problem.outputType = output.dtype;
    problem.transposeA = false;
    problem.transposeB = transpose_weight != 0;
    problem.rows = rows;
    problem.inner = inner;
    problem.columns = columns;
    if (bias && output.dtype != TESSERA_F64) {
      problem.bias = bias->data;
      if (tryGemm(problem, stream))
        return;
      problem.bias = nullptr;
    }
    if (bias) {
      fillRows(*bias, output.data, rows, columns, stream);
      problem.accumulate = true;
    }
    gemm(problem, stream);
  });
}

namespace tessera::cuda {
/// Destroys the cuBLASLt handles (tessera_cuda_release_resources).
void releaseMatmulHandles() {
  std::lock_guard<std::mutex> lock(handleMutex);
  for (auto &entry : handles)
    cublasLtDestroy(entry.second);
  handles.clear();
}
} // namespace tessera::cuda
