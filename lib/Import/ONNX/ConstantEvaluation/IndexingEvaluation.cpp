//===- IndexingEvaluation.cpp - Fold shape and indexing ONNX ops ----------===//
//
// Ops that only move elements: the shape queries (Shape, Size), the views
// that change a shape but not the data (Identity, Squeeze, Unsqueeze,
// Reshape), and the copies that select or rearrange elements (Concat, Split,
// Gather*, Slice, Expand, Transpose, Tile). The rearranging copies are
// strided walks over the input (see EvaluationSupport.h), so none of them
// looks at element values except to copy them.
//
//===----------------------------------------------------------------------===//

#include "EvaluationSupport.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <limits>

using namespace tessera::onnx_import;
using namespace tessera::onnx_import::constant_evaluation;

//===----------------------------------------------------------------------===//
// Shapes and views
//===----------------------------------------------------------------------===//

FoldResult constant_evaluation::evaluateIdentity(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(1, 1))
    return failure;
  return foldedTo(*context.input(0));
}

FoldResult constant_evaluation::evaluateSize(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(1, 1))
    return failure;
  return foldedTo(HostTensor::scalarInt(context.input(0)->numElements()));
}

FoldResult constant_evaluation::evaluateShape(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(1, 1))
    return failure;
  llvm::ArrayRef<int64_t> shape = context.input(0)->getShape();
  int64_t rank = static_cast<int64_t>(shape.size());
  auto clampBound = [&](int64_t bound) {
    if (bound < 0)
      bound += rank;
    return std::clamp<int64_t>(bound, 0, rank);
  };
  int64_t start = clampBound(context.intAttribute("start", 0));
  int64_t end = clampBound(context.intAttribute("end", rank));
  if (end < start)
    end = start;
  return foldedTo(HostTensor::vectorOfInts(shape.slice(start, end - start)));
}

/// `data` with its elements unchanged and its shape replaced.
static FoldResult reshaped(const HostTensor &data,
                           std::vector<int64_t> newShape) {
  HostTensor result = data;
  result.setShape(std::move(newShape));
  return foldedTo(std::move(result));
}

FoldResult constant_evaluation::evaluateSqueeze(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(1, 2))
    return failure;
  const HostTensor &data = *context.input(0);
  llvm::Expected<std::optional<std::vector<int64_t>>> axes =
      context.intsFromInputOrAttribute(1, "axes", 13);
  if (!axes)
    return axes.takeError();
  llvm::ArrayRef<int64_t> shape = data.getShape();
  std::vector<bool> squeezed(shape.size(), false);
  if (*axes) {
    llvm::Expected<std::vector<int64_t>> normalized =
        context.normalizeAxes(**axes, data.getRank());
    if (!normalized)
      return normalized.takeError();
    for (int64_t axis : *normalized) {
      if (shape[axis] != 1)
        return context.error("cannot squeeze axis " + llvm::Twine(axis) +
                             " of size " + llvm::Twine(shape[axis]));
      squeezed[axis] = true;
    }
  } else {
    for (size_t d = 0; d < shape.size(); ++d)
      squeezed[d] = shape[d] == 1;
  }
  std::vector<int64_t> newShape;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!squeezed[d])
      newShape.push_back(shape[d]);
  return reshaped(data, std::move(newShape));
}

FoldResult constant_evaluation::evaluateUnsqueeze(const NodeContext &context) {
  std::vector<int64_t> axes;
  if (context.getOpsetVersion() >= 13) {
    if (llvm::Error failure = context.checkInputCount(2, 2))
      return failure;
    if (llvm::Error failure =
            context.requireIntegerInput(*context.input(1), "axes"))
      return failure;
    axes = context.input(1)->toIntVector();
  } else {
    if (llvm::Error failure = context.checkInputCount(1, 1))
      return failure;
    std::optional<std::vector<int64_t>> attributeAxes =
        context.intsAttribute("axes");
    if (!attributeAxes)
      return context.error("missing required attribute 'axes'");
    axes = std::move(*attributeAxes);
  }
  const HostTensor &data = *context.input(0);
  int64_t outputRank = data.getRank() + static_cast<int64_t>(axes.size());
  llvm::Expected<std::vector<int64_t>> normalized =
      context.normalizeAxes(axes, outputRank);
  if (!normalized)
    return normalized.takeError();
  std::vector<bool> inserted(outputRank, false);
  for (int64_t axis : *normalized)
    inserted[axis] = true;
  std::vector<int64_t> newShape;
  llvm::ArrayRef<int64_t> shape = data.getShape();
  size_t next = 0;
  for (int64_t d = 0; d < outputRank; ++d)
    newShape.push_back(inserted[d] ? 1 : shape[next++]);
  return reshaped(data, std::move(newShape));
}

