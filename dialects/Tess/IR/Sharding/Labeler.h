//===- Labeler.h - building one op's sharding labels ------------*- C++ -*-===//
//
// The recurring shapes of a sharding rule (same labels everywhere, numpy
// broadcasting, following one operand, a normalized trailing block), so
// that each op's getShardingLabels reads as its rule. Private to the
// dialect's implementation.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_TESS_SHARDING_LABELER_H
#define TESSERA_DIALECT_TESS_SHARDING_LABELER_H

#include "Tess/IR/TessOps.h"

namespace tessera::tess::sharding {

/// The shape of a ranked tensor value; empty for anything else.
llvm::ArrayRef<int64_t> shapeOf(mlir::Value value);

/// `axis` in [-rank, rank) of `value` made non-negative (0 if invalid).
int64_t axisOf(int64_t axis, mlir::Value value);

/// The trailing dims [axis, rank) of a norm's input.
llvm::SmallVector<int64_t> trailingDims(int64_t axis, mlir::Value input);

class Labeler {
public:
  explicit Labeler(mlir::Operation *op);

  /// A new label of `kind`.
  int fresh(LabelKind kind = LabelKind::Parallel);
  llvm::SmallVector<int, 4> &operand(unsigned index) {
    return labels.operands[index];
  }
  llvm::SmallVector<int, 4> &result(unsigned index) {
    return labels.results[index];
  }

  /// Every operand and result of result 0's rank the same labels, dim by
  /// dim (elementwise ops whose operands all have the result's shape).
  void sameShape();
  /// Numpy broadcasting: result dims get labels; an operand dim aligned from
  /// the right shares it when the sizes agree (a stretched 1 stays whole).
  void broadcast(unsigned result = 0);
  /// Operand `index` shares the labels of `reference` (of `shape`) where it
  /// aligns from the right with equal sizes.
  void alignRight(unsigned index, llvm::ArrayRef<int> reference,
                  llvm::ArrayRef<int64_t> shape);
  /// Operand `source`, the operands in `operands` and the results in
  /// `results` (those of its rank) take one label per dim of `source`,
  /// except at `whole` dims (normalized dims, a softmax axis). `kind` is the
  /// labels' kind.
  void followOperand(unsigned source, llvm::ArrayRef<unsigned> operands,
                     llvm::ArrayRef<unsigned> results,
                     llvm::ArrayRef<int64_t> whole,
                     LabelKind kind = LabelKind::Parallel);

  void linearIn(std::initializer_list<unsigned> group);
  /// The op is linear in all its operands jointly (add, sub, concat).
  void linearInAll();

  /// The search may split `label`, reported as `name`.
  void offer(llvm::StringRef name, int label,
             SplitRole role = SplitRole::Other);
  /// The search may split each labeled dim of result 0, as "split dim d".
  void offerEveryResultDim();

  ShardingLabels take() { return std::move(labels); }

  mlir::Operation *op;
  ShardingLabels labels;
};

} // namespace tessera::tess::sharding

#endif // TESSERA_DIALECT_TESS_SHARDING_LABELER_H
