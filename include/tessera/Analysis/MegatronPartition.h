//===- MegatronPartition.h - which weights Megatron-LM's TP splits -*- C++ -*-===//
//
// Megatron-LM's tensor-parallel partition of a Transformer step, as one rule
// that both its users read, so that what the pipeline's stage model prices
// is what a stage mesh compiles:
// - tess-annotate-sharding's `tp` (every pipeline stage mesh, and
//   `--strategy tp`) seeds its layouts from it;
// - the stage model (tessera/Pipeline/UnitProfile.h) divides the work and
//   the state by the TP degree where it says so, and nowhere else.
//
// The rule, on @forward_backward's forward (the ops before the loss):
// - a block pairs a row-parallel linear (weight split on its input
//   features, result a partial sum) with the column-parallel linears its
//   input is made of (weights and biases split on their output features),
//   traced back through the ops that keep the split: activations,
//   products, reshapes, transposes, rotary arithmetic, attention. A linear
//   whose result reaches no other linear that way (the LM head: its result
//   is the loss's) is in no block and runs whole;
// - the LM head, the linear whose result is the loss's logits, is
//   column-parallel over the vocabulary (each rank the logits of its block
//   of classes), and the loss vocabulary-parallel
//   (lib/Transforms/Partition/VocabularyParallelLoss.h), as Megatron-LM's
//   output layer and vocab_parallel_cross_entropy;
// - a lookup of the token ids in a table the forward reads only in such
//   lookups and as an LM head's weight (an untied embedding, or one tied to
//   the head) is vocabulary-parallel (Megatron's VocabParallelEmbedding:
//   each rank its block of rows, the lookup a partial sum). A head reading
//   the padded copy tess-build-training makes of its weight (GPT-2's
//   50,257 classes padded to 50,304: the parameter joined with constant
//   rows) is split over its classes all the same: each rank takes its
//   block of the copy, and the copy's gradient is gathered whole for the
//   weight, which stays whole (Megatron pads the parameter itself instead).
// Whether the TP degree divides a weight's split dim is the caller's test.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_ANALYSIS_MEGATRONPARTITION_H
#define TESSERA_ANALYSIS_MEGATRONPARTITION_H

#include "Tess/IR/TessOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

#include <vector>

namespace tessera {

/// The `tess.parameter` argument `value` is (through casts to the compute
/// type), or null.
mlir::BlockArgument parameterArgument(mlir::Value value);

/// The vocabulary-parallel loss as tess-partition-spmd builds it (logits
/// split over their classes), per element of a rank's logits: it keeps each
/// row's f32 softmax and a byte of which class is the target for the
/// backward, and holds three f32 blocks of the logits' shape at once (the
/// f32 logits, x - max, exp; in the backward softmax * scale, the target's
/// scale, their difference), in place of the logits in the compute type
/// the fused loss kernel reads.
struct VocabularyParallelLoss {
  static constexpr int64_t kTargetMaskBytesPerElement = 1;
  static constexpr int64_t kKeptBytesPerElement =
      4 + kTargetMaskBytesPerElement;
  static constexpr int64_t kWorkingBytesPerElement = 3 * 4;
};

struct MegatronPartition {
  struct Block {
    tess::LinearOp row;
    llvm::SmallVector<tess::LinearOp> columns;
  };
  /// In program order of their row-parallel linears.
  std::vector<Block> blocks;
  /// The vocabulary-parallel lookups, in program order.
  std::vector<tess::EmbeddingOp> vocabularyLookups;
  /// The LM heads split over the vocabulary (their weights' output
  /// features).
  std::vector<tess::LinearOp> vocabularyHeads;

  bool isColumn(mlir::Operation *op) const { return columns.contains(op); }
  bool isRow(mlir::Operation *op) const { return rows.contains(op); }
  bool isVocabularyParallel(mlir::Operation *op) const {
    return lookups.contains(op);
  }
  bool isVocabularyHead(mlir::Operation *op) const { return heads.contains(op); }
  /// A head whose weight is the padded copy of a parameter, not the
  /// parameter: the copy's block, not a split parameter, is what it reads.
  bool readsPaddedCopy(mlir::Operation *op) const {
    return paddedHeads.contains(op);
  }
  /// The parameter arguments the partition splits (by argument number): the
  /// blocks' weights and column biases, the heads' weights and biases, and
  /// the vocabulary-parallel tables.
  bool splitsParameter(unsigned argument) const {
    return splitArguments.contains(argument);
  }
  bool isVocabularyTable(unsigned argument) const {
    return tables.contains(argument);
  }

  llvm::DenseSet<mlir::Operation *> columns, rows, lookups, heads,
      paddedHeads;
  llvm::DenseSet<unsigned> splitArguments, tables;
};

/// The partition of `step` (@forward_backward of tess-build-training).
MegatronPartition megatronPartition(mlir::func::FuncOp step);

} // namespace tessera

#endif // TESSERA_ANALYSIS_MEGATRONPARTITION_H
