//===- VocabularyParallelLoss.h - the loss over split classes ---*- C++ -*-===//
//
// Internal to tess-partition-spmd. A cross-entropy whose logits arrive split
// over their classes (a vocabulary-parallel LM head: each rank the logits of
// its block of the vocabulary) is computed as Megatron-LM's
// vocab_parallel_cross_entropy computes it, instead of gathering the
// [tokens, vocabulary] logits on every rank: each rank reduces its block of
// every row to its maximum, exponent sum and target logit, and three
// all-reduces of one value a row (max, sum, sum) make them the whole row's.
// The loss, `log(sum) + max - target logit`, is then the unsplit op's on
// every rank; the gradient, `softmax - one-hot`, each rank's block of it.
// The rewrite is made of tess ops every backend has (reductions,
// elementwise, shard_slice of the class ids, all_reduce), so the
// interpreter, the lowering and the arena planner see the same program.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_TRANSFORMS_PARTITION_VOCABULARYPARALLELLOSS_H
#define TESSERA_LIB_TRANSFORMS_PARTITION_VOCABULARYPARALLELLOSS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace tessera::partition {

/// What the gradient reads of the loss's rows, as Megatron-LM's
/// vocab_parallel_cross_entropy saves it for its backward: this rank's
/// block of every row's softmax (f32), which of its classes is the row's
/// target, and which rows count.
struct VocabularyParallelRows {
  mlir::Value softmax;  ///< f32, [rows..., local classes]
  mlir::Value isTarget; ///< i1, [rows..., local classes]
  mlir::Value counted;  ///< f32 0/1, [rows..., 1]
  mlir::Value count;    ///< f32 scalar: this rank's counted rows, at least 1
};

/// The rows of `logits` (the rank's block of `classes` classes along mesh
/// axis `axis`, its local type) against `targets` (global class ids; rows
/// whose target is `ignoreIndex` do not count).
VocabularyParallelRows vocabularyParallelRows(mlir::OpBuilder &builder,
                                              mlir::Location location,
                                              mlir::Value logits,
                                              mlir::Value targets,
                                              int64_t ignoreIndex,
                                              llvm::StringRef axis,
                                              int64_t classes);

/// The mean loss over this rank's rows, as tess.cross_entropy defines it
/// (no counted row gives 0), from the same operands; `rows` is set to
/// what its gradient reads.
mlir::Value vocabularyParallelLoss(mlir::OpBuilder &builder,
                                   mlir::Location location, mlir::Value logits,
                                   mlir::Value targets, int64_t ignoreIndex,
                                   llvm::StringRef axis, int64_t classes,
                                   VocabularyParallelRows &rows);

/// tess.cross_entropy_grad's result for `rows` and `dloss`: the rank's
/// block of the logits' gradient, of type `logitsType`. Every op of it
/// reads `dloss`, so it runs in the backward (ProgramUnits).
mlir::Value vocabularyParallelLossGradient(mlir::OpBuilder &builder,
                                           mlir::Location location,
                                           const VocabularyParallelRows &rows,
                                           mlir::Value dloss,
                                           mlir::Type logitsType);

} // namespace tessera::partition

#endif // TESSERA_LIB_TRANSFORMS_PARTITION_VOCABULARYPARALLELLOSS_H
