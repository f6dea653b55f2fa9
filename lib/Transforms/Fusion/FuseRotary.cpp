//===- FuseRotary.cpp - tess-fuse-rotary ----------------------------------===//
//
// Llama-family exports (Llama, Mistral, Qwen, Gemma, GPT-NeoX, Phi) apply
// the rotary position embedding as `x * cos + rotate_half(x) * sin`, with
// rotate_half(x) = concat(-x[..., h:], x[..., :h]): two slices, a neg, a
// concat, two muls and an add for each of q and k, and about as many again
// in the backward. Each is a full pass over a [B, H, T, D] tensor; in
// Llama 3.2 1B's step they were a sixth of all launches. As one
// tess.rotary, the forward is one pass, and the backward another (the same
// op with `adjoint`, the transposed rotation).
//
// The op leaves cos and sin without gradients, so the chain is fused only
// where they do not depend on a trainable parameter (they are computed from
// the rotary frequencies, a buffer, and positions).
//
//===----------------------------------------------------------------------===//

#include "FusionMatchers.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace tessera {
#define GEN_PASS_DEF_FUSEROTARY
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;
using namespace tessera::fusion;

namespace {

/// `slice` is x[..., first : first + width] of its input along the last dim,
/// every other dim whole, unit strides.
bool isLastDimWindow(tess::SliceOp slice, int64_t first, int64_t width) {
  auto input = llvm::cast<RankedTensorType>(slice.getInput().getType());
  int64_t rank = input.getRank();
  ArrayRef<int64_t> starts = slice.getStarts(), limits = slice.getLimits(),
                    strides = slice.getStrides();
  if (rank == 0 || static_cast<int64_t>(starts.size()) != rank)
    return false;
  for (int64_t dim = 0; dim < rank; ++dim) {
    bool last = dim == rank - 1;
    int64_t start = last ? first : 0;
    int64_t limit = last ? first + width : input.getDimSize(dim);
    if (starts[dim] != start || limits[dim] != limit || strides[dim] != 1)
      return false;
  }
  return true;
}

/// x when `value` is rotate_half(x) = concat(-x[..., h:], x[..., :h]) on the
/// last dim (h = D / 2); null otherwise.
Value matchRotateHalf(Value value) {
  auto concat = value.getDefiningOp<tess::ConcatOp>();
  if (!concat || concat.getInputs().size() != 2)
    return nullptr;
  auto type = llvm::cast<RankedTensorType>(concat.getType());
  int64_t rank = type.getRank();
  int64_t axis = static_cast<int64_t>(concat.getAxis());
  if (rank == 0 || (axis != -1 && axis != rank - 1))
    return nullptr;
  int64_t half = type.getDimSize(rank - 1) / 2;
  auto negated = concat.getInputs()[0].getDefiningOp<tess::NegOp>();
  if (!negated)
    return nullptr;
  auto upper = negated.getInput().getDefiningOp<tess::SliceOp>();
  auto lower = concat.getInputs()[1].getDefiningOp<tess::SliceOp>();
  if (!upper || !lower || upper.getInput() != lower.getInput() ||
      !isLastDimWindow(upper, half, half) || !isLastDimWindow(lower, 0, half))
    return nullptr;
  Value x = lower.getInput();
  if (x.getType() != concat.getType())
    return nullptr;
  return x;
}

/// True when `value` is computed without any trainable parameter: a
/// gradient could not flow through tess.rotary's cos and sin.
bool isStepConstant(Value value) {
  if (llvm::isa<BlockArgument>(value))
    return false;
  SetVector<Operation *> slice;
  BackwardSliceOptions options;
  options.inclusive = true;
  if (failed(getBackwardSlice(value, &slice, options)))
    return false;
  for (Operation *op : slice) {
    if (auto parameter = llvm::dyn_cast<tess::ParameterOp>(op);
        parameter && parameter.getTrainable())
      return false;
    for (Value operand : op->getOperands())
      if (llvm::isa<BlockArgument>(operand) &&
          llvm::isa<FloatType>(getElementTypeOrSelf(operand.getType())))
        return false;
  }
  return true;
}

/// The other factor of `mul` when one of them is `x`.
Value factorBeside(tess::MulOp mul, Value x) {
  if (mul.getLhs() == x)
    return mul.getRhs();
  if (mul.getRhs() == x)
    return mul.getLhs();
  return nullptr;
}

/// `angle` as an operand of tess.rotary against `x`: of x's rank (leading
/// unit dims added by a reshape) and broadcasting to it; null when it does
/// not broadcast.
Value asRotaryOperand(PatternRewriter &rewriter, Location loc, Value angle,
                      RankedTensorType x) {
  auto type = llvm::cast<RankedTensorType>(angle.getType());
  if (type.getElementType() != x.getElementType() ||
      type.getRank() > x.getRank())
    return nullptr;
  SmallVector<int64_t> shape(x.getRank() - type.getRank(), 1);
  llvm::append_range(shape, type.getShape());
  for (int64_t dim = 0; dim < x.getRank(); ++dim)
    if (shape[dim] != 1 && shape[dim] != x.getDimSize(dim))
      return nullptr;
  if (type.getRank() == x.getRank())
    return angle;
  return tess::ReshapeOp::create(
      rewriter, loc, RankedTensorType::get(shape, type.getElementType()),
      angle);
}

/// `x * cos + rotate_half(x) * sin` -> `tess.rotary x, cos, sin`, rooted at
/// the add; each product and sum in either order.
struct FuseRotaryEmbedding : OpRewritePattern<tess::AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tess::AddOp add,
                                PatternRewriter &rewriter) const override {
    auto resultType = llvm::cast<RankedTensorType>(add.getType());
    Value x, cos, sin;
    bool matched = matchEitherOrder(
        add.getLhs(), add.getRhs(), [&](Value direct, Value rotated) {
          auto directMul = direct.getDefiningOp<tess::MulOp>();
          auto rotatedMul = rotated.getDefiningOp<tess::MulOp>();
          if (!directMul || !rotatedMul || !direct.hasOneUse() ||
              !rotated.hasOneUse())
            return false;
          return matchEitherOrder(
              rotatedMul.getLhs(), rotatedMul.getRhs(),
              [&](Value half, Value sinFactor) {
                Value input = matchRotateHalf(half);
                if (!input || !half.hasOneUse())
                  return false;
                Value cosFactor = factorBeside(directMul, input);
                if (!cosFactor)
                  return false;
                x = input, cos = cosFactor, sin = sinFactor;
                return true;
              });
        });
    if (!matched)
      return rewriter.notifyMatchFailure(add, "not x * cos + rotate_half(x) * sin");
    auto xType = llvm::cast<RankedTensorType>(x.getType());
    if (xType != resultType)
      return rewriter.notifyMatchFailure(add, "cos or sin widens the result");
    if (!isStepConstant(cos) || !isStepConstant(sin))
      return rewriter.notifyMatchFailure(add, "cos or sin depends on a parameter");
    Value cosOperand = asRotaryOperand(rewriter, add.getLoc(), cos, xType);
    Value sinOperand =
        cosOperand ? asRotaryOperand(rewriter, add.getLoc(), sin, xType) : nullptr;
    if (!cosOperand || !sinOperand)
      return rewriter.notifyMatchFailure(add, "cos or sin does not broadcast");
    rewriter.replaceOpWithNewOp<tess::RotaryOp>(add, xType, x, cosOperand,
                                                sinOperand, /*adjoint=*/false);
    return success();
  }
};

struct FuseRotaryPass : tessera::impl::FuseRotaryBase<FuseRotaryPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseRotaryEmbedding>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

std::unique_ptr<mlir::Pass> tessera::createFuseRotaryPass() {
  return std::make_unique<FuseRotaryPass>();
}
