//===- FuseAttention.cpp - tess-fuse-attention ----------------------------===//
//
// Scaled dot-product attention reaches the importer as two matmuls around a
// softmax, with the scale and the additive mask as separate elementwise ops.
// As one `tess.attention` it can run as a flash-attention kernel that never
// materializes the [S, S] scores, and the sharding search sees heads it can
// split. The mask is the delicate part (AttentionMasks.h): exporters build a
// causal or sliding-window mask from token positions, and recognizing it
// turns a [B, 1, S, S] operand into the `causal` flag and `window`, which a
// kernel applies by skipping blocks instead of reading a tensor. Gemma-2's
// logit softcapping, `c * tanh(s / c)` between the scale and the mask,
// becomes the op's `softcap`: left as three elementwise ops it would keep
// the [B, H, S, S] scores materialized.
//
//===----------------------------------------------------------------------===//

#include "AttentionMasks.h"
#include "FusionMatchers.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>
#include <numeric>

namespace tessera {
#define GEN_PASS_DEF_FUSEATTENTION
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;
using namespace tessera::fusion;

namespace {

//===----------------------------------------------------------------------===//
// Operand matching
//===----------------------------------------------------------------------===//

/// The splat value of a scale factor: a constant, or the square root of one.
/// PyTorch's decomposed scaled_dot_product_attention multiplies Q and K^T by
/// sqrt(scale) each, and its Sqrt reaches the pattern unfolded when the
/// scale came from a CastLike of a run-time tensor.
std::optional<double> getSplatFactor(Value factor) {
  if (std::optional<double> splat = getSplatFloatAsWritten(factor))
    return splat;
  if (auto root = factor.getDefiningOp<tess::SqrtOp>())
    if (std::optional<double> splat = getSplatFloatAsWritten(root.getInput());
        splat && *splat >= 0)
      return std::sqrt(*splat);
  return std::nullopt;
}

/// When `value` is `input * s` or `s * input` or `input / d` with a positive
/// scalar constant (or the square root of one) and no broadcast of `input`,
/// returns `input` and multiplies `scale` by s (or 1/d).
Value peelScale(Value value, double &scale) {
  auto sameType = [&](Value input) { return input.getType() == value.getType(); };
  if (auto mul = value.getDefiningOp<tess::MulOp>()) {
    Value input;
    double factor = 0;
    if (matchEitherOrder(mul.getLhs(), mul.getRhs(), [&](Value x, Value c) {
          std::optional<double> splat = getSplatFactor(c);
          if (!splat || *splat <= 0 || !sameType(x))
            return false;
          input = x;
          factor = *splat;
          return true;
        })) {
      scale *= factor;
      return input;
    }
  }
  if (auto div = value.getDefiningOp<tess::DivOp>()) {
    std::optional<double> divisor = getSplatFloatAsWritten(div.getRhs());
    if (divisor && *divisor > 0 && sameType(div.getLhs())) {
      scale /= *divisor;
      return div.getLhs();
    }
  }
  return value;
}

/// Gemma-2's attention logit softcapping as transformers writes it,
/// `mul(tanh(div(s, c)), c)` (the Mul's operands in either order, the Div
/// also as a Mul by 1/c), each op feeding only the next: returns s and sets
/// `softcap` to c. Returns `value` itself when it is not that chain, or when
/// the inner and outer constants are not one cap (then the chain is some
/// other function, which stays unfused).
Value peelSoftcap(Value value, double &softcap) {
  auto mul = value.getDefiningOp<tess::MulOp>();
  if (!mul)
    return value;
  Value input;
  double cap = 0;
  if (!matchEitherOrder(mul.getLhs(), mul.getRhs(), [&](Value squashed,
                                                        Value outer) {
        std::optional<double> outerCap = getSplatFloatAsWritten(outer);
        auto tanh = squashed.getDefiningOp<tess::TanhOp>();
        if (!outerCap || *outerCap <= 0 || !tanh || !squashed.hasOneUse() ||
            squashed.getType() != value.getType() ||
            !tanh.getInput().hasOneUse())
          return false;
        double innerFactor = 1.0;
        Value scores = peelScale(tanh.getInput(), innerFactor);
        // The constants are written in the model's type: 1/c in f32 is
        // within a few ulps of the reciprocal of c.
        if (scores == tanh.getInput() ||
            std::abs(innerFactor * *outerCap - 1.0) > 1e-6)
          return false;
        input = scores;
        cap = *outerCap;
        return true;
      }))
    return value;
  softcap = cap;
  return input;
}

/// A value with its last two dims swapped, not yet built: either an existing
/// value (the input of a transpose that already swaps them) or a transpose
/// still to create. Nothing is created until the whole pattern has matched,
/// so that a failed match leaves the IR untouched.
struct SwappedValue {
  Value input;
  /// Empty when `input` itself is the swapped value.
  SmallVector<int64_t> permutation;
  RankedTensorType type;

