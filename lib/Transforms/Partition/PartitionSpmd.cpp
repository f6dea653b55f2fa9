//===- PartitionSpmd.cpp - tess-partition-spmd ---------------------------===//
//
// The annotated training step -> the program one rank runs. Op by op, in
// program order: the layouts the op runs in (LayoutChoice.h, given the
// layouts the plan wants for its results and those its operands have), the
// collectives that bring each operand there (Reshard.h), the op itself on
// local types, and a reshard of any result that comes out other than the
// plan says. See the pass's description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "LayoutChoice.h"
#include "PieceMajorRegion.h"
#include "Reshard.h"
#include "VocabularyParallelLoss.h"

#include "tessera/Sharding/PlanAnnotation.h"
#include "tessera/Transforms/Passes.h"

#include "llvm/ADT/DenseSet.h"

namespace tessera {
#define GEN_PASS_DEF_PARTITIONSPMD
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;
using namespace tessera::partition;
using sharding::kUnsplit;
using sharding::TensorLayout;

namespace {

RankedTensorType tensorType(Value value) {
  return llvm::dyn_cast<RankedTensorType>(value.getType());
}

TensorLayout replicatedFor(Value value) {
  RankedTensorType type = tensorType(value);
  return TensorLayout::replicated(type ? type.getRank() : 0);
}

/// A scalar f32 constant.
Value scalar(OpBuilder &builder, Location location, double value) {
  auto type = RankedTensorType::get({}, builder.getF32Type());
  return tess::ConstantOp::create(
      builder, location, type,
      DenseElementsAttr::get(type, builder.getF32FloatAttr(value)));
}

/// The cross-entropy's weights when its rows are split over `axes`: this
/// rank's count of targets that are not `ignoreIndex`, and the count over
/// the whole batch (at least 1, as the single-device loss of no targets is
/// 0).
std::pair<Value, Value> targetCounts(OpBuilder &builder, Location location,
                                     Value targets, int64_t ignoreIndex,
                                     ArrayRef<unsigned> axes,
                                     const cost::DeviceMesh &mesh) {
  RankedTensorType type = tensorType(targets);
  auto indexScalar = RankedTensorType::get({}, type.getElementType());
  Value ignored = tess::ConstantOp::create(
      builder, location, indexScalar,
      DenseElementsAttr::get(
          indexScalar, builder.getIntegerAttr(type.getElementType(),
                                              ignoreIndex)));
  Value counted = tess::CompareOp::create(
      builder, location, tess::ComparisonPredicate::ne, targets, ignored);
  Value ones = tess::CastOp::create(
      builder, location,
      RankedTensorType::get(type.getShape(), builder.getF32Type()), counted);
  Value local = tess::ReduceSumOp::create(
      builder, location, ones,
      builder.getDenseI64ArrayAttr(
          llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()))),
      /*keep_dims=*/false);
  Value total = local;
  for (unsigned axis : axes)
    total = tess::AllReduceOp::create(
        builder, location, total, builder.getStringAttr(mesh.axes[axis].name),
        tess::CollectiveReduction::sum);
  total = tess::MaximumOp::create(builder, location, total,
                                  scalar(builder, location, 1.0));
  return {local, total};
}

/// The loss of a batch split over `axes` from `localLoss`, the mean over
/// this rank's rows: the mean over every rank's counted targets.
Value batchMean(OpBuilder &builder, Location location, Value localLoss,
                tess::CrossEntropyOp loss, ArrayRef<unsigned> axes,
                const cost::DeviceMesh &mesh) {
  auto [local, total] = targetCounts(builder, location, loss.getTargets(),
                                     loss.getIgnoreIndex(), axes, mesh);
  Value sum = tess::MulOp::create(builder, location, localLoss, local);
  for (unsigned axis : axes)
    sum = tess::AllReduceOp::create(
        builder, location, sum, builder.getStringAttr(mesh.axes[axis].name),
        tess::CollectiveReduction::sum);
  return tess::DivOp::create(builder, location, sum, total);
}