FoldResult constant_evaluation::evaluateReshape(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(2, 2))
    return failure;
  const HostTensor &data = *context.input(0);
  if (llvm::Error failure =
          context.requireIntegerInput(*context.input(1), "shape"))
    return failure;
  std::vector<int64_t> newShape = context.input(1)->toIntVector();
  bool allowZero = context.intAttribute("allowzero", 0) != 0;
  llvm::ArrayRef<int64_t> shape = data.getShape();
  int64_t inferredAxis = -1;
  int64_t knownCount = 1;
  bool hasZero = false;
  for (size_t d = 0; d < newShape.size(); ++d) {
    if (newShape[d] == -1) {
      if (inferredAxis >= 0)
        return context.error("shape has more than one -1");
      inferredAxis = static_cast<int64_t>(d);
      continue;
    }
    if (newShape[d] < -1)
      return context.error("shape has invalid dimension " +
                           llvm::Twine(newShape[d]));
    if (newShape[d] == 0) {
      hasZero = true;
      if (!allowZero) {
        if (d >= shape.size())
          return context.error("shape copies dimension " + llvm::Twine(d) +
                               " with 0 but the input has rank " +
                               llvm::Twine(shape.size()));
        newShape[d] = shape[d];
      }
    }
    knownCount *= newShape[d];
  }
  if (allowZero && hasZero && inferredAxis >= 0)
    return context.error("shape with allowzero=1 cannot contain both 0 and -1");
  int64_t count = data.numElements();
  if (inferredAxis >= 0) {
    if (knownCount == 0 || count % knownCount != 0)
      return context.error("cannot infer the -1 dimension reshaping " +
                           data.describe());
    newShape[inferredAxis] = count / knownCount;
  } else if (knownCount != count) {
    return context.error("cannot reshape " + data.describe() + " (" +
                         llvm::Twine(count) + " elements) to a shape with " +
                         llvm::Twine(knownCount) + " elements");
  }
  return reshaped(data, std::move(newShape));
}

//===----------------------------------------------------------------------===//
// Concat and Split
//===----------------------------------------------------------------------===//

FoldResult constant_evaluation::evaluateConcat(const NodeContext &context) {
  llvm::Expected<std::vector<const HostTensor *>> parts =
      context.variadicInputs();
  if (!parts)
    return parts.takeError();
  const onnx::AttributeProto *axisAttribute = context.attribute("axis");
  if (!axisAttribute)
    return context.error("missing required attribute 'axis'");
  const HostTensor &first = *parts->front();
  int64_t rank = first.getRank();
  if (rank == 0)
    return context.error("cannot concatenate scalars");
  llvm::Expected<int64_t> axis =
      context.normalizeAxis(axisAttribute->i(), rank);
  if (!axis)
    return axis.takeError();
  std::vector<int64_t> outputShape(first.getShape().begin(),
                                   first.getShape().end());
  outputShape[*axis] = 0;
  for (const HostTensor *part : *parts) {
    if (llvm::Error failure = context.requireSameElementType(first, *part))
      return failure;
    if (part->getRank() != rank)
      return context.error("inputs have different ranks: " + first.describe() +
                           " and " + part->describe());
    for (int64_t d = 0; d < rank; ++d)
      if (d != *axis && part->getShape()[d] != first.getShape()[d])
        return context.error(
            "inputs differ outside the concatenation axis: " +
            first.describe() + " and " + part->describe());
    outputShape[*axis] += part->getShape()[*axis];
  }
  if (exceedsFoldLimit(outputShape))
    return notFolded();
  HostTensor result = makeResult(first.getElementType(), outputShape);
  AxisBlocks blocks = blocksAroundAxis(outputShape, *axis);
  int64_t destination = 0;
  for (int64_t o = 0; o < blocks.outer; ++o) {
    for (const HostTensor *part : *parts) {
      int64_t block = part->getShape()[*axis] * blocks.inner;
      copyElements(*part, o * block, result, destination, block);
      destination += block;
    }
  }
  return foldedTo(std::move(result));
}

