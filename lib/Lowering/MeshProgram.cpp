//===- MeshProgram.cpp - a partitioned step as the driver runs it ---------===//

#include "MeshProgram.h"

#include "Tess/IR/TessOps.h"
#include "tessera/Sharding/PlanAnnotation.h"

#include "llvm/ADT/StringMap.h"

using namespace mlir;
using tessera::sharding::kUnsplit;
using tessera::sharding::TensorLayout;
namespace tess = tessera::tess;

namespace tessera::lowering {
namespace {

StringRef roleOf(func::FuncOp step, unsigned argument, StringRef role) {
  if (auto name = step.getArgAttrOfType<StringAttr>(argument, role))
    return name.getValue();
  return {};
}

/// Makes the partitioned token argument `argument` (laid out as `layout`)
/// the whole micro-batch, cut to the rank's block by shard_slices at the top
/// of the step.
void takeWholeInput(func::FuncOp step, BlockArgument argument,
                    const TensorLayout &layout, const cost::DeviceMesh &mesh) {
  auto local = llvm::cast<RankedTensorType>(argument.getType());
  SmallVector<int64_t> shape(local.getShape());
  for (auto [dim, axis] : llvm::enumerate(layout.dimAxes))
    if (axis != kUnsplit)
      shape[dim] *= mesh.axes[axis].size;
  argument.setType(RankedTensorType::get(shape, local.getElementType()));

  OpBuilder builder = OpBuilder::atBlockBegin(&step.getBody().front());
  SmallVector<OpOperand *> uses;
  for (OpOperand &use : argument.getUses())
    uses.push_back(&use);
  Value value = argument;
  for (auto [dim, axis] : llvm::enumerate(layout.dimAxes)) {
    if (axis == kUnsplit)
      continue;
    shape[dim] /= mesh.axes[axis].size;
    value = tess::ShardSliceOp::create(
        builder, step.getLoc(),
        RankedTensorType::get(shape, local.getElementType()), value,
        builder.getStringAttr(mesh.axes[axis].name),
        static_cast<int64_t>(dim));
  }
  for (OpOperand *use : uses)
    use->set(value);
  step.removeArgAttr(argument.getArgNumber(),
                     builder.getStringAttr(sharding::kLayoutAttrName));
}

/// Makes the tokens and targets of `function` (the step, or a stage
/// function of it) whole; errors name `what` is laid out otherwise.
LogicalResult takeWholeInputs(func::FuncOp function,
                              const cost::DeviceMesh &mesh) {
  for (BlockArgument argument : function.getArguments()) {
    StringRef input = roleOf(function, argument.getArgNumber(), "tess.input");
    if (input != "input_ids" && input != "targets")
      continue;
    llvm::Expected<TensorLayout> layout = sharding::readLayout(argument, mesh);
    if (!layout)
      return function.emitError("tess-lower-to-emitc: @")
             << function.getSymName() << "'s '" << input
             << "': " << llvm::toString(layout.takeError());
    if (!layout->isReplicated())
      takeWholeInput(function, argument, *layout, mesh);
  }
  return success();
}

} // namespace

FailureOr<std::optional<MeshProgram>>
prepareMeshProgram(ModuleOp module, func::FuncOp step, bool pipelined) {
  auto meshAttr = module->getAttrOfType<tess::MeshAttr>(sharding::kMeshAttrName);
  if (!meshAttr) {
    if (step->hasAttr("tess.partitioned"))
      return step.emitError("tess-lower-to-emitc: a partitioned "
                            "@forward_backward in a module without a tess.mesh");
    return std::optional<MeshProgram>();
  }
  if (!step->hasAttr("tess.partitioned"))
    return step.emitError("tess-lower-to-emitc: the module has a tess.mesh "
                          "but @forward_backward is not partitioned (run "
                          "tess-partition-spmd first)");
  cost::DeviceMesh mesh = sharding::deviceMesh(meshAttr);
  MeshProgram program;
  for (const cost::MeshAxis &axis : mesh.axes) {
    program.axisNames.push_back(axis.name);
    program.axisSizes.push_back(axis.size);
  }

  auto layoutError = [&](const Twine &what, llvm::Error error) {
    return step.emitError("tess-lower-to-emitc: ")
           << what << ": " << llvm::toString(std::move(error));
  };
  llvm::StringMap<TensorLayout> parameterLayouts;
  for (BlockArgument argument : step.getArguments()) {
    unsigned number = argument.getArgNumber();
    llvm::Expected<TensorLayout> layout = sharding::readLayout(argument, mesh);
    if (!layout)
      return layoutError("argument " + Twine(number), layout.takeError());
    std::vector<int32_t> split(layout->dimAxes.begin(), layout->dimAxes.end());
    StringRef input = roleOf(step, number, "tess.input");
    if (input == "input_ids" || input == "targets") {
      if (!layout->isReplicated())
        takeWholeInput(step, argument, *layout, mesh);
      split.assign(split.size(), kUnsplit);
    } else if (!input.empty() && !layout->isReplicated()) {
      return step.emitError("tess-lower-to-emitc: input '")
             << input << "' must be replicated, the plan lays it out as \""
             << layout->print(mesh) << "\"";
    }
    if (StringRef name = roleOf(step, number, "tess.parameter"); !name.empty())
      parameterLayouts[name] = *layout;
    program.argumentSplits.push_back(std::move(split));
    std::vector<int64_t> pieces;
    if (auto attribute = step.getArgAttrOfType<DenseI64ArrayAttr>(
            number, sharding::kPiecesAttrName))
      pieces.assign(attribute.asArrayRef().begin(),
                    attribute.asArrayRef().end());
    program.argumentPieces.push_back(std::move(pieces));
  }

  for (unsigned index = 0; index < step.getNumResults(); ++index) {
    llvm::Expected<TensorLayout> layout =
        sharding::readResultLayout(step, index, mesh);
    if (!layout)
      return layoutError("result " + Twine(index), layout.takeError());
    auto gradient = step.getResultAttrOfType<StringAttr>(index, "tess.gradient");
    if (!gradient) {
      if (!layout->isReplicated())
        return step.emitError("tess-lower-to-emitc: result ")
               << index << " (the loss) leaves as \"" << layout->print(mesh)
               << "\"; every rank must return the whole loss";
      continue;
    }
    auto parameter = parameterLayouts.find(gradient.getValue());
    if (parameter == parameterLayouts.end())
      continue; // describeProgram names the missing parameter
    // A gradient may be pending over axes: the driver sums it there once
    // a step (the header's contract), or takes its shard of a whole one.
    TensorLayout completed = *layout;
    auto wholeOn =
        step.getResultAttrOfType<ArrayAttr>(index, sharding::kZeroAxesAttrName);
    if (wholeOn && layout->partialAxes.empty()) {
      int32_t axes = 0;
      for (Attribute axis : wholeOn) {
        auto name = dyn_cast<StringAttr>(axis);
        int found = name ? mesh.axisIndex(name.getValue()) : -1;
        if (found < 0)
          return step.emitError("tess-lower-to-emitc: result ")
                 << index << "'s " << sharding::kZeroAxesAttrName << " "
                 << wholeOn << " names no axis of the mesh";
        axes |= int32_t(1) << found;
      }
      program.gradientPartialAxes[gradient.getValue()] = axes;
      program.wholeGradients.insert(gradient.getValue());
    }
    if (!layout->partialAxes.empty() &&
        parameter->second.partialAxes.empty()) {
      int32_t axes = 0;
      for (unsigned axis : layout->partialAxes)
        axes |= int32_t(1) << axis;
      program.gradientPartialAxes[gradient.getValue()] = axes;
      completed.partialAxes.clear();
    }
    if (auto stage = step.getResultAttrOfType<IntegerAttr>(
            index, sharding::kZeroStageAttrName);
        stage && program.gradientPartialAxes.contains(gradient.getValue()))
      program.gradientZeroStages[gradient.getValue()] =
          static_cast<int32_t>(stage.getInt());
    if (completed != parameter->second)
      return step.emitError("tess-lower-to-emitc: the gradient of '")
             << gradient.getValue() << "' leaves as \"" << layout->print(mesh)
             << "\" but its parameter is laid out as \""
             << parameter->second.print(mesh)
             << "\"; the driver updates each rank's block of a parameter "
                "with the complete gradient of that block (partition "
                "without defer-gradient-reduction, and keep gradients in "
                "their parameters' layouts)";
  }
  // The stage functions take the whole micro-batch as the step does.
  if (pipelined)
    for (auto function : module.getOps<func::FuncOp>())
      if (function->hasAttr("tess.pipeline_stage") &&
          failed(takeWholeInputs(function, mesh)))
        return failure();
  return std::optional<MeshProgram>(std::move(program));
}

} // namespace tessera::lowering
