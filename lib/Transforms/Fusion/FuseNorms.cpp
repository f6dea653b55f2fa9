//===- FuseNorms.cpp - tess-fuse-norms ------------------------------------===//
//
// LayerNorm and RMSNorm written out as reductions and elementwise ops become
// `tess.layer_norm` / `tess.rms_norm`. The fused ops compute their statistics
// in fp32 and save only mean and inverse deviation for the backward pass;
// the decomposed chain would save every intermediate.
//
// Both patterns are anchored at the op that applies the normalization (the
// divide or multiply by the inverse deviation), because that is the one op
// every spelling has; from there the statistics are matched upwards and the
// optional `* gamma` and `+ beta` downwards.
//
//===----------------------------------------------------------------------===//

#include "FusionMatchers.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace tessera {
#define GEN_PASS_DEF_FUSENORMS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;
using namespace tessera::fusion;

namespace {

/// A mean over the trailing dims of its input, with keep_dims (without it the
/// statistics would broadcast against the wrong dims of x).
struct TrailingMean {
  Value input;
  /// First normalized dim, as a negative index (`-1`: the last dim only).
  int64_t axis = 0;
};

/// Matches `tess.reduce_mean {dims, keep_dims}` over dims `[k, rank)`.
std::optional<TrailingMean> matchTrailingMean(Value value) {
  auto mean = value.getDefiningOp<tess::ReduceMeanOp>();
  if (!mean || !mean.getKeepDims())
    return std::nullopt;
  int64_t rank = llvm::cast<RankedTensorType>(mean.getInput().getType()).getRank();
  SmallVector<int64_t> dims;
  for (int64_t dim : mean.getDims())
    dims.push_back(dim < 0 ? dim + rank : dim);
  llvm::sort(dims);
  if (dims.empty())
    return std::nullopt;
  for (auto [index, dim] : llvm::enumerate(dims))
    if (dim != rank - static_cast<int64_t>(dims.size()) +
                   static_cast<int64_t>(index))
      return std::nullopt;
  return TrailingMean{mean.getInput(), -static_cast<int64_t>(dims.size())};
}

/// True when `value` is `base^2`, as `pow(base, 2)` or `base * base`.
bool isSquareOf(Value value, Value base) {
  if (auto pow = value.getDefiningOp<tess::PowOp>())
    return pow.getLhs() == base && isSplatCloseTo(pow.getRhs(), 2.0);
  if (auto mul = value.getDefiningOp<tess::MulOp>())
    return mul.getLhs() == base && mul.getRhs() == base;
  return false;
}

/// `mean(base^2) + epsilon` over trailing dims: the variance plus epsilon of
/// LayerNorm (base = x - mean) and the mean square plus epsilon of RMSNorm
/// (base = x). Every intermediate must feed only this chain.
struct MeanSquarePlusEpsilon {
  Value base;
  /// The op that squares `base` (pow or mul).
  Operation *square = nullptr;
  int64_t axis = 0;
  double epsilon = 0;
};

std::optional<MeanSquarePlusEpsilon> matchMeanSquarePlusEpsilon(Value value) {
  auto add = value.getDefiningOp<tess::AddOp>();
  if (!add || !value.hasOneUse())
    return std::nullopt;
  std::optional<MeanSquarePlusEpsilon> result;
  matchEitherOrder(add.getLhs(), add.getRhs(), [&](Value meanSquare,
                                                   Value epsilon) {
    std::optional<double> epsilonValue = getSplatFloatAsWritten(epsilon);
    if (!epsilonValue || *epsilonValue < 0 || !meanSquare.hasOneUse() ||
        add.getType() != meanSquare.getType())
      return false;
    std::optional<TrailingMean> mean = matchTrailingMean(meanSquare);
    if (!mean || !mean->input.hasOneUse())
      return false;
    Operation *square = mean->input.getDefiningOp();
    if (!square || square->getNumOperands() != 2)
      return false;
    Value base = square->getOperand(0);
    if (!isSquareOf(mean->input, base))
      return false;
    result = MeanSquarePlusEpsilon{base, square, mean->axis, *epsilonValue};
    return true;
  });
  return result;
}

/// The normalization step `base * inverse-deviation` in its spellings:
/// `base / sqrt(s)`, `base * rsqrt(s)`, `base * reciprocal(sqrt(s))`,
/// `base * (1 / sqrt(s))`, operands of the mul in either order. Sets `base`
/// and `statistic` (the `s` under the root).
bool matchNormalization(Operation *op, Value &base, Value &statistic) {
  // sqrt(s) used only here, giving s.
  auto sqrtInput = [](Value value) -> Value {
    auto sqrt = value.getDefiningOp<tess::SqrtOp>();
    if (!sqrt || !value.hasOneUse())
      return nullptr;
    return sqrt.getInput();
  };
  if (auto div = dyn_cast<tess::DivOp>(op)) {
    Value s = sqrtInput(div.getRhs());
    if (!s)
      return false;
    base = div.getLhs();
    statistic = s;
    return true;
  }
  auto mul = dyn_cast<tess::MulOp>(op);
  if (!mul)
    return false;
  return matchEitherOrder(mul.getLhs(), mul.getRhs(), [&](Value x,
                                                          Value inverse) {
    if (!inverse.hasOneUse())
      return false;
    Value s;
    if (auto rsqrt = inverse.getDefiningOp<tess::RsqrtOp>())
      s = rsqrt.getInput();
    else if (auto reciprocal = inverse.getDefiningOp<tess::ReciprocalOp>())
      s = sqrtInput(reciprocal.getInput());
    else if (auto div = inverse.getDefiningOp<tess::DivOp>();
             div && isSplatCloseTo(div.getLhs(), 1.0))
      s = sqrtInput(div.getRhs());
    if (!s)
      return false;
    base = x;
    statistic = s;
    return true;
  });
}

/// The shape a norm's scale and bias must have: the input's dims from `axis`.
SmallVector<int64_t> normalizedShape(Value input, int64_t axis) {
  ArrayRef<int64_t> shape =
      llvm::cast<RankedTensorType>(input.getType()).getShape();
  return SmallVector<int64_t>(shape.take_back(-axis));
}

/// When the only user of `value` is an elementwise `OpTy` (add or mul) with
/// an operand of the normalized shape on the other side that leaves the
/// type unchanged, returns that op and sets `affine` to the operand.
template <typename OpTy>
OpTy matchAffineUser(Value value, ArrayRef<int64_t> shape, Value &affine) {
  if (!value.hasOneUse())
    return nullptr;
  auto user = dyn_cast<OpTy>(*value.getUsers().begin());
  if (!user || user.getType() != value.getType() ||
      user.getLhs() == user.getRhs())
    return nullptr;
  Value other = user.getLhs() == value ? user.getRhs() : user.getLhs();
  auto otherType = llvm::cast<RankedTensorType>(other.getType());
  if (otherType.getShape() != shape ||
      otherType.getElementType() !=
          llvm::cast<RankedTensorType>(value.getType()).getElementType())
    return nullptr;
  affine = other;
  return user;
}

/// LayerNorm: `(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)`, then
/// optionally `* gamma` and `+ beta` -> `tess.layer_norm`. `op` is the
/// normalization step (a div or mul).
LogicalResult fuseLayerNorm(Operation *op, PatternRewriter &rewriter) {
  Value centered, varianceEpsilon;
  if (!matchNormalization(op, centered, varianceEpsilon))
    return failure();
  std::optional<MeanSquarePlusEpsilon> variance =
      matchMeanSquarePlusEpsilon(varianceEpsilon);
  if (!variance || variance->base != centered)
    return failure();

  // centered = x - mean(x) feeds only the variance and the normalization.
  auto sub = centered.getDefiningOp<tess::SubOp>();
  if (!sub || !llvm::all_of(centered.getUsers(), [&](Operation *user) {
        return user == op || user == variance->square;
      }))
    return failure();
  Value x = sub.getLhs();
  std::optional<TrailingMean> mean = matchTrailingMean(sub.getRhs());
  if (!mean || mean->input != x || mean->axis != variance->axis ||
      !sub.getRhs().hasOneUse() || sub.getType() != x.getType() ||
      op->getResult(0).getType() != x.getType())
    return failure();

  // Extend downwards over the optional affine transform.
  SmallVector<int64_t> shape = normalizedShape(x, mean->axis);
  Operation *last = op;
  Value scale, bias;
  if (auto mul =
          matchAffineUser<tess::MulOp>(last->getResult(0), shape, scale))
    last = mul;
  if (auto add = matchAffineUser<tess::AddOp>(last->getResult(0), shape, bias))
    last = add;

  rewriter.setInsertionPoint(last);
  auto norm = tess::LayerNormOp::create(
      rewriter, last->getLoc(), x.getType(), x, scale, bias,
      rewriter.getF64FloatAttr(variance->epsilon),
      rewriter.getI64IntegerAttr(mean->axis));
  rewriter.replaceOp(last, norm.getResult());
  return success();
}

/// RMSNorm: `x * rsqrt(mean(x^2) + eps)` in any spelling, then optionally
/// `* weight` -> `tess.rms_norm`. Llama casts x to fp32 before and the result
/// back after; those casts stay outside: the chain between them is matched
/// on the fp32 value, and the fused op computes in fp32 anyway. Because the
/// cast back sits between the normalization and `* weight`, Llama's weight
/// stays a separate mul in bf16 models.
LogicalResult fuseRmsNorm(Operation *op, PatternRewriter &rewriter) {
  Value x, meanSquareEpsilon;
  if (!matchNormalization(op, x, meanSquareEpsilon))
    return failure();
  std::optional<MeanSquarePlusEpsilon> meanSquare =
      matchMeanSquarePlusEpsilon(meanSquareEpsilon);
  if (!meanSquare || meanSquare->base != x ||
      op->getResult(0).getType() != x.getType())
    return failure();

  SmallVector<int64_t> shape = normalizedShape(x, meanSquare->axis);
  Operation *last = op;
  Value scale;
  if (auto mul =
          matchAffineUser<tess::MulOp>(last->getResult(0), shape, scale))
    last = mul;

  rewriter.setInsertionPoint(last);
  auto norm = tess::RmsNormOp::create(
      rewriter, last->getLoc(), x.getType(), x, scale,
      rewriter.getF64FloatAttr(meanSquare->epsilon),
      rewriter.getI64IntegerAttr(meanSquare->axis));
  rewriter.replaceOp(last, norm.getResult());
  return success();
}

/// Runs `fuseLayerNorm` on the normalization step, whose op is `RootOp`.
template <typename RootOp>
struct FuseLayerNorm : OpRewritePattern<RootOp> {
  // A LayerNorm's normalization also matches the RMSNorm shape, applied to
  // x - mean(x): the higher benefit makes the LayerNorm reading win.
  FuseLayerNorm(MLIRContext *context)
      : OpRewritePattern<RootOp>(context, /*benefit=*/2) {}
  LogicalResult matchAndRewrite(RootOp op,
                                PatternRewriter &rewriter) const override {
    return fuseLayerNorm(op, rewriter);
  }
};

/// Runs `fuseRmsNorm` on the normalization step, whose op is `RootOp`.
template <typename RootOp>
struct FuseRmsNorm : OpRewritePattern<RootOp> {
  using OpRewritePattern<RootOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(RootOp op,
                                PatternRewriter &rewriter) const override {
    return fuseRmsNorm(op, rewriter);
  }
};

struct FuseNormsPass : tessera::impl::FuseNormsBase<FuseNormsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseLayerNorm<tess::DivOp>, FuseLayerNorm<tess::MulOp>,
                 FuseRmsNorm<tess::DivOp>, FuseRmsNorm<tess::MulOp>>(
        &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

std::unique_ptr<mlir::Pass> tessera::createFuseNormsPass() {
  return std::make_unique<FuseNormsPass>();
}
