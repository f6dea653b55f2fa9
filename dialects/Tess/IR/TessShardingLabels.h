//===- TessShardingLabels.h - what the sharding interface answers -*- C++ -*-===//
//
// The value a tess op's ShardingInterface (TessInterfaces.td) returns: the
// op's local rule for SPMD partitioning, in einsum style. Every dim of every
// operand and result gets a label; dims with one label are the same index of
// the computation (a batch dim of the input and the result, the contraction
// dim of a linear layer's input and weight), so splitting all of them over
// one mesh axis lets every rank run the op on its blocks. A dim labeled
// kWhole must stay whole (a normalized dim, the axis of a softmax, a
// broadcast size-1 dim).
//
// The intra-op search (lib/Sharding/ShardingStrategy), the partition rewrite
// (lib/Transforms/Partition/LayoutChoice) and the pipeline's per-stage costs
// (lib/Pipeline/UnitProfile) all read this one answer, so the layouts the
// search prices are the layouts the partitioner builds and the costs the
// pipeline search charges.
//
// Upstream's shard::ShardingInterface (loop iterator types plus indexing
// maps) is the model; it is not used directly because it cannot say what
// this needs: averaged rows (the loss's, combined by counted targets), ops
// linear in a group of operands (partial sums passing through an add), a
// dim indexed by another operand's values (the embedding's vocabulary) and
// one cut into pieces (a split's axis), and partial sums in a layout.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_TESS_TESSSHARDINGLABELS_H
#define TESSERA_DIALECT_TESS_TESSSHARDINGLABELS_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace tessera::tess {

constexpr int kWhole = -1;

/// What a label is to the op: how it may be split.
enum class LabelKind {
  /// An index of independent samples or rows (a linear layer's tokens, a
  /// matmul's batch, attention's batch): split, each rank runs its rows.
  Batch,
  /// Any other index the results have (a linear layer's output features,
  /// attention heads, an elementwise op's dims).
  Parallel,
  /// Multiplied and summed over (a GEMM's K). Linear and matmul sum it into
  /// the result: split, each rank holds a partial sum. Attention's are
  /// inside its softmax: never split (not in `summed`).
  Contracted,
  /// Summed by a reduction or a gradient (reduce_sum's dims, the rows of a
  /// weight gradient): split, each rank holds a partial sum.
  Reduced,
  /// Averaged into the result (the cross-entropy's rows): split, each rank
  /// holds the mean of its rows, combined weighted by the counted targets.
  Averaged,
  /// Indexed by another operand's values (the embedding's vocabulary rows):
  /// split, a rank finds the rows it holds and zeros elsewhere, so the
  /// result is a partial sum but every rank still looks up every index (the
  /// work is not divided). The partition rewrite marks the op's rows_axis
  /// and its kernels look up (the gradient: add into) the rank's block of
  /// rows only (Megatron's VocabParallelEmbedding).
  Indexed,
  /// The axis a split cuts into pieces (or a concat joins): split, each rank
  /// holds its 1/n of every piece, which is the tensor's block only when
  /// everything that reads or writes the dim lays it out piece by piece
  /// (Megatron's fused QKV: the weight's columns q0 k0 v0 | q1 k1 v1). The
  /// search offers a split's; the partition rewrite splits it only on an
  /// op marked `tess.piece_major` (AnnotateFromPlan marks those whose whole
  /// region it found piece-major, PieceMajorRegion.h), else keeps it whole.
  Pieced,
  /// The classes of a cross-entropy (its logits' last dim): split, each
  /// rank holds the logits of its block of the classes. The op reduces them
  /// inside its softmax, so the partition rewrite computes it as Megatron's
  /// vocabulary-parallel cross-entropy: each row's maximum, exponent sum and
  /// target logit all-reduced over the axis, the loss whole on every rank
  /// and the gradient split as the logits are
  /// (lib/Transforms/Partition/VocabularyParallelLoss.h). Only a producer's
  /// split reaches it (a vocabulary-parallel LM head); the search offers
  /// none.
  Classes,
  /// A dim of a random op's stream whose blocks begin at fixed offsets of
  /// the stream (a dropout's dim 0; attention's batch and heads with
  /// dropout, whose index has a fixed head stride): split, each rank's
  /// kernels draw from the stream advanced to its block's first element
  /// (the op's `stream_axis`, an attention's `head_stream_axis`, set by the
  /// partition rewrite), so the masks are the unsplit op's.
  Streamed,
};