/// The size of each Split output along `axis`, from the `split` input or
/// attribute, from `num_outputs` (opset 18), or else equal parts.
static llvm::Expected<std::vector<int64_t>>
splitSizes(const NodeContext &context, int64_t axis, int64_t axisSize,
           int64_t outputCount) {
  llvm::Expected<std::optional<std::vector<int64_t>>> sizes =
      context.intsFromInputOrAttribute(1, "split", 13);
  if (!sizes)
    return sizes.takeError();
  const onnx::AttributeProto *numOutputs =
      context.getOpsetVersion() >= 18 ? context.attribute("num_outputs")
                                      : nullptr;
  if (*sizes && numOutputs)
    return context.error("cannot have both 'split' and 'num_outputs'");
  if (*sizes) {
    if (static_cast<int64_t>((*sizes)->size()) != outputCount)
      return context.error("split has " + llvm::Twine((*sizes)->size()) +
                           " entries for " + llvm::Twine(outputCount) +
                           " outputs");
    int64_t total = 0;
    for (int64_t size : **sizes) {
      if (size < 0)
        return context.error("split has negative entry " + llvm::Twine(size));
      total += size;
    }
    if (total != axisSize)
      return context.error("split sizes add up to " + llvm::Twine(total) +
                           " but axis " + llvm::Twine(axis) + " has size " +
                           llvm::Twine(axisSize));
    return std::move(**sizes);
  }
  if (numOutputs && numOutputs->i() != outputCount)
    return context.error("num_outputs is " + llvm::Twine(numOutputs->i()) +
                         " but the node has " + llvm::Twine(outputCount) +
                         " outputs");
  if (axisSize % outputCount == 0)
    return std::vector<int64_t>(outputCount, axisSize / outputCount);
  if (!numOutputs)
    return context.error("cannot split axis of size " + llvm::Twine(axisSize) +
                         " evenly into " + llvm::Twine(outputCount) +
                         " outputs");
  // Opset 18: equal chunks of ceil(size / n), the last one smaller.
  int64_t chunk = (axisSize + outputCount - 1) / outputCount;
  int64_t last = axisSize - chunk * (outputCount - 1);
  if (last <= 0)
    return context.error("cannot split axis of size " + llvm::Twine(axisSize) +
                         " into " + llvm::Twine(outputCount) + " outputs");
  std::vector<int64_t> equalChunks(outputCount - 1, chunk);
  equalChunks.push_back(last);
  return equalChunks;
}

FoldResult constant_evaluation::evaluateSplit(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(1, 2))
    return failure;
  const HostTensor &data = *context.input(0);
  if (data.getRank() == 0)
    return context.error("cannot split a scalar");
  llvm::Expected<int64_t> axis =
      context.normalizeAxis(context.intAttribute("axis", 0), data.getRank());
  if (!axis)
    return axis.takeError();
  int64_t outputCount = context.getNode().output_size();
  if (outputCount < 1)
    return context.error("has no outputs");
  llvm::ArrayRef<int64_t> shape = data.getShape();
  int64_t axisSize = shape[*axis];
  llvm::Expected<std::vector<int64_t>> sizes =
      splitSizes(context, *axis, axisSize, outputCount);
  if (!sizes)
    return sizes.takeError();

  AxisBlocks blocks = blocksAroundAxis(shape, *axis);
  std::vector<HostTensor> results;
  int64_t axisOffset = 0;
  for (int64_t size : *sizes) {
    std::vector<int64_t> partShape(shape.begin(), shape.end());
    partShape[*axis] = size;
    HostTensor part = makeResult(data.getElementType(), partShape);
    for (int64_t o = 0; o < blocks.outer; ++o)
      copyElements(data, (o * axisSize + axisOffset) * blocks.inner, part,
                   o * size * blocks.inner, size * blocks.inner);
    axisOffset += size;
    results.push_back(std::move(part));
  }
  return std::optional<std::vector<HostTensor>>(std::move(results));
}

//===----------------------------------------------------------------------===//
// Gather, GatherElements, GatherND, ScatterND
//===----------------------------------------------------------------------===//

