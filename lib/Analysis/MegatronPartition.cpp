//===- MegatronPartition.cpp - which weights Megatron-LM's TP splits ----===//

#include "tessera/Analysis/MegatronPartition.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace tessera {

BlockArgument parameterArgument(Value value) {
  while (auto cast = value.getDefiningOp<tess::CastOp>())
    value = cast.getInput();
  auto argument = llvm::dyn_cast<BlockArgument>(value);
  if (!argument)
    return {};
  auto function =
      llvm::dyn_cast<func::FuncOp>(argument.getOwner()->getParentOp());
  if (!function ||
      !function.getArgAttr(argument.getArgNumber(), "tess.parameter"))
    return {};
  return argument;
}

namespace {

/// What a linear layer's input is made of, traced back through the ops of
/// a Transformer block that keep Megatron's split.
struct BlockTrace {
  SmallVector<tess::LinearOp> linears;
  bool throughAttention = false;
  bool onlyLinears = true;
};

BlockTrace traceBlock(Value input) {
  BlockTrace trace;
  SmallVector<Value> work = {input};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value value = work.pop_back_val();
    if (!seen.insert(value).second)
      continue;
    Operation *producer = value.getDefiningOp();
    if (auto linear = llvm::dyn_cast_or_null<tess::LinearOp>(producer);
        linear && parameterArgument(linear.getWeight())) {
      trace.linears.push_back(linear);
      continue;
    }
    if (producer && isa<tess::AttentionOp>(producer))
      trace.throughAttention = true;
    if (producer &&
        isa<tess::ReshapeOp, tess::TransposeOp, tess::CastOp, tess::GeluOp,
            tess::SiluOp, tess::SwigluOp, tess::PackedSwigluOp, tess::RotaryOp,
            tess::ReluOp, tess::MulOp, tess::AddOp, tess::SubOp, tess::NegOp,
            tess::SliceOp, tess::ConcatOp, tess::SplitOp, tess::AttentionOp>(
            producer)) {
      for (Value operand : producer->getOperands())
        if (llvm::isa<FloatType>(
                llvm::cast<ShapedType>(operand.getType()).getElementType()))
          work.push_back(operand);
      continue;
    }
    // A leaf. Constants and weights (rotary tables) do not matter; anything
    // else means the input is not made of linear layers alone.
    bool weight = false;
    if (auto argument = llvm::dyn_cast<BlockArgument>(value))
      if (auto function = llvm::dyn_cast<func::FuncOp>(
              argument.getOwner()->getParentOp()))
        weight = function.getArgAttr(argument.getArgNumber(),
                                     "tess.parameter") ||
                 function.getArgAttr(argument.getArgNumber(), "tess.buffer");
    if (producer ? !isa<tess::ConstantOp>(producer) : !weight)
      trace.onlyLinears = false;
  }
  return trace;
}

/// Whether every reader of `value` in the forward, through casts, is a
/// lookup of the token ids or reads it as an LM head's weight.
bool readAsVocabulary(Value value, const llvm::DenseSet<Operation *> &forward,
                      const llvm::DenseSet<Operation *> &tokenLookups,
                      const llvm::DenseSet<Operation *> &heads) {
  return llvm::all_of(value.getUses(), [&](OpOperand &use) {
    Operation *user = use.getOwner();
    if (!forward.contains(user))
      return true; // the backward follows the forward's layouts
    if (auto cast = llvm::dyn_cast<tess::CastOp>(user))
      return readAsVocabulary(cast.getResult(), forward, tokenLookups, heads);
    if (auto lookup = llvm::dyn_cast<tess::EmbeddingOp>(user))
      return tokenLookups.contains(user) &&
             use.get() == lookup.getTable();
    if (auto head = llvm::dyn_cast<tess::LinearOp>(user))
      return heads.contains(user) && use.get() == head.getWeight();
    return false;
  });
}

/// Whether `weight` is a parameter, or the padded copy of one that
/// tess-build-training's vocabulary padding makes (VocabularyPadding.h: the
/// parameter joined with constant rows or columns).
bool isParameterOrPaddedCopy(Value weight) {
  if (parameterArgument(weight))
    return true;
  auto concat = weight.getDefiningOp<tess::ConcatOp>();
  return concat && concat.getInputs().size() == 2 &&
         parameterArgument(concat.getInputs()[0]) &&
         concat.getInputs()[1].getDefiningOp<tess::ConstantOp>();
}

/// The linear whose result `logits` is, through reshapes and casts, when
/// its weight is a parameter or its padded copy.
tess::LinearOp headOf(Value logits) {
  while (Operation *producer = logits.getDefiningOp()) {
    if (auto linear = llvm::dyn_cast<tess::LinearOp>(producer))
      return isParameterOrPaddedCopy(linear.getWeight()) ? linear
                                                         : tess::LinearOp();
    if (!llvm::isa<tess::ReshapeOp, tess::CastOp>(producer))
      return {};
    logits = producer->getOperand(0);
  }
  return {};
}

} // namespace

MegatronPartition megatronPartition(func::FuncOp step) {
  MegatronPartition partition;
  auto addSplit = [&](Value weight) {
    if (BlockArgument argument = parameterArgument(weight))
      partition.splitArguments.insert(argument.getArgNumber());
  };
  llvm::DenseSet<Operation *> tokenLookups, forward;
  SmallVector<tess::EmbeddingOp> lookups;
  for (Operation &op : step.getBody().front()) {
    if (auto loss = dyn_cast<tess::CrossEntropyOp>(op)) {
      if (tess::LinearOp head = headOf(loss.getLogits())) {
        partition.vocabularyHeads.push_back(head);
        partition.heads.insert(head);
        if (!parameterArgument(head.getWeight()))
          partition.paddedHeads.insert(head);
        addSplit(head.getWeight());
        if (head.getBias())
          addSplit(head.getBias());
      }
      break; // the backward follows
    }
    forward.insert(&op);
    if (auto lookup = dyn_cast<tess::EmbeddingOp>(op)) {
      auto ids = llvm::dyn_cast<BlockArgument>(lookup.getIndices());
      auto role = ids ? step.getArgAttrOfType<StringAttr>(ids.getArgNumber(),
                                                          "tess.input")
                      : StringAttr();
      if (role && role.getValue() == "input_ids" &&
          parameterArgument(lookup.getTable())) {
        tokenLookups.insert(lookup);
        lookups.push_back(lookup);
      }
      continue;
    }
    auto row = dyn_cast<tess::LinearOp>(op);
    if (!row || !parameterArgument(row.getWeight()))
      continue;
    BlockTrace trace = traceBlock(row.getInput());
    if (!trace.throughAttention &&
        (trace.linears.empty() || !trace.onlyLinears))
      continue;
    partition.rows.insert(row);
    addSplit(row.getWeight());
    for (tess::LinearOp column : trace.linears) {
      partition.columns.insert(column);
      addSplit(column.getWeight());
      if (column.getBias())
        addSplit(column.getBias());
    }
    partition.blocks.push_back({row, std::move(trace.linears)});
  }
  for (tess::EmbeddingOp lookup : lookups) {
    BlockArgument table = parameterArgument(lookup.getTable());
    if (!readAsVocabulary(table, forward, tokenLookups, partition.heads))
      continue;
    partition.vocabularyLookups.push_back(lookup);
    partition.lookups.insert(lookup);
    partition.tables.insert(table.getArgNumber());
    partition.splitArguments.insert(table.getArgNumber());
  }
  return partition;
}

} // namespace tessera
