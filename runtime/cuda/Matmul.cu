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
// with the bias rows and the product added with beta = 1. A weight
// gradient x^T dy and its bias gradient (dy's column sums) are one GEMM
// with the BGRADA epilogue (dy is cuBLASLt's A), which sums dy's tiles as
// it reads them instead of a second pass over dy.
//
// Batch dims broadcast (numpy). When each operand's batch offsets form an
// arithmetic sequence (contiguous batches, or one matrix reused with stride
// 0) the product is a single strided-batched call; other broadcast patterns
// fall back to one call per output batch.
//
// Misaligned operands: cuBLASLt's fast (TMA) kernels need every matrix's
// base address and leading dimension to be 16-byte multiples; a vocabulary
// of 50257 makes the logits' rows 100514 bytes, and cuBLASLt then falls back
// to align-1 sm75 kernels at a sixth of the speed. A large single (unbatched)
// product with such an operand runs on extents rounded up to 8 elements
// instead: the operands that change move to zero-padded scratch (a padded y
// is computed there and copied back; the bias is padded with it), and the
// copies cost far less than the slow kernel. Padding only the leading
// dimension is not enough: cuBLASLt still picks slow kernels when the extent
// along it is odd.
//
// The workspace (32 MiB, what cuBLASLt's Hopper kernels like) is scratch of
// the (device, stream), allocated once; the handle is created once per
// device. The descriptors and the heuristic's algorithm are made once per
// shape (with alignments and device) and reused.
//
//===----------------------------------------------------------------------===//

#include "CandidateTiming.h"
#include "Common.cuh"
#include "OperandChecks.h"

#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

using namespace tessera::cuda;
using tessera::cpu::broadcastStrides;
using tessera::cpu::elementCount;
using tessera::cpu::formatShape;
using tessera::cpu::product;
using tessera::cpu::requireShape;
using tessera::cpu::requireSuccess;
using tessera::cpu::requireTensor;
using tessera::cpu::shapeOf;
using tessera::cpu::StridedWalker;

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;
constexpr int kWorkspaceSlot = 1000;
/// streamScratch slot of the padded copies of misaligned operands.
constexpr int kPaddedOperandSlot = 1001;
/// streamScratch slot of the unfused linear_dgelu's product (the linear it
/// calls uses the two above).
constexpr int kDgeluScratchSlot = 1010;
/// cuBLASLt's fast kernels want 16-byte aligned matrices and leading dims.
constexpr int64_t kFastAlignmentBytes = 16;
/// Below this many multiply-adds the copies cost more than the slow kernel
/// saves.
constexpr int64_t kPaddingMinimumWork = int64_t(1) << 24;

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
/// A GELU fused into the product (tanh approximation, cuBLASLt's epilogues):
/// the forward writes gelu(a b + bias) to y and a b + bias to `aux`; the
/// backward's DGelu writes (a b) * gelu'(aux) to y. `aux` has y's shape and
/// dtype.
enum class GeluEpilogue { None, Forward, Gradient };

