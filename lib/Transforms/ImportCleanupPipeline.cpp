//===- ImportCleanupPipeline.cpp - from imported ONNX to Transformer ops -===//
//
// The importer maps ONNX nodes one to one; this pipeline turns that graph
// into the form every later stage expects: decomposed activations, norms,
// attention and dense layers fused into single ops, no dead or duplicate
// values left.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

void tessera::buildImportCleanupPipeline(mlir::OpPassManager &pm) {
  mlir::OpPassManager &function = pm.nest<mlir::func::FuncOp>();
  function.addPass(mlir::createCanonicalizerPass());
  function.addPass(mlir::createCSEPass());
  function.addPass(createFuseActivationsPass());
  function.addPass(createFuseNormsPass());
  function.addPass(createFuseLinearPass());
  function.addPass(createFuseRotaryPass());
  function.addPass(createFuseAttentionPass());
  function.addPass(mlir::createCanonicalizerPass());
  function.addPass(mlir::createCSEPass());
}