struct PartitionSpmdPass
    : tessera::impl::PartitionSpmdBase<PartitionSpmdPass> {
  using PartitionSpmdBase::PartitionSpmdBase;

  void runOnOperation() override;

private:
  LogicalResult partitionOp(Operation &op);
  LogicalResult markBlocks(Operation &op, const LayoutChoice &choice);
  /// `op` (a loss or its gradient whose logits arrive split over their
  /// classes) replaced by the vocabulary-parallel rewrite; the loss of a
  /// split batch combined as partitionOp combines it.
  LogicalResult partitionVocabularyParallelLoss(Operation &op,
                                                const LayoutChoice &choice);
  /// A vocabulary-parallel loss's rows, by its (local) logits: what its
  /// gradient reads.
  llvm::DenseMap<Value, VocabularyParallelRows> vocabularyRows;
  LogicalResult partitionArguments();
  LogicalResult partitionReturn();
  /// After the rewrite: every piece-major region (PieceMajorRegion.h) is
  /// still one, on local blocks of one size, its parameters split over the
  /// axis its boundaries name, no reshard along its dim in it.
  LogicalResult checkPieceMajorRegions();
  /// `value`'s layout, as the plan says it arrives here.
  const TensorLayout &layoutOf(Value value) {
    auto it = layouts.find(value);
    if (it == layouts.end())
      it = layouts.insert({value, replicatedFor(value)}).first;
    return it->second;
  }
  /// `value` moved to `to` at the builder's insertion point: the value an
  /// earlier reshard of it to `to` made when that one dominates the point
  /// and holds no more elements than `value` (a completed partial sum, a
  /// block), else new collectives. A value read in one layout by several
  /// ops (the residual stream a tensor-parallel block keeps as a partial
  /// sum, read whole by the next norm and by the return that saves it for
  /// the backward) is so completed once, not once per reader, and the
  /// earlier result lives on in place of `value`; a larger one (a gather)
  /// is made again where it is read, as ZeRO-3 gathers its weights again
  /// for the backward, rather than kept alive in between.
  FailureOr<Value> reshardTo(OpBuilder &builder, Location location,
                             Value value, const TensorLayout &to) {
    const TensorLayout &from = layoutOf(value);
    if (from == to)
      return value;
    auto elements = [](Value of) -> int64_t {
      auto type = llvm::dyn_cast<ShapedType>(of.getType());
      return type && type.hasStaticShape() ? type.getNumElements() : -1;
    };
    for (auto &[layout, moved] : reshards[value])
      if (layout == to && elements(moved) >= 0 &&
          elements(moved) <= elements(value) &&
          dominatesInsertionPoint(builder, moved))
        return moved;
    FailureOr<Value> moved = reshard(builder, location, value, from, to, mesh);
    if (succeeded(moved)) {
      layouts[*moved] = to;
      reshards[value].push_back({to, *moved});
    }
    return moved;
  }
  /// Whether `value` is defined before the builder's insertion point in its
  /// block (the step is one block).
  static bool dominatesInsertionPoint(OpBuilder &builder, Value value) {
    Block *block = builder.getInsertionBlock();
    if (auto argument = llvm::dyn_cast<BlockArgument>(value))
      return argument.getOwner() == block;
    Operation *definition = value.getDefiningOp();
    if (definition->getBlock() != block)
      return false;
    return builder.getInsertionPoint() == block->end() ||
           definition->isBeforeInBlock(&*builder.getInsertionPoint());
  }
  /// The plan's layout of `value`, or failure with a diagnostic.
  FailureOr<TensorLayout> planned(Value value, Operation *where) {
    llvm::Expected<TensorLayout> layout = sharding::readLayout(value, mesh);
    if (!layout) {
      where->emitError("tess-partition-spmd: ")
          << llvm::toString(layout.takeError());
      return failure();
    }
    return *layout;
  }

  /// Whether a gradient arriving in `arrived` is whole and the same on
  /// every rank of the axes `pending` leaves it a partial sum over (no
  /// partial sum over them, no dim split over them), outside a pipeline
  /// (whose driver sums its gradients itself, StageZero.h).
  bool wholeOnZeroAxes(const TensorLayout &arrived,
                       const TensorLayout &pending) const {
    if (pipelined || pending.partialAxes.empty())
      return false;
    return llvm::none_of(pending.partialAxes, [&](unsigned axis) {
      return arrived.isPartialOver(axis) ||
             arrived.dimSplitOver(axis) != kUnsplit;
    });
  }
  /// Returns result `index` whole instead of pending over `layout`'s
  /// partial axes, which its tess.zero_axes keeps for the driver.
  void markWholeOnZeroAxes(unsigned index, TensorLayout &layout) {
    MLIRContext *context = step.getContext();
    SmallVector<Attribute> axes;
    for (unsigned axis : layout.partialAxes)
      axes.push_back(StringAttr::get(context, mesh.axes[axis].name));
    layout.partialAxes.clear();
    step.setResultAttr(index, sharding::kLayoutAttrName,
                       sharding::layoutAttr(context, layout, mesh));
    step.setResultAttr(index, sharding::kZeroAxesAttrName,
                       ArrayAttr::get(context, axes));
  }

  func::FuncOp step;
  cost::DeviceMesh mesh;
  bool pipelined = false;
  llvm::DenseMap<Value, TensorLayout> layouts;
  /// Per value, the layouts reshardTo has moved it to and the results.
  llvm::DenseMap<Value, llvm::SmallVector<std::pair<TensorLayout, Value>, 1>>
      reshards;
  /// Every op's labels, taken while all types are global (broadcasting
  /// compares sizes).
  llvm::DenseMap<Operation *, tess::ShardingLabels> labels;
};