/// The data and integer indices operands that every Gather variant takes.
static llvm::Error checkGatherOperands(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(2, 2))
    return failure;
  return context.requireIntegerInput(*context.input(1), "indices");
}

FoldResult constant_evaluation::evaluateGather(const NodeContext &context) {
  if (llvm::Error failure = checkGatherOperands(context))
    return failure;
  const HostTensor &data = *context.input(0);
  const HostTensor &indices = *context.input(1);
  if (data.getRank() == 0)
    return context.error("cannot gather from a scalar");
  llvm::Expected<int64_t> axis =
      context.normalizeAxis(context.intAttribute("axis", 0), data.getRank());
  if (!axis)
    return axis.takeError();
  llvm::ArrayRef<int64_t> dataShape = data.getShape();
  int64_t axisSize = dataShape[*axis];
  llvm::Expected<std::vector<int64_t>> positions =
      context.normalizeIndices(indices, *axis, axisSize);
  if (!positions)
    return positions.takeError();

  std::vector<int64_t> outputShape(dataShape.begin(),
                                   dataShape.begin() + *axis);
  llvm::append_range(outputShape, indices.getShape());
  outputShape.insert(outputShape.end(), dataShape.begin() + *axis + 1,
                     dataShape.end());
  if (exceedsFoldLimit(outputShape))
    return notFolded();
  HostTensor result = makeResult(data.getElementType(), outputShape);
  AxisBlocks blocks = blocksAroundAxis(dataShape, *axis);
  int64_t destination = 0;
  for (int64_t o = 0; o < blocks.outer; ++o) {
    for (int64_t position : *positions) {
      copyElements(data, (o * axisSize + position) * blocks.inner, result,
                   destination, blocks.inner);
      destination += blocks.inner;
    }
  }
  return foldedTo(std::move(result));
}

FoldResult
constant_evaluation::evaluateGatherElements(const NodeContext &context) {
  if (llvm::Error failure = checkGatherOperands(context))
    return failure;
  const HostTensor &data = *context.input(0);
  const HostTensor &indices = *context.input(1);
  int64_t rank = data.getRank();
  if (rank == 0 || indices.getRank() != rank)
    return context.error("data " + data.describe() + " and indices " +
                         indices.describe() +
                         " must have the same non-zero rank");
  llvm::Expected<int64_t> axis =
      context.normalizeAxis(context.intAttribute("axis", 0), rank);
  if (!axis)
    return axis.takeError();
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis && indices.getShape()[d] > data.getShape()[d])
      return context.error("indices " + indices.describe() +
                           " are larger than data " + data.describe() +
                           " outside the gather axis");
  int64_t axisSize = data.getShape()[*axis];
  llvm::Expected<std::vector<int64_t>> positions =
      context.normalizeIndices(indices, *axis, axisSize);
  if (!positions)
    return positions.takeError();

  Strides dataStrides = contiguousStrides(data.getShape());
  int64_t axisStride = dataStrides[*axis];
  Strides walkStrides = dataStrides;
  walkStrides[*axis] = 0;
  HostTensor result = makeResult(data.getElementType(), indices.getShape());
  const int64_t *position = positions->data();
  withStorage(data, result, [&](const auto *source, auto *destination) {
    walk<1>(indices.getShape(), {walkStrides}, {0},
            [&](int64_t i, const std::array<int64_t, 1> &offset) {
              destination[i] = source[offset[0] + position[i] * axisStride];
            });
  });
  return foldedTo(std::move(result));
}

