//===- ElementwiseSharding.cpp - sharding labels of elementwise tess ops -===//
//
// Elementwise ops share one label per dim between every operand and the
// result; binary ops and where broadcast, so an operand dim shares the
// result's label only where it is not stretched. The search may split any
// result dim. Ops linear in some operands pass partial sums through them.
// A random op (dropout with a rate) splits only its dim 0: its mask depends
// on an element's global position, and a block of the outermost dim is one
// run of the stream, which the rank draws from its block's first element
// on (`stream_axis`). The gradients of activations and AdamW are
// partitioned (ZeRO's sharded update runs on each rank's shard) but not
// searched: the search plans the forward.
//
//===----------------------------------------------------------------------===//

#include "Labeler.h"

using namespace mlir;
using namespace tessera::tess;
using namespace tessera::tess::sharding;

namespace {

/// An op of one shape. `searched`: the search may split any dim (the
/// gradients and AdamW are partitioned only: the search plans the forward).
ShardingLabels sameShape(Operation *op, bool searched,
                         std::initializer_list<unsigned> linearIn = {}) {
  Labeler labeler(op);
  labeler.sameShape();
  if (linearIn.size())
    labeler.linearIn(linearIn);
  if (searched)
    labeler.offerEveryResultDim();
  return labeler.take();
}

/// An elementwise op the search may split on any dim.
ShardingLabels elementwise(Operation *op,
                           std::initializer_list<unsigned> linearIn = {}) {
  return sameShape(op, /*searched=*/true, linearIn);
}

/// A broadcasting op; the search may split any result dim.
ShardingLabels broadcasting(
    Operation *op,
    std::initializer_list<std::initializer_list<unsigned>> linearGroups = {}) {
  Labeler labeler(op);
  labeler.broadcast();
  for (std::initializer_list<unsigned> group : linearGroups)
    labeler.linearIn(group);
  labeler.offerEveryResultDim();
  return labeler.take();
}

/// An op of one shape the search leaves replicated.
ShardingLabels partitionedOnly(Operation *op,
                               std::initializer_list<unsigned> linearIn = {}) {
  return sameShape(op, /*searched=*/false, linearIn);
}

} // namespace

ShardingLabels NegOp::getShardingLabels() { return elementwise(*this, {0}); }
ShardingLabels CastOp::getShardingLabels() { return elementwise(*this, {0}); }
ShardingLabels AbsOp::getShardingLabels() { return elementwise(*this); }
ShardingLabels ExpOp::getShardingLabels() { return elementwise(*this); }
ShardingLabels LogOp::getShardingLabels() { return elementwise(*this); }
ShardingLabels SqrtOp::getShardingLabels() { return elementwise(*this); }
ShardingLabels RsqrtOp::getShardingLabels() { return elementwise(*this); }
ShardingLabels ReciprocalOp::getShardingLabels() { return elementwise(*this); }
ShardingLabels TanhOp::getShardingLabels() { return elementwise(*this); }
ShardingLabels ErfOp::getShardingLabels() { return elementwise(*this); }
ShardingLabels SigmoidOp::getShardingLabels() { return elementwise(*this); }
ShardingLabels ReluOp::getShardingLabels() { return elementwise(*this); }
ShardingLabels CosOp::getShardingLabels() { return elementwise(*this); }
ShardingLabels SinOp::getShardingLabels() { return elementwise(*this); }
ShardingLabels SiluOp::getShardingLabels() { return elementwise(*this); }
ShardingLabels LogicalNotOp::getShardingLabels() { return elementwise(*this); }
ShardingLabels GeluOp::getShardingLabels() { return elementwise(*this); }
/// silu(gate) * up is linear in up.
ShardingLabels SwigluOp::getShardingLabels() {
  return elementwise(*this, {1});
}

/// The packed halves share the last dim: only the leading dims split.
ShardingLabels PackedSwigluOp::getShardingLabels() {
  Labeler labeler(*this);
  int64_t last = labeler.operand(0).size() - 1;
  labeler.followOperand(0, {}, {0}, {last});
  labeler.offerEveryResultDim();
  return labeler.take();
}

ShardingLabels DropoutOp::getShardingLabels() {
  Labeler labeler(*this);
  if (getRate().convertToDouble() == 0) {
    labeler.sameShape();
  } else if (!labeler.operand(0).empty()) {
    int rows = labeler.fresh(LabelKind::Streamed);
    labeler.operand(0)[0] = rows;
    labeler.result(0)[0] = rows;
    labeler.offer("split dim 0", rows);
  }
  // Linear in x for a fixed mask: a partial sum passes through.
  labeler.linearIn({0});
  return labeler.take();
}

/// dy * f'(x): linear in dy.
ShardingLabels GeluGradOp::getShardingLabels() {
  return partitionedOnly(*this, {1});
}
ShardingLabels SiluGradOp::getShardingLabels() {
  return partitionedOnly(*this, {1});
}
ShardingLabels SwigluGradOp::getShardingLabels() {
  return partitionedOnly(*this, {2});
}
ShardingLabels PackedSwigluGradOp::getShardingLabels() {
  Labeler labeler(*this);
  int64_t last = labeler.operand(0).size() - 1;
  labeler.followOperand(0, {1}, {0}, {last});
  labeler.linearIn({1});
  return labeler.take();
}
/// Elementwise in param, grad, m and v (lr, step and grad_scale are scalars).
ShardingLabels AdamWOp::getShardingLabels() { return partitionedOnly(*this); }

/// Linear in both terms jointly.
ShardingLabels AddOp::getShardingLabels() {
  return broadcasting(*this, {{0, 1}});
}
ShardingLabels SubOp::getShardingLabels() {
  return broadcasting(*this, {{0, 1}});
}
/// Linear in each factor alone.
ShardingLabels MulOp::getShardingLabels() {
  return broadcasting(*this, {{0}, {1}});
}
ShardingLabels DivOp::getShardingLabels() {
  return broadcasting(*this, {{0}});
}
ShardingLabels PowOp::getShardingLabels() { return broadcasting(*this); }
ShardingLabels MaximumOp::getShardingLabels() { return broadcasting(*this); }
ShardingLabels MinimumOp::getShardingLabels() { return broadcasting(*this); }
ShardingLabels CompareOp::getShardingLabels() { return broadcasting(*this); }
ShardingLabels LogicalAndOp::getShardingLabels() {
  return broadcasting(*this);
}
ShardingLabels LogicalOrOp::getShardingLabels() { return broadcasting(*this); }
/// Linear in both branches jointly.
ShardingLabels WhereOp::getShardingLabels() {
  return broadcasting(*this, {{1, 2}});
}
