//===- ShapeHandlers.cpp - ONNX data movement on run-time tensors -> tess -===//
//
// Shape operands (target shapes, axes, split sizes, slice bounds) must be
// known at compile time: after the symbolic dims are bound they are, since
// the ConstantEvaluator folds the arithmetic that computes them. Shape and
// Size of a run-time tensor are read off its static type here, which is
// what makes that folding reach every node.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

using namespace mlir;
using namespace tessera::onnx_import;
namespace tess = tessera::tess;

namespace {

/// Normalized, sorted, distinct axes for a tensor of `rank`.
llvm::Expected<SmallVector<int64_t>> normalizeAxes(GraphImporter &importer,
                                                   ArrayRef<int64_t> axes,
                                                   int64_t rank) {
  SmallVector<int64_t> result;
  for (int64_t axis : axes) {
    auto normalized = tess::normalizeAxis(axis, rank);
    if (!normalized || llvm::is_contained(result, *normalized))
      return importer.nodeError("axis " + std::to_string(axis) +
                                " is out of range or repeated for rank " +
                                std::to_string(rank));
    result.push_back(*normalized);
  }
  llvm::sort(result);
  return result;
}

/// Axes from input `index` (opset 13+) or the `axes` attribute (older).
llvm::Expected<std::optional<std::vector<int64_t>>>
axesOperand(GraphImporter &importer, unsigned index) {
  if (importer.hasInput(index)) {
    llvm::Expected<const HostTensor *> axes =
        importer.requireConstantInput(index, "axes");
    if (!axes)
      return axes.takeError();
    return std::optional<std::vector<int64_t>>((*axes)->toIntVector());
  }
  return importer.intsAttr("axes");
}

llvm::Error importShape(GraphImporter &importer) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  ArrayRef<int64_t> shape = tensorType(*input).getShape();
  int64_t rank = shape.size();
  auto clamp = [&](int64_t index) {
    if (index < 0)
      index += rank;
    return std::clamp<int64_t>(index, 0, rank);
  };
  int64_t start = clamp(importer.intAttr("start", 0));
  int64_t end = clamp(importer.intAttr("end", rank));
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i)
    dims.push_back(shape[i]);
  importer.setConstantResult(0, HostTensor::vectorOfInts(dims));
  return llvm::Error::success();
}

llvm::Error importSize(GraphImporter &importer) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  importer.setConstantResult(
      0, HostTensor::scalarInt(tensorType(*input).getNumElements()));
  return llvm::Error::success();
}

llvm::Error importReshape(GraphImporter &importer) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  llvm::Expected<const HostTensor *> target =
      importer.requireConstantInput(1, "shape");
  if (!target)
    return target.takeError();
  ArrayRef<int64_t> inputShape = tensorType(*input).getShape();
  bool allowZero = importer.intAttr("allowzero", 0) != 0;
  std::vector<int64_t> shape = (*target)->toIntVector();
  int64_t known = 1, inferredIndex = -1;
  for (auto [index, dim] : llvm::enumerate(shape)) {
    if (dim == 0 && !allowZero) {
      if (index >= inputShape.size())
        return importer.nodeError("shape copies dim " + std::to_string(index) +
                                  " of a rank-" +
                                  std::to_string(inputShape.size()) + " input");
      dim = inputShape[index];
    }
    if (dim == -1) {
      if (inferredIndex >= 0)
        return importer.nodeError("shape has more than one -1");
      inferredIndex = index;
      continue;
    }
    if (dim < 0)
      return importer.nodeError("negative dim " + std::to_string(dim) +
                                " in target shape");
    known *= dim;
  }
  int64_t total = tensorType(*input).getNumElements();
  if (inferredIndex >= 0) {
    if (known == 0 || total % known != 0)
      return importer.nodeError("cannot infer the -1 dim: " +
                                std::to_string(total) +
                                " elements into blocks of " +
                                std::to_string(known));
    shape[inferredIndex] = total / known;
  } else if (known != total) {
    return importer.nodeError("cannot reshape " + std::to_string(total) +
                              " elements to " + std::to_string(known));
  }
  return setReshaped(importer, *input, shape);
}

llvm::Error importUnsqueeze(GraphImporter &importer) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  auto axes = axesOperand(importer, 1);
  if (!axes)
    return axes.takeError();
  if (!*axes)
    return importer.nodeError("Unsqueeze needs axes");
  ArrayRef<int64_t> inputShape = tensorType(*input).getShape();
  int64_t rank = inputShape.size() + (*axes)->size();
  auto normalized = normalizeAxes(importer, **axes, rank);
  if (!normalized)
    return normalized.takeError();
  SmallVector<int64_t> shape;
  auto next = inputShape.begin();
  for (int64_t i = 0; i < rank; ++i)
    shape.push_back(llvm::is_contained(*normalized, i) ? 1 : *next++);
  return setReshaped(importer, *input, shape);
}

