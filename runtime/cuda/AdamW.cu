//===- AdamW.cu - AdamW and the gradient's sum of squares -----------------===//
//
// AdamW is one elementwise pass over (param, grad, m, v): read 4 tensors,
// write 3, arithmetic identical to runtime/cpu/AdamW.cpp (step-dependent
// factors computed once in f64 on the host, per-element math in f32, the
// parameter rounded once into its storage). Two launch shapes share the
// per-element update (adamwElement):
// - tessera_cuda_adamw: one tensor, a grid-stride loop;
// - tessera_cuda_multi_tensor_adamw: every parameter of a run in ONE launch,
//   the driver's flat buffers walked through a device table of chunks
//   (tensor_chunks.h) with one block per chunk, as PyTorch's foreach
//   kernels do. Its per-chunk weight-decay flag picks the decay factor; a
//   parameter without decay gets 1 - lr * 0 = 1, exactly what the
//   per-tensor call with weight_decay 0 computes. A chunk with a copy_offset
//   also stores the updated weight rounded to the compute precision: the
//   copy the step reads (tess-read-compute-copies), two more bytes an
//   element of a pass that moves 26, where a cast in the step would read
//   four and write two. tessera_cuda_round_chunk_copies makes the copies
//   from the masters alone (at load, after ZeRO-1's all-gather).
//
// The sum of squares feeds the global gradient norm without a host round
// trip per tensor. tessera_cuda_chunk_sum_squares (the driver's) writes one
// f64 per chunk, so the driver's norm is reproducible run to run (a resumed
// run takes the same clipping decisions). tessera_cuda_sum_squares, which
// adds into a device accumulator, is reproducible too: each block writes
// its f64 partial to scratch (the grid depends only on the size) and one
// block sums the partials in a fixed tree and adds them once.
//
//===----------------------------------------------------------------------===//

#include "AdamWFactors.h"
#include "Common.cuh"

#include "tessera/runtime/cuda_optimizer.h"

#include <cmath>

using namespace tessera::cuda;
using tessera::cpu::adamwFactors;
using tessera::cpu::AdamWFactors;
using tessera::cpu::elementCount;
using tessera::cpu::requireShape;
using tessera::cpu::requireTensor;
using tessera::cpu::shapeOf;

namespace {

/// Updates m[i], v[i] (also left in `vi`) and returns the new parameter
/// value. Every product and sum is an explicitly rounded intrinsic, which
/// nvcc never contracts into an FMA: the update is then bit for bit
/// tessera_cpu_adamw's (sqrtf and `/` are IEEE-rounded without fast math),
/// so a run whose AdamW runs on the host (--offload optimizer,
/// tessera_cpu_chunk_adamw) computes the same weights as one that keeps it
/// here. The pass is bound by memory, not by these few operations.
__device__ __forceinline__ float adamwElement(float p, float grad, float *m,
                                              float *v, int64_t i,
                                              const AdamWFactors &f,
                                              float decay, float &vi) {
  float g = __fmul_rn(grad, f.gradScale);
  float mi = __fadd_rn(__fmul_rn(f.beta1, m[i]), __fmul_rn(f.oneMinusBeta1, g));
  vi = __fadd_rn(__fmul_rn(f.beta2, v[i]),
                 __fmul_rn(__fmul_rn(f.oneMinusBeta2, g), g));
  m[i] = mi;
  v[i] = vi;
  float denominator = __fadd_rn(sqrtf(vi) / f.sqrtCorrection2, f.epsilon);
  return __fsub_rn(__fmul_rn(p, decay), __fmul_rn(f.stepSize, mi) / denominator);
}

__global__ void adamwKernel(void *param, int paramType, const void *grad,
                            int gradType, float *m, float *v, int64_t count,
                            AdamWFactors f) {
  TESSERA_GRID_STRIDE_LOOP(i, count) {
    float p = loadFloat(param, paramType, i), vi;
    storeFloat(
        param, paramType, i,
        adamwElement(p, loadFloat(grad, gradType, i), m, v, i, f, f.decay, vi));
  }
}

/// With `nonfinite`: a thread that wrote a non-finite value raises it to
/// chunkCount - chunk (atomicMax, so the first chunk wins); the test costs
/// two compares an element of a memory-bound pass, the atomic only runs on
/// the failure path.
__global__ void multiTensorAdamWKernel(float *param, const void *grad,
                                       int gradType, float *m, float *v,
                                       void *copies, int copyType,
                                       const tessera_tensor_chunk *chunks,
                                       AdamWFactors f, int32_t chunkCount,
                                       int32_t *nonfinite) {
  const tessera_tensor_chunk chunk = chunks[blockIdx.x];
  const float decay = chunk.weight_decay ? f.decay : 1.0f;
  const bool copied = copies && chunk.copy_offset >= 0;
  bool finite = true;
  for (int64_t k = threadIdx.x; k < chunk.count; k += blockDim.x) {
    // The gradient at the flat buffers' offset; masters and moments at the
    // state's (a ZeRO-1 shard's compact place, else the same).
    const int64_t i = chunk.state_offset + k;
    float vi;
    float updated =
        adamwElement(param[i], loadFloat(grad, gradType, chunk.offset + k), m,
                     v, i, f, decay, vi);
    param[i] = updated;
    if (copied)
      storeFloat(copies, copyType, chunk.copy_offset + k, updated);
    // |m| is at most the largest |gradient| seen, which the finite norm
    // bounds; v, its square's average, is what can overflow.
    finite &=
        static_cast<bool>(isfinite(updated)) & static_cast<bool>(isfinite(vi));
  }
  if (!finite && nonfinite)
    atomicMax(nonfinite, chunkCount - static_cast<int32_t>(blockIdx.x));
}

/// copies[copy_offset + k] = params[state_offset + k] rounded, for every chunk
/// with a copy.
__global__ void roundChunkCopiesKernel(const float *param, void *copies,
                                       int copyType,
                                       const tessera_tensor_chunk *chunks) {
  const tessera_tensor_chunk chunk = chunks[blockIdx.x];
  if (chunk.copy_offset < 0)
    return;
  for (int64_t k = threadIdx.x; k < chunk.count; k += blockDim.x)
    storeFloat(copies, copyType, chunk.copy_offset + k,
               param[chunk.state_offset + k]);
}

/// partialSums[block] = the block's sum of squares.
__global__ void sumSquaresKernel(const void *x, int xType, int64_t count,
                                 double *partialSums) {
  __shared__ double shared[32];
  double sum = 0.0;
  TESSERA_GRID_STRIDE_LOOP(i, count) {
    double value = loadNumber(x, xType, i);
    sum += value * value;
  }
  sum = blockSum(sum, shared);
  if (threadIdx.x == 0)
    partialSums[blockIdx.x] = sum;
}

/// One block: *accumulator += the sum of partialSums[0, count), thread t
/// summing t, t + blockDim, ... then blockSum's fixed tree.
__global__ void addPartialSumsKernel(const double *partialSums, int count,
                                     double *accumulator) {
  __shared__ double shared[32];
  double sum = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x)
    sum += partialSums[i];
  sum = blockSum(sum, shared);
  if (threadIdx.x == 0)
    *accumulator += sum;
}

