//===- ArenaPlanning.cpp - static arena for a step's intermediates -------===//
//
// Greedy-by-size placement (largest block first, each at the lowest gap
// that fits among the blocks live at the same time) is the usual offline
// heuristic for this interval-packing problem; on Transformer steps, where a
// few activation sizes repeat, it lands close to the peak of live bytes.
//
//===----------------------------------------------------------------------===//

#include "tessera/Analysis/ArenaPlanning.h"

#include "Tess/IR/TessOps.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <numeric>

using namespace mlir;

namespace tessera {

namespace {

int64_t alignUp(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

bool overlapInTime(const ArenaRequest &a, const ArenaRequest &b) {
  return a.first <= b.last && b.first <= a.last;
}

} // namespace

ArenaLayout packArena(ArrayRef<ArenaRequest> requests, int64_t alignment) {
  ArenaLayout layout;
  layout.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].bytes > requests[b].bytes;
  });

  std::vector<size_t> placed;
  for (size_t index : order) {
    const ArenaRequest &request = requests[index];
    if (request.bytes == 0)
      continue;
    // The blocks this one must avoid, by offset.
    std::vector<size_t> conflicts;
    for (size_t other : placed)
      if (overlapInTime(request, requests[other]))
        conflicts.push_back(other);
    llvm::sort(conflicts, [&](size_t a, size_t b) {
      return layout.offsets[a] < layout.offsets[b];
    });
    int64_t offset = 0;
    for (size_t other : conflicts) {
      if (offset + request.bytes <= layout.offsets[other])
        break;
      offset = std::max(
          offset, alignUp(layout.offsets[other] + requests[other].bytes,
                          alignment));
    }
    layout.offsets[index] = offset;
    layout.totalBytes =
        std::max(layout.totalBytes, alignUp(offset + request.bytes, alignment));
    placed.push_back(index);
  }
  return layout;
}

FailureOr<int64_t> elementBytes(Type elementType) {
  if (elementType.isInteger(1))
    return 1;
  if (elementType.isIntOrFloat() && elementType.getIntOrFloatBitWidth() % 8 == 0)
    return elementType.getIntOrFloatBitWidth() / 8;
  return failure();
}

/// A split whose pieces are contiguous blocks of its input: every dim
/// before the split axis is 1.
static bool isContiguousSplit(Operation &op) {
  auto split = dyn_cast<tess::SplitOp>(op);
  if (!split)
    return false;
  auto type = cast<RankedTensorType>(split.getInput().getType());
  // The attribute is signed (C1: [-rank, rank)).
  auto axis = static_cast<int64_t>(split.getAxis());
  if (axis < 0)
    axis += type.getRank();
  return llvm::all_of(type.getShape().take_front(axis),
                      [](int64_t dim) { return dim == 1; });
}

/// The operand whose bytes the kernels of `op` may overwrite with result
/// `result` (each element read before it is written, by whoever writes
/// it), or null. tess.cross_entropy_grad's dlogits over its logits: the
/// largest tensor of a large-vocabulary step (16384 x 128256 bf16 is
/// 4.2 GB) need not exist twice.
static Value inPlaceOperand(Operation &op, OpResult result) {
  if (auto grad = dyn_cast<tess::CrossEntropyGradOp>(op))
    if (grad.getLogits().getType() == result.getType())
      return grad.getLogits();
  if (auto loss = dyn_cast<tess::CrossEntropyWithGradOp>(op))
    if (result == loss.getDlogits())
      return loss.getLogits();
  // A matmul_add's partial sum, the GEMM's C, which it reads element by
  // element as it writes D: a weight gradient summed over blocks of rows
  // (tess-chunk-loss-head) is one buffer, not one per block.
  if (auto matmul = dyn_cast<tess::MatmulAddOp>(op))
    return matmul.getAddend();
  // A rotation reads each pair of x whole before writing it (both
  // backends): a packed q/k/v rotated in place leaves its value heads
  // where they are instead of copying them, and no second q/k/v-sized
  // buffer exists.
  // The packed SwiGLU gradient writes dgate and dup where it read gate and
  // up (both backends): the packed activation's [.., 2F] buffer becomes the
  // gradient the packed projection's backward GEMMs read.
  if (auto grad = dyn_cast<tess::PackedSwigluGradOp>(op))
    return grad.getInput();
  if (auto rotary = dyn_cast<tess::RotaryOp>(op))
    if (rotary.getInput().getType() == result.getType())
      return rotary.getInput();
  return {};
}

Value FunctionArenaPlan::resolveAlias(Value value) const {
  for (;;) {
    auto it = storage.find(value);
    if (it == storage.end() || it->second.kind != StorageKind::Alias)
      return value;
    value = it->second.aliasOf;
  }
}

int64_t FunctionArenaPlan::bytesWithoutReuse() const {
  int64_t sum = 0;
  for (const ArenaRequest &request : buffers)
    sum += alignUp(request.bytes, kArenaAlignment);
  return sum;
}

