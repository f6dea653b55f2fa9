//===- ChunkLossHead.cpp - tess-chunk-loss-head ---------------------------===//
//
// The head's logits, [rows, classes], are the step's largest tensor for a
// large vocabulary and live at its peak (the forward is done, the backward
// has not freed anything yet). Nothing needs them whole: each row's loss,
// gradient and input gradient depend on that row alone, and the weight
// gradient is a sum over rows. So the head, its fused loss and the two
// products of the loss gradient are rebuilt a block of rows at a time, in
// order, and the arena planner gives every block's logits the same bytes
// (Liger's and torchtune's chunked linear cross-entropy, here a rewrite of
// the IR that every backend, the interpreter and the planner see). The
// blocks' losses divide by the whole batch's count (count_over); the weight
// gradient is summed in one buffer by tess.matmul_add ops (tess-fuse-epilogues).
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "RowsView.h"

#include "Tess/IR/TessOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/OperationSupport.h"

namespace tessera {
#define GEN_PASS_DEF_CHUNKLOSSHEAD
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

/// The most blocks the head is split into: each block is a few launches.
constexpr int64_t kMaxBlocks = 64;

RankedTensorType rankedOf(Value value) {
  return llvm::dyn_cast<RankedTensorType>(value.getType());
}

/// What one head's rewrite reads: the matched ops.
struct LossHead {
  tess::LinearOp head;
  tess::CrossEntropyOp loss;
  tess::CrossEntropyGradOp grad;
  tess::LinearOp inputGradient; // dl W: the head input's gradient
  tess::MatmulOp weightGradient; // dl^T h
  /// What makes the input gradient's weight after the loss (a mesh rank's
  /// all-gather of the head's weight, right before that product): the
  /// blocks read it first, so it moves up before the loss.
  Operation *weightAfterLoss = nullptr;
};

/// `value` viewed as [rows, width] (itself, or the reshape it comes from).
bool isRowsOf(Value value, Value of) {
  if (value == of)
    return true;
  auto reshape = value.getDefiningOp<tess::ReshapeOp>();
  return reshape && reshape.getInput() == of;
}

/// The head of `loss` when its shape is one the rewrite covers.
std::optional<LossHead> matchHead(tess::CrossEntropyOp loss) {
  LossHead match;
  match.loss = loss;
  match.grad = loss.fusedGradient();
  if (!match.grad || loss.getAllTargets())
    return std::nullopt;
  Value logits = loss.getLogits();
  match.head = logits.getDefiningOp<tess::LinearOp>();
  if (!match.head || !llvm::hasNItems(logits.getUses(), 2))
    return std::nullopt;
  RankedTensorType logitsType = rankedOf(logits);
  RankedTensorType inputType = rankedOf(match.head.getInput());
  if (!logitsType || !inputType || !logitsType.hasStaticShape() ||
      !inputType.hasStaticShape() ||
      inputType.getShape().drop_back() != logitsType.getShape().drop_back())
    return std::nullopt;
  // The gradient's users: the input gradient dl W (a bias-free linear) and
  // the weight gradient dl^T h, dl and h flattened to rows. Anything else
  // (a bias gradient, a sharded head's collectives) is left alone.
  Value dl = match.grad.getResult();
  for (Operation *user : dl.getUsers()) {
    if (auto linear = dyn_cast<tess::LinearOp>(user)) {
      if (match.inputGradient || linear.getInput() != dl || linear.getBias())
        return std::nullopt;
      match.inputGradient = linear;
      continue;
    }
    auto reshape = dyn_cast<tess::ReshapeOp>(user);
    if (!reshape || !reshape.getResult().hasOneUse())
      return std::nullopt;
    auto matmul = dyn_cast<tess::MatmulOp>(*reshape->user_begin());
    if (!matmul || match.weightGradient || matmul.getLhs() != reshape ||
        !matmul.getTransposeLhs() || matmul.getTransposeRhs() ||
        rankedOf(matmul.getLhs()).getRank() != 2 ||
        !isRowsOf(matmul.getRhs(), match.head.getInput()))
      return std::nullopt;
    match.weightGradient = matmul;
  }
  if (!match.inputGradient || !match.weightGradient)
    return std::nullopt;
  Block *block = loss->getBlock();
  auto beforeLoss = [&](Value value) {
    Operation *definer = value.getDefiningOp();
    return !definer || definer->getBlock() != block ||
           definer->isBeforeInBlock(loss);
  };
  Value weight = match.inputGradient.getWeight();
  if (!beforeLoss(weight)) {
    Operation *definer = weight.getDefiningOp();
    if (definer->getNumRegions() != 0 ||
        !llvm::all_of(definer->getOperands(), beforeLoss))
      return std::nullopt;
    match.weightAfterLoss = definer;
  }
  return match;
}

/// The head's own weight when the input gradient's is the same gather of
/// it (a mesh rank gathers the head's weight again for the backward, so
/// that the forward's copy is free in between): the blocks, which run the
/// forward and the backward together, then hold one copy, not two.
Value sameWeight(LossHead &match) {
  Value weight = match.inputGradient.getWeight();
  Operation *again = weight.getDefiningOp();
  Operation *first = match.head.getWeight().getDefiningOp();
  if (!again || !first || again == first ||
      !OperationEquivalence::isEquivalentTo(
          again, first, OperationEquivalence::exactValueMatch,
          /*markEquivalent=*/nullptr, OperationEquivalence::IgnoreLocations))
    return {};
  return match.head.getWeight();
}

/// The blocks for `rows` rows of `rowBytes` each: the fewest (a divisor of
/// rows, at most kMaxBlocks) whose block fits `maxBytes`; 1 when the whole
/// fits or no such divisor exists.
int64_t blockCount(int64_t rows, int64_t rowBytes, int64_t maxBytes) {
  if (maxBytes <= 0 || rows * rowBytes <= maxBytes)
    return 1;
  for (int64_t blocks = 2; blocks <= std::min(rows, kMaxBlocks); ++blocks)
    if (rows % blocks == 0 && rows / blocks * rowBytes <= maxBytes)
      return blocks;
  return 1;
}

/// `value` (any shape) as rank 1.
Value asVector(OpBuilder &builder, Location loc, Value value) {
  RankedTensorType type = rankedOf(value);
  if (type.getRank() == 1)
    return value;
  return tess::ReshapeOp::create(
      builder, loc,
      RankedTensorType::get({type.getNumElements()}, type.getElementType()),
      value);
}

/// `value` split into `blocks` equal blocks along dim 0.
ValueRange splitRows(OpBuilder &builder, Location loc, Value value,
                     int64_t blocks) {
  int64_t rows = rankedOf(value).getShape().front();
  SmallVector<int64_t> sizes(blocks, rows / blocks);
  return tess::SplitOp::create(builder, loc, value, /*axis=*/0, sizes)
      .getResults();
}

/// `type` with `rows` rows (dim 0) and its last dim, rank 2.
RankedTensorType rowsType(RankedTensorType type, int64_t rows) {
  return RankedTensorType::get({rows, type.getShape().back()},
                               type.getElementType());
}

void rewrite(LossHead match, int64_t blocks) {
  tess::LinearOp head = match.head;
  Location loc = match.loss.getLoc();
  if (Value weight = sameWeight(match)) {
    Operation *again = match.inputGradient.getWeight().getDefiningOp();
    match.inputGradient.getWeightMutable().assign(weight);
    if (again->use_empty())
      again->erase();
  } else if (match.weightAfterLoss) {
    match.weightAfterLoss->moveBefore(match.loss);
  }
  OpBuilder builder(match.grad);
  builder.setInsertionPointAfter(match.grad);

  Value input = asRows(builder, loc, head.getInput());
  Value allTargets = match.loss.getTargets();
  Value targets = asVector(builder, loc, allTargets);
  ValueRange inputBlocks = splitRows(builder, loc, input, blocks);
  ValueRange targetBlocks = splitRows(builder, loc, targets, blocks);
  int64_t blockRows = rankedOf(input).getShape().front() / blocks;
  RankedTensorType logitsType = rankedOf(head.getResult());
  RankedTensorType dxType = rankedOf(match.inputGradient.getResult());

  Value loss, weightGradient;
  SmallVector<Value> inputGradients;
  for (int64_t block = 0; block < blocks; ++block) {
    IRMapping rows;
    rows.map(head.getInput(), inputBlocks[block]);
    Operation *logits = builder.clone(*head, rows);
    logits->getResult(0).setType(rowsType(logitsType, blockRows));
    Value blockLoss = tess::CrossEntropyOp::create(
        builder, loc, logits->getResult(0), targetBlocks[block], allTargets,
        match.loss.getIgnoreIndex());
    Value dl = tess::CrossEntropyGradOp::create(
        builder, loc, logits->getResult(0), targetBlocks[block],
        match.grad.getDloss(), allTargets, match.grad.getIgnoreIndex());
    IRMapping gradientRows;
    gradientRows.map(match.grad.getResult(), dl);
    Operation *dx = builder.clone(*match.inputGradient, gradientRows);
    dx->getResult(0).setType(rowsType(dxType, blockRows));
    inputGradients.push_back(dx->getResult(0));
    IRMapping products;
    products.map(match.weightGradient.getLhs(), dl);
    products.map(match.weightGradient.getRhs(), inputBlocks[block]);
    Value dw = builder.clone(*match.weightGradient, products)->getResult(0);
    // Right after the matmul: one matmul_add call, summed in place.
    weightGradient = weightGradient
                         ? tess::AddOp::create(builder, loc, dw.getType(),
                                               weightGradient, dw)
                               .getResult()
                         : dw;
    loss = loss ? tess::AddOp::create(builder, loc, loss.getType(), loss,
                                      blockLoss)
                      .getResult()
                : blockLoss;
  }
  Value dx = tess::ConcatOp::create(builder, loc, inputGradients, 0);
  if (dx.getType() != dxType)
    dx = tess::ReshapeOp::create(builder, loc, dxType, dx);

  match.inputGradient.getResult().replaceAllUsesWith(dx);
  match.weightGradient.getResult().replaceAllUsesWith(weightGradient);
  match.loss.getResult().replaceAllUsesWith(loss);
  Operation *flatGradient = match.weightGradient.getLhs().getDefiningOp();
  Operation *flatInput = match.weightGradient.getRhs().getDefiningOp();
  match.weightGradient.erase();
  flatGradient->erase();
  if (flatInput && flatInput->use_empty())
    flatInput->erase();
  match.inputGradient.erase();
  match.grad.erase();
  match.loss.erase();
  head.erase();
}

struct ChunkLossHeadPass
    : tessera::impl::ChunkLossHeadBase<ChunkLossHeadPass> {
  using ChunkLossHeadBase::ChunkLossHeadBase;
  void runOnOperation() override {
    SmallVector<LossHead> heads;
    getOperation().walk([&](tess::CrossEntropyOp loss) {
      if (std::optional<LossHead> match = matchHead(loss))
        heads.push_back(*match);
    });
    for (LossHead &match : heads) {
      RankedTensorType logitsType = rankedOf(match.head.getResult());
      int64_t classes = logitsType.getShape().back();
      int64_t rows = logitsType.getNumElements() / std::max<int64_t>(classes, 1);
      int64_t rowBytes =
          classes * std::max<int64_t>(
                        logitsType.getElementType().getIntOrFloatBitWidth() / 8,
                        1);
      int64_t blocks = blockCount(rows, rowBytes, maxBlockBytes);
      if (blocks > 1)
        rewrite(match, blocks);
    }
  }
};

} // namespace
