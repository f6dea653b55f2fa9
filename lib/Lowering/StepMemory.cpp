//===- StepMemory.cpp - device memory of a compiled training step ---------===//
//
// The arena comes from the same planner the lowering uses, so the estimate
// and the executable cannot drift apart; the driver's state mirrors
// runtime/train's CudaBackend (one flat buffer per kind, parameters in
// program order; the 256-byte slice alignment adds at most 256 bytes a
// parameter, ignored here).
//
//===----------------------------------------------------------------------===//

#include "tessera/Lowering/StepMemory.h"

#include "tessera/Lowering/ArenaPlanning.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace tessera::lowering {

namespace {

int64_t elementsOf(Type type) {
  auto shaped = cast<ShapedType>(type);
  return shaped.getNumElements();
}

} // namespace

FailureOr<StepMemory> estimateStepMemory(func::FuncOp forwardBackward,
                                         int64_t microBatches) {
  FailureOr<FunctionArenaPlan> plan = planFunctionArena(forwardBackward);
  if (failed(plan))
    return failure();
  StepMemory memory;
  memory.arenaBytes = plan->layout.totalBytes;

  // Gradients are the results marked tess.gradient, in the compute precision.
  int64_t parameterElements = 0;
  for (unsigned i = 0, e = forwardBackward.getNumArguments(); i < e; ++i) {
    Type type = forwardBackward.getArgument(i).getType();
    if (!isa<RankedTensorType>(type))
      continue;
    if (forwardBackward.getArgAttr(i, "tess.parameter")) {
      parameterElements += elementsOf(type);
    } else if (forwardBackward.getArgAttr(i, "tess.buffer")) {
      FailureOr<int64_t> bytes =
          elementBytes(cast<ShapedType>(type).getElementType());
      if (failed(bytes))
        return forwardBackward.emitError("buffer ") << i << " has an element "
               "type the runtime cannot store";
      memory.bufferBytes += elementsOf(type) * *bytes;
    }
  }
  bool computeIsF32 = true;
  for (unsigned i = 0, e = forwardBackward.getNumResults(); i < e; ++i) {
    if (!forwardBackward.getResultAttr(i, "tess.gradient"))
      continue;
    auto type = cast<ShapedType>(forwardBackward.getResultTypes()[i]);
    FailureOr<int64_t> bytes = elementBytes(type.getElementType());
    if (failed(bytes))
      return forwardBackward.emitError("gradient ") << i << " has an element "
             "type the runtime cannot store";
    memory.gradientBytes += type.getNumElements() * *bytes;
    computeIsF32 &= type.getElementType().isF32();
  }
  memory.masterWeightBytes = 4 * parameterElements;
  memory.optimizerStateBytes = 8 * parameterElements;
  // The driver sums micro-batches in fp32 accumulators; with one micro-batch
  // it reads the step's gradients directly (widening bf16/fp16 to f32 is
  // exact), so no accumulator exists.
  if (microBatches > 1)
    memory.accumulatorBytes = 4 * parameterElements;
  (void)computeIsF32;
  return memory;
}

void printStepMemory(const StepMemory &memory, llvm::raw_ostream &os) {
  auto line = [&](StringRef what, int64_t bytes) {
    os << llvm::formatv("  {0,-38} {1,15} bytes  ({2:F3} GiB)\n", what, bytes,
                        double(bytes) / double(int64_t(1) << 30));
  };
  os << "\nDevice memory of the compiled training step (one device, arena "
        "planned from liveness):\n";
  line("step arena (activations, temporaries)", memory.arenaBytes);
  line("fp32 master weights", memory.masterWeightBytes);
  line("AdamW moments (fp32 m, v)", memory.optimizerStateBytes);
  line("gradients (compute precision)", memory.gradientBytes);
  if (memory.accumulatorBytes)
    line("fp32 gradient accumulators", memory.accumulatorBytes);
  if (memory.bufferBytes)
    line("buffers", memory.bufferBytes);
  os << llvm::formatv("Peak device memory per GPU (predicted): {0:F3} GiB "
                      "(plus the CUDA context and library workspaces)\n",
                      double(memory.totalBytes()) /
                          double(int64_t(1) << 30));
}

} // namespace tessera::lowering