LogicalResult PartitionSpmdPass::partitionArguments() {
  SmallVector<Type> inputs;
  for (BlockArgument argument : step.getArguments()) {
    FailureOr<TensorLayout> layout = planned(argument, step);
    if (failed(layout))
      return failure();
    if (!layout->partialAxes.empty())
      return step.emitError("tess-partition-spmd: argument ")
             << argument.getArgNumber()
             << " cannot arrive as a partial sum";
    if (RankedTensorType type = tensorType(argument))
      argument.setType(localType(type, *layout, mesh));
    layouts[argument] = *layout;
    inputs.push_back(argument.getType());
  }
  step.setFunctionType(FunctionType::get(
      step.getContext(), inputs, step.getResultTypes()));
  return success();
}

/// An op whose local kernels need to know which block of a split dim the
/// rank holds, told by an attribute naming the dim's axis: a random op's
/// streamed dims (the rank draws its block of the stream: a dropout's or an
/// attention's batch, `stream_axis`; an attention's heads,
/// `head_stream_axis`) and a table's indexed rows (the rank looks up its
/// block of the vocabulary, `rows_axis`).
LogicalResult PartitionSpmdPass::markBlocks(Operation &op,
                                            const LayoutChoice &choice) {
  const tess::ShardingLabels &opLabels = labels[&op];
  // Each label once (the operands that share it run it on one axis).
  llvm::SmallDenseSet<int, 4> marked;
  auto mark = [&](tess::LabelKind kind,
                  llvm::function_ref<StringRef(int64_t dim)> attributeOf,
                  ArrayRef<SmallVector<int, 4>> lists,
                  ArrayRef<TensorLayout> layouts) -> LogicalResult {
    for (auto [index, list] : llvm::enumerate(lists))
      for (auto [dim, label] : llvm::enumerate(list)) {
        if (label == tess::kWhole || opLabels.kindOf(label) != kind ||
            index >= layouts.size() || !marked.insert(label).second)
          continue;
        int axis = layouts[index].dimAxes[dim];
        if (axis == kUnsplit)
          continue;
        StringRef attribute = attributeOf(dim);
        if (attribute.empty())
          return op.emitError("tess-partition-spmd: no kernel draws a block "
                              "of ")
                 << tess::stringifyLabelKind(kind) << " dim " << dim
                 << " (tess::streamBlocks names the split stream dims)";
        if (op.hasAttr(attribute))
          return op.emitError("tess-partition-spmd: the op is already a "
                              "rank's block (")
                 << attribute << ")";
        op.setAttr(attribute,
                   StringAttr::get(op.getContext(), mesh.axes[axis].name));
      }
    return success();
  };
  // The random op's own stream blocks say which attribute splits which dim
  // (asked only of an op with a streamed label, so only of a random op).
  auto streamAttribute = [&](int64_t dim) -> StringRef {
    for (const tess::StreamBlock &block : tess::streamBlocks(&op))
      if (block.dim == dim)
        return block.attribute;
    return "";
  };
  auto rowsAttribute = [](int64_t dim) -> StringRef {
    return dim == 0 ? "rows_axis" : "";
  };
  if (failed(mark(tess::LabelKind::Streamed, streamAttribute,
                  opLabels.operands, choice.operands)))
    return failure();
  if (failed(mark(tess::LabelKind::Indexed, rowsAttribute, opLabels.operands,
                  choice.operands)))
    return failure();
  return mark(tess::LabelKind::Indexed, rowsAttribute, opLabels.results,
              choice.results);
}

