//===- TensorBlocks.h - Tensors cut into one block per rank -----*- C++ -*-===//
//
// all_gather, reduce_scatter and all_to_all move "block j along axis a" of
// a row-major tensor: the rows [j * d/N, (j+1) * d/N) of dim a. In memory
// that block is `outer` runs of `blockRun` contiguous elements, `rowPitch`
// apart (outer = product of the dims before a). Both backends copy blocks
// with this geometry: the host with memcpy per run, CUDA with one
// cudaMemcpy2DAsync per block.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_COMM_TENSORBLOCKS_H
#define TESSERA_RUNTIME_COMM_TENSORBLOCKS_H

#include "tessera/runtime/cpu_kernels.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::comm {

struct BlockGeometry {
  int64_t outer = 1;    // runs per block
  int64_t blockRun = 0; // elements per run
  int64_t rowPitch = 0; // elements between runs
  size_t elementBytes = 0;

  int64_t blockElements() const { return outer * blockRun; }
  /// Byte offset of run `run` of block `block` in the tensor.
  size_t runOffsetBytes(int64_t block, int64_t run) const {
    return static_cast<size_t>(run * rowPitch + block * blockRun) *
           elementBytes;
  }
};

/// The geometry of `blocks` blocks along `axis` of `tensor` (the dim must
/// divide; the caller checked).
BlockGeometry blockGeometry(const tessera_tensor &tensor, int32_t axis,
                            int64_t blocks);

int64_t tensorElements(const tessera_tensor &tensor);
size_t tensorBytes(const tessera_tensor &tensor);
size_t dtypeBytes(int32_t dtype);
/// "bf16[4, 8]".
std::string describeTensor(const tessera_tensor &tensor);
/// Elements [offset, offset + elements) of a flat buffer of `dtype`, as a
/// 1-D tensor (what the data-parallel collectives move).
tessera_tensor flatView(void *buffer, int32_t dtype, int64_t offset,
                        int64_t elements);
/// Throws CommError with tessera_comm_last_error() unless `status` is 0.
void checkComm(int status);

/// Copies block `block` of `source` (geometry `geometry`) into a contiguous
/// buffer, and back (host memory).
void packBlock(const void *source, const BlockGeometry &geometry, int64_t block,
               void *destination);
void unpackBlock(const void *source, const BlockGeometry &geometry,
                 int64_t block, void *destination);

} // namespace tessera::comm

#endif // TESSERA_RUNTIME_COMM_TENSORBLOCKS_H