struct GemmProblem {
  const void *a;
  const void *b;
  void *y;
  const void *bias = nullptr; // fused epilogue: length N, y's dtype
  GeluEpilogue gelu = GeluEpilogue::None;
  void *aux = nullptr;
  /// Added to the product (cuBLASLt's C, beta = 1; laid out as y): the
  /// residual of linear_add.
  const void *addend = nullptr;
  /// The column sums of b over the contracted dim (cuBLASLt's BGRADA on
  /// its A, which is our b), length N, y's dtype: a weight gradient's
  /// bias gradient.
  void *biasGradient = nullptr;
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

/// Calls `launch` with a value of the unsigned type of `elementSize` (2, 4
/// or 8) bytes: kernels that only move elements move them as such words.
template <typename Launch>
void withWordOf(size_t elementSize, Launch &&launch) {
  switch (elementSize) {
  case 2:
    launch(uint16_t{});
    break;
  case 4:
    launch(uint32_t{});
    break;
  default:
    launch(uint64_t{});
    break;
  }
}

/// One matrix as cuBLASLt sees it (column-major): `rows` x `columns`
/// elements, `leadingDim` elements apart from one column to the next.
struct MatrixView {
  const void *data;
  int64_t rows, columns;
  int64_t leadingDim;
  size_t elementSize;
};

bool isFastAligned(const MatrixView &view) {
  return reinterpret_cast<uintptr_t>(view.data) % kFastAlignmentBytes == 0 &&
         view.leadingDim * static_cast<int64_t>(view.elementSize) %
                 kFastAlignmentBytes ==
             0;
}

/// Writes the `rows` x `columns` Words of a destination (leading dim
/// `destinationLeadingDim`) from a source of `sourceRows` x `sourceColumns`:
/// zero where the destination reaches past the source.
///
/// A thread moves one 16-byte chunk of a column (kChunk Words), so a warp
/// covers 512 contiguous bytes of a column. One side of every copy is the
/// padded scratch, whose columns start on 16 bytes: that side moves as one
/// vector; the other (a misaligned vocabulary-sized matrix) moves Word by
/// Word, still coalesced across the warp. The one-Word-a-thread version spent
/// a sixth of a GPT-2 step here.
template <typename Word>
__global__ void copyColumnsKernel(const Word *source, int64_t sourceLeadingDim,
                                  int64_t sourceRows, int64_t sourceColumns,
                                  Word *destination,
                                  int64_t destinationLeadingDim, int64_t rows,
                                  int64_t columns) {
  constexpr int kChunk = 16 / sizeof(Word);
  union Chunk {
    uint4 vector;
    Word words[kChunk];
  };
  int64_t chunksPerColumn = (rows + kChunk - 1) / kChunk;
  TESSERA_GRID_STRIDE_LOOP(index, chunksPerColumn * columns) {
    int64_t column = index / chunksPerColumn;
    int64_t row = (index - column * chunksPerColumn) * kChunk;
    Chunk chunk;
    const Word *from = source + column * sourceLeadingDim + row;
    if (column >= sourceColumns) {
      chunk.vector = make_uint4(0, 0, 0, 0);
    } else if (row + kChunk <= sourceRows &&
               reinterpret_cast<uintptr_t>(from) % 16 == 0) {
      chunk.vector = *reinterpret_cast<const uint4 *>(from);
    } else {
#pragma unroll
      for (int i = 0; i < kChunk; ++i)
        chunk.words[i] = row + i < sourceRows ? from[i] : Word(0);
    }
    Word *to = destination + column * destinationLeadingDim + row;
    if (row + kChunk <= rows && reinterpret_cast<uintptr_t>(to) % 16 == 0) {
      *reinterpret_cast<uint4 *>(to) = chunk.vector;
    } else {
#pragma unroll
      for (int i = 0; i < kChunk; ++i)
        if (row + i < rows)
          to[i] = chunk.words[i];
    }
  }
}

/// Fills the matrix `to` from `from` (same element size; zero beyond
/// `from`'s extents).
void copyMatrix(const MatrixView &from, const MatrixView &to,
                cudaStream_t stream) {
  void *destination = const_cast<void *>(to.data);
  withWordOf(from.elementSize, [&](auto word) {
    using Word = decltype(word);
    int64_t chunks = (to.rows * static_cast<int64_t>(sizeof(Word)) + 15) / 16;
    copyColumnsKernel<<<gridFor(chunks * to.columns), kThreadsPerBlock, 0,
                        stream>>>(
        static_cast<const Word *>(from.data), from.leadingDim, from.rows,
        from.columns, static_cast<Word *>(destination), to.leadingDim, to.rows,
        to.columns);
  });
  cudaCheckLaunch();
}

/// Where cuBLASLt finds one product: the operands in its order (our b, our
/// a, y; column-major D[m,n] = op(first)[m,k] op(second)[k,n]) and the bias,
/// each in place or (`copied`) in scratch.
struct Placement {
  MatrixView operands[3];
  bool copied[3] = {false, false, false};
  MatrixView bias;
  bool biasCopied = false;
};

/// The column-major extents (rows, columns) of operand `index` of a product
/// of extents m, n, k.
void operandExtents(const GemmProblem &problem, int index, int64_t m,
                    int64_t n, int64_t k, int64_t &rows, int64_t &columns) {
  bool transposed = index == 0 ? problem.transposeB : problem.transposeA;
  int64_t outer = index == 0 ? m : n;
  if (index == 2) {
    rows = m;
    columns = n;
  } else if ((index == 0) != transposed) {
    rows = outer;
    columns = k;
  } else {
    rows = k;
    columns = outer;
  }
}

/// The product as the caller laid it out: every matrix in place.
Placement placeInPlace(const GemmProblem &problem) {
  size_t inputSize = tessera::cpu::dtypeSize(problem.inputType);
  size_t outputSize = tessera::cpu::dtypeSize(problem.outputType);
  Placement placement{};
  const void *data[3] = {problem.b, problem.a, problem.y};
  for (int i = 0; i < 3; ++i) {
    MatrixView &view = placement.operands[i];
    view.data = data[i];
    view.elementSize = i == 2 ? outputSize : inputSize;
    operandExtents(problem, i, problem.columns, problem.rows, problem.inner,
                   view.rows, view.columns);
    view.leadingDim = view.rows;
  }
  placement.bias = {problem.bias, problem.columns, 1, problem.columns,
                    outputSize};
  return placement;
}

/// Where `original` runs. A large unbatched product with a misaligned
/// operand runs on extents rounded up to 8 elements, so that every operand
/// is a 16-byte multiple in both shape and leading dim (with only the
/// leading dim padded, cuBLASLt still picks slow kernels when the extent
/// along it is odd); operands whose extents grow or that are misaligned move
/// to scratch, zero padded, so the padding of the inner extent adds nothing.
/// Nothing is copied yet.
Placement placePadded(const GemmProblem &problem, const Placement &original,
                      cudaStream_t stream) {
  Placement placement = original;
  bool misaligned = false;
  for (const MatrixView &view : original.operands)
    misaligned |= !isFastAligned(view);
  if (!misaligned || problem.batchCount != 1 ||
      problem.rows * problem.inner * problem.columns < kPaddingMinimumWork)
    return placement;

  auto roundUp = [](int64_t extent) { return (extent + 7) / 8 * 8; };
  int64_t m = roundUp(problem.columns), n = roundUp(problem.rows),
          k = roundUp(problem.inner);
  size_t offsets[4] = {0, 0, 0, 0}, total = 0;
  auto reserve = [&](size_t bytes) {
    size_t offset = total;
    total += (bytes + 255) / 256 * 256;
    return offset;
  };
  for (int i = 0; i < 3; ++i) {
    MatrixView &view = placement.operands[i];
    int64_t rows = 0, columns = 0;
    operandExtents(problem, i, m, n, k, rows, columns);
    if (rows == view.rows && columns == view.columns && isFastAligned(view))
      continue;
    view.rows = view.leadingDim = rows;
    view.columns = columns;
    placement.copied[i] = true;
    offsets[i] = reserve(rows * columns * view.elementSize);
  }
  if (problem.bias && m != problem.columns) {
    placement.bias.rows = placement.bias.leadingDim = m;
    placement.biasCopied = true;
    offsets[3] = reserve(m * placement.bias.elementSize);
  }
  char *scratch = static_cast<char *>(
      streamScratch(stream, total, kPaddedOperandSlot));
  for (int i = 0; i < 3; ++i)
    if (placement.copied[i])
      placement.operands[i].data = scratch + offsets[i];
  if (placement.biasCopied)
    placement.bias.data = scratch + offsets[3];
  return placement;
}

/// How many of the heuristic's algorithms the autotuning times.
constexpr int kAutotuneCandidates = 8;

/// tessera_cuda_set_gemm_autotune: each shape's algorithm is the fastest of
/// the heuristic's first kAutotuneCandidates, timed on the shape's first
/// call that runs eagerly and writes a fresh output (what cuBLAS's heuristic
/// ranks first is a model's guess, and can be a tile shape that leaves SMs
/// idle in the last wave). Off by default: a timed choice can differ between
/// runs, so two runs (or a run and its resume) would no longer compute the
/// same bits.
std::atomic<bool> autotuneEnabled{false};

bool gemmAutotune() { return autotuneEnabled.load(); }

/// What cuBLASLt decided for one shape of product: its descriptors and the
/// algorithm its heuristic picked (or that it found none). Everything but
/// the data pointers (and the bias pointer, set per call) is in the key.
struct GemmPlan {
  Descriptors descriptors;
  cublasLtMatmulHeuristicResult_t heuristic{};
  bool found = false;
  /// The heuristic's other candidates, best first (heuristic is the first),
  /// until the plan is measured (gemmAutotune); then empty.
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;
};

using GemmPlanKey = std::array<int64_t, 24>;

GemmPlanKey planKeyOf(const GemmProblem &problem, const Placement &placement) {
  int device = 0;
  cudaCheck(cudaGetDevice(&device));
  const MatrixView &first = placement.operands[0];
  const MatrixView &second = placement.operands[1];
  const MatrixView &result = placement.operands[2];
  return {device,
          problem.inputType,
          problem.outputType,
          problem.transposeA,
          problem.transposeB,
          problem.bias != nullptr,
          problem.biasGradient != nullptr,
          static_cast<int64_t>(problem.gelu),
          first.rows,
          first.columns,
          first.leadingDim,
          second.rows,
          second.columns,
          second.leadingDim,
          result.rows,
          result.columns,
          result.leadingDim,
          problem.batchCount,
          problem.batchStrideA,
          problem.batchStrideB,
          problem.batchStrideY,
          alignmentOf(first.data),
          alignmentOf(second.data),
          alignmentOf(result.data)};
}

/// Builds the descriptors of `problem` as placed and asks the heuristic for
/// its best algorithm.
std::unique_ptr<GemmPlan> makeGemmPlan(cublasLtHandle_t handle,
                                       const GemmProblem &problem,
                                       const Placement &placement) {
  auto plan = std::make_unique<GemmPlan>();
  Descriptors &descriptors = plan->descriptors;
  bool doublePrecision = problem.inputType == TESSERA_F64;
  cudaDataType_t inputType = cudaTypeOf(problem.inputType, "the inputs");
  cudaDataType_t outputType = cudaTypeOf(problem.outputType, "y");
  cublasComputeType_t computeType =
      doublePrecision ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  cudaDataType_t scaleType = doublePrecision ? CUDA_R_64F : CUDA_R_32F;

  // Column-major view: D[N,M] = B'[N,K] A'[K,M] with B' = our b, A' = our a.
  cublasOperation_t opFirst = problem.transposeB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opSecond = problem.transposeA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const MatrixView &first = placement.operands[0];
  const MatrixView &second = placement.operands[1];
  const MatrixView &result = placement.operands[2];

  cublasCheck(
      cublasLtMatmulDescCreate(&descriptors.operation, computeType, scaleType));
  cublasCheck(cublasLtMatmulDescSetAttribute(
      descriptors.operation, CUBLASLT_MATMUL_DESC_TRANSA, &opFirst,
      sizeof(opFirst)));
  cublasCheck(cublasLtMatmulDescSetAttribute(
      descriptors.operation, CUBLASLT_MATMUL_DESC_TRANSB, &opSecond,
      sizeof(opSecond)));
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (problem.gelu == GeluEpilogue::Forward)
    epilogue = problem.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                            : CUBLASLT_EPILOGUE_GELU_AUX;
  else if (problem.gelu == GeluEpilogue::Gradient)
    epilogue = CUBLASLT_EPILOGUE_DGELU;
  else if (problem.bias)
    epilogue = CUBLASLT_EPILOGUE_BIAS;
  else if (problem.biasGradient)
    epilogue = CUBLASLT_EPILOGUE_BGRADA;
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT)
    cublasCheck(cublasLtMatmulDescSetAttribute(
        descriptors.operation, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
        sizeof(epilogue)));
  if (problem.bias) {
    cublasCheck(cublasLtMatmulDescSetAttribute(
        descriptors.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
        &placement.bias.data, sizeof(placement.bias.data)));
    cublasCheck(cublasLtMatmulDescSetAttribute(
        descriptors.operation, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &outputType,
        sizeof(outputType)));
  }
  if (problem.biasGradient) {
    cublasCheck(cublasLtMatmulDescSetAttribute(
        descriptors.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
        &problem.biasGradient, sizeof(problem.biasGradient)));
    cublasCheck(cublasLtMatmulDescSetAttribute(
        descriptors.operation, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &outputType,
        sizeof(outputType)));
  }
  if (problem.gelu != GeluEpilogue::None) {
    // The aux matrix is laid out as y (column-major, y's leading dim).
    int64_t auxLeadingDim = result.leadingDim;
    cublasCheck(cublasLtMatmulDescSetAttribute(
        descriptors.operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
        &problem.aux, sizeof(problem.aux)));
    cublasCheck(cublasLtMatmulDescSetAttribute(
        descriptors.operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
        &auxLeadingDim, sizeof(auxLeadingDim)));
    cublasCheck(cublasLtMatmulDescSetAttribute(
        descriptors.operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE,
        &outputType, sizeof(outputType)));
  }
  cublasCheck(cublasLtMatrixLayoutCreate(&descriptors.a, inputType, first.rows,
                                         first.columns, first.leadingDim));
  cublasCheck(cublasLtMatrixLayoutCreate(&descriptors.b, inputType,
                                         second.rows, second.columns,
                                         second.leadingDim));
  cublasCheck(cublasLtMatrixLayoutCreate(&descriptors.y, outputType,
                                         result.rows, result.columns,
                                         result.leadingDim));
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
  uint32_t alignments[4] = {alignmentOf(first.data), alignmentOf(second.data),
                            alignmentOf(result.data), alignmentOf(result.data)};
  const cublasLtMatmulPreferenceAttributes_t alignmentAttributes[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(
        descriptors.preference, alignmentAttributes[i], &alignments[i],
        sizeof(alignments[i])));

