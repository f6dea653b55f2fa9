//===- PrintShardingLabels.cpp - tess-print-sharding-labels --------------===//
//
// Prints what each op's ShardingInterface answers and, for operands laid out
// as `tess.arriving` says, the layouts LayoutChoice runs the op in: the
// per-op partition rules as text that FileCheck can hold still, one test
// file for every op kind (test/Sharding/sharding-interface.mlir).
//
//===----------------------------------------------------------------------===//

#include "LayoutChoice.h"

#include "tessera/Sharding/PlanAnnotation.h"
#include "tessera/Transforms/Passes.h"

#include "llvm/Support/raw_ostream.h"

namespace tessera {
#define GEN_PASS_DEF_PRINTSHARDINGLABELS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;
using sharding::kUnsplit;
using sharding::TensorLayout;

namespace {

constexpr llvm::StringLiteral kArrivingAttrName = "tess.arriving";

void printList(llvm::raw_ostream &os, ArrayRef<int> labels) {
  os << "[";
  llvm::interleaveComma(labels, os, [&](int label) {
    if (label == tess::kWhole)
      os << "-";
    else
      os << label;
  });
  os << "]";
}

void printLabels(llvm::raw_ostream &os, Operation *op,
                 const tess::ShardingLabels &labels) {
  os << op->getName() << "\n  labels:";
  if (labels.labels().empty())
    os << " none (replicated)";
  llvm::interleave(
      labels.labels(), os,
      [&](int label) {
        os << " " << label << " " << stringifyLabelKind(labels.kindOf(label));
      },
      ",");
  os << "\n";
  for (auto [index, list] : llvm::enumerate(labels.operands)) {
    os << "  operand " << index << ": ";
    printList(os, list);
    os << "\n";
  }
  for (auto [index, list] : llvm::enumerate(labels.results)) {
    os << "  result " << index << ": ";
    printList(os, list);
    if (!labels.summed[index].empty()) {
      os << " summed ";
      printList(os, labels.summed[index]);
    }
    if (index == 0 && !labels.averaged.empty()) {
      os << " averaged ";
      printList(os, labels.averaged);
    }
    os << "\n";
  }
  if (!labels.addedToSum.empty()) {
    os << "  added to the sum:";
    for (unsigned index : labels.addedToSum)
      os << " " << index;
    os << "\n";
  }
  if (!labels.linearGroups.empty()) {
    os << "  linear in:";
    for (const auto &group : labels.linearGroups) {
      os << " {";
      llvm::interleaveComma(group, os);
      os << "}";
    }
    os << "\n";
  }
  if (!labels.splits.empty() || labels.searchesPartialSums) {
    os << "  splits: ";
    llvm::interleaveComma(labels.splits, os, [&](const tess::NamedSplit &split) {
      os << split.name << " = " << split.label;
    });
    if (labels.searchesPartialSums)
      os << (labels.splits.empty() ? "" : ", ") << "partial sum";
    os << "\n";
  }
}

struct PrintShardingLabelsPass
    : tessera::impl::PrintShardingLabelsBase<PrintShardingLabelsPass> {
  using PrintShardingLabelsBase::PrintShardingLabelsBase;

  void runOnOperation() override {
    llvm::Expected<cost::DeviceMesh> parsed = cost::parseMesh(mesh);
    if (!parsed) {
      getOperation().emitError("tess-print-sharding-labels: mesh '")
          << mesh << "': " << llvm::toString(parsed.takeError());
      return signalPassFailure();
    }
    bool failedOnce = false;
    getOperation().walk([&](Operation *op) {
      if (!isa<tess::ShardingInterface>(op))
        return;
      tess::ShardingLabels labels = tess::shardingLabels(op);
      printLabels(llvm::outs(), op, labels);
      if (op->hasAttr(kArrivingAttrName) &&
          failed(printLayouts(op, labels, *parsed)))
        failedOnce = true;
    });
    if (failedOnce)
      signalPassFailure();
  }

  /// The layouts the op runs in for its `tess.arriving` operand layouts.
  LogicalResult printLayouts(Operation *op, const tess::ShardingLabels &labels,
                             const cost::DeviceMesh &deviceMesh) {
    auto arriving = op->getAttrOfType<ArrayAttr>(kArrivingAttrName);
    if (!arriving || arriving.size() != op->getNumOperands())
      return op->emitError("tess.arriving must be an array of one "
                           "#tess.layout per operand (")
             << op->getNumOperands() << ")";
    SmallVector<TensorLayout> layouts;
    for (auto [index, attribute] : llvm::enumerate(arriving)) {
      auto layoutAttr = llvm::dyn_cast<tess::LayoutAttr>(attribute);
      if (!layoutAttr)
        return op->emitError("tess.arriving: operand ")
               << index << "'s layout is not a #tess.layout";
      llvm::Expected<TensorLayout> layout =
          sharding::tensorLayout(layoutAttr, deviceMesh);
      if (!layout)
        return op->emitError("tess.arriving: operand ")
               << index << ": " << llvm::toString(layout.takeError());
      auto type = llvm::dyn_cast<RankedTensorType>(
          op->getOperand(index).getType());
      if (!type || layout->rank() != static_cast<size_t>(type.getRank()))
        return op->emitError("tess.arriving: operand ")
               << index << "'s layout has rank " << layout->rank()
               << ", the operand " << (type ? type.getRank() : 0);
      layouts.push_back(*layout);
    }

    partition::LayoutChoice choice =
        partition::chooseLayouts(op, labels, layouts, deviceMesh);
    // A split dim the op keeps whole is gathered before the op reads it.
    for (auto [index, layout] : llvm::enumerate(layouts))
      for (auto [dim, axis] : llvm::enumerate(layout.dimAxes)) {
        if (axis == kUnsplit || choice.operands[index].dimAxes[dim] == axis)
          continue;
        int label = labels.operands[index][dim];
        InFlightDiagnostic warning =
            op->emitWarning("operand ")
            << index << " dim " << dim << " arrives split over '"
            << deviceMesh.axes[axis].name << "', but the op ";
        if (label == tess::kWhole)
          warning << "keeps that dim whole";
        else if (!labels.isPartitionable(label))
          warning << "keeps its "
                  << stringifyLabelKind(labels.kindOf(label))
                  << " label whole (only the search splits it)";
        else
          warning << "runs with that label on another axis";
        warning << ": it is resharded first";
      }
    llvm::raw_ostream &os = llvm::outs();
    os << "  runs in: operands";
    for (const TensorLayout &layout : choice.operands)
      os << " " << layout.print(deviceMesh);
    os << " -> results";
    for (const TensorLayout &layout : choice.results)
      os << " " << layout.print(deviceMesh);
    os << "\n";
    return success();
  }
};

} // namespace
