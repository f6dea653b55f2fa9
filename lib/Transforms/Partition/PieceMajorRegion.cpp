//===- PieceMajorRegion.cpp - where a fused projection's pieces run -------===//

#include "PieceMajorRegion.h"

#include "Tess/IR/TessOps.h"
#include "Tess/IR/TessShardingLabels.h"
#include "tessera/Sharding/PlanAnnotation.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::partition;

namespace {

int64_t dimSize(Value value, unsigned dim) {
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  return type && dim < type.getRank() ? type.getDimSize(dim) : -1;
}

/// A split's or concat's axis of `value`, counted from the front.
int64_t positiveAxis(int64_t axis, Value value) {
  return axis < 0 ? axis + llvm::cast<RankedTensorType>(value.getType()).getRank()
                  : axis;
}

/// The product of `value`'s dims after `dim`.
int64_t innerElements(Value value, unsigned dim) {
  auto type = llvm::cast<RankedTensorType>(value.getType());
  int64_t product = 1;
  for (int64_t d = dim + 1; d < type.getRank(); ++d)
    product *= type.getDimSize(d);
  return product;
}

std::string describe(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << op->getName();
  if (auto location = llvm::dyn_cast<FileLineColLoc>(op->getLoc()))
    os << " at " << location.getFilename().getValue() << ":"
       << location.getLine();
  else if (auto named = llvm::dyn_cast<NameLoc>(op->getLoc()))
    os << " '" << named.getName().getValue() << "'";
  return text;
}

class Walker {
public:
  explicit Walker(func::FuncOp step) : step(step) {}

  llvm::Expected<PieceMajorRegion> run(Operation *boundary);

private:
  llvm::Error add(Value value, unsigned dim, Operation *from);
  llvm::Error visit(Operation *op, Value value, unsigned dim);
  llvm::Error boundary(Operation *op, ValueRange pieces, int64_t axis);
  llvm::Error fail(Operation *op, const Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   describe(op) + " " + why.str());
  }

  func::FuncOp step;
  PieceMajorRegion region;
  llvm::SmallVector<std::pair<Value, unsigned>> worklist;
  llvm::DenseSet<std::pair<Value, unsigned>> seen;
  llvm::DenseSet<Operation *> boundaries;
};

llvm::Error Walker::add(Value value, unsigned dim, Operation *from) {
  if (dimSize(value, dim) != region.size)
    return fail(from, llvm::formatv("maps the pieced dim (size {0}) to dim {1} "
                                    "of size {2}",
                                    region.size, dim, dimSize(value, dim)));
  if (seen.insert({value, dim}).second) {
    worklist.push_back({value, dim});
    region.values.push_back({value, dim});
  }
  return llvm::Error::success();
}

llvm::Error Walker::boundary(Operation *op, ValueRange pieces, int64_t axis) {
  int64_t count = static_cast<int64_t>(pieces.size());
  for (Value piece : pieces)
    if (count < 2 || dimSize(piece, axis) * count != region.size)
      return fail(op, "cuts the dim into unequal pieces");
  if (region.pieces && region.pieces != count)
    return fail(op, llvm::formatv("cuts the dim into {0} pieces, another "
                                  "boundary into {1}",
                                  count, region.pieces));
  region.pieces = count;
  if (boundaries.insert(op).second)
    region.boundaries.push_back(op);
  return llvm::Error::success();
}

