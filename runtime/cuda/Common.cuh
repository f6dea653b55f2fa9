//===- Common.cuh - What every CUDA kernel file shares ----------*- CUDA -*-===//
//
// The CUDA kernels keep the CPU kernels' host-side discipline: every exported
// function checks its arguments with the same helpers (TensorAccess.h, which
// throw KernelError) and is wrapped in runCudaKernel, which turns an error
// into `return 1` and a message for tessera_cuda_last_error(). A CUDA call that
// fails is an error too: cudaCheck/cublasCheck throw with the file and line.
//
// On the device, storage types are read and written through loadFloat /
// storeFloat (and the f64 / int64 variants) with the dtype as a kernel
// argument. The switch is uniform across a warp, so it costs a few
// instructions per element, and one kernel serves f32, bf16 and f16: the
// kernels in this library are memory-bound, so the arithmetic is never the
// bottleneck. Hot paths that want vector loads can specialize later.
//
// Data errors (an id out of range) cannot be returned synchronously from an
// asynchronous kernel; kernels record the first one in a per-device
// DeviceErrorRecord, which tessera_cuda_check_device_errors reads.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CUDA_COMMON_CUH
#define TESSERA_RUNTIME_CUDA_COMMON_CUH

#include "DataTypes.h"
#include "HostSupport.h"
#include "TensorAccess.h"
#include "tessera/runtime/cuda_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace tessera::cuda {

using cpu::fail;
using cpu::Shape;

//===--- Data errors found on the device ---------------------------------===//

enum DeviceErrorKind : int {
  kNoDeviceError = 0,
  kIndexOutOfRange = 1,  // value, position, low, high
  kIntegerDivisionByZero = 2, // position
  kIntegerPowerOfZero = 3,    // position
};

struct DeviceErrorRecord {
  int kind;
  int padding;
  long long value;
  long long position;
  long long low;
  long long high;
  char kernel[32];
};

/// The current device's record (allocated once, zeroed).
DeviceErrorRecord *deviceErrorRecord();

/// Records an error if none is recorded yet; `kernel` is copied (<= 31 chars).
__device__ inline void reportDeviceError(DeviceErrorRecord *record, int kind,
                                         long long value, long long position,
                                         long long low, long long high,
                                         const char *kernel) {
  if (atomicCAS(&record->kind, 0, -1) != 0)
    return;
  record->value = value;
  record->position = position;
  record->low = low;
  record->high = high;
  int i = 0;
  for (; i < 31 && kernel[i]; ++i)
    record->kernel[i] = kernel[i];
  record->kernel[i] = 0;
  __threadfence();
  atomicExch(&record->kind, kind);
}

//===--- Storage types on the device --------------------------------------===//

__device__ __forceinline__ float loadFloat(const void *data, int dtype,
                                           int64_t i) {
  switch (dtype) {
  case TESSERA_F32:
    return static_cast<const float *>(data)[i];
  case TESSERA_BF16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(data)[i]);
  case TESSERA_F16:
    return __half2float(static_cast<const __half *>(data)[i]);
  case TESSERA_F64:
    return static_cast<float>(static_cast<const double *>(data)[i]);
  default:
    return 0.0f;
  }
}

__device__ __forceinline__ void storeFloat(void *data, int dtype, int64_t i,
                                           float value) {
  switch (dtype) {
  case TESSERA_F32:
    static_cast<float *>(data)[i] = value;
    break;
  case TESSERA_BF16:
    static_cast<__nv_bfloat16 *>(data)[i] = __float2bfloat16_rn(value);
    break;
  case TESSERA_F16:
    static_cast<__half *>(data)[i] = __float2half_rn(value);
    break;
  case TESSERA_F64:
    static_cast<double *>(data)[i] = value;
    break;
  default:
    break;
  }
}

/// Float to int64 as the CPU kernels define it: truncation, NaN -> 0,
/// saturating at the int64 range.
__device__ __forceinline__ int64_t truncateToInteger(double value) {
  if (isnan(value))
    return 0;
  if (value >= 9223372036854775807.0)
    return INT64_MAX;
  if (value <= -9223372036854775808.0)
    return INT64_MIN;
  return static_cast<int64_t>(value);
}

/// Any storage type as int64 (floats truncate).
__device__ inline int64_t loadInteger(const void *data, int dtype, int64_t i) {
  switch (dtype) {
  case TESSERA_I64:
    return static_cast<const int64_t *>(data)[i];
  case TESSERA_I32:
    return static_cast<const int32_t *>(data)[i];
  case TESSERA_I16:
    return static_cast<const int16_t *>(data)[i];
  case TESSERA_I8:
    return static_cast<const int8_t *>(data)[i];
  case TESSERA_BOOL:
    return static_cast<const uint8_t *>(data)[i] != 0;
  case TESSERA_F64:
    return truncateToInteger(static_cast<const double *>(data)[i]);
  default:
    return truncateToInteger(loadFloat(data, dtype, i));
  }
}

