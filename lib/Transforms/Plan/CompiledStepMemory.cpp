//===- CompiledStepMemory.cpp - the step a forward compiles to ---------===//
//
// See CompiledStepMemory.h. The passes run here are the compile phases'
// (tessera/Driver/CompilePhases.h builds its training phase with
// buildTrainingStepPipeline), on a copy in a pass manager of its own: a pass
// that measures the step it would compile leaves its module as it was.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/CompiledStepMemory.h"

#include "tessera/Sharding/PlanAnnotation.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace tessera;

namespace {

/// Runs `passes` on `module`; when they fail without an error of their own,
/// emits `failure` on the module.
LogicalResult runOrSay(PassManager &passes, ModuleOp module,
                       const Twine &failure) {
  bool reported = false;
  {
    ScopedDiagnosticHandler seen(module.getContext(), [&](Diagnostic &diag) {
      reported |= diag.getSeverity() == DiagnosticSeverity::Error;
      // Not handled here: the handler below prints it.
      return mlir::failure();
    });
    if (succeeded(passes.run(module)))
      return success();
  }
  if (!reported)
    module.emitError() << failure;
  return mlir::failure();
}

} // namespace

void tessera::buildTrainingStepPipeline(OpPassManager &pm,
                                        const BuildTrainingOptions &options,
                                        bool packQkv) {
  if (packQkv)
    pm.addNestedPass<func::FuncOp>(createPackQkvProjections());
  buildTrainingPipeline(pm, options);
}

LogicalResult tessera::buildTrainingStep(ModuleOp module,
                                         const CompiledStepOptions &options,
                                         bool packQkv) {
  BuildTrainingOptions training;
  training.loss = options.loss;
  training.precision = options.precision;
  training.vocabularyMultiple = options.vocabularyMultiple;
  PassManager passes(module.getContext());
  buildTrainingStepPipeline(passes, training, packQkv);
  return runOrSay(passes, module, "building the training step failed");
}

FailureOr<StepMemory>
tessera::preparedStepMemory(ModuleOp step, const CompiledStepOptions &options,
                            int64_t microBatches) {
  LoweringPreparationOptions preparation;
  preparation.logitsBlockBytes = options.logitsBlockBytes;
  PassManager passes(step.getContext());
  buildLoweringPreparationPipeline(passes, preparation);
  if (failed(runOrSay(passes, step, "preparing the training step failed")))
    return failure();
  auto forwardBackward = step.lookupSymbol<func::FuncOp>("forward_backward");
  if (!forwardBackward)
    return step.emitError() << "the training step has no @forward_backward";
  FailureOr<StepMemory> memory =
      estimateStepMemory(forwardBackward, microBatches);
  if (failed(memory))
    return step.emitError() << "cannot plan the training step's memory";
  return memory;
}

FailureOr<StepMemory>
tessera::compiledStepMemory(ModuleOp module, pipeline::RematMode remat,
                            const CompiledStepOptions &options,
                            int64_t microBatches) {
  OwningOpRef<ModuleOp> step(module.clone());
  // tess-rematerialize takes a plan's mode over its option.
  (*step)->removeAttr(sharding::kPlanAttrName);
  if (failed(buildTrainingStep(*step, options, /*packQkv=*/true)))
    return failure();
  RematerializeOptions recompute;
  recompute.mode = pipeline::rematName(remat).str();
  PassManager passes(module.getContext());
  passes.addPass(createRematerialize(recompute));
  if (failed(runOrSay(passes, *step,
                      "--remat " + pipeline::rematName(remat) + " failed")))
    return failure();
  return preparedStepMemory(*step, options, microBatches);
}