LogicalResult PartitionSpmdPass::partitionOp(Operation &op) {
  OpBuilder builder(&op);
  Location location = op.getLoc();
  // A block of the head's rows (tess-chunk-loss-head) is made per rank,
  // after partitioning: its batch count would need the mesh's targets.
  if (isa<tess::CrossEntropyOp, tess::CrossEntropyGradOp>(op) &&
      op.getNumOperands() > (isa<tess::CrossEntropyOp>(op) ? 2u : 3u))
    return op.emitError("tess-partition-spmd: a loss with count_over is not "
                        "partitioned (tess-chunk-loss-head runs after "
                        "tess-partition-spmd)");
  SmallVector<TensorLayout> operandLayouts, desired;
  for (Value operand : op.getOperands())
    operandLayouts.push_back(layoutOf(operand));
  for (Value result : op.getResults()) {
    FailureOr<TensorLayout> layout = planned(result, &op);
    if (failed(layout))
      return failure();
    desired.push_back(*layout);
  }
  // A table's gradient the step returns as it is: computed in the layout it
  // is returned in (a vocabulary-parallel table's, each rank its block of
  // rows, rows_axis), not whole and then sliced.
  if (isa<tess::EmbeddingGradOp>(op) && op.getResult(0).hasOneUse()) {
    OpOperand &use = *op.getResult(0).use_begin();
    if (isa<func::ReturnOp>(use.getOwner())) {
      llvm::Expected<TensorLayout> returned = sharding::readResultLayout(
          step, use.getOperandNumber(), mesh);
      if (!returned)
        return op.emitError("tess-partition-spmd: ")
               << llvm::toString(returned.takeError());
      if (returned->partialAxes.empty())
        desired[0] = *returned;
    }
  }
  op.removeAttr(sharding::kLayoutsAttrName);
  LayoutChoice choice =
      chooseLayouts(&op, labels.lookup(&op), operandLayouts, mesh, desired,
                    /*forced=*/nullptr, /*operandsAreLocal=*/true);

  for (auto [index, operand] : llvm::enumerate(op.getOperands())) {
    if (!tensorType(operand))
      continue;
    FailureOr<Value> moved =
        reshardTo(builder, location, operand, choice.operands[index]);
    if (failed(moved))
      return failure();
    op.setOperand(index, *moved);
  }

  // The loss of a split batch: the mean over every rank's targets.
  if (!choice.averagedAxes.empty()) {
    if (auto gradient = dyn_cast<tess::CrossEntropyGradOp>(op)) {
      auto [local, total] =
          targetCounts(builder, location, gradient.getTargets(),
                       gradient.getIgnoreIndex(), choice.averagedAxes, mesh);
      Value share = tess::DivOp::create(builder, location, local, total);
      gradient.getDlossMutable().assign(tess::MulOp::create(
          builder, location, gradient.getDloss(), share));
    }
  }

  for (auto [result, layout] : llvm::zip(op.getResults(), choice.results))
    if (RankedTensorType type = tensorType(result))
      result.setType(localType(type, layout, mesh));
  if (failed(markBlocks(op, choice)))
    return failure();
  // Logits split over their classes: Megatron's vocabulary-parallel loss
  // (VocabularyParallelLoss.h) in place of the op.
  if (isa<tess::CrossEntropyOp, tess::CrossEntropyGradOp>(op) &&
      choice.operands[0].rank() > 0 &&
      choice.operands[0].dimAxes.back() != kUnsplit)
    return partitionVocabularyParallelLoss(op, choice);
  if (auto split = dyn_cast<tess::SplitOp>(op)) {
    // A piece-major split (tess.piece_major) of a split dim: each piece's
    // local block.
    SmallVector<int64_t> sizes(split.getSizes());
    int64_t axis = static_cast<int64_t>(split.getAxis());
    if (axis < 0)
      axis += static_cast<int64_t>(choice.operands[0].rank());
    int dimAxis = choice.operands[0].dimAxes[axis];
    if (dimAxis != kUnsplit) {
      for (int64_t &size : sizes)
        size /= mesh.axes[dimAxis].size;
      split.setSizes(sizes);
    }
  }
  if (auto slice = dyn_cast<tess::SliceOp>(op)) {
    // Whole dims (the only ones split) end at their local size.
    SmallVector<int64_t> limits(slice.getLimits());
    for (auto [dim, axis] : llvm::enumerate(choice.results[0].dimAxes))
      if (axis != kUnsplit)
        limits[dim] = tensorType(slice.getResult()).getDimSize(dim);
    slice.setLimits(limits);
  }

  builder.setInsertionPointAfter(&op);
  if (auto loss = dyn_cast<tess::CrossEntropyOp>(op);
      loss && !choice.averagedAxes.empty()) {
    Value localLoss = loss.getResult();
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : localLoss.getUses())
      uses.push_back(&use);
    Value mean = batchMean(builder, location, localLoss, loss,
                           choice.averagedAxes, mesh);
    for (OpOperand *use : uses)
      use->set(mean);
    layouts[mean] = choice.results[0];
    layouts[localLoss] = choice.results[0];
    return success();
  }

  for (auto [index, result] : llvm::enumerate(op.getResults())) {
    layouts[result] = choice.results[index];
    if (!tensorType(result) || choice.results[index] == desired[index])
      continue;
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : result.getUses())
      uses.push_back(&use);
    FailureOr<Value> moved =
        reshardTo(builder, location, result, desired[index]);
    if (failed(moved))
      return failure();
    for (OpOperand *use : uses)
      use->set(*moved);
  }
  return success();
}