/// Any storage type as a double (integers exactly up to 2^53).
__device__ inline double loadNumber(const void *data, int dtype, int64_t i) {
  switch (dtype) {
  case TESSERA_F64:
    return static_cast<const double *>(data)[i];
  case TESSERA_F32:
  case TESSERA_BF16:
  case TESSERA_F16:
    return loadFloat(data, dtype, i);
  default:
    return static_cast<double>(loadInteger(data, dtype, i));
  }
}

/// Integers keep the low bits; bool stores value != 0.
__device__ inline void storeInteger(void *data, int dtype, int64_t i,
                                    int64_t value) {
  switch (dtype) {
  case TESSERA_I64:
    static_cast<int64_t *>(data)[i] = value;
    break;
  case TESSERA_I32:
    static_cast<int32_t *>(data)[i] = static_cast<int32_t>(value);
    break;
  case TESSERA_I16:
    static_cast<int16_t *>(data)[i] = static_cast<int16_t>(value);
    break;
  case TESSERA_I8:
    static_cast<int8_t *>(data)[i] = static_cast<int8_t>(value);
    break;
  case TESSERA_BOOL:
    static_cast<uint8_t *>(data)[i] = value != 0;
    break;
  case TESSERA_F64:
    static_cast<double *>(data)[i] = static_cast<double>(value);
    break;
  default:
    storeFloat(data, dtype, i, static_cast<float>(value));
    break;
  }
}

/// Rounds once (a double goes straight to bf16/f16, never through f32).
__device__ inline void storeNumber(void *data, int dtype, int64_t i,
                                   double value) {
  switch (dtype) {
  case TESSERA_F64:
    static_cast<double *>(data)[i] = value;
    break;
  case TESSERA_F32:
    static_cast<float *>(data)[i] = static_cast<float>(value);
    break;
  case TESSERA_BF16:
    static_cast<__nv_bfloat16 *>(data)[i] = __double2bfloat16(value);
    break;
  case TESSERA_F16:
    static_cast<__half *>(data)[i] = __double2half(value);
    break;
  case TESSERA_BOOL:
    static_cast<uint8_t *>(data)[i] = value != 0.0;
    break;
  default:
    storeInteger(data, dtype, i, truncateToInteger(value));
    break;
  }
}

__device__ __forceinline__ bool isIntegerDtype(int dtype) {
  return dtype >= TESSERA_I64;
}

//===--- Index arithmetic ---------------------------------------------------===//

/// A walk over `shape` in row-major order with one strided offset per operand
/// (stride 0 on broadcast dims): the device twin of cpu::StridedWalker.
template <int Operands> struct StridedLayout {
  int rank;
  int64_t shape[TESSERA_MAX_RANK];
  int64_t strides[Operands][TESSERA_MAX_RANK];

  /// With Index = uint32_t (the caller knows every offset fits) the
  /// divisions are 32-bit ones, several times cheaper than 64-bit ones.
  template <typename Index>
  __device__ __forceinline__ void offsets(Index linear,
                                          Index (&result)[Operands]) const {
    for (int k = 0; k < Operands; ++k)
      result[k] = 0;
    for (int dim = rank - 1; dim >= 0; --dim) {
      Index extent = static_cast<Index>(shape[dim]);
      Index index = linear % extent;
      linear /= extent;
      for (int k = 0; k < Operands; ++k)
        result[k] += index * static_cast<Index>(strides[k][dim]);
    }
  }
};

template <int Operands>
StridedLayout<Operands> makeLayout(const Shape &shape,
                                   const Shape (&strides)[Operands]) {
  StridedLayout<Operands> layout{};
  layout.rank = static_cast<int>(shape.size());
  for (size_t dim = 0; dim < shape.size(); ++dim) {
    layout.shape[dim] = shape[dim];
    for (int k = 0; k < Operands; ++k)
      layout.strides[k][dim] = strides[k][dim];
  }
  return layout;
}

//===--- 16-byte packs of eight float-storage elements ---------------------===//

constexpr int kPack = 8;

/// Elements [i, i + kPack) of a float storage type (f32, bf16, f16) as
/// floats; the address is 16-byte aligned. Converts exactly as loadFloat.
__device__ __forceinline__ void loadPack(const void *data, int dtype,
                                         int64_t i, float (&values)[kPack]) {
  if (dtype == TESSERA_F32) {
    const float4 *vectors =
        reinterpret_cast<const float4 *>(static_cast<const float *>(data) + i);
    float4 low = vectors[0], high = vectors[1];
    values[0] = low.x, values[1] = low.y, values[2] = low.z, values[3] = low.w;
    values[4] = high.x, values[5] = high.y, values[6] = high.z,
    values[7] = high.w;
    return;
  }
  // bf16 and f16: eight 2-byte elements in one 16-byte vector.
  uint4 vector = *reinterpret_cast<const uint4 *>(
      static_cast<const uint16_t *>(data) + i);
  if (dtype == TESSERA_BF16) {
    const __nv_bfloat16 *elements =
        reinterpret_cast<const __nv_bfloat16 *>(&vector);
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      values[k] = __bfloat162float(elements[k]);
  } else {
    const __half *elements = reinterpret_cast<const __half *>(&vector);
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      values[k] = __half2float(elements[k]);
  }
}