FoldResult constant_evaluation::evaluateGatherND(const NodeContext &context) {
  if (llvm::Error failure = checkGatherOperands(context))
    return failure;
  const HostTensor &data = *context.input(0);
  const HostTensor &indices = *context.input(1);
  llvm::ArrayRef<int64_t> dataShape = data.getShape();
  llvm::ArrayRef<int64_t> indicesShape = indices.getShape();
  int64_t dataRank = data.getRank();
  int64_t indicesRank = indices.getRank();
  int64_t batchDims = context.intAttribute("batch_dims", 0);
  if (dataRank < 1 || indicesRank < 1)
    return context.error("data and indices must have rank at least 1");
  if (batchDims < 0 || batchDims >= std::min(dataRank, indicesRank))
    return context.error("batch_dims " + llvm::Twine(batchDims) +
                         " must be less than the ranks of data and indices");
  for (int64_t d = 0; d < batchDims; ++d)
    if (dataShape[d] != indicesShape[d])
      return context.error("batch dimension " + llvm::Twine(d) +
                           " differs: data " + data.describe() +
                           ", indices " + indices.describe());
  int64_t tupleSize = indicesShape.back();
  if (tupleSize < 1 || tupleSize > dataRank - batchDims)
    return context.error("last indices dimension " + llvm::Twine(tupleSize) +
                         " must be between 1 and " +
                         llvm::Twine(dataRank - batchDims));

  std::vector<int64_t> outputShape(indicesShape.begin(),
                                   indicesShape.end() - 1);
  llvm::ArrayRef<int64_t> sliceShape =
      dataShape.drop_front(batchDims + tupleSize);
  llvm::append_range(outputShape, sliceShape);
  if (exceedsFoldLimit(outputShape))
    return notFolded();

  int64_t sliceSize = product(sliceShape);
  int64_t batchCount = product(indicesShape.take_front(batchDims));
  int64_t tupleCount = product(indicesShape.drop_back());
  int64_t tuplesPerBatch = batchCount == 0 ? 0 : tupleCount / batchCount;
  int64_t dataBatchStride = product(dataShape.drop_front(batchDims));
  Strides dataStrides = contiguousStrides(dataShape);
  llvm::ArrayRef<int64_t> indexValues = indices.getIntData();
  HostTensor result = makeResult(data.getElementType(), outputShape);
  for (int64_t tuple = 0; tuple < tupleCount; ++tuple) {
    int64_t offset = (tuple / tuplesPerBatch) * dataBatchStride;
    for (int64_t k = 0; k < tupleSize; ++k) {
      int64_t index = indexValues[tuple * tupleSize + k];
      int64_t size = dataShape[batchDims + k];
      if (index < -size || index >= size)
        return context.error("index " + llvm::Twine(index) +
                             " is out of range for data dimension " +
                             llvm::Twine(batchDims + k) + " of size " +
                             llvm::Twine(size));
      if (index < 0)
        index += size;
      offset += index * dataStrides[batchDims + k];
    }
    copyElements(data, offset, result, tuple * sliceSize, sliceSize);
  }
  return foldedTo(std::move(result));
}

/// ScatterND without a reduction: the data with each update's slice written
/// at its index tuple. OPT's and BLOOM's exports build their masks so (an
/// in-place slice assignment); a reduction is left to the importer.
FoldResult constant_evaluation::evaluateScatterND(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(3, 3))
    return failure;
  const HostTensor &data = *context.input(0);
  const HostTensor &indices = *context.input(1);
  const HostTensor &updates = *context.input(2);
  if (llvm::Error failure = context.requireIntegerInput(indices, "indices"))
    return failure;
  const onnx::AttributeProto *reduction = context.attribute("reduction");
  if (reduction && reduction->s() != "none")
    return notFolded();
  llvm::ArrayRef<int64_t> dataShape = data.getShape();
  llvm::ArrayRef<int64_t> indicesShape = indices.getShape();
  if (data.getRank() < 1 || indices.getRank() < 1)
    return context.error("data and indices must have rank at least 1");
  int64_t tupleSize = indicesShape.back();
  if (tupleSize < 1 || tupleSize > data.getRank())
    return context.error("last indices dimension " + llvm::Twine(tupleSize) +
                         " must be between 1 and " +
                         llvm::Twine(data.getRank()));
  std::vector<int64_t> updatesShape(indicesShape.begin(),
                                    indicesShape.end() - 1);
  llvm::append_range(updatesShape, dataShape.drop_front(tupleSize));
  if (updates.getShape() != llvm::ArrayRef<int64_t>(updatesShape) ||
      updates.getElementType() != data.getElementType())
    return context.error("updates " + updates.describe() +
                         " must have the data's element type and the shape "
                         "indices.shape[:-1] + data.shape[indices.shape[-1]:]");
  if (exceedsFoldLimit(dataShape))
    return notFolded();
  int64_t sliceSize = product(dataShape.drop_front(tupleSize));
  int64_t tupleCount = product(indicesShape.drop_back());
  Strides dataStrides = contiguousStrides(dataShape);
  HostTensor result = data;
  for (int64_t tuple = 0; tuple < tupleCount; ++tuple) {
    int64_t offset = 0;
    for (int64_t k = 0; k < tupleSize; ++k) {
      int64_t index = indices.getInt(tuple * tupleSize + k);
      int64_t size = dataShape[k];
      if (index < -size || index >= size)
        return context.error("index " + llvm::Twine(index) +
                             " is out of range for data dimension " +
                             llvm::Twine(k) + " of size " + llvm::Twine(size));
      offset += (index < 0 ? index + size : index) * dataStrides[k];
    }
    copyElements(updates, tuple * sliceSize, result, offset, sliceSize);
  }
  return foldedTo(std::move(result));
}

