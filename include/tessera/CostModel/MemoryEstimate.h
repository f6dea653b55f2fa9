//===- MemoryEstimate.h - peak memory of a training step per device -*- C++ -*-===//
//
// What one device holds while it runs the training step that
// `tess-build-training` writes, by category:
//
//   master weights      the fp32 arguments of @forward_backward marked
//                       `tess.parameter`
//   compute weights     their casts to the compute precision (bf16/fp16);
//                       none in fp32, where the master weights are used
//   gradients           the results marked `tess.gradient`
//   optimizer state     the arguments of @optimizer_step marked
//                       `tess.first_moment` / `tess.second_moment`
//   inputs and buffers  token ids, targets, loss scale, non-trainable
//                       `tess.buffer` tensors
//   activations         the peak, over the program points of
//                       @forward_backward, of the bytes of every other value
//                       alive there: what the forward keeps for the backward
//                       plus the temporaries of the op at that point
//   communication       collective buffers (none until the partitioner
//                       inserts collectives)
//
// The first five are resident for the whole step (a static arena allocates
// them once), so they are counted in full; activations come from liveness.
// With bf16 AdamW the resident part is 2 + 2 + 4 + 8 = 16 bytes a parameter,
// the usual mixed-precision rule; in fp32 it is 4 + 4 + 8 = 16 as well.
//
// Liveness: a value is alive from the op that defines it to its last use (to
// the end of the function when returned). A tess.reshape is a view: its
// result shares its input's buffer, which stays alive until the last use of
// either. At each op both its operands and its results are alive.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_COSTMODEL_MEMORYESTIMATE_H
#define TESSERA_COSTMODEL_MEMORYESTIMATE_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace tessera::cost {

struct MemoryEstimate {
  int64_t masterWeights = 0;
  int64_t computeWeights = 0;
  int64_t gradients = 0;
  int64_t optimizerState = 0;
  int64_t inputsAndBuffers = 0;
  /// Peak of the transient values of @forward_backward.
  int64_t activations = 0;
  int64_t communicationBuffers = 0;

  /// Bytes of forward values still alive when the loss is computed: what the
  /// forward keeps for the backward (the quantity Korthikanti et al. count).
  int64_t savedForBackward = 0;
  /// The op of @forward_backward where `activations` peaks (its name).
  std::string peakOpName;
  /// Elements of the trainable parameters.
  int64_t trainableElements = 0;

  int64_t resident() const {
    return masterWeights + computeWeights + gradients + optimizerState +
           inputsAndBuffers;
  }
  int64_t total() const {
    return resident() + activations + communicationBuffers;
  }
};

/// Estimates a module holding @forward_backward and @optimizer_step; an
/// error names what is missing.
llvm::Expected<MemoryEstimate> estimateTrainingMemory(mlir::ModuleOp module);

} // namespace tessera::cost

#endif // TESSERA_COSTMODEL_MEMORYESTIMATE_H
