//===- LoweringPreparationPipeline.cpp - the step as the lowering takes it -===//
//
// What runs on the finished training step (after autodiff, remat, the
// partition and the stage split) right before the lowering, and before
// --summary plans its memory, so that both plan the same program: passes
// that change only how the step moves its bytes, then the fusions that make
// each kernel call one op. tesserac builds it; tessera-opt names it
// `tess-lowering-preparation`, so any compile's last IR before the lowering
// can be reproduced and inspected.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"

void tessera::buildLoweringPreparationPipeline(
    mlir::OpPassManager &pm, const LoweringPreparationOptions &options) {
  mlir::OpPassManager &function = pm.nest<mlir::func::FuncOp>();
  // The weight gradients as the GEMMs the kernels run, before the rewrites
  // below that take them in that form (the head's blocks, the bias
  // gradient's epilogue).
  function.addPass(createExpandWeightGrads());
  // The loss next to its gradient first: both rewrites of the pair below
  // (the blocks of rows, the fused kernel) take it only then.
  function.addPass(createScheduleLossGradient());
  // The head a block of rows at a time, before the schedules below (its
  // matmul/add pairs are already adjacent).
  ChunkLossHeadOptions chunking;
  chunking.maxBlockBytes = options.logitsBlockBytes;
  function.addPass(createChunkLossHead(chunking));
  // Packed attention first: it takes the fused QKV's split whole, and the
  // head split is left for attentions it does not cover.
  function.addPass(createFusePackedAttention());
  function.addPass(createFuseHeadSplit());
  // The GELU gradients next to their linears, and the sums of input
  // gradients next to their linears, for the fusions below.
  function.addPass(createScheduleGeluGrad());
  function.addPass(createScheduleResidualAdds());
  // An untied embedding table's compute copy is not made: its rows are.
  function.addPass(createLookUpBeforeCast());
  // Every other parameter the step only casts is read as the copy the
  // driver keeps (after the lookup above, so an untied table stays f32
  // and no copy of it is kept).
  function.addPass(createReadComputeCopies());
  // Last: one op per kernel call.
  function.addPass(createFuseEpilogues());
}