//===----------------------------------------------------------------------===//
// Strided copies: Slice, Expand, Transpose, Tile
//===----------------------------------------------------------------------===//

/// Slice's starts, ends, axes and steps, from attributes before opset 10 and
/// inputs from then on. Absent axes and steps are left empty.
struct SliceParameters {
  std::vector<int64_t> starts, ends, axes, steps;
};

static llvm::Expected<SliceParameters>
readSliceParameters(const NodeContext &context) {
  SliceParameters parameters;
  if (context.getOpsetVersion() < 10) {
    if (llvm::Error failure = context.checkInputCount(1, 1))
      return std::move(failure);
    std::optional<std::vector<int64_t>> startsAttribute =
        context.intsAttribute("starts");
    std::optional<std::vector<int64_t>> endsAttribute =
        context.intsAttribute("ends");
    if (!startsAttribute || !endsAttribute)
      return context.error("missing required attribute 'starts' or 'ends'");
    parameters.starts = std::move(*startsAttribute);
    parameters.ends = std::move(*endsAttribute);
    parameters.axes =
        context.intsAttribute("axes").value_or(std::vector<int64_t>());
    return parameters;
  }
  if (llvm::Error failure = context.checkInputCount(3, 5))
    return std::move(failure);
  if (llvm::Error failure = context.requireInputs({1, 2}))
    return std::move(failure);
  std::array<std::vector<int64_t> *, 4> lists = {
      &parameters.starts, &parameters.ends, &parameters.axes,
      &parameters.steps};
  std::array<llvm::StringRef, 4> names = {"starts", "ends", "axes", "steps"};
  for (size_t i = 0; i < lists.size(); ++i)
    if (const HostTensor *list = context.input(i + 1))
      if (llvm::Error failure = context.requireIntegerInput(*list, names[i]))
        return std::move(failure);
  for (size_t i = 0; i < lists.size(); ++i)
    if (const HostTensor *list = context.input(i + 1))
      *lists[i] = list->toIntVector();
  return parameters;
}

FoldResult constant_evaluation::evaluateSlice(const NodeContext &context) {
  llvm::Expected<SliceParameters> parameters = readSliceParameters(context);
  if (!parameters)
    return parameters.takeError();
  auto &[starts, ends, axes, steps] = *parameters;
  bool hasInputs = context.getOpsetVersion() >= 10;
  const HostTensor &data = *context.input(0);
  int64_t rank = data.getRank();
  if (axes.empty() && !(hasInputs && context.input(3)))
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  if (steps.empty() && !(hasInputs && context.input(4)))
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return context.error(
        "starts, ends, axes and steps must have the same length");
  llvm::Expected<std::vector<int64_t>> normalizedAxes =
      context.normalizeAxes(axes, rank);
  if (!normalizedAxes)
    return normalizedAxes.takeError();

  std::vector<int64_t> outputShape(data.getShape().begin(),
                                   data.getShape().end());
  Strides dataStrides = contiguousStrides(data.getShape());
  Strides walkStrides = dataStrides;
  int64_t baseOffset = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = (*normalizedAxes)[i];
    int64_t size = outputShape[axis];
    int64_t step = steps[i];
    if (step == 0)
      return context.error("slice step for axis " + llvm::Twine(axis) +
                           " must not be 0");
    int64_t start = starts[i];
    int64_t end = ends[i];
    // Negative bounds count from the end; then clamp so that INT64_MAX and
    // INT64_MIN mean "to the end" in either direction.
    if (start < 0)
      start += size;
    if (end < 0)
      end += size;
    int64_t length = 0;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, size);
      end = std::clamp<int64_t>(end, 0, size);
      if (end > start)
        length = (end - start - 1) / step + 1;
    } else {
      start = std::clamp<int64_t>(start, 0, size - 1);
      end = std::clamp<int64_t>(end, -1, size - 1);
      int64_t magnitude =
          step == std::numeric_limits<int64_t>::min() ? INT64_MAX : -step;
      if (start > end)
        length = (start - end - 1) / magnitude + 1;
    }
    outputShape[axis] = length;
    if (length > 0)
      baseOffset += start * dataStrides[axis];
    // With one element along the axis the stride is never used; avoid
    // overflowing it for huge steps.
    walkStrides[axis] = length > 1 ? step * dataStrides[axis] : 0;
  }
  return foldedTo(stridedCopy(data, outputShape, walkStrides, baseOffset));
}

