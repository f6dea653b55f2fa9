//===- TensorBlocks.cpp - Tensors cut into one block per rank -------------===//

#include "TensorBlocks.h"

#include "DataTypes.h"

#include "tessera/runtime/comm.h"
#include "tessera/runtime/comm_error.h"

#include <cstring>

namespace tessera::comm {

int64_t tensorElements(const tessera_tensor &tensor) {
  int64_t count = 1;
  for (int32_t d = 0; d < tensor.rank; ++d)
    count *= tensor.shape[d];
  return count;
}

size_t dtypeBytes(int32_t dtype) { return cpu::dtypeSize(dtype); }

tessera_tensor flatView(void *buffer, int32_t dtype, int64_t offset,
                        int64_t elements) {
  tessera_tensor view{};
  view.data = static_cast<unsigned char *>(buffer) +
              static_cast<size_t>(offset) * dtypeBytes(dtype);
  view.dtype = dtype;
  view.rank = 1;
  view.shape[0] = elements;
  return view;
}

void checkComm(int status) {
  if (status != 0)
    throw CommError(tessera_comm_last_error());
}

size_t tensorBytes(const tessera_tensor &tensor) {
  return static_cast<size_t>(tensorElements(tensor)) * dtypeBytes(tensor.dtype);
}

std::string describeTensor(const tessera_tensor &tensor) {
  std::string text = cpu::dtypeName(tensor.dtype);
  text += "[";
  for (int32_t d = 0; d < tensor.rank; ++d)
    text += (d ? ", " : "") + std::to_string(tensor.shape[d]);
  return text + "]";
}

BlockGeometry blockGeometry(const tessera_tensor &tensor, int32_t axis,
                            int64_t blocks) {
  BlockGeometry geometry;
  geometry.elementBytes = dtypeBytes(tensor.dtype);
  int64_t inner = 1;
  for (int32_t d = axis + 1; d < tensor.rank; ++d)
    inner *= tensor.shape[d];
  for (int32_t d = 0; d < axis; ++d)
    geometry.outer *= tensor.shape[d];
  geometry.rowPitch = tensor.shape[axis] * inner;
  geometry.blockRun = tensor.shape[axis] / blocks * inner;
  return geometry;
}

void packBlock(const void *source, const BlockGeometry &geometry, int64_t block,
               void *destination) {
  const auto *from = static_cast<const unsigned char *>(source);
  auto *to = static_cast<unsigned char *>(destination);
  size_t runBytes =
      static_cast<size_t>(geometry.blockRun) * geometry.elementBytes;
  for (int64_t run = 0; run < geometry.outer; ++run)
    std::memcpy(to + static_cast<size_t>(run) * runBytes,
                from + geometry.runOffsetBytes(block, run), runBytes);
}

void unpackBlock(const void *source, const BlockGeometry &geometry,
                 int64_t block, void *destination) {
  const auto *from = static_cast<const unsigned char *>(source);
  auto *to = static_cast<unsigned char *>(destination);
  size_t runBytes =
      static_cast<size_t>(geometry.blockRun) * geometry.elementBytes;
  for (int64_t run = 0; run < geometry.outer; ++run)
    std::memcpy(to + geometry.runOffsetBytes(block, run),
                from + static_cast<size_t>(run) * runBytes, runBytes);
}

} // namespace tessera::comm
