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
/// and makes every read at or after `firstBackward` use the clones.
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
    builder.clone(*op, clones);
  for (Value value : plan.values)
    value.replaceUsesWithIf(clones.lookup(value), [&](OpOperand &use) {
      return !use.getOwner()->isBeforeInBlock(firstBackward);
    });
  // A forward op only the backward read is now dead where it was.
  for (Operation *op : llvm::reverse(plan.ops))
    if (isOpTriviallyDead(op))
      op->erase();
}

void RematerializePass::runOnOperation() {
  ModuleOp module = getOperation();
  // The module's plan decides the mode; the option is for a module without
  // one (tessera-opt).
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
  if (*parsedMode == pipeline::RematMode::None)
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
  std::vector<pipeline::LayerRecomputation> plans;
  for (unsigned unit = 0; unit < units->units.size(); ++unit) {
    const pipeline::ProgramUnit &programUnit = units->units[unit];
    if (programUnit.kind == pipeline::UnitKind::Layer &&
        pattern.match(programUnit.name))
      plans.push_back(
          pipeline::planLayerRecomputation(*units, unit, *parsedMode));
  }
  if (plans.empty()) {
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