  int found = 0;
  std::array<cublasLtMatmulHeuristicResult_t, kAutotuneCandidates> results{};
  int requested = gemmAutotune() ? kAutotuneCandidates : 1;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle, descriptors.operation, descriptors.a, descriptors.b,
      descriptors.y, descriptors.y, descriptors.preference, requested,
      results.data(), &found);
  plan->found = status == CUBLAS_STATUS_SUCCESS && found > 0;
  if (plan->found) {
    plan->heuristic = results[0];
    if (found > 1)
      plan->candidates.assign(results.begin(), results.begin() + found);
  }
  return plan;
}

/// With more than one candidate and an eagerly running stream, times each
/// candidate of `plan` through `launch` (a warm-up, then kTrials calls) and
/// keeps the fastest as plan.heuristic; the candidates are then dropped. A
/// candidate that fails to launch is skipped. Inside a stream capture it
/// waits for an eager call (events cannot be waited on there).
template <typename Launch>
void chooseFastest(GemmPlan &plan, const Launch &launch, cudaStream_t stream) {
  std::optional<TimedCandidates> timing = timeCandidates(
      plan.candidates.size(),
      [&](size_t i) {
        return launch(plan.candidates[i].algo) == CUBLAS_STATUS_SUCCESS;
      },
      stream);
  if (!timing)
    return;
  if (timing->timed > 0)
    plan.heuristic = plan.candidates[timing->fastest];
  plan.candidates.clear();
}