llvm::Error Walker::visit(Operation *op, Value value, unsigned dim) {
  // The boundaries: the whole side of a split or concat along the dim.
  if (auto split = llvm::dyn_cast<tess::SplitOp>(op))
    if (value == split.getInput() &&
        positiveAxis(static_cast<int64_t>(split.getAxis()), value) == dim)
      return boundary(op, split.getResults(), dim);
  if (auto concat = llvm::dyn_cast<tess::ConcatOp>(op))
    if (value == concat.getResult() &&
        positiveAxis(static_cast<int64_t>(concat.getAxis()), value) == dim)
      return boundary(op, concat.getInputs(), dim);
  // The collectives the partitioner inserts: an all-reduce keeps every
  // position; one that moves blocks along the dim assumes contiguous ones.
  if (llvm::isa<tess::AllReduceOp>(op))
    for (Value other : {op->getOperand(0), Value(op->getResult(0))})
      if (llvm::Error error = add(other, dim, op))
        return error;
  if (llvm::isa<tess::AllReduceOp>(op))
    return llvm::Error::success();
  std::optional<int64_t> movedDim;
  if (auto gather = llvm::dyn_cast<tess::AllGatherOp>(op))
    movedDim = gather.getDim();
  else if (auto scatter = llvm::dyn_cast<tess::ReduceScatterOp>(op))
    movedDim = scatter.getDim();
  else if (auto slice = llvm::dyn_cast<tess::ShardSliceOp>(op))
    movedDim = slice.getDim();
  if (auto exchange = llvm::dyn_cast<tess::AllToAllOp>(op)) {
    if (exchange.getSplitDim() == dim || exchange.getConcatDim() == dim)
      return fail(op, "exchanges contiguous blocks of the pieced dim");
    movedDim = -1;
  }
  if (movedDim) {
    if (*movedDim == dim)
      return fail(op, "moves contiguous blocks of the pieced dim");
    for (Value other : {op->getOperand(0), Value(op->getResult(0))})
      if (llvm::Error error = add(other, dim, op))
        return error;
    return llvm::Error::success();
  }

  // Everything else by its sharding labels: the dim's label names the
  // operand and result dims that hold the same index.
  tess::ShardingLabels labels = tess::shardingLabels(op);
  llvm::SmallVector<int> found;
  for (auto [index, operand] : llvm::enumerate(op->getOperands()))
    if (operand == value && dim < labels.operands[index].size())
      found.push_back(labels.operands[index][dim]);
  for (auto [index, result] : llvm::enumerate(op->getResults()))
    if (result == value && dim < labels.results[index].size())
      found.push_back(labels.results[index][dim]);
  if (found.empty())
    return fail(op, "has no label for the pieced dim");
  for (int label : found) {
    if (label == tess::kWhole)
      return fail(op, llvm::formatv("reads the pieced dim {0} whole", dim));
    tess::LabelKind kind = labels.kindOf(label);
    if (kind != tess::LabelKind::Batch && kind != tess::LabelKind::Parallel &&
        kind != tess::LabelKind::Contracted &&
        kind != tess::LabelKind::Reduced)
      return fail(op, llvm::formatv("reads the pieced dim {0} as {1}", dim,
                                    tess::stringifyLabelKind(kind)));
    auto join = [&](Value other, unsigned otherDim) -> llvm::Error {
      // A reshape keeps positions only where it leaves the dim and every
      // inner dim alone (its labels pair the outermost dims of a group).
      if (llvm::isa<tess::ReshapeOp>(op) &&
          innerElements(other, otherDim) != innerElements(value, dim))
        return fail(op, "regroups the dims inside the pieced dim");
      return add(other, otherDim, op);
    };
    for (auto [index, list] : llvm::enumerate(labels.operands))
      for (auto [otherDim, other] : llvm::enumerate(list))
        if (other == label)
          if (llvm::Error error = join(op->getOperand(index), otherDim))
            return error;
    for (auto [index, list] : llvm::enumerate(labels.results))
      for (auto [otherDim, other] : llvm::enumerate(list))
        if (other == label)
          if (llvm::Error error = join(op->getResult(index), otherDim))
            return error;
  }
  return llvm::Error::success();
}