LogicalResult
PartitionSpmdPass::partitionVocabularyParallelLoss(Operation &op,
                                                   const LayoutChoice &choice) {
  OpBuilder builder(&op);
  builder.setInsertionPointAfter(&op);
  Location location = op.getLoc();
  unsigned classAxis =
      static_cast<unsigned>(choice.operands[0].dimAxes.back());
  StringRef axis = mesh.axes[classAxis].name;
  Value logits = op.getOperand(0);
  int64_t classes =
      tensorType(logits).getShape().back() * mesh.axes[classAxis].size;
  // The lowering's program description reads the loss's classes and
  // ignore index from the function once no tess.cross_entropy is left.
  auto recordLoss = [&](int64_t ignoreIndex) {
    if (!step->hasAttr("tess.vocabulary"))
      step->setAttr("tess.vocabulary", builder.getI64IntegerAttr(classes));
    step->setAttr("tess.ignore_index", builder.getI64IntegerAttr(ignoreIndex));
  };
  Value replacement;
  if (auto gradient = dyn_cast<tess::CrossEntropyGradOp>(op)) {
    recordLoss(gradient.getIgnoreIndex());
    // The rows the loss kept for it, else computed here.
    auto found = vocabularyRows.find(logits);
    VocabularyParallelRows rows =
        found != vocabularyRows.end()
            ? found->second
            : vocabularyParallelRows(builder, location, logits,
                                     gradient.getTargets(),
                                     gradient.getIgnoreIndex(), axis, classes);
    replacement = vocabularyParallelLossGradient(
        builder, location, rows, gradient.getDloss(), logits.getType());
  } else {
    auto loss = cast<tess::CrossEntropyOp>(op);
    recordLoss(loss.getIgnoreIndex());
    VocabularyParallelRows &rows = vocabularyRows[logits];
    replacement =
        vocabularyParallelLoss(builder, location, logits, loss.getTargets(),
                               loss.getIgnoreIndex(), axis, classes, rows);
    if (!choice.averagedAxes.empty())
      replacement = batchMean(builder, location, replacement, loss,
                              choice.averagedAxes, mesh);
  }
  // The classes are complete in the loss; the gradient is split as its
  // logits are.
  TensorLayout layout = choice.results[0];
  layout.partialAxes.clear();
  layouts[replacement] = layout;
  op.getResult(0).replaceAllUsesWith(replacement);
  // No entry may outlive its value (a later one could take its address).
  layouts.erase(op.getResult(0));
  reshards.erase(op.getResult(0));
  op.erase();
  return success();
}

