//===- GatedActivation.cu - SwiGLU: silu(gate) * up, and its gradients ----===//
//
// tess.swiglu and tess.swiglu_grad on the GPU, and their packed forms (gate
// and up the strided halves of each row of 2F): memory-bound, so 16-byte
// packs of eight elements per thread (as Elementwise.cu's pack kernels),
// f32 arithmetic, one rounding per output. Against the unfused silu + mul
// and mul + mul + silu_grad, the forward moves 768 MB instead of 1,280 and
// the backward 1,280 instead of 2,304 at Llama 3.2 1B's [8, 2048, 8192]
// bf16, and silu(gate) is never stored (the backward recomputes s).
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "OperandChecks.h"

using namespace tessera::cuda;
using tessera::cpu::elementCount;

namespace {

__device__ __forceinline__ float sigmoidOf(float x) {
  return 1.0f / (1.0f + __expf(-x));
}

/// Where the gate and up of result element i are: gateIndex(i) and
/// gateIndex(i) + upOffset. Unpacked (Strided false): i in two tensors of the
/// result's shape. Packed: rows of `stride` = 2 width in one tensor, the up
/// half `upOffset` = width after the gate half.
struct GatedLayout {
  int64_t width, stride, upOffset;
};

template <bool Strided>
__device__ __forceinline__ int64_t gateIndex(const GatedLayout &layout,
                                             int64_t i) {
  if constexpr (Strided)
    return i / layout.width * layout.stride + i % layout.width;
  else
    return i;
}

/// A pack never crosses a row: packed, the width is a multiple of kPack.
template <bool Strided>
__global__ void swigluKernel(const void *gate, const void *up, void *y,
                             int dtype, int64_t count, bool packed,
                             GatedLayout layout) {
  if (packed) {
    TESSERA_GRID_STRIDE_LOOP(pack, count / kPack) {
      float g[kPack], u[kPack];
      int64_t at = gateIndex<Strided>(layout, pack * kPack);
      loadPack(gate, dtype, at, g);
      loadPack(up, dtype, at + layout.upOffset, u);
#pragma unroll
      for (int k = 0; k < kPack; ++k)
        g[k] = g[k] * sigmoidOf(g[k]) * u[k];
      storePack(y, dtype, pack * kPack, g);
    }
  }
  auto element = [&](int64_t i) {
    int64_t at = gateIndex<Strided>(layout, i);
    float g = loadFloat(gate, dtype, at);
    storeFloat(y, dtype, i,
               g * sigmoidOf(g) * loadFloat(up, dtype, at + layout.upOffset));
  };
  if (packed) {
    if (int64_t i = tailElement(count); i < count)
      element(i);
  } else {
    TESSERA_GRID_STRIDE_LOOP(i, count) { element(i); }
  }
}

__device__ __forceinline__ void swigluGradient(float g, float u, float dy,
                                               float &dgate, float &dup) {
  float s = sigmoidOf(g);
  dgate = dy * u * s * (1.0f + g * (1.0f - s));
  dup = dy * g * s;
}

/// dgate and dup written where gate and up are read (each element read
/// before it is written by the same thread, so in place works).
template <bool Strided>
__global__ void swigluGradKernel(const void *gate, const void *up,
                                 const void *dy, void *dgate, void *dup,
                                 int dtype, int64_t count, bool packed,
                                 GatedLayout layout) {
  if (packed) {
    TESSERA_GRID_STRIDE_LOOP(pack, count / kPack) {
      float g[kPack], u[kPack], d[kPack];
      int64_t at = gateIndex<Strided>(layout, pack * kPack);
      loadPack(gate, dtype, at, g);
      loadPack(up, dtype, at + layout.upOffset, u);
      loadPack(dy, dtype, pack * kPack, d);
#pragma unroll
      for (int k = 0; k < kPack; ++k)
        swigluGradient(g[k], u[k], d[k], g[k], u[k]);
      storePack(dgate, dtype, at, g);
      storePack(dup, dtype, at + layout.upOffset, u);
    }
  }
  auto element = [&](int64_t i) {
    int64_t at = gateIndex<Strided>(layout, i);
    float g, u;
    swigluGradient(loadFloat(gate, dtype, at),
                   loadFloat(up, dtype, at + layout.upOffset),
                   loadFloat(dy, dtype, i), g, u);
    storeFloat(dgate, dtype, at, g);
    storeFloat(dup, dtype, at + layout.upOffset, u);
  };
  if (packed) {
    if (int64_t i = tailElement(count); i < count)
      element(i);
  } else {
    TESSERA_GRID_STRIDE_LOOP(i, count) { element(i); }
  }
}

/// Whether every tensor can be read and written in 16-byte packs.
bool allPackable(std::initializer_list<const tessera_tensor *> tensors) {
  for (const tessera_tensor *tensor : tensors)
    if (!packable(*tensor))
      return false;
  return true;
}

void requireFloatStorage(const tessera_tensor &gate) {
  if (gate.dtype == TESSERA_F64)
    tessera::cpu::fail("f64 tensors are not supported on the GPU "
                       "(gate is f64)");
}

} // namespace

