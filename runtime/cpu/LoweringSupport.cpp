//===- LoweringSupport.cpp - helpers of the lowered training step --------===//
//
// See lowering_support.h. These sit in the kernels' library because they
// report failures through the same tessera_cpu_last_error().
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/lowering_support.h"

#include "DataTypes.h"
#include "Errors.h"
#include "Random.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

using namespace tessera::cpu;

namespace {

int64_t elementCountOf(const tessera_tensor &tensor) {
  int64_t count = 1;
  for (int32_t d = 0; d < tensor.rank; ++d)
    count *= tensor.shape[d];
  return count;
}

tessera_tensor describe(void *data, const int64_t *row) {
  tessera_tensor tensor;
  std::memset(&tensor, 0, sizeof(tensor));
  tensor.data = data;
  tensor.dtype = static_cast<int32_t>(row[1]);
  tensor.rank = static_cast<int32_t>(row[2]);
  for (int32_t d = 0; d < tensor.rank && d < TESSERA_MAX_RANK; ++d)
    tensor.shape[d] = row[3 + d];
  return tensor;
}

} // namespace

extern "C" int tessera_arena_acquire(uint8_t **arena, int64_t bytes) {
  return runKernel("tessera_arena_acquire", [&] {
    if (*arena)
      return;
    // aligned_alloc wants a size that is a multiple of the alignment; an
    // empty arena still gets one block so the pointer is never NULL.
    int64_t rounded = (bytes + TESSERA_ARENA_ALIGNMENT - 1) /
                      TESSERA_ARENA_ALIGNMENT * TESSERA_ARENA_ALIGNMENT;
    if (rounded <= 0)
      rounded = TESSERA_ARENA_ALIGNMENT;
    void *memory = std::aligned_alloc(TESSERA_ARENA_ALIGNMENT,
                                      static_cast<size_t>(rounded));
    if (!memory)
      fail("cannot allocate the step's arena of " + std::to_string(bytes) +
           " bytes");
    std::memset(memory, 0, static_cast<size_t>(rounded));
    *arena = static_cast<uint8_t *>(memory);
  });
}

extern "C" tessera_tensor tessera_layout_tensor(void *base,
                                                const int64_t *layout,
                                                int32_t row) {
  const int64_t *entry = layout + static_cast<int64_t>(row) * TESSERA_LAYOUT_ROW;
  return describe(static_cast<uint8_t *>(base) + entry[0], entry);
}

extern "C" tessera_tensor tessera_view_tensor(const tessera_tensor *base,
                                              const int64_t *layout,
                                              int32_t row) {
  const int64_t *entry = layout + static_cast<int64_t>(row) * TESSERA_LAYOUT_ROW;
  return describe(static_cast<uint8_t *>(base->data) + entry[0], entry);
}

extern "C" int tessera_fill_bytes(tessera_tensor *y, const uint8_t *bytes,
                                  int64_t size) {
  return runKernel("tessera_fill_bytes", [&] {
    int64_t expected =
        elementCountOf(*y) * static_cast<int64_t>(dtypeSize(y->dtype));
    if (size != expected)
      fail("constant of " + std::to_string(size) + " bytes for a tensor of " +
           std::to_string(expected));
    std::memcpy(y->data, bytes, static_cast<size_t>(size));
  });
}

extern "C" int tessera_fill_splat(tessera_tensor *y, const uint8_t *element,
                                  int64_t element_size) {
  return runKernel("tessera_fill_splat", [&] {
    if (element_size != static_cast<int64_t>(dtypeSize(y->dtype)))
      fail("splat element of " + std::to_string(element_size) +
           " bytes for dtype " + std::to_string(y->dtype));
    auto *out = static_cast<uint8_t *>(y->data);
    for (int64_t i = 0, n = elementCountOf(*y); i < n; ++i)
      std::memcpy(out + i * element_size, element,
                  static_cast<size_t>(element_size));
  });
}

namespace {
std::atomic<uint64_t> mixedSeeds{0};
} // namespace

extern "C" uint64_t tessera_mix_seed_calls(void) { return mixedSeeds.load(); }

extern "C" uint64_t tessera_mix_seed(uint64_t step_seed, uint64_t op_seed) {
  mixedSeeds.fetch_add(1, std::memory_order_relaxed);
  uint64_t z = step_seed * 0x9E3779B97F4A7C15ull + op_seed + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

extern "C" uint64_t tessera_advance_seed(uint64_t seed, uint64_t count) {
  return tessera::cpu::advancedSeed(seed, count);
}

extern "C" int tessera_read_scalar_f32(const tessera_tensor *x, float *value) {
  return runKernel("tessera_read_scalar_f32", [&] {
    if (x->dtype != TESSERA_F32 || elementCountOf(*x) != 1)
      fail("expected one F32 element");
    std::memcpy(value, x->data, sizeof(float));
  });
}