/// Stores as storeFloat rounds, 16-byte aligned.
__device__ __forceinline__ void storePack(void *data, int dtype, int64_t i,
                                          const float (&values)[kPack]) {
  if (dtype == TESSERA_F32) {
    float4 *vectors =
        reinterpret_cast<float4 *>(static_cast<float *>(data) + i);
    vectors[0] = make_float4(values[0], values[1], values[2], values[3]);
    vectors[1] = make_float4(values[4], values[5], values[6], values[7]);
    return;
  }
  uint4 vector;
  if (dtype == TESSERA_BF16) {
    __nv_bfloat16 *elements = reinterpret_cast<__nv_bfloat16 *>(&vector);
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      elements[k] = __float2bfloat16_rn(values[k]);
  } else {
    __half *elements = reinterpret_cast<__half *>(&vector);
#pragma unroll
    for (int k = 0; k < kPack; ++k)
      elements[k] = __float2half_rn(values[k]);
  }
  *reinterpret_cast<uint4 *>(static_cast<uint16_t *>(data) + i) = vector;
}

/// The first element after the whole packs that this thread owns, if any:
/// every thread takes at most one, so `count % kPack` threads finish the
/// tail.
__device__ __forceinline__ int64_t tailElement(int64_t count) {
  return count / kPack * kPack + blockIdx.x * static_cast<int64_t>(blockDim.x) +
         threadIdx.x;
}

/// Whether the pack kernels can read and write these tensors: float storage
/// and 16-byte aligned data.
inline bool packable(const tessera_tensor &tensor) {
  return (tensor.dtype == TESSERA_F32 || tensor.dtype == TESSERA_BF16 ||
          tensor.dtype == TESSERA_F16) &&
         reinterpret_cast<uintptr_t>(tensor.data) % 16 == 0;
}

//===--- Launch shapes and reductions --------------------------------------===//

constexpr int kThreadsPerBlock = 256;

/// Blocks for a grid-stride loop over `count` elements.
inline unsigned gridFor(int64_t count, int threads = kThreadsPerBlock) {
  int64_t blocks = (count + threads - 1) / threads;
  if (blocks < 1)
    blocks = 1;
  // Enough blocks to fill an H200 many times over; the loops stride.
  return static_cast<unsigned>(blocks > 65536 ? 65536 : blocks);
}

#define TESSERA_GRID_STRIDE_LOOP(i, count)                                     \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) +             \
                   threadIdx.x;                                                \
       i < (count); i += static_cast<int64_t>(blockDim.x) * gridDim.x)

template <typename T> __device__ __forceinline__ T warpSum(T value) {
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

__device__ __forceinline__ float warpMax(float value) {
  for (int offset = 16; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

/// Sum over the block (every thread gets it); `shared` holds 32 values.
/// Every thread of the block must call it.
template <typename T>
__device__ __forceinline__ T blockSum(T value, T *shared) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int warps = (blockDim.x + 31) / 32;
  value = warpSum(value);
  __syncthreads(); // `shared` may still be read by a previous call
  if (lane == 0)
    shared[warp] = value;
  __syncthreads();
  value = lane < warps ? shared[lane] : T(0);
  return warpSum(value);
}

__device__ __forceinline__ float blockMax(float value, float *shared) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int warps = (blockDim.x + 31) / 32;
  value = warpMax(value);
  __syncthreads();
  if (lane == 0)
    shared[warp] = value;
  __syncthreads();
  value = lane < warps ? shared[lane] : -INFINITY;
  return warpMax(value);
}

//===--- Dropout's generator (runtime/cpu/Random.h, bit for bit) ------------===//

__host__ __device__ __forceinline__ uint64_t mixBits(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct DropoutMask {
  uint64_t start = 0;
  uint64_t dropBelow = 0;
  DropoutMask() = default;
  DropoutMask(uint64_t seed, double rate)
      : start(mixBits(seed)),
        dropBelow(static_cast<uint64_t>(rate * 16777216.0)) {}
  __device__ __forceinline__ bool keeps(uint64_t index) const {
    uint64_t bits = mixBits(start + (index + 1) * 0x9E3779B97F4A7C15ull);
    return (bits >> 40) >= dropBelow;
  }
};

/// Destroys the cuBLASLt handles (Matmul.cu).
void releaseMatmulHandles();

/// The device-side float storage types the float kernels accept.
void requireKernelFloat(const tessera_tensor &tensor, const char *name);

} // namespace tessera::cuda

#endif // TESSERA_RUNTIME_CUDA_COMMON_CUH