namespace {

/// The forward over `count` results; `strided` picks the packed layout.
void launchSwiglu(const void *gate, const void *up, void *y, int dtype,
                  int64_t count, bool packs, bool strided, GatedLayout layout,
                  cudaStream_t stream) {
  unsigned grid = gridFor(packs ? count / kPack : count);
  if (strided)
    swigluKernel<true><<<grid, kThreadsPerBlock, 0, stream>>>(
        gate, up, y, dtype, count, packs, layout);
  else
    swigluKernel<false><<<grid, kThreadsPerBlock, 0, stream>>>(
        gate, up, y, dtype, count, packs, layout);
  cudaCheckLaunch();
}

void launchSwigluGrad(const void *gate, const void *up, const void *dy,
                      void *dgate, void *dup, int dtype, int64_t count,
                      bool packs, bool strided, GatedLayout layout,
                      cudaStream_t stream) {
  unsigned grid = gridFor(packs ? count / kPack : count);
  if (strided)
    swigluGradKernel<true><<<grid, kThreadsPerBlock, 0, stream>>>(
        gate, up, dy, dgate, dup, dtype, count, packs, layout);
  else
    swigluGradKernel<false><<<grid, kThreadsPerBlock, 0, stream>>>(
        gate, up, dy, dgate, dup, dtype, count, packs, layout);
  cudaCheckLaunch();
}

} // namespace

extern "C" int tessera_cuda_swiglu(const tessera_tensor *gate,
                                   const tessera_tensor *up, tessera_tensor *y,
                                   cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_swiglu", [&] {
    tessera::cpu::requireGatedOperands(gate, up, {{y, "y"}});
    requireFloatStorage(*gate);
    int64_t count = elementCount(*gate);
    if (count == 0)
      return;
    launchSwiglu(gate->data, up->data, y->data, gate->dtype, count,
                 allPackable({gate, up, y}), /*strided=*/false,
                 {count, count, 0}, stream);
  });
}

extern "C" int
tessera_cuda_swiglu_grad(const tessera_tensor *gate, const tessera_tensor *up,
                         const tessera_tensor *dy, tessera_tensor *dgate,
                         tessera_tensor *dup, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_swiglu_grad", [&] {
    tessera::cpu::requireGatedOperands(
        gate, up, {{dy, "dy"}, {dgate, "dgate"}, {dup, "dup"}});
    requireFloatStorage(*gate);
    int64_t count = elementCount(*gate);
    if (count == 0)
      return;
    launchSwigluGrad(gate->data, up->data, dy->data, dgate->data, dup->data,
                     gate->dtype, count,
                     allPackable({gate, up, dy, dgate, dup}),
                     /*strided=*/false, {count, count, 0}, stream);
  });
}

// The packed forms: gate and up the halves of each row of 2F, read (and the
// gradient written) in place; 16-byte packs where F is a multiple of kPack,
// so that no pack crosses a row and every row's halves stay aligned.
extern "C" int tessera_cuda_packed_swiglu(const tessera_tensor *input,
                                          tessera_tensor *y,
                                          cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_packed_swiglu", [&] {
    int64_t width = tessera::cpu::requirePackedGatedOperands(input, y, "y", {});
    requireFloatStorage(*input);
    int64_t count = elementCount(*y);
    if (count == 0)
      return;
    launchSwiglu(input->data, input->data, y->data, input->dtype, count,
                 width % kPack == 0 && allPackable({input, y}),
                 /*strided=*/true, {width, 2 * width, width}, stream);
  });
}

extern "C" int tessera_cuda_packed_swiglu_grad(const tessera_tensor *input,
                                               const tessera_tensor *dy,
                                               tessera_tensor *dinput,
                                               cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_packed_swiglu_grad", [&] {
    int64_t width = tessera::cpu::requirePackedGatedOperands(
        input, dy, "dy", {{dinput, "dinput"}});
    requireFloatStorage(*input);
    int64_t count = elementCount(*dy);
    if (count == 0)
      return;
    launchSwigluGrad(input->data, input->data, dy->data, dinput->data,
                     dinput->data, input->dtype, count,
                     width % kPack == 0 && allPackable({input, dy, dinput}),
                     /*strided=*/true, {width, 2 * width, width}, stream);
  });
}