FoldResult constant_evaluation::evaluateExpand(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(2, 2))
    return failure;
  const HostTensor &data = *context.input(0);
  llvm::Expected<std::vector<int64_t>> requested =
      context.shapeInput(*context.input(1));
  if (!requested)
    return requested.takeError();
  llvm::Expected<std::vector<int64_t>> outputShape =
      broadcastShapes(data.getShape(), *requested);
  if (!outputShape)
    return context.error(llvm::toString(outputShape.takeError()));
  if (exceedsFoldLimit(*outputShape))
    return notFolded();
  return foldedTo(stridedCopy(
      data, *outputShape, broadcastStrides(data.getShape(), *outputShape), 0));
}

FoldResult constant_evaluation::evaluateTranspose(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(1, 1))
    return failure;
  const HostTensor &data = *context.input(0);
  int64_t rank = data.getRank();
  std::vector<int64_t> permutation;
  if (std::optional<std::vector<int64_t>> perm =
          context.intsAttribute("perm")) {
    permutation = std::move(*perm);
  } else {
    for (int64_t d = rank - 1; d >= 0; --d)
      permutation.push_back(d);
  }
  if (static_cast<int64_t>(permutation.size()) != rank)
    return context.error("perm has " + llvm::Twine(permutation.size()) +
                         " entries for an input of rank " + llvm::Twine(rank));
  std::vector<bool> used(rank, false);
  for (int64_t axis : permutation) {
    if (axis < 0 || axis >= rank || used[axis])
      return context.error("perm is not a permutation of 0.." +
                           llvm::Twine(rank - 1));
    used[axis] = true;
  }
  Strides dataStrides = contiguousStrides(data.getShape());
  std::vector<int64_t> outputShape;
  Strides walkStrides;
  for (int64_t axis : permutation) {
    outputShape.push_back(data.getShape()[axis]);
    walkStrides.push_back(dataStrides[axis]);
  }
  return foldedTo(stridedCopy(data, outputShape, walkStrides, 0));
}

FoldResult constant_evaluation::evaluateTile(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(2, 2))
    return failure;
  const HostTensor &data = *context.input(0);
  const HostTensor &repeatsInput = *context.input(1);
  if (llvm::Error failure =
          context.requireIntegerInput(repeatsInput, "repeats"))
    return failure;
  std::vector<int64_t> repeats = repeatsInput.toIntVector();
  int64_t rank = data.getRank();
  if (static_cast<int64_t>(repeats.size()) != rank)
    return context.error("repeats has " + llvm::Twine(repeats.size()) +
                         " entries for an input of rank " + llvm::Twine(rank));
  // Output dimension d, read as (repeat, position) pairs, is a row-major walk
  // over [repeats[d], size[d]] with stride 0 for the repeat.
  Strides dataStrides = contiguousStrides(data.getShape());
  std::vector<int64_t> pairedShape, outputShape;
  Strides pairedStrides;
  for (int64_t d = 0; d < rank; ++d) {
    if (repeats[d] < 0)
      return context.error("repeats has negative entry " +
                           llvm::Twine(repeats[d]));
    pairedShape.push_back(repeats[d]);
    pairedShape.push_back(data.getShape()[d]);
    pairedStrides.push_back(0);
    pairedStrides.push_back(dataStrides[d]);
  }
  if (exceedsFoldLimit(pairedShape))
    return notFolded();
  for (int64_t d = 0; d < rank; ++d)
    outputShape.push_back(repeats[d] * data.getShape()[d]);
  HostTensor result = stridedCopy(data, pairedShape, pairedStrides, 0);
  result.setShape(std::move(outputShape));
  return foldedTo(std::move(result));
}