llvm::Error importSqueeze(GraphImporter &importer) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  auto axes = axesOperand(importer, 1);
  if (!axes)
    return axes.takeError();
  ArrayRef<int64_t> inputShape = tensorType(*input).getShape();
  SmallVector<int64_t> squeezed;
  if (*axes) {
    auto normalized = normalizeAxes(importer, **axes, inputShape.size());
    if (!normalized)
      return normalized.takeError();
    squeezed = *normalized;
  } else {
    for (auto [index, dim] : llvm::enumerate(inputShape))
      if (dim == 1)
        squeezed.push_back(index);
  }
  SmallVector<int64_t> shape;
  for (auto [index, dim] : llvm::enumerate(inputShape)) {
    bool drop = llvm::is_contained(squeezed, static_cast<int64_t>(index));
    if (drop && dim != 1)
      return importer.nodeError("cannot squeeze dim " + std::to_string(index) +
                                " of size " + std::to_string(dim));
    if (!drop)
      shape.push_back(dim);
  }
  return setReshaped(importer, *input, shape);
}

llvm::Error importFlatten(GraphImporter &importer) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  ArrayRef<int64_t> inputShape = tensorType(*input).getShape();
  int64_t rank = inputShape.size();
  int64_t axis = importer.intAttr("axis", 1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    return importer.nodeError("axis out of range");
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i)
    (i < axis ? outer : inner) *= inputShape[i];
  return setReshaped(importer, *input, {outer, inner});
}

llvm::Error importTranspose(GraphImporter &importer) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  int64_t rank = tensorType(*input).getRank();
  std::vector<int64_t> permutation;
  if (auto perm = importer.intsAttr("perm"))
    permutation = *perm;
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      permutation.push_back(i);
  if (llvm::equal(permutation, llvm::seq<int64_t>(0, rank))) {
    importer.setResult(0, *input);
    return llvm::Error::success();
  }
  return importer.createResult<tess::TransposeOp>(
      {*input}, {importer.builder().getNamedAttr(
                    "permutation",
                    importer.builder().getDenseI64ArrayAttr(permutation))});
}

llvm::Error importConcat(GraphImporter &importer) {
  SmallVector<Value> inputs;
  for (unsigned i = 0; i < importer.numInputs(); ++i) {
    llvm::Expected<Value> input = importer.tensorInput(i);
    if (!input)
      return input.takeError();
    // Zero-sized pieces are legal in ONNX and contribute nothing.
    if (tensorType(*input).getNumElements() != 0 || importer.numInputs() == 1)
      inputs.push_back(*input);
  }
  return importer.createResult<tess::ConcatOp>(
      inputs, {importer.builder().getNamedAttr(
                  "axis", importer.builder().getI64IntegerAttr(
                              importer.intAttr("axis", 0)))});
}

/// Emits tess.split of `input` along `axis` into `sizes`.
llvm::Expected<tess::SplitOp> emitSplit(GraphImporter &importer, Value input,
                                        int64_t axis,
                                        ArrayRef<int64_t> sizes) {
  return importer.create<tess::SplitOp>(
      {input},
      {importer.builder().getNamedAttr(
           "axis", importer.builder().getI64IntegerAttr(axis)),
       importer.builder().getNamedAttr(
           "sizes", importer.builder().getDenseI64ArrayAttr(sizes))});
}

/// Sizes of an even split of `dim` into `parts` (the last one smaller when
/// it does not divide, as ONNX Split-18 and SplitToSequence define it).
std::vector<int64_t> evenSplit(int64_t dim, int64_t chunk) {
  std::vector<int64_t> sizes;
  for (int64_t done = 0; done < dim; done += chunk)
    sizes.push_back(std::min(chunk, dim - done));
  return sizes;
}

