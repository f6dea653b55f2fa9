//===- OpDimLabels.h - how an op's dims correspond, for sharding -*- C++ -*-===//
//
// Each op's local rule for SPMD partitioning, in einsum style: every dim of
// every operand and result gets a label. Dims with one label are the same
// index of the computation (a batch dim of the input and the result, the
// contraction dim of a linear layer's input and weight), so splitting them
// all over one mesh axis lets every rank run the op on its blocks. A dim
// labeled kWhole must stay whole (a normalized dim, the axis of a softmax or
// a split, a broadcast size-1 dim).
//
// A label that is in no result is either summed by the op (a linear layer's
// `in`, a reduce_sum's dims, the rows of a weight gradient): splitting it
// leaves each rank a partial sum of the result; or averaged (the rows of
// the cross-entropy): splitting it leaves each rank the mean of its rows,
// which the partitioner combines weighted by the counted targets; or kWhole.
//
// An op that is linear in a group of operands jointly (add in both, a
// linear layer in its input and bias) passes partial sums through when all
// operands of the group are partial over the same axis.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TRANSFORMS_PARTITION_OPDIMLABELS_H
#define TESSERA_TRANSFORMS_PARTITION_OPDIMLABELS_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

namespace tessera::partition {

constexpr int kWhole = -1;

struct OpDimLabels {
  /// Per operand (op->getOperands() order) and per result: one label per
  /// dim. Non-tensor values get an empty list.
  llvm::SmallVector<llvm::SmallVector<int, 4>, 4> operands, results;
  /// Per result: the labels the op sums into it.
  llvm::SmallVector<llvm::SmallVector<int, 2>, 3> summed;
  /// Labels averaged into result 0 (the cross-entropy's rows).
  llvm::SmallVector<int, 2> averaged;
  /// Operands added to a summed product (a linear layer's bias): when a
  /// summed label is split, they must be partial sums too.
  llvm::SmallVector<unsigned, 1> addedToSum;
  /// Groups of operands the op is jointly linear in.
  llvm::SmallVector<llvm::SmallVector<unsigned, 3>, 2> linearGroups;

  /// Every label used, ascending.
  llvm::SmallVector<int> labels() const;
  /// Whether `label` is in some result.
  bool inResults(int label) const;
  bool isSummed(int label) const;
};

/// The labels of `op`. Ops this file does not know get every dim kWhole (run
/// replicated: always correct), as do random ops (dropout, attention with
/// dropout), whose masks depend on an element's global position.
OpDimLabels dimLabels(mlir::Operation *op);

} // namespace tessera::partition

#endif // TESSERA_TRANSFORMS_PARTITION_OPDIMLABELS_H