LogicalResult PartitionSpmdPass::partitionReturn() {
  Operation *terminator = step.getBody().front().getTerminator();
  SmallVector<Type> results;
  for (auto [index, returned] : llvm::enumerate(terminator->getOperands())) {
    llvm::Expected<TensorLayout> layout =
        sharding::readResultLayout(step, index, mesh);
    if (!layout)
      return step.emitError("tess-partition-spmd: result ")
             << index << ": " << llvm::toString(layout.takeError());
    // A gradient the driver completes (tess.zero_stage: pending over its
    // ZeRO axes) is resharded where it is computed, not at the return, so
    // it is written as the backward produces it and the driver's ZeRO-2
    // ring reduces it bucket by bucket instead of holding every such
    // gradient at the step's end.
    OpBuilder builder(terminator);
    Operation *producer = returned.getDefiningOp();
    const bool zero =
        step.getResultAttr(index, sharding::kZeroStageAttrName) != nullptr;
    if (producer && zero)
      builder.setInsertionPointAfter(producer);
    // One that arrives whole on its ZeRO axes (its layer's compute
    // replicated there) is returned whole, not made a partial sum: the
    // driver takes its rank's shard of it locally (tess.zero_axes).
    if (zero && wholeOnZeroAxes(layoutOf(returned), *layout))
      markWholeOnZeroAxes(index, *layout);
    FailureOr<Value> moved =
        reshardTo(builder, terminator->getLoc(), returned, *layout);
    if (failed(moved))
      return failure();
    terminator->setOperand(index, *moved);
    results.push_back(moved->getType());
  }
  step.setFunctionType(FunctionType::get(
      step.getContext(), step.getArgumentTypes(), results));
  return success();
}

LogicalResult PartitionSpmdPass::checkPieceMajorRegions() {
  SmallVector<Operation *> boundaries;
  step.walk([&](Operation *op) {
    if (op->hasAttr(tess::kPieceMajorAttrName))
      boundaries.push_back(op);
  });
  llvm::DenseSet<Operation *> checked;
  for (Operation *boundary : boundaries) {
    if (checked.contains(boundary))
      continue;
    auto axisName =
        boundary->getAttrOfType<StringAttr>(tess::kPieceMajorAttrName);
    auto error = [&](const Twine &why) {
      return boundary->emitError("tess-partition-spmd: the piece-major "
                                 "region of this op is broken (a compiler "
                                 "bug): ")
             << why;
    };
    llvm::Expected<PieceMajorRegion> region =
        findPieceMajorRegion(step, boundary);
    if (!region)
      return error(llvm::toString(region.takeError()));
    for (Operation *op : region->boundaries) {
      checked.insert(op);
      if (op->getAttr(tess::kPieceMajorAttrName) != axisName)
        return error("its boundaries are not all marked for one axis");
    }
    for (auto [number, dim] : region->arguments) {
      const TensorLayout &layout = layoutOf(step.getArgument(number));
      auto pieces =
          step.getArgAttrOfType<DenseI64ArrayAttr>(number,
                                                   sharding::kPiecesAttrName);
      if (dim >= layout.rank() || layout.dimAxes[dim] == kUnsplit ||
          mesh.axes[layout.dimAxes[dim]].name != axisName.getValue() ||
          !pieces || pieces.asArrayRef()[dim] != region->pieces)
        return error("argument " + Twine(number) + " is not split in " +
                     Twine(region->pieces) + " pieces over " +
                     axisName.getValue());
    }
  }
  return success();
}

void PartitionSpmdPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto meshAttribute =
      module->getAttrOfType<tess::MeshAttr>(sharding::kMeshAttrName);
  if (!meshAttribute) {
    module.emitError("tess-partition-spmd needs a module with a tess.mesh "
                     "(run tess-annotate-sharding or the search first)");
    return signalPassFailure();
  }
  mesh = sharding::deviceMesh(meshAttribute);
  tess::PlanAttr plan = tess::PlanAttr::lookup(module);
  pipelined = (plan && plan.isPipelined()) || module->hasAttr("tess.pipeline");
  step = module.lookupSymbol<func::FuncOp>(this->function);
  if (!step || step.isExternal() ||
      !step.getBody().hasOneBlock()) {
    module.emitError("tess-partition-spmd: no function @")
        << this->function << " with a body of one block";
    return signalPassFailure();
  }
  // The ops of the plan; those inserted on the way are already local.
  SmallVector<Operation *> original;
  for (Operation &op : step.getBody().front().without_terminator()) {
    original.push_back(&op);
    labels[&op] = tess::shardingLabels(&op);
  }
  if (failed(partitionArguments()))
    return signalPassFailure();
  for (Operation *op : original)
    if (failed(partitionOp(*op)))
      return signalPassFailure();
  if (failed(partitionReturn()))
    return signalPassFailure();
  if (failed(checkPieceMajorRegions()))
    return signalPassFailure();
  step->setAttr("tess.partitioned", UnitAttr::get(&getContext()));
}

} // namespace
