//===- LayoutChoice.h - the layouts one op runs in --------------*- C++ -*-===//
//
// Given the layouts an op's operands arrive in, which layouts it runs in:
// the mesh axis of each of the op's sharding labels (its ShardingInterface,
// Tess/IR/TessShardingLabels.h), from which the layouts the operands must be
// resharded to and the layouts the results leave in follow. Both the forced
// plans (tess-annotate-sharding, which propagates layouts through the whole
// step) and the partitioner (tess-partition-spmd, which rewrites each op to
// its local form) decide with this one function, so an annotation and its
// partition agree.
//
// How labels get axes, first come first served (an axis splits one label;
// every dim of a label must divide by the axis's size):
//  1. `forced` labels (a plan's choice the operands do not show, e.g.
//     attention heads over `tp` when Q/K/V arrive replicated);
//  2. labels in results: from `desiredResults` when given (the partitioner:
//     the plan says how results leave), else from the operands in order (a
//     split operand dim splits its label: propagation);
//  3. summed and averaged labels: from the operands in order.
// Indexed and pieced labels (the embedding's vocabulary, a split's axis)
// stay whole: only the search splits them (LabelKind says why). Streamed
// labels (a random op's dim 0, attention's heads with dropout) split like
// batch ones; tess-partition-spmd then marks the op's stream_axis or
// head_stream_axis.
// Partial sums: an operand partial over an axis passes it to the results
// when the op is linear in a group of operands that are all partial over
// it (and no label uses the axis); otherwise the operand must be completed
// first. A split summed label makes every result it is summed into partial
// over its axis, and an operand added to the sum (a bias) too.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TRANSFORMS_PARTITION_LAYOUTCHOICE_H
#define TESSERA_TRANSFORMS_PARTITION_LAYOUTCHOICE_H

#include "Tess/IR/TessOps.h"

#include "tessera/Sharding/TensorLayout.h"

#include "llvm/ADT/DenseMap.h"

namespace tessera::partition {

struct LayoutChoice {
  /// Per operand: the layout it must be in (empty for non-tensors).
  llvm::SmallVector<sharding::TensorLayout, 4> operands;
  /// Per result: the layout it leaves in.
  llvm::SmallVector<sharding::TensorLayout, 2> results;
  /// Mesh axes that split averaged labels (the cross-entropy's rows).
  llvm::SmallVector<unsigned, 2> averagedAxes;
};

/// `operandsAreLocal`: the operands already have their local types in
/// `operandLayouts` (the partitioner), not the global ones.
LayoutChoice
chooseLayouts(mlir::Operation *op, const tess::ShardingLabels &labels,
              llvm::ArrayRef<sharding::TensorLayout> operandLayouts,
              const cost::DeviceMesh &mesh,
              llvm::ArrayRef<sharding::TensorLayout> desiredResults = {},
              const llvm::DenseMap<int, unsigned> *forced = nullptr,
              bool operandsAreLocal = false);

} // namespace tessera::partition

#endif // TESSERA_TRANSFORMS_PARTITION_LAYOUTCHOICE_H
