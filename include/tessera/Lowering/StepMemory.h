//===- StepMemory.h - device memory of a compiled training step -*- C++ -*-===//
//
// What one device holds while the compiled training executable runs, derived
// from the program itself rather than from a formula:
// - the step arena: every intermediate of @forward_backward at the offset the
//   liveness-based arena planner gives it (planFunctionArena), so it is
//   exactly what the executable allocates;
// - the driver's training state (runtime/train, ParameterLayout): fp32 master
//   weights and two fp32 AdamW moments per parameter element, the gradients
//   the step writes in the compute precision, and fp32 accumulators when
//   they are needed (several micro-batches per step);
// - the buffers (non-trained initializers) the step reads;
// - on the GPU, the scratch of products that runtime/cuda/Matmul.cu pads
//   (a vocabulary like GPT-2's 50257 makes the LM head's rows misaligned; the
//   runtime copies such operands into one zero-padded buffer per stream).
// Not included: the CUDA context and cuBLASLt's workspace, which the
// measured peak (the driver's "peak mem") does include.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LOWERING_STEPMEMORY_H
#define TESSERA_LOWERING_STEPMEMORY_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>

namespace tessera::lowering {

struct StepMemory {
  int64_t arenaBytes = 0;
  int64_t masterWeightBytes = 0;
  int64_t optimizerStateBytes = 0;
  int64_t gradientBytes = 0;
  int64_t accumulatorBytes = 0;
  int64_t bufferBytes = 0;
  int64_t gemmScratchBytes = 0;
  int64_t totalBytes() const {
    return arenaBytes + masterWeightBytes + optimizerStateBytes +
           gradientBytes + accumulatorBytes + bufferBytes + gemmScratchBytes;
  }
};

/// The memory of `forwardBackward` (after tess-build-training) trained with
/// `microBatches` micro-batches per step. Fails with a diagnostic when the
/// arena cannot be planned (a dynamic shape).
mlir::FailureOr<StepMemory> estimateStepMemory(mlir::func::FuncOp forwardBackward,
                                               int64_t microBatches);

/// The report block of `tesserac --summary --loss ... --precision ...`; its
/// last line, "Peak device memory per GPU (predicted): N GiB", is what
/// bench/gpt2/report.py sets beside the measured peak.
void printStepMemory(const StepMemory &memory, llvm::raw_ostream &os);

} // namespace tessera::lowering

#endif // TESSERA_LOWERING_STEPMEMORY_H