/// The name of `kind` as the test pass prints it ("batch", "parallel", ...).
llvm::StringRef stringifyLabelKind(LabelKind kind);

/// What a named split means to a pass that reasons about layers rather than
/// dims (Megatron-LM's tensor-parallel recipe in UnitProfile).
enum class SplitRole {
  Other,
  /// A linear layer's output features (its weight's columns).
  ColumnParallel,
  /// A linear layer's input features (its weight's rows): the result is a
  /// partial sum. The op's activation is its first operand.
  RowParallel,
  /// The embedding table's rows (an Indexed label).
  VocabularyParallel,
  /// Attention heads: a tensor-parallel degree must divide each head count.
  Heads,
};

/// One way the intra-op search may split the op over a mesh axis: every dim
/// with `label` split, a result the label is summed into partial.
struct NamedSplit {
  /// What plans and reports print: "column-parallel", "split dim 0", ...
  std::string name;
  int label = kWhole;
  SplitRole role = SplitRole::Other;
};

struct ShardingLabels {
  /// Per operand (op->getOperands() order) and per result: one label per
  /// dim. Non-tensor values get an empty list.
  llvm::SmallVector<llvm::SmallVector<int, 4>, 4> operands, results;
  /// Per label (labels are 0, 1, ...): its kind.
  llvm::SmallVector<LabelKind, 8> kinds;
  /// Per result: the labels the op sums into it.
  llvm::SmallVector<llvm::SmallVector<int, 2>, 3> summed;
  /// Labels averaged into result 0 (the cross-entropy's rows).
  llvm::SmallVector<int, 2> averaged;
  /// Operands added to a summed product (a linear layer's bias): when a
  /// summed label is split, they must be partial sums too.
  llvm::SmallVector<unsigned, 1> addedToSum;
  /// Groups of operands the op is jointly linear in: partial sums over one
  /// axis in every operand of a group pass through to the results.
  llvm::SmallVector<llvm::SmallVector<unsigned, 3>, 2> linearGroups;
  /// The splits the intra-op search offers, in the order it lists them.
  /// Ops without any run replicated in the search.
  llvm::SmallVector<NamedSplit, 4> splits;
  /// The search also offers "partial sum": every operand and result a
  /// partial sum over the axis (a view of a linear op: reshape, transpose).
  bool searchesPartialSums = false;
  /// The op carries `tess.piece_major`: its pieced labels are partitionable
  /// (each rank's block of its pieced dim is its 1/n of every piece).
  bool pieceMajor = false;

  /// Every label used, ascending.
  llvm::SmallVector<int> labels() const;
  /// Whether `label` is in some result.
  bool inResults(int label) const;
  bool isSummed(int label) const;
  LabelKind kindOf(int label) const { return kinds[label]; }
  /// Whether the partition rewrite may split `label`: not an indexed or
  /// positional one, nor a pieced one unless the op is pieceMajor (see
  /// LabelKind).
  bool isPartitionable(int label) const;
  /// The split with `role`, or null.
  const NamedSplit *splitWithRole(SplitRole role) const;
  /// The size of the first dim labeled `label` (operands, then results), or
  /// 0 when none is.
  int64_t sizeOf(mlir::Operation *op, int label) const;
};

/// The labels of `op`: its ShardingInterface's answer, or every dim kWhole
/// (run replicated: always correct) for an op without the interface.
ShardingLabels shardingLabels(mlir::Operation *op);

/// The attribute that marks a split or concat whose pieced dim is laid out
/// piece by piece: the mesh axis's name (StringAttr).
inline constexpr llvm::StringLiteral kPieceMajorAttrName = "tess.piece_major";

} // namespace tessera::tess

#endif // TESSERA_DIALECT_TESS_TESSSHARDINGLABELS_H
