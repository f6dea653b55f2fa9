//===- TessCanonicalization.cpp - canonical forms of tess ops ------------===//
//
// Chains of data movement collapse into one op, and transposes that only
// swap a matmul operand's two inner dims move into the matmul's flags, so
// that the sharding search and the kernels see one contraction per matmul.
//
//===----------------------------------------------------------------------===//

#include "Tess/IR/TessOps.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace tessera::tess;

namespace {

/// reshape(reshape(x)) -> reshape(x): only the final shape matters.
struct CollapseReshapeChain : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<ReshapeOp>();
    if (!inner)
      return failure();
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), inner.getInput());
    return success();
  }
};

/// transpose(transpose(x, p), q) -> transpose(x, p∘q).
struct ComposeTransposes : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<TransposeOp>();
    if (!inner)
      return failure();
    SmallVector<int64_t> composed;
    for (int64_t dim : op.getPermutation())
      composed.push_back(inner.getPermutation()[dim]);
    rewriter.replaceOpWithNewOp<TransposeOp>(op, op.getType(),
                                             inner.getInput(), composed);
    return success();
  }
};

/// broadcast(broadcast(x)) -> broadcast(x): numpy broadcasting is
/// transitive, since a dim that is not 1 after the first broadcast is kept by
/// the second.
struct CollapseBroadcastChain : OpRewritePattern<BroadcastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BroadcastOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<BroadcastOp>();
    if (!inner)
      return failure();
    rewriter.replaceOpWithNewOp<BroadcastOp>(op, op.getType(),
                                             inner.getInput());
    return success();
  }
};

/// True when `permutation` swaps the last two dims and keeps the rest.
bool swapsInnerDims(ArrayRef<int64_t> permutation) {
  int64_t rank = permutation.size();
  if (rank < 2)
    return false;
  for (int64_t i = 0; i < rank - 2; ++i)
    if (permutation[i] != i)
      return false;
  return permutation[rank - 2] == rank - 1 && permutation[rank - 1] == rank - 2;
}

/// matmul(transpose(a, swap last two), b) -> matmul(a, b) {transpose_lhs}, and
/// the same for the right-hand side.
struct FoldTransposeIntoMatmul : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    auto lhsTranspose = op.getLhs().getDefiningOp<TransposeOp>();
    auto rhsTranspose = op.getRhs().getDefiningOp<TransposeOp>();
    bool foldLhs = lhsTranspose && swapsInnerDims(lhsTranspose.getPermutation());
    bool foldRhs = rhsTranspose && swapsInnerDims(rhsTranspose.getPermutation());
    if (!foldLhs && !foldRhs)
      return failure();
    Value lhs = foldLhs ? lhsTranspose.getInput() : op.getLhs();
    Value rhs = foldRhs ? rhsTranspose.getInput() : op.getRhs();
    bool transposeLhs = op.getTransposeLhs() != foldLhs;
    bool transposeRhs = op.getTransposeRhs() != foldRhs;
    rewriter.replaceOpWithNewOp<MatmulOp>(op, op.getType(), lhs, rhs,
                                          transposeLhs, transposeRhs);
    return success();
  }
};

/// cast(cast(x: A -> B) -> A) -> x when B holds every value of A exactly
/// (a float at least as wide, or an integer at least as wide).
struct RemoveLosslessCastRoundTrip : OpRewritePattern<CastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CastOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<CastOp>();
    if (!inner || inner.getInput().getType() != op.getType())
      return failure();
    Type original = op.getType().getElementType();
    Type middle = inner.getType().getElementType();
    bool lossless = false;
    // Precision alone is not enough: f16 has bf16's 8 bits of precision and
    // more, but not its exponent range, so bf16 -> f16 -> bf16 turns 1e30
    // into infinity. A format without infinity or NaN cannot hold them.
    if (auto originalFloat = llvm::dyn_cast<FloatType>(original))
      if (auto middleFloat = llvm::dyn_cast<FloatType>(middle)) {
        const llvm::fltSemantics &from = originalFloat.getFloatSemantics();
        const llvm::fltSemantics &to = middleFloat.getFloatSemantics();
        lossless = APFloat::isRepresentableBy(from, to) &&
                   (!APFloat::semanticsHasInf(from) ||
                    APFloat::semanticsHasInf(to)) &&
                   (!APFloat::semanticsHasNaN(from) ||
                    APFloat::semanticsHasNaN(to));
      }
    if (original.isSignlessInteger() && middle.isSignlessInteger())
      lossless = middle.getIntOrFloatBitWidth() >=
                 original.getIntOrFloatBitWidth();
    if (!lossless)
      return failure();
    rewriter.replaceOp(op, inner.getInput());
    return success();
  }
};

} // namespace

void ReshapeOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                            MLIRContext *context) {
  patterns.add<CollapseReshapeChain>(context);
}

void TransposeOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                              MLIRContext *context) {
  patterns.add<ComposeTransposes>(context);
}

void BroadcastOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                              MLIRContext *context) {
  patterns.add<CollapseBroadcastChain>(context);
}

void MatmulOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                           MLIRContext *context) {
  patterns.add<FoldTransposeIntoMatmul>(context);
}

void CastOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                         MLIRContext *context) {
  patterns.add<RemoveLosslessCastRoundTrip>(context);
}
