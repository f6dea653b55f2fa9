//===- WritePlan.cpp - tess-write-plan -------------------------------------===//
//
// The plan as IR: what tesserac decided (from its search or its flags)
// becomes the module's #tess.plan here, in a pass of its own, so that the
// compile's `plan` phase (tessera/Driver/CompilePhases.h) is a step
// tessera-opt can rerun from the text of the plan, and every later pass
// reads the decision from the module rather than from options.
//
//===----------------------------------------------------------------------===//

#include "tessera/Sharding/PlanAnnotation.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/AsmParser/AsmParser.h"

namespace tessera {
#define GEN_PASS_DEF_WRITEPLAN
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

struct WritePlanPass : tessera::impl::WritePlanBase<WritePlanPass> {
  using WritePlanBase::WritePlanBase;
  void runOnOperation() override;
};

} // namespace

void WritePlanPass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *context = &getContext();
  tess::PlanAttr planAttribute = tess::PlanAttr::get(context);
  if (!StringRef(plan).trim().empty()) {
    // The parser reports a text that is no attribute (or breaks a rule of
    // #tess.plan) itself; the error below names the option either way.
    Attribute parsed = parseAttribute(plan, context);
    planAttribute = llvm::dyn_cast_or_null<tess::PlanAttr>(parsed);
    if (!planAttribute) {
      module.emitError() << "tess-write-plan: plan '" << plan
                         << "' is not a #tess.plan<...>";
      return signalPassFailure();
    }
  }
  module->setAttr(sharding::kPlanAttrName, planAttribute);
}