llvm::Error importSplit(GraphImporter &importer) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  int64_t rank = tensorType(*input).getRank();
  auto axis = tess::normalizeAxis(importer.intAttr("axis", 0), rank);
  if (!axis)
    return importer.nodeError("axis out of range");
  int64_t dim = tensorType(*input).getDimSize(*axis);
  std::vector<int64_t> sizes;
  if (importer.hasInput(1)) {
    llvm::Expected<const HostTensor *> split =
        importer.requireConstantInput(1, "split");
    if (!split)
      return split.takeError();
    sizes = (*split)->toIntVector();
  } else if (auto attr = importer.intsAttr("split")) {
    sizes = *attr;
  } else {
    int64_t parts = importer.intAttr("num_outputs", importer.node().output_size());
    if (parts <= 0)
      return importer.nodeError("Split needs a positive number of outputs");
    sizes = evenSplit(dim, (dim + parts - 1) / parts);
  }
  if (static_cast<int>(sizes.size()) != importer.node().output_size())
    return importer.nodeError("Split into " + std::to_string(sizes.size()) +
                              " pieces but the node has " +
                              std::to_string(importer.node().output_size()) +
                              " outputs");
  auto op = emitSplit(importer, *input, *axis, sizes);
  if (!op)
    return op.takeError();
  for (auto [index, result] : llvm::enumerate(op->getResults()))
    importer.setResult(index, result);
  return llvm::Error::success();
}

llvm::Error importSplitToSequence(GraphImporter &importer) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  int64_t rank = tensorType(*input).getRank();
  auto axis = tess::normalizeAxis(importer.intAttr("axis", 0), rank);
  if (!axis)
    return importer.nodeError("axis out of range");
  int64_t dim = tensorType(*input).getDimSize(*axis);
  bool keepDims = importer.intAttr("keepdims", 1) != 0;
  std::vector<int64_t> sizes;
  if (importer.hasInput(1)) {
    llvm::Expected<const HostTensor *> split =
        importer.requireConstantInput(1, "split");
    if (!split)
      return split.takeError();
    if ((*split)->getRank() == 0) {
      if ((*split)->getScalarInt() <= 0)
        return importer.nodeError("split size must be positive");
      sizes = evenSplit(dim, (*split)->getScalarInt());
    } else {
      sizes = (*split)->toIntVector();
    }
    keepDims = true;
  } else {
    sizes.assign(dim, 1);
  }
  auto op = emitSplit(importer, *input, *axis, sizes);
  if (!op)
    return op.takeError();
  std::vector<ImportedValue> elements;
  for (Value piece : op->getResults()) {
    ImportedValue element;
    element.value = piece;
    if (!keepDims) {
      SmallVector<int64_t> shape(tensorType(piece).getShape());
      shape.erase(shape.begin() + *axis);
      auto reshaped = importer.create<tess::ReshapeOp>(
          {piece}, {},
          {RankedTensorType::get(shape, tensorType(piece).getElementType())});
      if (!reshaped)
        return reshaped.takeError();
      element.value = reshaped->getResult();
    }
    elements.push_back(std::move(element));
  }
  importer.setSequenceResult(0, std::move(elements));
  return llvm::Error::success();
}

llvm::Error importSequenceAt(GraphImporter &importer) {
  llvm::Expected<const ImportedValue *> sequence = importer.sequenceInput(0);
  if (!sequence)
    return sequence.takeError();
  llvm::Expected<const HostTensor *> position =
      importer.requireConstantInput(1, "position");
  if (!position)
    return position.takeError();
  int64_t size = (*sequence)->sequence.size();
  int64_t index = (*position)->getScalarInt();
  if (index < 0)
    index += size;
  if (index < 0 || index >= size)
    return importer.nodeError("position " +
                              std::to_string((*position)->getScalarInt()) +
                              " is outside a sequence of " +
                              std::to_string(size));
  const ImportedValue &element = (*sequence)->sequence[index];
  if (element.constant)
    importer.setConstantResult(0, *element.constant);
  else
    importer.setResult(0, element.value);
  return llvm::Error::success();
}

