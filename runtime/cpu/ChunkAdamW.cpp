//===- ChunkAdamW.cpp - AdamW over chunks of flat host buffers ------------===//
//
// What an offloaded run (`--offload optimizer`) updates on the host each
// step: every parameter's chunk of the fp32 masters and moments, from the
// gradients the GPU sent, and the compute copies the GPU reads next step.
// Two promises shape it:
// - bit for bit tessera_cpu_adamw (AdamW.cpp): the same f64 factors cast to
//   f32 once a call, the same f32 operations in the same order per element,
//   so an offloaded run computes the non-offloaded one's numbers (the GPU's
//   multi-tensor AdamW keeps this order too, never contracting to FMA).
//   This file is compiled with -ffp-contract=off so a host compiler that
//   may fuse never does;
// - fast enough not to dominate the step: the inner loop is branch-free
//   over plain f32 arrays (the gradient widened by a bit shift for bf16),
//   which the compiler vectorizes (IEEE sqrt and division vectorize
//   exactly; -fno-math-errno keeps std::sqrt one instruction, with the
//   same IEEE result), and a call covers only its chunks, so the driver's
//   threads run disjoint sub-tables at once.
// The copies are rounded to nearest even with NaN kept quiet: floatToBf16's
// rule, what tessera_cpu_cast and the GPU's __float2bfloat16_rn make.
//
//===----------------------------------------------------------------------===//

#include "AdamWFactors.h"
#include "DataTypes.h"
#include "Errors.h"

#include "tessera/runtime/cpu_kernels.h"
#include "tessera/runtime/host_optimizer.h"

#include <cmath>
#include <cstring>
#include <string>

using namespace tessera::cpu;

namespace {

inline uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float floatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// floatToBf16 without its branch, so the loop stays vectorizable.
inline uint16_t roundToBf16(float value) {
  const uint32_t bits = bitsOf(value);
  const uint16_t quietNaN = static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint16_t rounded =
      static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
  return (bits & 0x7fffffffu) > 0x7f800000u ? quietNaN : rounded;
}

inline bool nonFinite(float value) {
  return (bitsOf(value) & 0x7f800000u) == 0x7f800000u;
}

/// One chunk: `loadGradient(i)` is gradient element i as f32; with
/// kBf16Copy, the updated weights are also rounded into `bf16Copy` (a
/// template flag, so that each loop is branch-free and vectorizes).
/// Returns whether a parameter or second moment came out non-finite.
template <bool kBf16Copy, typename LoadGradient>
bool updateChunk(float *__restrict params, float *__restrict m,
                 float *__restrict v, uint16_t *__restrict bf16Copy,
                 int64_t count, const AdamWFactors &f, float decay,
                 LoadGradient loadGradient) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < count; ++i) {
    // tessera_cpu_adamw's expressions, operation for operation.
    float g = loadGradient(i) * f.gradScale;
    m[i] = f.beta1 * m[i] + f.oneMinusBeta1 * g;
    v[i] = f.beta2 * v[i] + f.oneMinusBeta2 * g * g;
    float denominator = std::sqrt(v[i]) / f.sqrtCorrection2 + f.epsilon;
    float updated = params[i] * decay - f.stepSize * m[i] / denominator;
    params[i] = updated;
    if constexpr (kBf16Copy)
      bf16Copy[i] = roundToBf16(updated);
    bad |= static_cast<uint32_t>(nonFinite(updated)) |
           static_cast<uint32_t>(nonFinite(v[i]));
  }
  return bad != 0;
}

void requireCopyDtype(const void *copies, int32_t copyDtype) {
  if (copies && copyDtype != TESSERA_BF16 && copyDtype != TESSERA_F16)
    fail("the compute copies' dtype must be bf16 or f16, not " +
         std::string(dtypeName(copyDtype)));
}

void requireChunks(const tessera_tensor_chunk *chunks, int32_t chunkCount) {
  if (chunkCount < 0 || (chunkCount > 0 && !chunks))
    fail("a chunk table of " + std::to_string(chunkCount) +
         " chunks must be given");
}

} // namespace

