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
    if (auto originalFloat = llvm::dyn_cast<FloatType>(original))
      if (auto middleFloat = llvm::dyn_cast<FloatType>(middle))
        lossless = middleFloat.getWidth() >= originalFloat.getWidth() &&
                   middleFloat.getFPMantissaWidth() >=
                       originalFloat.getFPMantissaWidth();
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

void MatmulOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                           MLIRContext *context) {
  patterns.add<FoldTransposeIntoMatmul>(context);
}

void CastOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                         MLIRContext *context) {
  patterns.add<RemoveLosslessCastRoundTrip>(context);
}
