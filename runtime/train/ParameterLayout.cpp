//===- ParameterLayout.cpp - Offsets of the flat parameter buffers --------===//

#include "ParameterLayout.h"

#include "TrainError.h"
#include "TrainingState.h"

#include <algorithm>

namespace tessera::train {

namespace {

int64_t roundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

} // namespace

ParameterLayout::ParameterLayout(const tessera_program &program) {
  for (int32_t i = 0; i < program.parameter_count; ++i) {
    int64_t elements = elementCount(program.parameters[i]);
    offsets.push_back(total);
    counts.push_back(elements);
    total = roundUp(total + elements, kSliceAlignment);
  }
}

int64_t ParameterLayout::totalBytes(int32_t dtype) const {
  return total * dtypeSize(dtype);
}

std::vector<tessera_tensor_chunk>
ParameterLayout::chunks(const std::vector<bool> &decays,
                        int64_t chunkElements) const {
  if (decays.size() != offsets.size() || chunkElements <= 0)
    fail("internal error: chunks of " + std::to_string(offsets.size()) +
         " parameters with " + std::to_string(decays.size()) +
         " decay flags");
  std::vector<tessera_tensor_chunk> table;
  for (size_t i = 0; i < offsets.size(); ++i)
    for (int64_t start = 0; start < counts[i]; start += chunkElements) {
      tessera_tensor_chunk chunk{};
      chunk.offset = offsets[i] + start;
      chunk.count = std::min(chunkElements, counts[i] - start);
      chunk.tensor = static_cast<int32_t>(i);
      chunk.weight_decay = decays[i] ? 1 : 0;
      table.push_back(chunk);
    }
  return table;
}

} // namespace tessera::train