  Value materialize(PatternRewriter &rewriter, Location loc) const {
    if (permutation.empty())
      return input;
    return tess::TransposeOp::create(rewriter, loc, type, input, permutation);
  }
};

/// `value` with its last two dims swapped; a transpose defining `value` is
/// composed with the swap rather than stacked under a second transpose.
SwappedValue swapInnerDims(Value value) {
  auto type = llvm::cast<RankedTensorType>(value.getType());
  int64_t rank = type.getRank();
  SmallVector<int64_t> swap(rank);
  std::iota(swap.begin(), swap.end(), 0);
  std::swap(swap[rank - 2], swap[rank - 1]);

  SwappedValue result{value, swap, nullptr};
  if (auto transpose = value.getDefiningOp<tess::TransposeOp>()) {
    result.input = transpose.getInput();
    result.permutation.clear();
    for (int64_t dim : swap)
      result.permutation.push_back(transpose.getPermutation()[dim]);
  }
  if (llvm::equal(result.permutation, llvm::seq<int64_t>(0, rank)))
    result.permutation.clear();
  SmallVector<int64_t> shape(type.getShape());
  std::swap(shape[rank - 2], shape[rank - 1]);
  result.type = RankedTensorType::get(shape, type.getElementType());
  return result;
}

/// `value` unchanged, as a SwappedValue with nothing to build.
SwappedValue asIs(Value value) {
  return SwappedValue{value, {}, llvm::cast<RankedTensorType>(value.getType())};
}

/// Grouped-query attention repeats each K/V head n times as
/// `reshape(broadcast(reshape(x: [B, Hkv, S, D] -> [B, Hkv, 1, S, D])
/// -> [B, Hkv, n, S, D]) -> [B, Hkv * n, S, D])`. Returns x, whose heads the
/// attention op groups itself, and sets `groups` to n; null when `value` is
/// not such a repeat.
///
/// The merge may also flatten batch and heads, `[B * Hkv * n, S, D]`: the
/// form in which the exporter's decomposed SDPA (enable_gqa) hands K to a
/// batched transpose (see matchRepeatedHeadsUnderBatchedSwap).
Value matchRepeatedHeads(Value value, int64_t &groups) {
  auto merge = value.getDefiningOp<tess::ReshapeOp>();
  if (!merge)
    return nullptr;
  auto broadcast = merge.getInput().getDefiningOp<tess::BroadcastOp>();
  if (!broadcast)
    return nullptr;
  auto unsqueeze = broadcast.getInput().getDefiningOp<tess::ReshapeOp>();
  if (!unsqueeze)
    return nullptr;
  Value x = unsqueeze.getInput();
  ArrayRef<int64_t> xShape = llvm::cast<RankedTensorType>(x.getType()).getShape();
  ArrayRef<int64_t> unsqueezed = unsqueeze.getType().getShape();
  ArrayRef<int64_t> repeated = broadcast.getType().getShape();
  ArrayRef<int64_t> merged = merge.getType().getShape();
  if (xShape.size() != 4 || unsqueezed.size() != 5 || repeated.size() != 5)
    return nullptr;
  int64_t b = xShape[0], heads = xShape[1], s = xShape[2], d = xShape[3];
  int64_t n = repeated[2];
  if (unsqueezed != ArrayRef<int64_t>{b, heads, 1, s, d} ||
      repeated != ArrayRef<int64_t>{b, heads, n, s, d} ||
      (merged != ArrayRef<int64_t>{b, heads * n, s, d} &&
       merged != ArrayRef<int64_t>{b * heads * n, s, d}))
    return nullptr;
  groups = n;
  return x;
}

/// K^T built from repeated heads flattened to `[B * H, S, D]`, transposed as
/// a batch of matrices and split again:
/// `reshape(transpose(repeat(x) : [B*H, S, D]) {0, 2, 1} -> [B, H, D, S])`.
/// `key` is that K^T with its inner dims still to swap back; returns x (as
/// matchRepeatedHeads), or null when `key` is not of that form.
Value matchRepeatedHeadsUnderBatchedSwap(Value swappedKey,
                                         ArrayRef<int64_t> permutation,
                                         int64_t &groups) {
  if (permutation != ArrayRef<int64_t>{0, 1, 3, 2})
    return nullptr;
  auto split = swappedKey.getDefiningOp<tess::ReshapeOp>();
  if (!split)
    return nullptr;
  auto transpose = split.getInput().getDefiningOp<tess::TransposeOp>();
  if (!transpose || transpose.getPermutation() != ArrayRef<int64_t>{0, 2, 1})
    return nullptr;
  ArrayRef<int64_t> flat = transpose.getType().getShape();
  ArrayRef<int64_t> keyT = split.getType().getShape();
  if (keyT.size() != 4 || flat[0] != keyT[0] * keyT[1] || flat[1] != keyT[2] ||
      flat[2] != keyT[3])
    return nullptr;
  Value x = matchRepeatedHeads(transpose.getInput(), groups);
  if (!x)
    return nullptr;
  ArrayRef<int64_t> xShape = llvm::cast<RankedTensorType>(x.getType()).getShape();
  if (xShape[0] != keyT[0] || xShape[1] * groups != keyT[1])
    return nullptr;
  return x;
}

/// PyTorch's decomposed scaled_dot_product_attention guards its
/// probabilities with `where(isnan(p), 0, p)`, isnan imported as
/// `compare ne, p, p`: a row whose keys are all hidden has softmax 0/0 = NaN
/// and gets weight 0 instead. tess.attention gives such a row weight 0
/// itself (as PyTorch does; see runtime/cpu/Attention.cpp), so the guard is
/// part of the attention. Returns p when `value` is that guard and p feeds
/// nothing else; null otherwise.
Value matchNanGuardedProbabilities(Value value) {
  auto guard = value.getDefiningOp<tess::WhereOp>();
  if (!guard || !value.hasOneUse())
    return nullptr;
  Value probabilities = guard.getOnFalse();
  auto isNan = guard.getCondition().getDefiningOp<tess::CompareOp>();
  if (!isNan || !isNan->hasOneUse() ||
      isNan.getPredicate() != tess::ComparisonPredicate::ne ||
      isNan.getLhs() != probabilities || isNan.getRhs() != probabilities ||
      probabilities.getType() != value.getType())
    return nullptr;
  std::optional<double> zero = getSplatFloatAsWritten(guard.getOnTrue());
  if (!zero || *zero != 0.0)
    return nullptr;
  for (Operation *user : probabilities.getUsers())
    if (user != isNan.getOperation() && user != guard.getOperation())
      return nullptr;
  return probabilities;
}

/// True when `value` is a softmax over its last dim.
bool isLastDimSoftmax(tess::SoftmaxOp softmax) {
  int64_t rank = softmax.getType().getRank();
  int64_t axis = softmax.getAxis();
  return axis == -1 || axis == rank - 1;
}

//===----------------------------------------------------------------------===//
// The pattern
//===----------------------------------------------------------------------===//

/// `softmax(scale * Q K^T + M) V` -> `tess.attention Q, K, V`, rooted at the
/// matmul by V.
struct FuseScaledDotProductAttention : OpRewritePattern<tess::MatmulOp> {
  FuseScaledDotProductAttention(MLIRContext *context,
                                MaskClassificationCache &masks)
      : OpRewritePattern(context), masks(masks) {}