// The plans of every shape seen, made once: a GPT step asks for the same few
// dozen shapes every micro-batch, and the heuristic query plus descriptor
// setup cost tens of microseconds of host time a call, enough to leave the
// GPU idle between short kernels.
std::mutex planMutex;
std::map<GemmPlanKey, std::unique_ptr<GemmPlan>> plans;

/// Runs `problem`; returns false (nothing launched) when cuBLASLt has no
/// algorithm for it, e.g. a bias epilogue it does not offer for the types.
bool tryGemm(const GemmProblem &problem, cudaStream_t stream) {
  cublasLtHandle_t handle = handleForCurrentDevice();
  void *workspace = streamScratch(stream, kWorkspaceBytes, kWorkspaceSlot);
  Placement original = placeInPlace(problem);
  Placement placement = placePadded(problem, original, stream);
  // The aux matrix is the caller's, laid out as y in place: a padded y
  // would need a padded aux too.
  // So is the bias gradient: padding b would pad its length.
  if ((problem.gelu != GeluEpilogue::None || problem.addend ||
       problem.biasGradient) &&
      (placement.copied[0] || placement.copied[1] || placement.copied[2] ||
       placement.biasCopied))
    return false;
  const MatrixView &first = placement.operands[0];
  const MatrixView &second = placement.operands[1];
  const MatrixView &result = placement.operands[2];

  // The plan's descriptors are shared by every call of its shape: the lock
  // covers setting this call's bias pointer through the enqueue.
  std::lock_guard<std::mutex> lock(planMutex);
  std::unique_ptr<GemmPlan> &plan = plans[planKeyOf(problem, placement)];
  if (!plan)
    plan = makeGemmPlan(handle, problem, placement);
  if (!plan->found)
    return false;
  if (problem.bias)
    cublasCheck(cublasLtMatmulDescSetAttribute(
        plan->descriptors.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
        &placement.bias.data, sizeof(placement.bias.data)));
  if (problem.biasGradient)
    cublasCheck(cublasLtMatmulDescSetAttribute(
        plan->descriptors.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
        &problem.biasGradient, sizeof(problem.biasGradient)));
  if (problem.gelu != GeluEpilogue::None)
    cublasCheck(cublasLtMatmulDescSetAttribute(
        plan->descriptors.operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
        &problem.aux, sizeof(problem.aux)));

  for (int i = 0; i < 2; ++i)
    if (placement.copied[i])
      copyMatrix(original.operands[i], placement.operands[i], stream);
  if (placement.copied[2] && problem.accumulate)
    copyMatrix(original.operands[2], result, stream);
  if (placement.biasCopied)
    copyMatrix(original.bias, placement.bias, stream);
  bool doublePrecision = problem.inputType == TESSERA_F64;
  bool addC = problem.accumulate || problem.addend;
  float alpha32 = 1.0f, beta32 = addC ? 1.0f : 0.0f;
  double alpha64 = 1.0, beta64 = addC ? 1.0 : 0.0;
  const void *alpha = doublePrecision ? static_cast<const void *>(&alpha64)
                                      : static_cast<const void *>(&alpha32);
  const void *beta = doublePrecision ? static_cast<const void *>(&beta64)
                                     : static_cast<const void *>(&beta32);
  void *output = const_cast<void *>(result.data);
  const void *addend = problem.addend ? problem.addend : output;
  const Descriptors &descriptors = plan->descriptors;
  auto launch = [&](const cublasLtMatmulAlgo_t &algo) {
    return cublasLtMatmul(handle, descriptors.operation, alpha, first.data,
                          descriptors.a, second.data, descriptors.b, beta,
                          addend, descriptors.y, output, descriptors.y, &algo,
                          workspace, kWorkspaceBytes, stream);
  };
  // Trials write what this call writes: they may not run where the call
  // reads its own output (an in-place sum).
  if (!plan->candidates.empty() && !(addC && addend == output))
    chooseFastest(*plan, launch, stream);
  cublasCheck(launch(plan->heuristic.algo));
  if (placement.copied[2])
    copyMatrix(result, original.operands[2], stream);
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
  withWordOf(tessera::cpu::dtypeSize(bias.dtype), [&](auto word) {
    using Word = decltype(word);
    fillRowsKernel<<<grid, kThreadsPerBlock, 0, stream>>>(
        static_cast<const Word *>(bias.data), static_cast<Word *>(y), rows,
        columns);
  });
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

namespace {

/// y = op(a) op(b), or + C (= `addend`, or y itself when `accumulate`).
/// Returns false, with nothing launched, where cuBLASLt has no algorithm
/// for a separate addend (the caller then copies it into y and
/// accumulates).
bool matmulInto(const tessera_tensor *a, const tessera_tensor *b,
                tessera_tensor *y, int32_t transpose_a, int32_t transpose_b,
                const void *addend, bool accumulate, cudaStream_t stream) {
  {
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
      return true;
    size_t outputElementSize = tessera::cpu::dtypeSize(output.dtype);
    if (inner == 0) {
      // An empty product: y is the addend (or stays what it is).
      if (addend)
        cudaCheck(cudaMemcpyAsync(output.data, addend,
                                  elementCount(output) * outputElementSize,
                                  cudaMemcpyDeviceToDevice, stream));
      else if (!accumulate)
        cudaCheck(cudaMemsetAsync(output.data, 0,
                                  elementCount(output) * outputElementSize,
                                  stream));
      return true;
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
    problem.accumulate = accumulate;
    if (addend) {
      // Only whole matrices (the weight-gradient sums this serves).
      if (batchCount != 1)
        return false;
      problem.a = lhs.data;
      problem.b = rhs.data;
      problem.y = output.data;
      problem.addend = addend;
      return tryGemm(problem, stream);
    }
    if (offsets[0].uniform && offsets[1].uniform) {
      problem.a = lhs.data;
      problem.b = rhs.data;
      problem.y = output.data;
      problem.batchCount = batchCount;
      problem.batchStrideA = offsets[0].stride * lhsMatrix;
      problem.batchStrideB = offsets[1].stride * rhsMatrix;
      problem.batchStrideY = outputMatrix;
      gemm(problem, stream);
      return true;
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
    return true;
  }
}

} // namespace

extern "C" void tessera_cuda_set_gemm_autotune(int32_t enabled) {
  autotuneEnabled.store(enabled != 0);
}

extern "C" int tessera_cuda_matmul(const tessera_tensor *a,
                                   const tessera_tensor *b, tessera_tensor *y,
                                   int32_t transpose_a, int32_t transpose_b,
                                   cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_matmul", [&] {
    matmulInto(a, b, y, transpose_a, transpose_b, nullptr, false, stream);
  });
}

extern "C" int tessera_cuda_matmul_add(const tessera_tensor *a,
                                       const tessera_tensor *b,
                                       const tessera_tensor *addend,
                                       tessera_tensor *y, int32_t transpose_a,
                                       int32_t transpose_b,
                                       cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_matmul_add", [&] {
    const tessera_tensor &partial = requireTensor(addend, "addend");
    tessera_tensor &output = requireTensor(y, "y");
    tessera::cpu::requireLike(partial, "addend", output, "y");
    // In place (the arena's accumulated sum): y is C.
    if (partial.data == output.data) {
      matmulInto(a, b, y, transpose_a, transpose_b, nullptr, true, stream);
      return;
    }
    if (matmulInto(a, b, y, transpose_a, transpose_b, partial.data, false,
                   stream))
      return;
    // No algorithm for a separate C: copy it into y and accumulate there.
    cudaCheck(cudaMemcpyAsync(output.data, partial.data,
                              elementCount(output) *
                                  tessera::cpu::dtypeSize(output.dtype),
                              cudaMemcpyDeviceToDevice, stream));
    matmulInto(a, b, y, transpose_a, transpose_b, nullptr, true, stream);
  });
}

