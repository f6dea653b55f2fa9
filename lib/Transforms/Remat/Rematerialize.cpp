//===- Rematerialize.cpp - recompute layer activations in the backward ----===//
//
// tess-rematerialize: the program transformation behind the pipeline
// planner's remat choice (lib/Pipeline/Remat.h decides which values; this
// pass clones their producers into the backward and reroutes the backward's
// reads to the clones).
//
//===----------------------------------------------------------------------===//

#include "tessera/Pipeline/ProgramUnits.h"
#include "tessera/Pipeline/Remat.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Regex.h"

namespace tessera {
#define GEN_PASS_DEF_REMATERIALIZE
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

struct RematerializePass
    : tessera::impl::RematerializeBase<RematerializePass> {
  using RematerializeBase::RematerializeBase;

  void runOnOperation() override;
};

/// The first op at or after `firstBackward` that reads one of `values`.
Operation *firstBackwardReader(ArrayRef<Value> values,
                               Operation *firstBackward) {
  Operation *first = nullptr;
  for (Value value : values)
    for (Operation *user : value.getUsers())
      if (!user->isBeforeInBlock(firstBackward) &&
          (!first || user->isBeforeInBlock(first)))
        first = user;
  return first;
}

/// Clones the plan's ops before the backward's first reader of its values
/// and makes every read at or after `firstBackward` use the clones, each
/// marked `tess.recomputed` (tess-split-pipeline-stages puts it in its
/// stage's backward: by its operands alone it is a forward op).
void recompute(const pipeline::LayerRecomputation &plan,
               Operation *firstBackward) {
  if (plan.values.empty())
    return;
  Operation *insertionPoint = firstBackwardReader(plan.values, firstBackward);
  if (!insertionPoint)
    return;
  OpBuilder builder(insertionPoint);
  IRMapping clones;
  for (Operation *op : plan.ops)
    builder.clone(*op, clones)
        ->setAttr("tess.recomputed", builder.getUnitAttr());
  for (Value value : plan.values)
    value.replaceUsesWithIf(clones.lookup(value), [&](OpOperand &use) {
      return !use.getOwner()->isBeforeInBlock(firstBackward);
    });
  // A forward op only the backward read is now dead where it was.
  for (Operation *op : llvm::reverse(plan.ops))
    if (isOpTriviallyDead(op))
      op->erase();
}

/// The mode of each program unit: the plan's chunk's that holds it (the
/// pipeline search's per stage), else `planMode`.
std::vector<pipeline::RematMode> unitModes(tess::PlanAttr plan,
                                           pipeline::RematMode planMode,
                                           size_t unitCount) {
  std::vector<pipeline::RematMode> modes(unitCount, planMode);
  if (!plan)
    return modes;
  for (tess::ChunkAttr chunk : plan.getChunks()) {
    if (chunk.getRemat().empty())
      continue;
    // The attribute's verifier (C3) admits the three modes only.
    pipeline::RematMode chunkMode = *pipeline::parseRematName(chunk.getRemat());
    for (int64_t unit = chunk.getFirst();
         unit <= chunk.getLast() && unit < static_cast<int64_t>(unitCount);
         ++unit)
      modes[static_cast<size_t>(unit)] = chunkMode;
  }
  return modes;
}

void RematerializePass::runOnOperation() {
  ModuleOp module = getOperation();
  // The module's plan decides the mode (its chunks', where they say one);
  // the option is for a module without one (tessera-opt).
  tess::PlanAttr plan = tess::PlanAttr::lookup(module);
  std::string modeName = plan ? plan.getRemat().str() : std::string(mode);
  std::optional<pipeline::RematMode> parsedMode =
      pipeline::parseRematName(modeName);
  if (!parsedMode) {
    module.emitError() << "tess-rematerialize: mode '" << modeName
                       << "': expected none, selective or full";
    return signalPassFailure();
  }
  llvm::Regex pattern("^(" + layers + ")$");
  std::string regexError;
  if (!pattern.isValid(regexError)) {
    module.emitError() << "tess-rematerialize: layers '" << layers
                       << "': " << regexError;
    return signalPassFailure();
  }
  bool chunkModes =
      plan && llvm::any_of(plan.getChunks(), [](tess::ChunkAttr chunk) {
        return !chunk.getRemat().empty();
      });
  if (*parsedMode == pipeline::RematMode::None && !chunkModes)
    return;

  llvm::Expected<pipeline::ProgramUnits> units =
      pipeline::partitionIntoUnits(module);
  if (!units) {
    module.emitError() << "tess-rematerialize: "
                       << llvm::toString(units.takeError());
    return signalPassFailure();
  }

  // Every plan is made on the program as tess-build-training wrote it, then
  // applied: a plan reads which ops use a value, and the clones of another
  // layer must not count.
  std::vector<pipeline::RematMode> modes =
      unitModes(plan, *parsedMode, units->units.size());
  std::vector<pipeline::LayerRecomputation> plans;
  bool matched = false;
  for (unsigned unit = 0; unit < units->units.size(); ++unit) {
    const pipeline::ProgramUnit &programUnit = units->units[unit];
    if (programUnit.kind != pipeline::UnitKind::Layer ||
        !pattern.match(programUnit.name))
      continue;
    matched = true;
    if (modes[unit] != pipeline::RematMode::None)
      plans.push_back(
          pipeline::planLayerRecomputation(*units, unit, modes[unit]));
  }
  if (!matched) {
    units->forwardBackward.emitError()
        << "tess-rematerialize: layers '" << layers
        << "' matches none of the " << units->layerCount()
        << " layers (keys " << units->units[1].name << " to "
        << units->units[units->layerCount()].name << ")";
    return signalPassFailure();
  }

  Operation *firstBackward = nullptr;
  for (Operation &op : units->forwardBackward.getBody().front())
    if (units->isBackward.lookup(&op)) {
      firstBackward = &op;
      break;
    }
  if (!firstBackward)
    return;
  for (const pipeline::LayerRecomputation &plan : plans)
    recompute(plan, firstBackward);
}

} // namespace
