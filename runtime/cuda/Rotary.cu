//===- Rotary.cu - Rotary position embedding (rotate-half form) -----------===//
//
// tess.rotary on the GPU: one thread per eight rotated pairs
// (x[r, i..i+8), x[r, i+h..i+h+8)) of a row r of the last dim (h = D / 2),
// in 16-byte packs, where h is a multiple of 8 and the data is aligned; one
// thread per pair otherwise. Adjacent threads take adjacent i,
// so a warp reads a contiguous run of each half; the row's cos/sin offsets
// come from their broadcast strides over x's leading dims (cos and sin are
// typically [1, 1, T, D] against [B, H, T, D], and stay in L2). Each output
// is two products summed in f32 and rounded once into its storage type, as
// the CPU kernel does in f64; the chain it replaces rounded after each of
// five ops and made seven passes over x. Rows whose dim -2 index is at or
// past rotated_heads (a packed q/k/v's value heads) are copied, or not
// touched when y is x: each thread reads its pairs whole before writing
// them, so the arena runs the rotation in place (x is dead after it), and
// a packed q/k/v's values then cost nothing. Tables that broadcast over
// the heads (the packed q/k/v's [.., T, 1, D]) run a warp per token
// (rotaryTokenKernel), the row arithmetic and the cos/sin loads once a
// token.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "OperandChecks.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

using namespace tessera::cuda;
using tessera::cpu::elementCount;
using tessera::cpu::shapeOf;

namespace {

/// The offsets of row r's first element in cos (0) and sin (1).
using RowLayout = StridedLayout<2>;

// f64 tensors compute in f64; the rest in f32.
template <typename Element>
using ComputeType =
    std::conditional_t<std::is_same_v<Element, double>, double, float>;

template <typename Element>
__device__ __forceinline__ ComputeType<Element> toFloat(Element value) {
  return static_cast<ComputeType<Element>>(value);
}
template <> __device__ __forceinline__ float toFloat(__nv_bfloat16 value) {
  return __bfloat162float(value);
}
template <> __device__ __forceinline__ float toFloat(__half value) {
  return __half2float(value);
}
template <typename Element>
__device__ __forceinline__ Element fromFloat(ComputeType<Element> value) {
  return static_cast<Element>(value);
}
template <> __device__ __forceinline__ __nv_bfloat16 fromFloat(float value) {
  return __float2bfloat16(value);
}
template <> __device__ __forceinline__ __half fromFloat(float value) {
  return __float2half(value);
}

template <typename Element>
__global__ void rotaryKernel(const Element *x, const Element *cos,
                             const Element *sin, Element *y, RowLayout rows,
                             int64_t cosStride, int64_t sinStride, int64_t half,
                             int64_t pairs, bool adjoint, int64_t heads,
                             int64_t rotatedHeads) {
  TESSERA_GRID_STRIDE_LOOP(p, pairs) {
    int64_t row = p / half, i = p - row * half;
    int64_t low = row * 2 * half + i, high = low + half;
    if (rotatedHeads < heads && row % heads >= rotatedHeads) {
      if (x != y) {
        y[low] = x[low];
        y[high] = x[high];
      }
      continue;
    }
    int64_t base[2];
    rows.offsets(row, base);
    using Compute = ComputeType<Element>;
    Compute a = toFloat(x[low]), b = toFloat(x[high]);
    Compute cosLow = toFloat(cos[base[0] + i * cosStride]);
    Compute cosHigh = toFloat(cos[base[0] + (i + half) * cosStride]);
    Compute sinLow = toFloat(sin[base[1] + i * sinStride]);
    Compute sinHigh = toFloat(sin[base[1] + (i + half) * sinStride]);
    Compute first, second;
    if (!adjoint) {
      first = a * cosLow - b * sinLow;
      second = b * cosHigh + a * sinHigh;
    } else {
      first = a * cosLow + b * sinHigh;
      second = b * cosHigh - a * sinLow;
    }
    y[low] = fromFloat<Element>(first);
    y[high] = fromFloat<Element>(second);
  }
}

/// The same rotation, eight adjacent pairs a thread in 16-byte packs (f32,
/// bf16, f16 storage): for half widths that are multiples of 8, aligned
/// data and contiguous cos/sin rows, as Llama's head dims 64..256 are.
/// Index is uint32_t when every element offset fits: the row arithmetic
/// (a division per dim) is then 32-bit, which is what kept the kernel at
/// 44 % of bandwidth in 64 bits.
template <typename Index>
__global__ void rotaryPackKernel(const void *x, const void *cos,
                                 const void *sin, void *y, int dtype,
                                 RowLayout rows, Index half, int64_t packs,
                                 bool adjoint, Index heads,
                                 Index rotatedHeads) {
  Index packsPerRow = half / kPack;
  TESSERA_GRID_STRIDE_LOOP(p, packs) {
    Index pack = static_cast<Index>(p);
    Index row = pack / packsPerRow, i = (pack - row * packsPerRow) * kPack;
    Index low = row * 2 * half + i, high = low + half;
    float a[kPack], b[kPack], cosLow[kPack], cosHigh[kPack], sinLow[kPack],
        sinHigh[kPack];
    // Heads past rotatedHeads (a packed q/k/v's values) are copied, or
    // left where they are when the rotation runs in place.
    const bool passThrough = rotatedHeads < heads && row % heads >= rotatedHeads;
    if (passThrough && x == y)
      continue;
    loadPack(x, dtype, low, a);
    loadPack(x, dtype, high, b);
    if (passThrough) {
      storePack(y, dtype, low, a);
      storePack(y, dtype, high, b);
      continue;
    }
    Index base[2];
    rows.offsets(row, base);
    loadPack(cos, dtype, base[0] + i, cosLow);
    loadPack(cos, dtype, base[0] + i + half, cosHigh);
    loadPack(sin, dtype, base[1] + i, sinLow);
    loadPack(sin, dtype, base[1] + i + half, sinHigh);
    float first[kPack], second[kPack];
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      if (!adjoint) {
        first[k] = a[k] * cosLow[k] - b[k] * sinLow[k];
        second[k] = b[k] * cosHigh[k] + a[k] * sinHigh[k];
      } else {
        first[k] = a[k] * cosLow[k] + b[k] * sinHigh[k];
        second[k] = b[k] * cosHigh[k] - a[k] * sinLow[k];
      }
    }
    storePack(y, dtype, low, first);
    storePack(y, dtype, high, second);
  }
}