FailureOr<FunctionArenaPlan> planFunctionArena(func::FuncOp function) {
  FunctionArenaPlan plan;
  if (!function.getBody().hasOneBlock())
    return function.emitError("arena planning needs a function of one block");
  Block &body = function.getBody().front();
  auto returnOp = dyn_cast<func::ReturnOp>(body.getTerminator());
  if (!returnOp)
    return function.emitError("arena planning needs a func.return terminator");

  for (BlockArgument argument : function.getArguments())
    plan.storage[argument] = {StorageKind::Argument, argument.getArgNumber(),
                              {}};

  // Results written straight into the caller's storage: op results that are
  // returned exactly once (a value returned twice needs two copies).
  llvm::DenseMap<Value, unsigned> returnCount;
  for (Value value : returnOp.getOperands())
    ++returnCount[value];
  llvm::DenseMap<Value, unsigned> outputOf;
  for (auto [index, value] : llvm::enumerate(returnOp.getOperands()))
    if (returnCount[value] == 1 && llvm::isa<OpResult>(value) &&
        !isa<tess::ReshapeOp>(value.getDefiningOp()))
      outputOf[value] = index;
  // A returned reshape is the same bytes as the value it views: that value
  // is written into the reshape's output (when it is not returned itself
  // and no other returned reshape of it took it first), instead of living
  // in the arena until the return copies it out. A pipeline chunk's forward
  // returns most of its saved activations so, as the [tokens, features]
  // rows its backward's GEMMs read.
  for (auto [index, value] : llvm::enumerate(returnOp.getOperands())) {
    if (returnCount[value] != 1 || !llvm::isa<OpResult>(value))
      continue;
    Value source = value;
    while (auto reshape = source.getDefiningOp<tess::ReshapeOp>())
      source = reshape.getOperand();
    if (source == value || !llvm::isa<OpResult>(source) ||
        returnCount.lookup(source) != 0 || outputOf.count(source))
      continue;
    outputOf[source] = index;
  }

  // Positions (one op, one call: tess-fuse-epilogues made each pair the
  // kernels compute together one op), then per storage root the last
  // position it is needed at.
  llvm::DenseMap<Operation *, int64_t> position;
  int64_t next = 0;
  for (Operation &op : body)
    position[&op] = next++;

  // Per value, the last position that reads it (the return included);
  // per storage root, the values that share its bytes. An op may write a
  // result over an operand's storage only when no value of that storage is
  // read after it.
  llvm::DenseMap<Value, int64_t> lastReader;
  for (Operation &op : body)
    for (Value operand : op.getOperands())
      lastReader[operand] = std::max(lastReader.lookup(operand), position[&op]);
  llvm::DenseMap<Value, SmallVector<Value, 2>> sharers;
  auto share = [&](Value result, Value of) {
    Value root = plan.resolveAlias(of);
    sharers[root].push_back(result);
  };
  auto readAfter = [&](Value root, int64_t at) {
    if (lastReader.lookup(root) > at)
      return true;
    return llvm::any_of(sharers.lookup(root), [&](Value value) {
      return lastReader.lookup(value) > at;
    });
  };

  llvm::DenseMap<Value, int64_t> lastUse;
  for (Operation &op : body) {
    if (op.getNumRegions() != 0)
      return op.emitError("arena planning does not support ops with regions");
    // Where the next piece of a contiguous split starts in its input.
    int64_t pieceOffset = 0;
    for (Value result : op.getResults()) {
      auto type = llvm::dyn_cast<RankedTensorType>(result.getType());
      if (!type || !type.hasStaticShape())
        return op.emitError("arena planning needs statically shaped tensor "
                            "results, got ")
               << result.getType();
      if (failed(elementBytes(type.getElementType())))
        return op.emitError("arena planning: unsupported element type ")
               << type.getElementType();
      Value overwritten = inPlaceOperand(op, llvm::cast<OpResult>(result));
      if (overwritten) {
        Value root = plan.resolveAlias(overwritten);
        if (plan.storage.lookup(root).kind != StorageKind::Arena ||
            readAfter(root, position[&op]))
          overwritten = {};
      }
      if (isa<tess::ReshapeOp>(op)) {
        plan.storage[result] = {StorageKind::Alias, 0, op.getOperand(0)};
        share(result, op.getOperand(0));
      } else if (isContiguousSplit(op)) {
        plan.storage[result] = {StorageKind::Alias, 0, op.getOperand(0),
                                pieceOffset};
        share(result, op.getOperand(0));
        pieceOffset += type.getNumElements() * *elementBytes(type.getElementType());
      } else if (overwritten && !outputOf.count(result)) {
        plan.storage[result] = {StorageKind::Alias, 0, overwritten};
        share(result, overwritten);
      } else if (auto it = outputOf.find(result); it != outputOf.end()) {
        plan.storage[result] = {StorageKind::Output, it->second, {}};
      } else {
        plan.storage[result] = {StorageKind::Arena, 0, {}};
        lastUse[result] = position[&op];
      }
    }
    // Every use keeps the storage its operand resolves to alive; the return
    // is a use too (values not written in place are copied out there).
    for (Value operand : op.getOperands()) {
      Value root = plan.resolveAlias(operand);
      auto it = lastUse.find(root);
      if (it != lastUse.end())
        it->second = std::max(it->second, position[&op]);
    }
  }

  for (Operation &op : body)
    for (Value result : op.getResults()) {
      ValueStorage &storage = plan.storage[result];
      if (storage.kind != StorageKind::Arena)
        continue;
      auto type = llvm::cast<RankedTensorType>(result.getType());
      storage.index = plan.buffers.size();
      plan.buffers.push_back({type.getNumElements() *
                                  *elementBytes(type.getElementType()),
                              position[&op], lastUse[result]});
      plan.bufferValues.push_back(result);
    }
  plan.layout = packArena(plan.buffers);
  return plan;
}

void printArenaPlan(const FunctionArenaPlan &plan, llvm::raw_ostream &os) {
  os << "arena: " << plan.buffers.size() << " buffers, "
     << plan.layout.totalBytes << " bytes (" << plan.bytesWithoutReuse()
     << " without reuse)\n";
  for (auto [index, request] : llvm::enumerate(plan.buffers)) {
    os << llvm::formatv("  buffer {0,4}  offset {1,10}  bytes {2,10}  live "
                        "[{3}, {4}]  ",
                        index, plan.layout.offsets[index], request.bytes,
                        request.first, request.last)
       << plan.bufferValues[index].getType() << "\n";
  }
}

} // namespace tessera