llvm::Expected<PieceMajorRegion> Walker::run(Operation *start) {
  Value whole;
  int64_t axis = 0;
  if (auto split = llvm::dyn_cast<tess::SplitOp>(start)) {
    whole = split.getInput();
    axis = static_cast<int64_t>(split.getAxis());
  } else if (auto concat = llvm::dyn_cast<tess::ConcatOp>(start)) {
    whole = concat.getResult();
    axis = static_cast<int64_t>(concat.getAxis());
  } else {
    return fail(start, "is neither a split nor a concat");
  }
  if (!llvm::isa<RankedTensorType>(whole.getType()))
    return fail(start, "has no ranked type");
  axis = positiveAxis(axis, whole);
  region.size = dimSize(whole, axis);
  if (llvm::Error error = add(whole, axis, start))
    return std::move(error);
  Block &body = step.getBody().front();
  while (!worklist.empty()) {
    auto [value, dim] = worklist.pop_back_val();
    if (auto argument = llvm::dyn_cast<BlockArgument>(value)) {
      unsigned number = argument.getArgNumber();
      if (argument.getOwner() != &body ||
          !(step.getArgAttr(number, "tess.parameter") ||
            step.getArgAttr(number, "tess.buffer")))
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            llvm::formatv("the pieced dim reaches argument {0}, which is no "
                          "parameter or buffer",
                          number));
      region.arguments.push_back({number, dim});
    } else if (llvm::Error error =
                   visit(value.getDefiningOp(), value, dim)) {
      return std::move(error);
    }
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (llvm::isa<func::ReturnOp>(user)) {
        unsigned index = use.getOperandNumber();
        if (!step.getResultAttr(index, "tess.gradient"))
          return llvm::createStringError(
              llvm::inconvertibleErrorCode(),
              llvm::formatv("the pieced dim reaches result {0}, which is no "
                            "gradient",
                            index));
        region.results.push_back({index, dim});
        continue;
      }
      if (llvm::Error error = visit(user, value, dim))
        return std::move(error);
    }
  }
  // A parameter and its gradient in one order: the driver updates the
  // parameter's block with the gradient's.
  for (auto [number, dim] : region.arguments) {
    auto name = step.getArgAttrOfType<StringAttr>(number, "tess.parameter");
    if (!name)
      continue;
    for (unsigned index = 0; index < step.getNumResults(); ++index) {
      auto gradient =
          step.getResultAttrOfType<StringAttr>(index, "tess.gradient");
      if (!gradient || gradient != name)
        continue;
      if (!llvm::is_contained(region.results, std::make_pair(index, dim)))
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "the gradient of " + name.getValue().str() +
                " is not computed in the pieced order");
    }
  }
  for (auto [index, dim] : region.results) {
    auto gradient = step.getResultAttrOfType<StringAttr>(index, "tess.gradient");
    bool found = false;
    for (auto [number, argumentDim] : region.arguments)
      if (auto name =
              step.getArgAttrOfType<StringAttr>(number, "tess.parameter"))
        found = found || (name == gradient && argumentDim == dim);
    if (!found)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "the gradient of " + gradient.getValue().str() +
              " is pieced, its parameter is not");
  }
  if (!region.pieces)
    return fail(start, "found no boundary");
  return std::move(region);
}

} // namespace

llvm::Expected<PieceMajorRegion>
partition::findPieceMajorRegion(func::FuncOp step, Operation *boundary) {
  return Walker(step).run(boundary);
}

/// The `tess.parameter` argument `value` is (through casts to the compute
/// type), or null.
PieceMajorDecision partition::decidePieceMajor(
    func::FuncOp step, ArrayRef<PiecedSplit> splits,
    llvm::function_ref<bool(unsigned, unsigned, unsigned)> argumentSplit,
    const llvm::DenseMap<Operation *, std::string> *broken) {
  struct Candidate {
    PiecedSplit split;
    std::optional<PieceMajorRegion> region;
    std::string why;
  };
  std::vector<Candidate> candidates;
  llvm::DenseSet<Operation *> inRegion;
  for (const PiecedSplit &split : splits) {
    Candidate candidate{split, std::nullopt, ""};
    if (inRegion.contains(split.split)) {
      candidates.push_back(std::move(candidate));
      continue;
    }
    llvm::Expected<PieceMajorRegion> region =
        findPieceMajorRegion(step, split.split);
    if (region && broken && broken->count(split.split)) {
      candidate.why = broken->lookup(split.split);
    } else if (!region) {
      candidate.why = llvm::toString(region.takeError());
    } else {
      for (auto [number, dim] : region->arguments)
        if (!argumentSplit(number, dim, split.meshAxis)) {
          auto name =
              step.getArgAttrOfType<StringAttr>(number, "tess.parameter");
          candidate.why = "argument " + std::to_string(number) +
                          (name ? " (" + name.getValue().str() + ")" : "") +
                          " is not split on the pieced dim over the split's "
                          "axis";
          break;
        }
      if (candidate.why.empty()) {
        for (Operation *boundary : region->boundaries)
          inRegion.insert(boundary);
        candidate.region = std::move(*region);
      }
    }
    candidates.push_back(std::move(candidate));
  }

  // A refused split keeps its producer's parameters whole on its axis; a
  // region through one of them is refused too.
  PieceMajorDecision decision;
  auto keepProducerWhole = [&](const Candidate &candidate) {
    Operation *producer =
        llvm::cast<tess::SplitOp>(candidate.split.split).getInput()
            .getDefiningOp();
    if (!producer)
      return;
    for (Value operand : producer->getOperands())
      if (BlockArgument argument = parameterArgument(operand))
        if (argument.getOwner() == &step.getBody().front())
          decision.wholeArguments.insert(argument.getArgNumber());
  };
  for (const Candidate &candidate : candidates)
    if (!candidate.region && !inRegion.contains(candidate.split.split))
      keepProducerWhole(candidate);
  for (bool changed = true; changed;) {
    changed = false;
    for (Candidate &candidate : candidates) {
      if (!candidate.region ||
          llvm::none_of(candidate.region->arguments, [&](auto argument) {
            return decision.wholeArguments.contains(argument.first);
          }))
        continue;
      candidate.why =
          "a parameter of its region stays whole for another split";
      for (Operation *boundary : candidate.region->boundaries)
        inRegion.erase(boundary);
      candidate.region.reset();
      keepProducerWhole(candidate);
      changed = true;
    }
  }
  for (Candidate &candidate : candidates) {
    if (candidate.region)
      decision.regions.push_back(
          {std::move(*candidate.region), candidate.split.meshAxis});
    else if (!inRegion.contains(candidate.split.split))
      decision.refused.push_back({candidate.split.split, candidate.why});
  }
  return decision;
}