constexpr int kSumSquaresSlot = 3300; // streamScratch slot of the partials

/// partialSums[c] = chunk c's sum of squares. With `packed` (x 16-byte
/// aligned), a chunk whose offset is a whole number of packs is read a
/// 16-byte pack a thread, its last count % kPack elements one a thread:
/// 2-byte loads left the bf16 gradient's pass at a third of DRAM bandwidth.
/// Either way the order depends only on the chunk table, so the sum is the
/// same every run.
__global__ void chunkSumSquaresKernel(const void *x, int xType, bool packed,
                                      const tessera_tensor_chunk *chunks,
                                      double *partialSums) {
  __shared__ double shared[32];
  const tessera_tensor_chunk chunk = chunks[blockIdx.x];
  double sum = 0.0;
  int64_t first = 0;
  if (packed && chunk.offset % kPack == 0) {
    first = chunk.count / kPack * kPack;
#pragma unroll 4
    for (int64_t k = threadIdx.x * int64_t{kPack}; k < first;
         k += blockDim.x * int64_t{kPack}) {
      float values[kPack];
      loadPack(x, xType, chunk.offset + k, values);
#pragma unroll
      for (int e = 0; e < kPack; ++e)
        sum += static_cast<double>(values[e]) * values[e];
    }
  }
  for (int64_t k = first + threadIdx.x; k < chunk.count; k += blockDim.x) {
    double value = loadFloat(x, xType, chunk.offset + k);
    sum += value * value;
  }
  sum = blockSum(sum, shared);
  if (threadIdx.x == 0)
    partialSums[blockIdx.x] = sum;
}

/// Threads per block of the chunked kernels: a 2^16-element chunk is 128
/// elements a thread.
constexpr int kChunkThreads = 512;

void requireChunks(const tessera_tensor_chunk *chunks, int32_t chunkCount) {
  if (chunkCount < 0)
    fail("chunk_count " + std::to_string(chunkCount) + " is negative");
  if (chunkCount > 0 && !chunks)
    fail("chunks is null");
}

void requireFloatDtype(int32_t dtype, const char *name) {
  if (dtype != TESSERA_F32 && dtype != TESSERA_BF16 && dtype != TESSERA_F16)
    fail(std::string(name) + " must be f32, bf16 or f16, not " +
         tessera::cpu::dtypeName(dtype));
}

} // namespace

