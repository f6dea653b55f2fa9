//===- TrainingPipeline.cpp - from the forward function to the step ------===//
//
// The one place that says how the training step is built, for tesserac's
// --target/--emit=cpp/--summary/--explain and the pipeline planner alike.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

void tessera::buildTrainingPipeline(mlir::OpPassManager &pm,
                                    const BuildTrainingOptions &options) {
  pm.addPass(createBuildTraining(options));
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
}
