//===- tessera-opt.cpp - run any Tessera pass on .mlir -------------------===//
//
// Like mlir-opt, with the tess dialect and every Tessera pass registered,
// plus the upstream passes a pipeline of ours uses (canonicalize, cse, ...),
// and tesserac's compile phases as `--tess-phase-<name>` (CompilePhases.h),
// so that any step of a compile reruns on the previous phase's output.
//
//===----------------------------------------------------------------------===//

#include "Tess/IR/TessOps.h"
#include "tessera/Driver/CompilePhases.h"
#include "tessera/Lowering/Passes.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
  tessera::registerTesseraPasses();
  tessera::registerTesseraLoweringPasses();
  tessera::registerCompilePhasePipelines();
  mlir::PassPipelineRegistration<>(
      "tess-import-cleanup",
      "Canonicalize and fuse a freshly imported forward graph",
      tessera::buildImportCleanupPipeline);
  mlir::PassPipelineRegistration<tessera::LoweringPreparationOptions>(
      "tess-lowering-preparation",
      "Prepare a finished training step for the lowering: the chunked loss "
      "head, attention layouts, schedules, and one op per kernel call",
      tessera::buildLoweringPreparationPipeline);

  mlir::DialectRegistry registry;
  registry.insert<tessera::tess::TessDialect, mlir::func::FuncDialect,
                  mlir::emitc::EmitCDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Tessera optimizer driver\n", registry));
}