extern "C" int tessera_cuda_matmul_bias_grad(const tessera_tensor *a,
                                             const tessera_tensor *b,
                                             tessera_tensor *y,
                                             tessera_tensor *dbias,
                                             int32_t transpose_a,
                                             int32_t transpose_b,
                                             cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_matmul_bias_grad", [&] {
    const tessera_tensor &lhs = requireTensor(a, "a");
    const tessera_tensor &rhs = requireTensor(b, "b");
    tessera_tensor &output = requireTensor(y, "y");
    tessera_tensor &biasGradient = requireTensor(dbias, "dbias");
    tessera::cpu::LinearLayout shape = tessera::cpu::requireMatmulBiasGradOperands(
        lhs, rhs, output, biasGradient, transpose_a, transpose_b);
    checkTypes(lhs, rhs, output);
    // One GEMM with cuBLASLt's BGRADA epilogue where it has one for the
    // shape and types (the sums come from the f32 accumulation of b's tiles
    // as the GEMM reads them); otherwise the product and a column sum.
    if (shape.rows > 0 && shape.inner > 0 && shape.columns > 0 &&
        biasGradient.dtype == output.dtype) {
      GemmProblem problem{};
      problem.a = lhs.data;
      problem.b = rhs.data;
      problem.y = output.data;
      problem.biasGradient = biasGradient.data;
      problem.inputType = lhs.dtype;
      problem.outputType = output.dtype;
      problem.transposeA = transpose_a != 0;
      problem.transposeB = false;
      problem.rows = shape.rows;
      problem.inner = shape.inner;
      problem.columns = shape.columns;
      if (tryGemm(problem, stream))
        return;
    }
    requireSuccess(tessera_cuda_matmul(a, b, y, transpose_a, 0, stream),
                   tessera_cuda_last_error);
    const int64_t rowsOfB[] = {0};
    requireSuccess(
        tessera_cuda_reduce(TESSERA_REDUCE_SUM, b, dbias, rowsOfB, 1, stream),
        tessera_cuda_last_error);
  });
}

