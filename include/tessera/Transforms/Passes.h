//===- Passes.h - Tessera's passes -----------------------------*- C++ -*-===//
#ifndef TESSERA_TRANSFORMS_PASSES_H
#define TESSERA_TRANSFORMS_PASSES_H

#include "Tess/IR/TessOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace tessera {

std::unique_ptr<mlir::Pass> createFuseActivationsPass();
std::unique_ptr<mlir::Pass> createFuseAttentionPass();
std::unique_ptr<mlir::Pass> createFuseLinearPass();
std::unique_ptr<mlir::Pass> createFuseNormsPass();
std::unique_ptr<mlir::Pass> createFuseRotaryPass();

/// Adds the passes that turn a freshly imported forward graph into its
/// Transformer-level form: canonicalize, fuse, canonicalize, CSE.
void buildImportCleanupPipeline(mlir::OpPassManager &pm);

#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "tessera/Transforms/Passes.h.inc"

/// Adds the passes that turn the forward function into the training step:
/// tess-build-training with `options`, then canonicalize and CSE (which a
/// later tess-rematerialize must follow, not precede: CSE would merge its
/// clones back into the forward).
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const BuildTrainingOptions &options);

} // namespace tessera

#endif // TESSERA_TRANSFORMS_PASSES_H