/// The packed rotation a warp per token, for tables that broadcast over the
/// heads (cos/sin [.., T, 1, D] against a packed q/k/v [B, T, H, D], as the
/// Llama-family exports run it): the row arithmetic (a division per dim)
/// and the token's cos/sin packs are done once a token instead of once a
/// pack, and each lane then rotates its pack of every `headLanes`-th head,
/// two heads' loads in flight before either is written (x may be y). With
/// packsPerHalf = half / 8 dividing 32: head dims 16..512 in powers of two.
/// rotaryPackKernel did the same work at 49 % of the bandwidth roofline in
/// the Llama 3.2 1B step.
constexpr int kTokenWarps = 8;

template <typename Index>
__global__ void __launch_bounds__(kTokenWarps * 32)
    rotaryTokenKernel(const void *x, const void *cos, const void *sin,
                      void *y, int dtype, RowLayout rows, Index half,
                      Index tokens, bool adjoint, Index heads,
                      Index rotatedHeads) {
  const Index packsPerHalf = half / kPack;
  const Index headLanes = 32 / packsPerHalf;
  const Index lane = threadIdx.x % 32;
  const Index i = (lane % packsPerHalf) * kPack;
  const Index token = blockIdx.x * kTokenWarps + threadIdx.x / 32;
  if (token >= tokens)
    return;
  Index base[2];
  rows.offsets(token * heads, base);
  float cosLow[kPack], cosHigh[kPack], sinLow[kPack], sinHigh[kPack];
  loadPack(cos, dtype, base[0] + i, cosLow);
  loadPack(cos, dtype, base[0] + i + half, cosHigh);
  loadPack(sin, dtype, base[1] + i, sinLow);
  loadPack(sin, dtype, base[1] + i + half, sinHigh);
  auto rotate = [&](float (&a)[kPack], float (&b)[kPack]) {
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      float first, second;
      if (!adjoint) {
        first = a[k] * cosLow[k] - b[k] * sinLow[k];
        second = b[k] * cosHigh[k] + a[k] * sinHigh[k];
      } else {
        first = a[k] * cosLow[k] + b[k] * sinHigh[k];
        second = b[k] * cosHigh[k] - a[k] * sinLow[k];
      }
      a[k] = first;
      b[k] = second;
    }
  };
  // Heads past rotatedHeads are copied, or left alone in place.
  const Index end = x == y ? rotatedHeads : heads;
  const Index row0 = token * heads;
  for (Index h = lane / packsPerHalf; h < end; h += 2 * headLanes) {
    Index h1 = h + headLanes;
    bool second = h1 < end;
    Index low0 = (row0 + h) * 2 * half + i, low1 = (row0 + h1) * 2 * half + i;
    float a0[kPack], b0[kPack], a1[kPack], b1[kPack];
    loadPack(x, dtype, low0, a0);
    loadPack(x, dtype, low0 + half, b0);
    if (second) {
      loadPack(x, dtype, low1, a1);
      loadPack(x, dtype, low1 + half, b1);
    }
    if (h < rotatedHeads)
      rotate(a0, b0);
    storePack(y, dtype, low0, a0);
    storePack(y, dtype, low0 + half, b0);
    if (second) {
      if (h1 < rotatedHeads)
        rotate(a1, b1);
      storePack(y, dtype, low1, a1);
      storePack(y, dtype, low1 + half, b1);
    }
  }
}

