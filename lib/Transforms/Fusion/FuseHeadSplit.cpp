//===- FuseHeadSplit.cpp - tess-fuse-head-split ---------------------------===//
//
// GPT-2 (and any fused-QKV model) computes qkv = x W with [B, T, 3D], splits
// it along the last dim, views each piece as [B, T, H, Dh] and transposes it
// to the [B, H, T, Dh] the attention reads. Each piece of that split is a
// strided block of qkv, so the split is three copies, and the transposes
// three more: on an H200 the copies alone cost 1.1 ms of GPT-2 124M's step.
// Viewing qkv as [B, T, 3, H, Dh] and transposing it once with the new dim
// first ([3, B, H, T, Dh]) moves the same bytes as the three transposes, and
// what is left is a split along the outermost dim, whose pieces are
// contiguous: the arena planner makes them views (no copy at all).
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "Tess/IR/TessOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera {
#define GEN_PASS_DEF_FUSEHEADSPLIT
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

/// The op of `value`'s one use, if it has exactly one and it is an OpTy.
template <typename OpTy> OpTy onlyUser(Value value) {
  if (!value.hasOneUse())
    return {};
  return llvm::dyn_cast<OpTy>(*value.getUsers().begin());
}

/// Rewrites `split` when every piece goes through one reshape that splits
/// its last dim in two and then one transpose, all alike; returns whether it
/// did.
bool fuseHeadSplit(tess::SplitOp split) {
  auto inputType = llvm::cast<RankedTensorType>(split.getInput().getType());
  int64_t rank = inputType.getRank();
  // The attribute is signed (C1: [-rank, rank)).
  auto axis = static_cast<int64_t>(split.getAxis());
  if (axis < 0)
    axis += rank;
  ArrayRef<int64_t> sizes = split.getSizes();
  if (axis != rank - 1 || sizes.size() < 2 ||
      !llvm::all_equal(sizes) || !inputType.hasStaticShape())
    return false;
  SmallVector<tess::ReshapeOp> views;
  SmallVector<tess::TransposeOp> transposes;
  for (Value piece : split.getResults()) {
    auto view = onlyUser<tess::ReshapeOp>(piece);
    auto transpose = view ? onlyUser<tess::TransposeOp>(view.getResult())
                          : tess::TransposeOp();
    if (!transpose)
      return false;
    views.push_back(view);
    transposes.push_back(transpose);
  }
  auto viewType = llvm::cast<RankedTensorType>(views[0].getResult().getType());
  ArrayRef<int64_t> permutation = transposes[0].getPermutation();
  // Each piece viewed as [..., H, Dh] with the leading dims kept.
  if (viewType.getRank() != rank + 1 ||
      viewType.getShape().take_front(axis) !=
          inputType.getShape().take_front(axis) ||
      viewType.getShape()[axis] * viewType.getShape()[axis + 1] != sizes[0])
    return false;
  for (auto [view, transpose] : llvm::zip_equal(views, transposes))
    if (view.getResult().getType() != viewType ||
        transpose.getPermutation() != permutation)
      return false;

  OpBuilder builder(split);
  Location loc = split.getLoc();
  int64_t count = static_cast<int64_t>(sizes.size());
  // qkv as [..., N, H, Dh], then the N pieces' transposes with N first.
  SmallVector<int64_t> packedShape(inputType.getShape().take_front(axis));
  packedShape.push_back(count);
  packedShape.append(viewType.getShape().begin() + axis,
                     viewType.getShape().end());
  Value packed = tess::ReshapeOp::create(
      builder, loc,
      RankedTensorType::get(packedShape, inputType.getElementType()),
      split.getInput());
  SmallVector<int64_t> packedPermutation = {axis};
  for (int64_t dim : permutation)
    packedPermutation.push_back(dim < axis ? dim : dim + 1);
  Value transposed =
      tess::TransposeOp::create(builder, loc, packed, packedPermutation);
  auto outer = tess::SplitOp::create(builder, loc, transposed, /*axis=*/0,
                                     SmallVector<int64_t>(count, 1));
  for (auto [index, transpose] : llvm::enumerate(transposes)) {
    Value piece = tess::ReshapeOp::create(builder, loc, transpose.getType(),
                                          outer.getResult(index));
    transpose.getResult().replaceAllUsesWith(piece);
    transpose.erase();
    views[index].erase();
  }
  split.erase();
  return true;
}

struct FuseHeadSplitPass
    : tessera::impl::FuseHeadSplitBase<FuseHeadSplitPass> {
  void runOnOperation() override {
    SmallVector<tess::SplitOp> splits;
    getOperation().walk([&](tess::SplitOp split) { splits.push_back(split); });
    for (tess::SplitOp split : splits)
      fuseHeadSplit(split);
  }
};

} // namespace
