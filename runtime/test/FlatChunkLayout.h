//===- FlatChunkLayout.h - A small flat state and its chunk table -*- C++ -*-===//
//
// The flat layout the optimizer kernels' tests run on (the CPU's
// ChunkAdamWTest, the GPU's DriverKernelsCudaTest): three parameters at
// 128-element aligned offsets, of 1000, 70000 (two chunks) and 5 elements,
// the middle one without weight decay, and the chunk table the driver
// builds for it (ParameterLayout, in the train library these kernel tests
// do not link): chunks of at most kChunk elements, each its tensor's, with
// its state at its own offset and its compute copy where `copyOffsets` puts
// the tensor's (-1: none, the tensor is read as its master).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TEST_FLATCHUNKLAYOUT_H
#define TESSERA_RUNTIME_TEST_FLATCHUNKLAYOUT_H

#include "tessera/runtime/tensor_chunks.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace tessera::test {

struct FlatChunkLayout {
  static constexpr int64_t kChunk = 65536;

  std::vector<int64_t> offsets = {0, 1024, 71040};
  std::vector<int64_t> counts = {1000, 70000, 5};
  int64_t total = 71168;
  std::vector<bool> decays = {true, false, true};
  /// Where each tensor's compute copy starts, -1 for none.
  std::vector<int64_t> copyOffsets;

  explicit FlatChunkLayout(std::vector<int64_t> copies)
      : copyOffsets(std::move(copies)) {}

  std::vector<tessera_tensor_chunk> chunks() const {
    std::vector<tessera_tensor_chunk> table;
    for (size_t t = 0; t < counts.size(); ++t)
      for (int64_t start = 0; start < counts[t]; start += kChunk) {
        tessera_tensor_chunk chunk{};
        chunk.offset = offsets[t] + start;
        chunk.count = std::min(kChunk, counts[t] - start);
        chunk.tensor = static_cast<int32_t>(t);
        chunk.weight_decay = decays[t] ? 1 : 0;
        chunk.copy_offset = copyOffsets[t] < 0 ? -1 : copyOffsets[t] + start;
        chunk.state_offset = chunk.offset;
        table.push_back(chunk);
      }
    return table;
  }
};

} // namespace tessera::test

#endif // TESSERA_RUNTIME_TEST_FLATCHUNKLAYOUT_H