namespace {

/// A linear layer's operands, checked (OperandChecks.h, and the GEMM's
/// dtype pairing): rows, inner and output columns.
using LinearShape = tessera::cpu::LinearLayout;

LinearShape checkLinear(const tessera_tensor &input,
                        const tessera_tensor &weights,
                        const tessera_tensor *bias,
                        const tessera_tensor &output,
                        int32_t transpose_weight) {
  LinearShape shape = tessera::cpu::requireLinearOperands(
      input, weights, bias, output, transpose_weight);
  checkTypes(input, weights, output);
  if (bias && bias->dtype != output.dtype)
    fail(std::string("bias must have y's dtype ") +
         tessera::cpu::dtypeName(output.dtype) + ", not " +
         tessera::cpu::dtypeName(bias->dtype));
  return shape;
}

GemmProblem linearProblem(const tessera_tensor &input,
                          const tessera_tensor &weights,
                          const tessera_tensor &output,
                          int32_t transpose_weight, const LinearShape &shape) {
  GemmProblem problem{};
  problem.a = input.data;
  problem.b = weights.data;
  problem.y = output.data;
  problem.inputType = input.dtype;
  problem.outputType = output.dtype;
  problem.transposeA = false;
  problem.transposeB = transpose_weight != 0;
  problem.rows = shape.rows;
  problem.inner = shape.inner;
  problem.columns = shape.columns;
  return problem;
}

/// The GELU epilogues are taken for 16-bit results only: f32 keeps the
/// separate kernels' arithmetic, which the CPU reference matches to 1e-5.
bool geluEpilogueApplies(const tessera_tensor &output,
                         const LinearShape &shape) {
  return (output.dtype == TESSERA_BF16 || output.dtype == TESSERA_F16) &&
         shape.rows > 0 && shape.columns > 0 && shape.inner > 0;
}

} // namespace

