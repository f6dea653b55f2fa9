//===- MemoryEstimate.cpp - resident state and activation liveness --------===//

#include "tessera/CostModel/MemoryEstimate.h"

#include "Tess/IR/TessOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

#include <algorithm>

using namespace mlir;

namespace tessera::cost {
namespace {

int64_t bytesOf(Type type) {
  auto tensor = llvm::dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.getElementType().isIntOrFloat())
    return 0;
  return tensor.getNumElements() *
         ((tensor.getElementType().getIntOrFloatBitWidth() + 7) / 8);
}

llvm::Error missing(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "memory estimate: " + what +
                                     " (run tess-build-training first)");
}

/// One buffer of @forward_backward: a value and the reshapes viewing it.
struct Buffer {
  int64_t bytes = 0;
  size_t definedAt = 0;
  size_t lastUsedAt = 0;
};

} // namespace

llvm::Expected<MemoryEstimate> estimateTrainingMemory(ModuleOp module) {
  auto forwardBackward = module.lookupSymbol<func::FuncOp>("forward_backward");
  auto optimizerStep = module.lookupSymbol<func::FuncOp>("optimizer_step");
  if (!forwardBackward || forwardBackward.isExternal())
    return missing("the module has no @forward_backward");
  if (!optimizerStep)
    return missing("the module has no @optimizer_step");
  if (!forwardBackward.getBody().hasOneBlock())
    return missing("@forward_backward must have one block");

  MemoryEstimate estimate;
  Block &body = forwardBackward.getBody().front();

  // Arguments: master weights, or inputs and buffers.
  llvm::DenseSet<Value> masterWeights;
  for (BlockArgument argument : body.getArguments()) {
    int64_t bytes = bytesOf(argument.getType());
    if (forwardBackward.getArgAttr(argument.getArgNumber(),
                                   "tess.parameter")) {
      estimate.masterWeights += bytes;
      estimate.trainableElements +=
          llvm::cast<RankedTensorType>(argument.getType()).getNumElements();
      masterWeights.insert(argument);
    } else {
      estimate.inputsAndBuffers += bytes;
    }
  }

  for (BlockArgument argument : optimizerStep.getArguments())
    if (optimizerStep.getArgAttr(argument.getArgNumber(),
                                 "tess.first_moment") ||
        optimizerStep.getArgAttr(argument.getArgNumber(),
                                 "tess.second_moment"))
      estimate.optimizerState += bytesOf(argument.getType());

  // Number the ops; a reshape's result is its input's buffer.
  SmallVector<Operation *> ops;
  llvm::DenseMap<Value, Value> bufferOf;
  auto root = [&](Value value) {
    auto found = bufferOf.find(value);
    return found == bufferOf.end() ? value : found->second;
  };
  for (Operation &op : body) {
    ops.push_back(&op);
    if (auto reshape = llvm::dyn_cast<tess::ReshapeOp>(op))
      bufferOf[reshape.getResult()] = root(reshape.getInput());
  }
  size_t end = ops.size();

  // Resident values of the function: the casts of the master weights to the
  // compute type, and the returned gradients.
  llvm::DenseSet<Value> resident;
  for (Operation *op : ops)
    if (auto cast = llvm::dyn_cast<tess::CastOp>(op))
      if (masterWeights.contains(cast.getInput())) {
        resident.insert(cast.getResult());
        estimate.computeWeights += bytesOf(cast.getType());
      }
  Operation *terminator = body.getTerminator();
  for (auto [index, returned] : llvm::enumerate(terminator->getOperands()))
    if (forwardBackward.getResultAttr(index, "tess.gradient")) {
      estimate.gradients += bytesOf(returned.getType());
      resident.insert(root(returned));
    }

  // Liveness of the other buffers.
  llvm::MapVector<Value, Buffer> buffers;
  for (auto [index, op] : llvm::enumerate(ops)) {
    for (Value operand : op->getOperands()) {
      Value buffer = root(operand);
      auto found = buffers.find(buffer);
      if (found != buffers.end())
        found->second.lastUsedAt =
            op == terminator ? end : std::max(found->second.lastUsedAt, index);
    }
    if (llvm::isa<tess::ReshapeOp>(op))
      continue;
    for (Value result : op->getResults())
      if (!resident.contains(result))
        buffers[result] = {bytesOf(result.getType()), index, index};
  }

  // Live bytes at each op: defined at or before it, last used at or after.
  std::vector<int64_t> change(end + 2, 0);
  for (const auto &entry : buffers) {
    const Buffer &buffer = entry.second;
    change[buffer.definedAt] += buffer.bytes;
    change[buffer.lastUsedAt + 1] -= buffer.bytes;
  }
  int64_t live = 0;
  size_t peakAt = 0;
  for (size_t index = 0; index < end; ++index) {
    live += change[index];
    if (live > estimate.activations) {
      estimate.activations = live;
      peakAt = index;
    }
  }
  if (!ops.empty())
    estimate.peakOpName = ops[peakAt]->getName().getStringRef().str();

  // What the forward keeps for the backward: alive across the loss.
  auto loss = llvm::find_if(
      ops, [](Operation *op) { return llvm::isa<tess::CrossEntropyOp>(op); });
  if (loss != ops.end()) {
    size_t boundary = loss - ops.begin();
    for (const auto &entry : buffers)
      if (entry.second.definedAt < boundary &&
          entry.second.lastUsedAt > boundary)
        estimate.savedForBackward += entry.second.bytes;
  }
  return estimate;
}

} // namespace tessera::cost