extern "C" int tessera_cpu_chunk_adamw(
    float *params, const void *grad, int32_t grad_dtype, float *m, float *v,
    void *copies, int32_t copy_dtype, const tessera_tensor_chunk *chunks,
    int32_t chunk_count, int64_t step, double lr, double beta1, double beta2,
    double eps, double weight_decay, double grad_scale, int32_t *nonfinite) {
  return runKernel("tessera_cpu_chunk_adamw", [&] {
    requireChunks(chunks, chunk_count);
    if (chunk_count > 0 && (!params || !grad || !m || !v))
      fail("params, grad, m and v must be given");
    if (grad_dtype != TESSERA_F32 && grad_dtype != TESSERA_BF16 &&
        grad_dtype != TESSERA_F16)
      fail("the gradient's dtype must be f32, bf16 or f16, not " +
           std::string(dtypeName(grad_dtype)));
    requireCopyDtype(copies, copy_dtype);
    const AdamWFactors f =
        adamwFactors(step, lr, beta1, beta2, eps, weight_decay, grad_scale);
    if (nonfinite)
      *nonfinite = -1;
    for (int32_t c = 0; c < chunk_count; ++c) {
      const tessera_tensor_chunk &chunk = chunks[c];
      // Masters and moments at the state's offset (a ZeRO-1 shard's
      // compact place, else the flat buffers'); the gradient at the flat
      // buffers'.
      const int64_t at = chunk.state_offset;
      const float decay = chunk.weight_decay ? f.decay : 1.0f;
      const bool copied = copies && chunk.copy_offset >= 0;
      // f16 copies take the scalar rounding after the update; bf16 ones
      // are rounded in the vector loop.
      uint16_t *bf16Copy =
          copied && copy_dtype == TESSERA_BF16
              ? static_cast<uint16_t *>(copies) + chunk.copy_offset
              : nullptr;
      auto update = [&](auto loadGradient) {
        return bf16Copy
                   ? updateChunk<true>(params + at, m + at, v + at, bf16Copy,
                                       chunk.count, f, decay, loadGradient)
                   : updateChunk<false>(params + at, m + at, v + at, nullptr,
                                        chunk.count, f, decay, loadGradient);
      };
      const auto *g16 = static_cast<const uint16_t *>(grad) + chunk.offset;
      bool bad;
      if (grad_dtype == TESSERA_F32) {
        const float *g = static_cast<const float *>(grad) + chunk.offset;
        bad = update([g](int64_t i) { return g[i]; });
      } else if (grad_dtype == TESSERA_BF16) {
        bad = update([g16](int64_t i) {
          return floatOf(static_cast<uint32_t>(g16[i]) << 16);
        });
      } else {
        bad = update([g16](int64_t i) { return f16ToFloat(g16[i]); });
      }
      if (copied && copy_dtype == TESSERA_F16) {
        uint16_t *copy = static_cast<uint16_t *>(copies) + chunk.copy_offset;
        for (int64_t k = 0; k < chunk.count; ++k)
          copy[k] = floatToF16(params[at + k]);
      }
      if (bad && nonfinite && *nonfinite < 0)
        *nonfinite = c;
    }
  });
}

extern "C" int tessera_cpu_round_chunk_copies(
    const float *params, void *copies, int32_t copy_dtype,
    const tessera_tensor_chunk *chunks, int32_t chunk_count) {
  return runKernel("tessera_cpu_round_chunk_copies", [&] {
    requireChunks(chunks, chunk_count);
    if (!copies || (chunk_count > 0 && !params))
      fail("params and copies must be given");
    requireCopyDtype(copies, copy_dtype);
    auto *copy = static_cast<uint16_t *>(copies);
    for (int32_t c = 0; c < chunk_count; ++c) {
      const tessera_tensor_chunk &chunk = chunks[c];
      if (chunk.copy_offset < 0)
        continue;
      const float *from = params + chunk.state_offset;
      uint16_t *to = copy + chunk.copy_offset;
      for (int64_t k = 0; k < chunk.count; ++k)
        to[k] = copy_dtype == TESSERA_BF16 ? roundToBf16(from[k])
                                           : floatToF16(from[k]);
    }
  });
}