extern "C" int tessera_cuda_adamw(tessera_tensor *param,
                                  const tessera_tensor *grad, tessera_tensor *m,
                                  tessera_tensor *v, int64_t step, double lr,
                                  double beta1, double beta2, double eps,
                                  double weight_decay, double grad_scale,
                                  cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_adamw", [&] {
    tessera_tensor &parameter = requireTensor(param, "param");
    const tessera_tensor &gradient = requireTensor(grad, "grad");
    tessera_tensor &firstMoment = requireTensor(m, "m");
    tessera_tensor &secondMoment = requireTensor(v, "v");
    Shape shape = shapeOf(parameter);
    requireShape(gradient, shape, "grad");
    requireShape(firstMoment, shape, "m");
    requireShape(secondMoment, shape, "v");
    requireKernelFloat(parameter, "param");
    requireKernelFloat(gradient, "grad");
    if (firstMoment.dtype != TESSERA_F32 || secondMoment.dtype != TESSERA_F32)
      fail("the moments m and v must be f32");
    AdamWFactors factors =
        adamwFactors(step, lr, beta1, beta2, eps, weight_decay, grad_scale);
    int64_t count = elementCount(parameter);
    if (count == 0)
      return;
    adamwKernel<<<gridFor(count), kThreadsPerBlock, 0, stream>>>(
        parameter.data, parameter.dtype, gradient.data, gradient.dtype,
        static_cast<float *>(firstMoment.data),
        static_cast<float *>(secondMoment.data), count, factors);
    cudaCheckLaunch();
  });
}

extern "C" int tessera_cuda_multi_tensor_adamw(
    float *params, const void *grad, int32_t grad_dtype, float *m, float *v,
    void *copies, int32_t copy_dtype, const tessera_tensor_chunk *chunks,
    int32_t chunk_count, int64_t step, double lr, double beta1, double beta2,
    double eps, double weight_decay, double grad_scale, int32_t *nonfinite,
    cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_multi_tensor_adamw", [&] {
    requireChunks(chunks, chunk_count);
    requireFloatDtype(grad_dtype, "grad");
    if (copies)
      requireFloatDtype(copy_dtype, "copies");
    if (chunk_count > 0 && (!params || !grad || !m || !v))
      fail("params, grad, m and v must not be null");
    AdamWFactors factors =
        adamwFactors(step, lr, beta1, beta2, eps, weight_decay, grad_scale);
    if (nonfinite)
      cudaCheck(cudaMemsetAsync(nonfinite, 0, sizeof(int32_t), stream));
    if (chunk_count == 0)
      return;
    multiTensorAdamWKernel<<<static_cast<unsigned>(chunk_count), kChunkThreads,
                             0, stream>>>(params, grad, grad_dtype, m, v,
                                          copies, copy_dtype, chunks, factors,
                                          chunk_count, nonfinite);
    cudaCheckLaunch();
  });
}

extern "C" int tessera_cuda_round_chunk_copies(
    const float *params, void *copies, int32_t copy_dtype,
    const tessera_tensor_chunk *chunks, int32_t chunk_count,
    cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_round_chunk_copies", [&] {
    requireChunks(chunks, chunk_count);
    requireFloatDtype(copy_dtype, "copies");
    if (chunk_count == 0)
      return;
    if (!params || !copies)
      fail("params and copies must not be null");
    roundChunkCopiesKernel<<<static_cast<unsigned>(chunk_count), kChunkThreads,
                             0, stream>>>(params, copies, copy_dtype, chunks);
    cudaCheckLaunch();
  });
}

extern "C" int tessera_cuda_sum_squares(const tessera_tensor *x,
                                        double *accumulator,
                                        cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_sum_squares", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera::cpu::requireFloatType(input, "x");
    if (!accumulator)
      fail("accumulator is null");
    int64_t count = elementCount(input);
    if (count == 0)
      return;
    unsigned grid = std::min<unsigned>(gridFor(count), 1024);
    double *partialSums = static_cast<double *>(
        streamScratch(stream, grid * sizeof(double), kSumSquaresSlot));
    sumSquaresKernel<<<grid, kThreadsPerBlock, 0, stream>>>(
        input.data, input.dtype, count, partialSums);
    cudaCheckLaunch();
    addPartialSumsKernel<<<1, kThreadsPerBlock, 0, stream>>>(
        partialSums, static_cast<int>(grid), accumulator);
    cudaCheckLaunch();
  });
}

extern "C" int tessera_cuda_chunk_sum_squares(
    const void *x, int32_t dtype, const tessera_tensor_chunk *chunks,
    int32_t chunk_count, double *partial_sums, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_chunk_sum_squares", [&] {
    requireChunks(chunks, chunk_count);
    requireFloatDtype(dtype, "x");
    if (chunk_count == 0)
      return;
    if (!x || !partial_sums)
      fail("x and partial_sums must not be null");
    chunkSumSquaresKernel<<<static_cast<unsigned>(chunk_count), kChunkThreads,
                            0, stream>>>(
        x, dtype, reinterpret_cast<uintptr_t>(x) % 16 == 0, chunks,
        partial_sums);
    cudaCheckLaunch();
  });
}