void partition::markPieceMajor(func::FuncOp step,
                               const PieceMajorDecision &decision,
                               ArrayRef<std::string> axisNames) {
  MLIRContext *context = step.getContext();
  auto counts = [&](Type type, unsigned dim, int64_t pieces) {
    SmallVector<int64_t> counts(llvm::cast<RankedTensorType>(type).getRank(),
                                1);
    counts[dim] = pieces;
    return DenseI64ArrayAttr::get(context, counts);
  };
  for (const auto &[region, axis] : decision.regions) {
    auto name = StringAttr::get(context, axisNames[axis]);
    for (Operation *boundary : region.boundaries)
      boundary->setAttr(tess::kPieceMajorAttrName, name);
    for (auto [number, dim] : region.arguments)
      step.setArgAttr(number, sharding::kPiecesAttrName,
                      counts(step.getArgument(number).getType(), dim,
                             region.pieces));
    for (auto [index, dim] : region.results)
      step.setResultAttr(index, sharding::kPiecesAttrName,
                         counts(step.getResultTypes()[index], dim,
                                region.pieces));
  }
}

PieceMajorLayoutCheck::PieceMajorLayoutCheck(
    std::vector<std::pair<PieceMajorRegion, unsigned>> decided)
    : regions(std::move(decided)) {
  for (auto [index, region] : llvm::enumerate(regions))
    for (auto [value, dim] : region.first.values)
      pieces[value].push_back({dim, index});
}

void PieceMajorLayoutCheck::check(
    Value value, const sharding::TensorLayout &layout,
    llvm::function_ref<std::string(unsigned)> why,
    llvm::DenseMap<Operation *, std::string> &broken) const {
  auto found = pieces.find(value);
  if (found == pieces.end())
    return;
  for (auto [dim, index] : found->second) {
    unsigned axis = regions[index].second;
    if (dim < layout.rank() && layout.dimAxes[dim] == (int)axis)
      continue;
    std::string reason = why(axis);
    for (Operation *boundary : regions[index].first.boundaries)
      broken.try_emplace(boundary, reason);
  }
}

void partition::clearPieceMajor(func::FuncOp step) {
  step.walk([](Operation *op) { op->removeAttr(tess::kPieceMajorAttrName); });
  for (unsigned index = 0; index < step.getNumArguments(); ++index)
    step.removeArgAttr(index, sharding::kPiecesAttrName);
  for (unsigned index = 0; index < step.getNumResults(); ++index)
    step.removeResultAttr(
        index, StringAttr::get(step.getContext(), sharding::kPiecesAttrName));
}
