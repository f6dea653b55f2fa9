//===- Remat.cpp - activation memory and recomputation per remat mode -----===//

#include "tessera/Pipeline/Remat.h"

#include "Tess/IR/TessOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <functional>

namespace tessera::pipeline {

llvm::StringRef rematName(RematMode mode) {
  switch (mode) {
  case RematMode::None:
    return "none";
  case RematMode::Selective:
    return "selective";
  case RematMode::Full:
    return "full";
  }
  return "unknown";
}

std::optional<RematMode> parseRematName(llvm::StringRef name) {
  for (RematMode mode :
       {RematMode::None, RematMode::Selective, RematMode::Full})
    if (rematName(mode) == name)
      return mode;
  return std::nullopt;
}

namespace {

/// What `mode` reads of a unit: `none`'s, `selective`'s or `full`'s.
template <typename T>
const T &byMode(RematMode mode, const T &none, const T &selective,
                const T &full) {
  switch (mode) {
  case RematMode::Selective:
    return selective;
  case RematMode::Full:
    return full;
  case RematMode::None:
    break;
  }
  return none;
}

} // namespace

const TensorBytes &keptActivations(const UnitProfile &unit, RematMode mode) {
  return byMode(mode, unit.savedAll, unit.savedSelective, unit.savedInput);
}

const TensorBytes &backwardWorkingBytes(const UnitProfile &unit,
                                        RematMode mode) {
  return byMode(mode, unit.working, unit.workingSelective,
                unit.workingRecomputing);
}

const std::vector<OpRecord> &recomputedOps(const UnitProfile &unit,
                                           RematMode mode) {
  static const std::vector<OpRecord> none;
  return byMode(mode, none, unit.selectiveRecompute, unit.forward);
}

namespace {

/// A cast of a master weight to the compute precision: part of the
/// parameter, not of the layer's activations.
bool isParameterCast(mlir::Operation *op, mlir::func::FuncOp function) {
  auto cast = llvm::dyn_cast<tess::CastOp>(op);
  if (!cast)
    return false;
  auto argument = llvm::dyn_cast<mlir::BlockArgument>(cast.getInput());
  return argument && argument.getOwner()->getParentOp() == function &&
         function.getArgAttr(argument.getArgNumber(), "tess.parameter");
}

/// Ops whose re-run costs about the bytes of their result: what selective
/// recomputation may repeat.
bool isMemoryBound(mlir::Operation *op) {
  return op->hasTrait<mlir::OpTrait::Elementwise>() ||
         llvm::isa<tess::LayerNormOp, tess::RmsNormOp, tess::RotaryOp, tess::SoftmaxOp,
                   tess::DropoutOp, tess::AddOp, tess::SubOp, tess::MulOp,
                   tess::DivOp, tess::PackedSwigluOp>(op);
}

} // namespace

LayerRecomputation planLayerRecomputation(const ProgramUnits &units,
                                          unsigned unit, RematMode mode) {
  LayerRecomputation plan;
  if (mode == RematMode::None)
    return plan;
  mlir::func::FuncOp function = units.forwardBackward;
  mlir::Block &body = function.getBody().front();
  mlir::Operation *firstBackward = nullptr;
  for (mlir::Operation &op : body)
    if (units.isBackward.lookup(&op)) {
      firstBackward = &op;
      break;
    }
  if (!firstBackward)
    return plan;

  // The layer's forward ops, and which of their values the backward reads
  // or another unit's forward reads.
  llvm::DenseSet<mlir::Operation *> layerOps;
  llvm::SmallVector<mlir::Value> readByBackward;
  llvm::DenseSet<mlir::Value> keptForForward;
  for (mlir::Operation &op : body) {
    if (&op == firstBackward)
      break;
    if (units.unitOf.lookup(&op) != unit || llvm::isa<tess::ConstantOp>(op) ||
        isParameterCast(&op, function))
      continue;
    layerOps.insert(&op);
    for (mlir::Value result : op.getResults()) {
      bool backwardUse = false;
      for (mlir::Operation *user : result.getUsers()) {
        // The loss, returned, is the forward's result, not a saved value.
        if (user == body.getTerminator() ||
            (user->isBeforeInBlock(firstBackward) &&
             units.unitOf.lookup(user) != unit))
          keptForForward.insert(result);
        else if (!user->isBeforeInBlock(firstBackward))
          backwardUse = true;
      }
      if (backwardUse)
        readByBackward.push_back(result);
    }
  }
  auto fromLayer = [&](mlir::Value value) {
    mlir::Operation *producer = value.getDefiningOp();
    return producer && layerOps.contains(producer);
  };

  llvm::DenseSet<mlir::Value> recomputed;
  llvm::DenseSet<mlir::Operation *> cloned;
  // Clones `value`'s producer and, transitively, the layer's ops it needs
  // whose results are not `available` in the backward.
  auto recompute = [&](mlir::Value value,
                       llvm::function_ref<bool(mlir::Value)> available) {
    recomputed.insert(value);
    llvm::SmallVector<mlir::Operation *> work = {value.getDefiningOp()};
    while (!work.empty()) {
      mlir::Operation *op = work.pop_back_val();
      if (!cloned.insert(op).second)
        continue;
      for (mlir::Value operand : op->getOperands())
        if (fromLayer(operand) && !available(operand))
          work.push_back(operand.getDefiningOp());
    }
  };
  if (mode == RematMode::Full) {
    auto kept = [&](mlir::Value value) {
      return keptForForward.contains(value);
    };
    for (mlir::Value value : readByBackward)
      if (!kept(value))
        recompute(value, kept);
  } else {
    // A value the backward can rebuild cheaply: from outside the layer,
    // kept (or recomputed) for the backward, or a memory-bound op's result
    // of such values (the GELU output under a dropout).
    llvm::DenseSet<mlir::Value> read(readByBackward.begin(),
                                     readByBackward.end());
    auto isRead = [&](mlir::Value value) { return read.contains(value); };
    llvm::DenseMap<mlir::Value, bool> rebuildableMemo;
    std::function<bool(mlir::Value)> rebuildable = [&](mlir::Value value) {
      if (!fromLayer(value) || isRead(value))
        return true;
      if (auto found = rebuildableMemo.find(value);
          found != rebuildableMemo.end())
        return found->second;
      mlir::Operation *producer = value.getDefiningOp();
      bool result = isMemoryBound(producer) &&
                    llvm::all_of(producer->getOperands(), rebuildable);
      rebuildableMemo[value] = result;
      return result;
    };
    for (mlir::Value value : readByBackward) {
      mlir::Operation *producer = value.getDefiningOp();
      if (!keptForForward.contains(value) && isMemoryBound(producer) &&
          llvm::all_of(producer->getOperands(), rebuildable))
        recompute(value, isRead);
    }
  }

  for (mlir::Value value : readByBackward)
    if (recomputed.contains(value))
      plan.values.push_back(value);
  for (mlir::Operation &op : body) {
    if (&op == firstBackward)
      break;
    if (cloned.contains(&op))
      plan.ops.push_back(&op);
  }
  return plan;
}

} // namespace tessera::pipeline
