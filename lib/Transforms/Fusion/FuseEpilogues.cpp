//===- FuseEpilogues.cpp - tess-fuse-epilogues -----------------------------===//
//
// Design: the kernels compute some pairs of adjacent ops in one call, the
// second op as the first's epilogue (a GEMM's C, its GELU or DGELU
// epilogue, its bias-gradient column sum; a norm gradient's residual add;
// a loss and its gradient in one pass over the logits).
// This pass makes each such pair one op (TessFusedOps.td, or the norm
// gradients' `residual` operand), so that the interpreter, the arena planner
// and the lowering see one op and one call, and the interpreter's fixtures
// test the calls the executable makes.
//
// Only adjacent pairs fuse: where each op of the step runs is the business
// of the scheduling passes before this one (tess-schedule-gelu-grad,
// tess-schedule-residual-adds), which move the second op next to the first
// where that does not stretch any tensor's life. Fusing a pair that is
// apart would move work across the schedule and change the memory plan.
// The fused op takes the second op's place: every operand of the pair is
// defined before it.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "Tess/IR/TessOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace tessera {
#define GEN_PASS_DEF_FUSEEPILOGUES
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

/// The tess.add right after `value`'s defining op whose one operand is
/// `value` (its only use) and the other an earlier value of the same type,
/// or null.
tess::AddOp residualAddOf(Value value) {
  Operation *producer = value.getDefiningOp();
  auto add = llvm::dyn_cast_or_null<tess::AddOp>(producer->getNextNode());
  if (!add || !value.hasOneUse() ||
      (add.getLhs() != value && add.getRhs() != value) ||
      add.getLhs().getType() != add.getType() ||
      add.getRhs().getType() != add.getType())
    return {};
  // Not x + x, and not another result of the same op.
  Value other = add.getLhs() == value ? add.getRhs() : add.getLhs();
  if (other.getDefiningOp() == producer)
    return {};
  return add;
}

/// That add's operand other than `value`.
Value otherOperand(tess::AddOp add, Value value) {
  return add.getLhs() == value ? add.getRhs() : add.getLhs();
}

/// The tanh GELU of `linear`'s result right after it, or null.
tess::GeluOp geluAfter(tess::LinearOp linear) {
  auto gelu = llvm::dyn_cast_or_null<tess::GeluOp>(linear->getNextNode());
  if (!gelu || gelu.getInput() != linear.getResult() ||
      gelu.getApproximation() != tess::GeluApproximation::tanh)
    return {};
  return gelu;
}

/// The tanh gelu_grad right after a bias-free `linear` whose dy is the
/// linear's result and its only use, or null.
tess::GeluGradOp geluGradAfter(tess::LinearOp linear) {
  auto grad = llvm::dyn_cast_or_null<tess::GeluGradOp>(linear->getNextNode());
  if (!grad || linear.getBias() || grad.getDy() != linear.getResult() ||
      !linear.getResult().hasOneUse() ||
      grad.getApproximation() != tess::GeluApproximation::tanh)
    return {};
  return grad;
}

/// The reduce_sum right after a 2-D weight-gradient `matmul` that sums its
/// rhs (or what rhs is a reshape of) over every dim but the last, or null.
tess::ReduceSumOp biasGradAfter(tess::MatmulOp matmul) {
  auto reduce =
      llvm::dyn_cast_or_null<tess::ReduceSumOp>(matmul->getNextNode());
  if (!reduce || matmul.getTransposeRhs())
    return {};
  auto lhsType = llvm::cast<RankedTensorType>(matmul.getLhs().getType());
  auto rhsType = llvm::cast<RankedTensorType>(matmul.getRhs().getType());
  auto dyType = llvm::cast<RankedTensorType>(reduce.getInput().getType());
  auto sumType = llvm::cast<RankedTensorType>(reduce.getType());
  if (lhsType.getRank() != 2 || rhsType.getRank() != 2 ||
      !rhsType.hasStaticShape() || !dyType.hasStaticShape() ||
      dyType.getRank() < 1)
    return {};
  Value rhs = matmul.getRhs();
  if (auto reshape = rhs.getDefiningOp<tess::ReshapeOp>())
    rhs = reshape.getOperand();
  int64_t columns = dyType.getShape().back();
  if (rhs != reduce.getInput() || rhsType.getShape()[1] != columns ||
      rhsType.getElementType() != dyType.getElementType())
    return {};
  // The sum over every dim but the last, to [columns].
  SmallVector<int64_t> dims;
  for (int64_t dim : reduce.getDims())
    dims.push_back(dim < 0 ? dim + dyType.getRank() : dim);
  llvm::sort(dims);
  SmallVector<int64_t> leading;
  for (int64_t dim = 0; dim + 1 < dyType.getRank(); ++dim)
    leading.push_back(dim);
  if (dims != leading || sumType.getShape() != ArrayRef<int64_t>{columns})
    return {};
  return reduce;
}