extern "C" int tessera_cuda_linear(const tessera_tensor *x,
                                   const tessera_tensor *weight,
                                   const tessera_tensor *bias,
                                   tessera_tensor *y, int32_t transpose_weight,
                                   cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_linear", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    const tessera_tensor &weights = requireTensor(weight, "weight");
    tessera_tensor &output = requireTensor(y, "y");
    LinearShape shape =
        checkLinear(input, weights, bias, output, transpose_weight);
    if (shape.rows == 0 || shape.columns == 0)
      return;
    if (shape.inner == 0) {
      if (bias)
        fillRows(*bias, output.data, shape.rows, shape.columns, stream);
      else
        cudaCheck(cudaMemsetAsync(
            output.data, 0,
            elementCount(output) * tessera::cpu::dtypeSize(output.dtype),
            stream));
      return;
    }
    GemmProblem problem =
        linearProblem(input, weights, output, transpose_weight, shape);
    if (bias && output.dtype != TESSERA_F64) {
      problem.bias = bias->data;
      if (tryGemm(problem, stream))
        return;
      problem.bias = nullptr;
    }
    if (bias) {
      fillRows(*bias, output.data, shape.rows, shape.columns, stream);
      problem.accumulate = true;
    }
    gemm(problem, stream);
  });
}