llvm::Error importSlice(GraphImporter &importer) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  ArrayRef<int64_t> shape = tensorType(*input).getShape();
  int64_t rank = shape.size();
  auto operand = [&](unsigned index,
                     llvm::StringRef what) -> llvm::Expected<std::vector<int64_t>> {
    llvm::Expected<const HostTensor *> tensor =
        importer.requireConstantInput(index, what);
    if (!tensor)
      return tensor.takeError();
    return (*tensor)->toIntVector();
  };
  auto starts = operand(1, "starts");
  if (!starts)
    return starts.takeError();
  auto ends = operand(2, "ends");
  if (!ends)
    return ends.takeError();
  std::vector<int64_t> axes, steps(starts->size(), 1);
  if (importer.hasInput(3)) {
    auto given = operand(3, "axes");
    if (!given)
      return given.takeError();
    axes = *given;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(i);
  }
  if (importer.hasInput(4)) {
    auto given = operand(4, "steps");
    if (!given)
      return given.takeError();
    steps = *given;
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return importer.nodeError("starts, ends, axes and steps differ in length");
  SmallVector<int64_t> lower(rank, 0), upper(shape), stride(rank, 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    auto axis = tess::normalizeAxis(axes[i], rank);
    if (!axis)
      return importer.nodeError("axis " + std::to_string(axes[i]) +
                                " out of range");
    int64_t dim = shape[*axis];
    if (steps[i] <= 0)
      return importer.nodeError("Slice with step " + std::to_string(steps[i]) +
                                " on a run-time tensor is not supported");
    auto clampIndex = [&](int64_t index) {
      if (index < 0)
        index += dim;
      return std::clamp<int64_t>(index, 0, dim);
    };
    lower[*axis] = clampIndex((*starts)[i]);
    upper[*axis] = std::max(lower[*axis], clampIndex((*ends)[i]));
    stride[*axis] = steps[i];
  }
  auto &builder = importer.builder();
  return importer.createResult<tess::SliceOp>(
      {*input}, {builder.getNamedAttr("starts", builder.getDenseI64ArrayAttr(lower)),
                 builder.getNamedAttr("limits", builder.getDenseI64ArrayAttr(upper)),
                 builder.getNamedAttr("strides",
                                      builder.getDenseI64ArrayAttr(stride))});
}

llvm::Error importExpand(GraphImporter &importer) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  llvm::Expected<const HostTensor *> target =
      importer.requireConstantInput(1, "shape");
  if (!target)
    return target.takeError();
  auto shape = tess::broadcastShapes(tensorType(*input).getShape(),
                                     (*target)->toIntVector());
  if (!shape)
    return importer.nodeError("input does not broadcast to the target shape");
  auto type = RankedTensorType::get(*shape, tensorType(*input).getElementType());
  if (type == input->getType()) {
    importer.setResult(0, *input);
    return llvm::Error::success();
  }
  return importer.createResult<tess::BroadcastOp>({*input}, {}, {type});
}

/// Gather of rows of a rank-2 table is an embedding lookup; any other
/// gather stays a general tess.gather.
llvm::Error importGather(GraphImporter &importer) {
  llvm::Expected<Value> data = importer.tensorInput(0);
  if (!data)
    return data.takeError();
  llvm::Expected<Value> indices = importer.tensorInput(1);
  if (!indices)
    return indices.takeError();
  RankedTensorType dataType = tensorType(*data);
  auto axis = tess::normalizeAxis(importer.intAttr("axis", 0),
                                  dataType.getRank());
  if (!axis)
    return importer.nodeError("axis out of range");
  Type indexElement = tensorType(*indices).getElementType();
  if (!indexElement.isInteger(64) && !indexElement.isInteger(32))
    return importer.nodeError("indices must be int32 or int64");
  // Indices known now (position ids) are checked now: out of range, they
  // would read past the table at run time (e.g. --dim seq beyond GPT-2's
  // position table).
  if (const HostTensor *known = importer.constantInput(1)) {
    int64_t extent = dataType.getDimSize(*axis);
    for (int64_t i = 0, e = known->numElements(); i < e; ++i) {
      int64_t index = known->getInt(i);
      if (index < -extent || index >= extent)
        return importer.nodeError(
            "index " + std::to_string(index) + " is out of range for axis " +
            std::to_string(*axis) + " of size " + std::to_string(extent) +
            " of input '" + importer.node().input(0) + "'");
    }
  }
  if (dataType.getRank() == 2 && *axis == 0 &&
      llvm::isa<FloatType>(dataType.getElementType())) {
    auto op = importer.create<tess::EmbeddingOp>({*data, *indices});
    if (!op)
      return op.takeError();
    importer.setResult(0, op->getResult());
    return llvm::Error::success();
  }
  return importer.createResult<tess::GatherOp>(
      {*data, *indices}, {importer.builder().getNamedAttr(
                             "axis", importer.builder().getI64IntegerAttr(*axis))});
}

} // namespace

void tessera::onnx_import::registerShapeHandlers(HandlerTable &table) {
  table["Shape"] = importShape;
  table["Size"] = importSize;
  table["Reshape"] = importReshape;
  table["Unsqueeze"] = importUnsqueeze;
  table["Squeeze"] = importSqueeze;
  table["Flatten"] = importFlatten;
  table["Transpose"] = importTranspose;
  table["Concat"] = importConcat;
  table["Split"] = importSplit;
  table["SplitToSequence"] = importSplitToSequence;
  table["SequenceAt"] = importSequenceAt;
  table["Slice"] = importSlice;
  table["Expand"] = importExpand;
  table["Gather"] = importGather;
}