  LogicalResult matchAndRewrite(tess::MatmulOp output,
                                PatternRewriter &rewriter) const override {
    if (output.getTransposeLhs())
      return rewriter.notifyMatchFailure(output, "probabilities transposed");
    // Training graphs drop out attention probabilities between softmax and
    // the matmul by V; the op applies that dropout itself.
    Value probabilities = output.getLhs();
    auto dropout = probabilities.getDefiningOp<tess::DropoutOp>();
    if (dropout && probabilities.hasOneUse())
      probabilities = dropout.getInput();
    else
      dropout = nullptr;
    // SDPA exports put a NaN guard between the softmax and the dropout.
    bool guarded = false;
    if (Value unguarded = matchNanGuardedProbabilities(probabilities)) {
      probabilities = unguarded;
      guarded = true;
    }
    auto softmax = probabilities.getDefiningOp<tess::SoftmaxOp>();
    if (!softmax || !(guarded || softmax.getResult().hasOneUse()) ||
        !isLastDimSoftmax(softmax) || softmax.getType().getRank() != 4)
      return rewriter.notifyMatchFailure(output, "lhs is not a softmax");
    RankedTensorType scoresType = softmax.getType();

    // Optional additive mask: softmax(scaled + M), operands in either order.
    Value logits = softmax.getInput();
    Value mask;
    if (auto add = logits.getDefiningOp<tess::AddOp>();
        add && logits.hasOneUse()) {
      matchEitherOrder(add.getLhs(), add.getRhs(), [&](Value scaled,
                                                       Value candidate) {
        double unusedScale = 1.0, unusedCap = 0.0;
        Value uncapped =
            scaled.hasOneUse() ? peelSoftcap(scaled, unusedCap) : scaled;
        Value unscaled = uncapped.hasOneUse()
                             ? peelScale(uncapped, unusedScale)
                             : uncapped;
        if (scaled.getType() != scoresType ||
            !unscaled.getDefiningOp<tess::MatmulOp>())
          return false;
        logits = scaled;
        mask = candidate;
        return true;
      });
    }

    // Optional softcap, then scale, on the scores.
    double softcap = 0.0;
    if (logits.hasOneUse())
      logits = peelSoftcap(logits, softcap);
    double scale = 1.0;
    Value scores = logits;
    if (logits.hasOneUse())
      scores = peelScale(logits, scale);
    auto product = scores.getDefiningOp<tess::MatmulOp>();
    if (!product || !scores.hasOneUse() || product.getTransposeLhs() ||
        scores.getType() != scoresType)
      return rewriter.notifyMatchFailure(output, "no Q K^T product");

    // Q, and K from K^T (or from K itself with transpose_rhs); a scale on
    // either side multiplies the scores the same way.
    Value query = peelScale(product.getLhs(), scale);
    Value keyOperand = peelScale(product.getRhs(), scale);
    Value value = output.getRhs();
    if (llvm::cast<RankedTensorType>(query.getType()).getRank() != 4 ||
        llvm::cast<RankedTensorType>(keyOperand.getType()).getRank() != 4 ||
        llvm::cast<RankedTensorType>(value.getType()).getRank() != 4)
      return rewriter.notifyMatchFailure(output, "operands are not rank 4");

    MaskKind maskKind = mask ? masks.classify(mask, scoresType.getShape())
                             : MaskKind{MaskKind::HidesNothing, 0};

    SwappedValue key = product.getTransposeRhs() ? asIs(keyOperand)
                                                 : swapInnerDims(keyOperand);
    SwappedValue values = output.getTransposeRhs() ? swapInnerDims(value)
                                                   : asIs(value);

    // Fold repeated K/V heads back when both K and V repeat by one factor.
    int64_t keyGroups = 0, valueGroups = 0;
    Value groupedKey =
        key.permutation.empty()
            ? matchRepeatedHeads(key.input, keyGroups)
            : matchRepeatedHeadsUnderBatchedSwap(key.input, key.permutation,
                                                 keyGroups);
    Value groupedValue = values.permutation.empty()
                             ? matchRepeatedHeads(values.input, valueGroups)
                             : nullptr;
    if (groupedKey && groupedValue && keyGroups == valueGroups) {
      key = asIs(groupedKey);
      values = asIs(groupedValue);
    }

    // The checks of tess.attention's verifier, made here so that a chain the
    // op cannot express stays unfused instead of failing verification.
    auto queryType = llvm::cast<RankedTensorType>(query.getType());
    RankedTensorType keyType = key.type, valueType = values.type;
    bool shapesAgree =
        queryType.getElementType() == keyType.getElementType() &&
        queryType.getElementType() == valueType.getElementType() &&
        keyType.getDimSize(0) == valueType.getDimSize(0) &&
        keyType.getDimSize(1) == valueType.getDimSize(1) &&
        keyType.getDimSize(2) == valueType.getDimSize(2) &&
        queryType.getDimSize(0) == keyType.getDimSize(0) &&
        queryType.getDimSize(3) == keyType.getDimSize(3) &&
        queryType.getDimSize(1) % keyType.getDimSize(1) == 0;
    SmallVector<int64_t> resultShape = {
        queryType.getDimSize(0), queryType.getDimSize(1),
        queryType.getDimSize(2), valueType.getDimSize(3)};
    if (!shapesAgree || output.getType().getShape() != ArrayRef(resultShape) ||
        (mask && llvm::cast<RankedTensorType>(mask.getType()).getElementType() !=
                     queryType.getElementType()))
      return rewriter.notifyMatchFailure(output, "operand shapes disagree");

    rewriter.setInsertionPoint(output);
    Value keyValue = key.materialize(rewriter, output.getLoc());
    Value valueValue = values.materialize(rewriter, output.getLoc());
    bool causal = maskKind.effect == MaskKind::Causal;
    Value maskOperand = maskKind.effect == MaskKind::Other ? mask : Value();
    auto attention = tess::AttentionOp::create(
        rewriter, output.getLoc(), output.getType(), query, keyValue,
        valueValue, maskOperand, causal, APFloat(scale),
        dropout ? dropout.getRate() : APFloat(0.0), /*seed=*/0,
        maskKind.window, APFloat(softcap), /*stream_axis=*/StringAttr(),
        /*head_stream_axis=*/StringAttr());
    rewriter.replaceOp(output, attention.getResult());
    // Dropout draws random numbers, so it is not erased as dead on its own.
    if (dropout)
      rewriter.eraseOp(dropout);
    return success();
  }

private:
  MaskClassificationCache &masks;
};

struct FuseAttentionPass
    : tessera::impl::FuseAttentionBase<FuseAttentionPass> {
  void runOnOperation() override {
    MaskClassificationCache masks;
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseScaledDotProductAttention>(&getContext(), masks);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

std::unique_ptr<mlir::Pass> tessera::createFuseAttentionPass() {
  return std::make_unique<FuseAttentionPass>();
}