extern "C" int tessera_cuda_linear_gelu(const tessera_tensor *x,
                                        const tessera_tensor *weight,
                                        const tessera_tensor *bias,
                                        tessera_tensor *pre, tessera_tensor *y,
                                        int32_t transpose_weight,
                                        cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_linear_gelu", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    const tessera_tensor &weights = requireTensor(weight, "weight");
    tessera_tensor &preactivation = requireTensor(pre, "pre");
    tessera_tensor &output = requireTensor(y, "y");
    LinearShape shape =
        checkLinear(input, weights, bias, preactivation, transpose_weight);
    tessera::cpu::requireLike(output, "y", preactivation, "pre");
    if (geluEpilogueApplies(output, shape)) {
      GemmProblem problem =
          linearProblem(input, weights, output, transpose_weight, shape);
      problem.bias = bias ? bias->data : nullptr;
      problem.gelu = GeluEpilogue::Forward;
      problem.aux = preactivation.data;
      if (tryGemm(problem, stream))
        return;
    }
    requireSuccess(tessera_cuda_linear(x, weight, bias, pre, transpose_weight,
                                       stream),
                   tessera_cuda_last_error);
    requireSuccess(tessera_cuda_unary(TESSERA_GELU_TANH, pre, y, stream),
                   tessera_cuda_last_error);
  });
}

extern "C" int tessera_cuda_linear_add(const tessera_tensor *x,
                                       const tessera_tensor *weight,
                                       const tessera_tensor *bias,
                                       const tessera_tensor *residual,
                                       tessera_tensor *y,
                                       int32_t transpose_weight,
                                       cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_linear_add", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    const tessera_tensor &weights = requireTensor(weight, "weight");
    const tessera_tensor &addend = requireTensor(residual, "residual");
    tessera_tensor &output = requireTensor(y, "y");
    LinearShape shape =
        checkLinear(input, weights, bias, output, transpose_weight);
    tessera::cpu::requireLike(addend, "residual", output, "y");
    if (output.dtype != TESSERA_F64 && shape.rows > 0 && shape.columns > 0 &&
        shape.inner > 0) {
      GemmProblem problem =
          linearProblem(input, weights, output, transpose_weight, shape);
      problem.bias = bias ? bias->data : nullptr;
      problem.addend = addend.data;
      if (tryGemm(problem, stream))
        return;
    }
    requireSuccess(tessera_cuda_linear(x, weight, bias, y, transpose_weight,
                                       stream),
                   tessera_cuda_last_error);
    requireSuccess(tessera_cuda_binary(TESSERA_ADD, y, residual, y, stream),
                   tessera_cuda_last_error);
  });
}

extern "C" int tessera_cuda_linear_dgelu(const tessera_tensor *dy,
                                         const tessera_tensor *weight,
                                         const tessera_tensor *pre,
                                         tessera_tensor *dx,
                                         int32_t transpose_weight,
                                         cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_linear_dgelu", [&] {
    const tessera_tensor &upstream = requireTensor(dy, "dy");
    const tessera_tensor &weights = requireTensor(weight, "weight");
    const tessera_tensor &preactivation = requireTensor(pre, "pre");
    tessera_tensor &gradient = requireTensor(dx, "dx");
    LinearShape shape =
        checkLinear(upstream, weights, nullptr, gradient, transpose_weight);
    tessera::cpu::requireLike(preactivation, "pre", gradient, "dx");
    if (geluEpilogueApplies(gradient, shape)) {
      GemmProblem problem =
          linearProblem(upstream, weights, gradient, transpose_weight, shape);
      problem.gelu = GeluEpilogue::Gradient;
      problem.aux = const_cast<void *>(preactivation.data);
      if (tryGemm(problem, stream))
        return;
    }
    // The product in scratch, then the GELU's gradient.
    tessera_tensor product = gradient;
    product.data = streamScratch(
        stream, elementCount(gradient) * tessera::cpu::dtypeSize(gradient.dtype),
        kDgeluScratchSlot);
    requireSuccess(tessera_cuda_linear(dy, weight, nullptr, &product,
                                       transpose_weight, stream),
                   tessera_cuda_last_error);
    requireSuccess(tessera_cuda_unary_grad(TESSERA_GELU_TANH, pre, &product,
                                           dx, stream),
                   tessera_cuda_last_error);
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