/// Replaces `first` and `second` by `fused`: `firstResults` and
/// `secondResults` name, for each of their results, the fused op's result
/// that takes its place.
void replacePair(Operation *first, Operation *second, ValueRange firstResults,
                 ValueRange secondResults) {
  second->replaceAllUsesWith(secondResults);
  second->erase();
  first->replaceAllUsesWith(firstResults);
  first->erase();
}

/// Fuses `op` with the op after it where the kernels compute both in one
/// call; returns the fused op, or null.
Operation *fuseWithNext(Operation &op) {
  Operation *next = op.getNextNode();
  if (!next)
    return nullptr;
  OpBuilder builder(next);
  Location loc = op.getLoc();

  if (auto linear = dyn_cast<tess::LinearOp>(op)) {
    if (tess::GeluOp gelu = geluAfter(linear)) {
      auto fused = tess::LinearGeluOp::create(
          builder, loc, linear.getInput(), linear.getWeight(),
          linear.getBias(), linear.getTransposeWeight());
      replacePair(linear, gelu, fused.getPreactivation(), fused.getResult());
      return fused;
    }
    if (tess::GeluGradOp grad = geluGradAfter(linear)) {
      auto fused = tess::LinearGeluGradOp::create(
          builder, loc, linear.getInput(), linear.getWeight(),
          grad.getInput(), linear.getTransposeWeight());
      // The linear's one use was the gelu_grad.
      replacePair(linear, grad, ValueRange{Value()}, fused.getResult());
      return fused;
    }
    if (tess::AddOp add = residualAddOf(linear.getResult())) {
      auto fused = tess::LinearAddOp::create(
          builder, loc, linear.getInput(), linear.getWeight(),
          otherOperand(add, linear.getResult()), linear.getBias(),
          linear.getTransposeWeight());
      replacePair(linear, add, ValueRange{Value()}, fused.getResult());
      return fused;
    }
    return nullptr;
  }

  if (auto matmul = dyn_cast<tess::MatmulOp>(op)) {
    if (tess::ReduceSumOp sum = biasGradAfter(matmul)) {
      auto fused = tess::MatmulBiasGradOp::create(
          builder, loc, matmul.getLhs(), matmul.getRhs(),
          matmul.getTransposeLhs());
      replacePair(matmul, sum, fused.getResult(), fused.getColumnSum());
      return fused;
    }
    if (tess::AddOp add = residualAddOf(matmul.getResult())) {
      auto fused = tess::MatmulAddOp::create(
          builder, loc, matmul.getLhs(), matmul.getRhs(),
          otherOperand(add, matmul.getResult()), matmul.getTransposeLhs(),
          matmul.getTransposeRhs());
      replacePair(matmul, add, ValueRange{Value()}, fused.getResult());
      return fused;
    }
    return nullptr;
  }

  // The loss and its gradient: one pass over the logits.
  if (auto loss = dyn_cast<tess::CrossEntropyOp>(op)) {
    tess::CrossEntropyGradOp grad = loss.fusedGradient();
    if (!grad)
      return nullptr;
    auto fused = tess::CrossEntropyWithGradOp::create(
        builder, loc, loss.getLogits(), loss.getTargets(), grad.getDloss(),
        loss.getAllTargets(), loss.getIgnoreIndex());
    replacePair(loss, grad, fused.getLoss(), fused.getDlogits());
    return fused;
  }

  // A norm gradient's dx and the gradient arriving through the residual
  // stream: dx = residual + the gradient, rounded once.
  auto fuseNormGrad = [&](auto grad, auto create) -> Operation * {
    if (grad.getResidual())
      return nullptr;
    tess::AddOp add = residualAddOf(grad.getDx());
    if (!add)
      return nullptr;
    Operation *fused = create(otherOperand(add, grad.getDx()));
    fused->setDiscardableAttrs(grad->getDiscardableAttrDictionary());
    SmallVector<Value> results(fused->getResults());
    replacePair(grad, add, results, fused->getResult(0));
    return fused;
  };
  if (auto grad = dyn_cast<tess::LayerNormGradOp>(op))
    return fuseNormGrad(grad, [&](Value residual) {
      return tess::LayerNormGradOp::create(
          builder, loc, grad.getInput(), grad.getScale(), grad.getDy(),
          residual, grad.getEpsilon(), grad.getAxis(), grad.getBiasGrad());
    });
  if (auto grad = dyn_cast<tess::RmsNormGradOp>(op))
    return fuseNormGrad(grad, [&](Value residual) {
      return tess::RmsNormGradOp::create(builder, loc, grad.getInput(),
                                         grad.getScale(), grad.getDy(),
                                         residual, grad.getEpsilon(),
                                         grad.getAxis());
    });
  return nullptr;
}

struct FuseEpiloguesPass
    : tessera::impl::FuseEpiloguesBase<FuseEpiloguesPass> {
  void runOnOperation() override {
    for (Block &block : getOperation().getBody())
      for (Operation *op = block.empty() ? nullptr : &block.front(); op;) {
        Operation *fused = fuseWithNext(*op);
        op = (fused ? fused : op)->getNextNode();
      }
  }
};

} // namespace