template <typename Element>
void launchRotary(const tessera_tensor &x, const tessera_tensor &cos,
                  const tessera_tensor &sin, tessera_tensor &y,
                  const RowLayout &rows, int64_t cosStride, int64_t sinStride,
                  int64_t half, int64_t pairs, bool adjoint, int64_t heads,
                  int64_t rotatedHeads, cudaStream_t stream) {
  rotaryKernel<Element><<<gridFor(pairs), kThreadsPerBlock, 0, stream>>>(
      static_cast<const Element *>(x.data),
      static_cast<const Element *>(cos.data),
      static_cast<const Element *>(sin.data), static_cast<Element *>(y.data),
      rows, cosStride, sinStride, half, pairs, adjoint, heads, rotatedHeads);
}

} // namespace

extern "C" int tessera_cuda_rotary(const tessera_tensor *x,
                                   const tessera_tensor *cos,
                                   const tessera_tensor *sin, tessera_tensor *y,
                                   int32_t adjoint, int64_t rotated_heads,
                                   cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_rotary", [&] {
    tessera::cpu::RotaryOperands operands =
        tessera::cpu::requireRotaryOperands(x, cos, sin, y, rotated_heads);
    int64_t heads = operands.heads, rotatedHeads = operands.rotatedHeads;
    Shape shape = shapeOf(*x);
    int64_t half = shape.back() / 2;
    int64_t pairs = elementCount(*x) / 2;
    if (pairs == 0)
      return;
    Shape leading(shape.begin(), shape.end() - 1);
    Shape strides[2] = {
        Shape(operands.cosStrides.begin(), operands.cosStrides.end() - 1),
        Shape(operands.sinStrides.begin(), operands.sinStrides.end() - 1)};
    RowLayout rows = makeLayout(leading, strides);
    int64_t cosStride = operands.cosStrides.back();
    int64_t sinStride = operands.sinStrides.back();
    // Packs need every row start 16-byte aligned: contiguous cos/sin rows
    // whose strides (and the halves) are multiples of a pack.
    bool rowsAligned = half % kPack == 0;
    for (const Shape &operand : strides)
      for (int64_t stride : operand)
        rowsAligned = rowsAligned && stride % kPack == 0;
    if (rowsAligned && cosStride == 1 && sinStride == 1 && packable(*x) &&
        packable(*cos) && packable(*sin) && packable(*y)) {
      int64_t packs = pairs / kPack;
      bool narrow = std::max({elementCount(*x), elementCount(*cos),
                              elementCount(*sin)}) <= UINT32_MAX;
      // A warp per token when the tables broadcast over the heads (dim -2)
      // and a half's packs tile a warp.
      int64_t packsPerHalf = half / kPack;
      bool perToken = narrow && leading.size() >= 1 && strides[0].back() == 0 &&
                      strides[1].back() == 0 && packsPerHalf <= 32 &&
                      32 % packsPerHalf == 0;
      if (perToken) {
        int64_t tokens = pairs / (half * heads);
        rotaryTokenKernel<uint32_t>
            <<<static_cast<unsigned>((tokens + kTokenWarps - 1) / kTokenWarps),
               kTokenWarps * 32, 0, stream>>>(
                x->data, cos->data, sin->data, y->data, x->dtype, rows,
                static_cast<uint32_t>(half), static_cast<uint32_t>(tokens),
                adjoint != 0, static_cast<uint32_t>(heads),
                static_cast<uint32_t>(rotatedHeads));
        cudaCheckLaunch();
        return;
      }
      if (narrow)
        rotaryPackKernel<uint32_t>
            <<<gridFor(packs), kThreadsPerBlock, 0, stream>>>(
                x->data, cos->data, sin->data, y->data, x->dtype, rows,
                static_cast<uint32_t>(half), packs, adjoint != 0,
                static_cast<uint32_t>(heads),
                static_cast<uint32_t>(rotatedHeads));
      else
        rotaryPackKernel<int64_t>
            <<<gridFor(packs), kThreadsPerBlock, 0, stream>>>(
                x->data, cos->data, sin->data, y->data, x->dtype, rows, half,
                packs, adjoint != 0, heads, rotatedHeads);
      cudaCheckLaunch();
      return;
    }
    switch (x->dtype) {
    case TESSERA_F32:
      launchRotary<float>(*x, *cos, *sin, *y, rows, cosStride, sinStride, half,
                          pairs, adjoint != 0, heads, rotatedHeads, stream);
      break;
    case TESSERA_BF16:
      launchRotary<__nv_bfloat16>(*x, *cos, *sin, *y, rows, cosStride,
                                  sinStride, half, pairs, adjoint != 0, heads,
                                  rotatedHeads, stream);
      break;
    case TESSERA_F16:
      launchRotary<__half>(*x, *cos, *sin, *y, rows, cosStride, sinStride, half,
                           pairs, adjoint != 0, heads, rotatedHeads, stream);
      break;
    default:
      launchRotary<double>(*x, *cos, *sin, *y, rows, cosStride, sinStride, half,
                           pairs, adjoint != 0, heads, rotatedHeads, stream);
      break;
    }
    cudaCheckLaunch();
  });
}
