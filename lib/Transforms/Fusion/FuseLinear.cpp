//===- FuseLinear.cpp - tess-fuse-linear ----------------------------------===//
//
// A dense layer reaches the importer as a MatMul by a weight (through a
// Transpose when PyTorch's nn.Linear keeps it as [out, in]) plus an Add of
// the bias, or as a Gemm between two Reshapes that flatten the batch dims.
// `tess.linear` is the op the sharding search splits Megatron-style, so every
// spelling must end up as one: a dense layer left as a bare matmul would be
// invisible to it.
//
//===----------------------------------------------------------------------===//

#include "FusionMatchers.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace tessera {
#define GEN_PASS_DEF_FUSELINEAR
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;
using namespace tessera::fusion;

namespace {

/// True when `value` is a rank-2 `tess.parameter`: a weight matrix.
bool isWeightMatrix(Value value) {
  auto parameter = value.getDefiningOp<tess::ParameterOp>();
  return parameter && parameter.getType().getRank() == 2;
}

/// When the only user of `value` is an add of a rank-1 `[outFeatures]` tensor
/// (either order) that keeps `value`'s type, returns that add and sets `bias`.
tess::AddOp matchBiasAdd(Value value, Value &bias) {
  if (!value.hasOneUse())
    return nullptr;
  auto add = dyn_cast<tess::AddOp>(*value.getUsers().begin());
  if (!add || add.getType() != value.getType() || add.getLhs() == add.getRhs())
    return nullptr;
  Value other = add.getLhs() == value ? add.getRhs() : add.getLhs();
  auto type = llvm::cast<RankedTensorType>(value.getType());
  if (!hasShape(other, {type.getShape().back()}))
    return nullptr;
  bias = other;
  return add;
}

/// `matmul(x, W)` with W a rank-2 parameter, directly or through
/// `transpose(W, [1, 0])`, and an optional following `+ bias`
/// -> `tess.linear x, W(, bias)` (`transpose_weight` when W is `[out, in]`).
struct MatmulByWeightToLinear : OpRewritePattern<tess::MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tess::MatmulOp matmul,
                                PatternRewriter &rewriter) const override {
    // A transposed input is not a dense layer's input.
    if (matmul.getTransposeLhs())
      return rewriter.notifyMatchFailure(matmul, "input is transposed");
    Value weight = matmul.getRhs();
    bool transposeWeight = matmul.getTransposeRhs();
    if (auto transpose = weight.getDefiningOp<tess::TransposeOp>();
        transpose && llvm::equal(transpose.getPermutation(),
                                 ArrayRef<int64_t>{1, 0})) {
      weight = transpose.getInput();
      transposeWeight = !transposeWeight;
    }
    if (!isWeightMatrix(weight))
      return rewriter.notifyMatchFailure(matmul, "rhs is not a weight matrix");

    Value bias;
    Operation *last = matmul;
    if (tess::AddOp add = matchBiasAdd(matmul.getResult(), bias))
      last = add;
    rewriter.setInsertionPoint(last);
    auto linear = tess::LinearOp::create(
        rewriter, last->getLoc(), matmul.getType(), matmul.getLhs(), weight,
        bias, transposeWeight);
    rewriter.replaceOp(last, linear.getResult());
    return success();
  }
};

/// `linear(x, W) + bias` (bias rank-1 `[out]`) -> `linear(x, W, bias)`: the
/// importer's Gemm without a bias, followed by a separate Add.
struct AbsorbBiasIntoLinear : OpRewritePattern<tess::LinearOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tess::LinearOp linear,
                                PatternRewriter &rewriter) const override {
    Value bias;
    tess::AddOp add;
    if (linear.getBias() || !(add = matchBiasAdd(linear.getResult(), bias)))
      return rewriter.notifyMatchFailure(linear, "no bias to absorb");
    rewriter.setInsertionPoint(add);
    auto fused = tess::LinearOp::create(
        rewriter, add.getLoc(), linear.getType(), linear.getInput(),
        linear.getWeight(), bias, linear.getTransposeWeight());
    rewriter.replaceOp(add, fused.getResult());
    return success();
  }
};

/// `reshape(linear(reshape(x)))` where the outer reshape only regroups the
/// rows (its last dim is the linear's N) -> `linear(x')`, with x' = x when x
/// already has the outer shape's rows ([A..., K]) and otherwise one reshape
/// of x to them. A linear acts on each row alone and row-major reshapes keep
/// the rows in order, so how they are grouped does not matter. GPT-2 exports
/// every Conv1D as `view(-1, K)`, `addmm`, `view(B, S, N)`; after its
/// attention, the input is [B, S, H, D] and becomes one reshape to
/// [B, S, H * D] instead of two around the linear.
struct RemoveReshapesAroundLinear : OpRewritePattern<tess::LinearOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tess::LinearOp linear,
                                PatternRewriter &rewriter) const override {
    // Only when a reshape feeds the linear: otherwise the restore would just
    // move to the input, with nothing gained.
    auto flatten = linear.getInput().getDefiningOp<tess::ReshapeOp>();
    if (!flatten || !linear.getResult().hasOneUse())
      return rewriter.notifyMatchFailure(linear, "input is not a reshape");
    auto restore = dyn_cast<tess::ReshapeOp>(*linear->getUsers().begin());
    if (!restore)
      return rewriter.notifyMatchFailure(linear, "user is not a reshape");
    RankedTensorType restoredType = restore.getType();
    int64_t outFeatures = linear.getType().getShape().back();
    if (restoredType.getRank() < 1 ||
        restoredType.getShape().back() != outFeatures)
      return rewriter.notifyMatchFailure(linear, "reshape moves the last dim");

    Value x = flatten.getInput();
    auto xType = llvm::cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> rows(restoredType.getShape());
    rows.back() = linear.getInput().getType().getShape().back();
    auto rowsType = RankedTensorType::get(rows, xType.getElementType());

    rewriter.setInsertionPoint(restore);
    Value input = x;
    if (xType != rowsType)
      input = tess::ReshapeOp::create(rewriter, flatten.getLoc(), rowsType, x);
    auto fused = tess::LinearOp::create(
        rewriter, restore.getLoc(), restoredType, input, linear.getWeight(),
        linear.getBias(), linear.getTransposeWeight());
    rewriter.replaceOp(restore, fused.getResult());
    return success();
  }
};

struct FuseLinearPass : tessera::impl::FuseLinearBase<FuseLinearPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<MatmulByWeightToLinear, AbsorbBiasIntoLinear,
                 RemoveReshapesAroundLinear>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

std::unique_ptr<mlir::Pass> tessera::createFuseLinearPass() {
  return std::make_unique<FuseLinearPass>();
}
