//===- EvaluationSupport.cpp - Shared pieces of the constant evaluator ----===//
//
// The non-template helpers declared in EvaluationSupport.h: shape and stride
// arithmetic, result allocation and copies, and NodeContext's input checks
// and attribute readers.
//
//===----------------------------------------------------------------------===//

#include "EvaluationSupport.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

using namespace tessera::onnx_import;
using namespace tessera::onnx_import::constant_evaluation;
using onnx::TensorProto;

//===----------------------------------------------------------------------===//
// Shape and stride helpers
//===----------------------------------------------------------------------===//

int64_t constant_evaluation::product(llvm::ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

bool constant_evaluation::exceedsFoldLimit(llvm::ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim == 0)
      return false;
  }
  for (int64_t dim : shape) {
    if (dim > kMaxFoldedElements / count)
      return true;
    count *= dim;
  }
  return false;
}

Strides constant_evaluation::contiguousStrides(llvm::ArrayRef<int64_t> shape) {
  Strides strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

Strides
constant_evaluation::broadcastStrides(llvm::ArrayRef<int64_t> inputShape,
                                      llvm::ArrayRef<int64_t> outputShape) {
  Strides inputStrides = contiguousStrides(inputShape);
  Strides strides(outputShape.size(), 0);
  size_t offset = outputShape.size() - inputShape.size();
  for (size_t d = 0; d < inputShape.size(); ++d)
    strides[offset + d] = inputShape[d] == 1 ? 0 : inputStrides[d];
  return strides;
}

AxisBlocks constant_evaluation::blocksAroundAxis(llvm::ArrayRef<int64_t> shape,
                                                 int64_t axis) {
  return {product(shape.take_front(axis)), product(shape.drop_front(axis + 1))};
}

//===----------------------------------------------------------------------===//
// Tensor storage
//===----------------------------------------------------------------------===//

HostTensor constant_evaluation::makeResult(int32_t elementType,
                                           llvm::ArrayRef<int64_t> shape) {
  return HostTensor::zeros(elementType,
                           std::vector<int64_t>(shape.begin(), shape.end()));
}

HostTensor
constant_evaluation::stridedCopy(const HostTensor &input,
                                 llvm::ArrayRef<int64_t> outputShape,
                                 const Strides &strides, int64_t baseOffset) {
  HostTensor result = makeResult(input.getElementType(), outputShape);
  withStorage(input, result, [&](const auto *source, auto *destination) {
    walk<1>(outputShape, {strides}, {baseOffset},
            [&](int64_t i, const std::array<int64_t, 1> &offset) {
              destination[i] = source[offset[0]];
            });
  });
  return result;
}

void constant_evaluation::copyElements(const HostTensor &source,
                                       int64_t sourceOffset,
                                       HostTensor &destination,
                                       int64_t destinationOffset,
                                       int64_t count) {
  withStorage(source, destination, [&](const auto *from, auto *to) {
    std::copy(from + sourceOffset, from + sourceOffset + count,
              to + destinationOffset);
  });
}

std::pair<int64_t, int64_t>
constant_evaluation::integerRange(int32_t elementType) {
  switch (elementType) {
  case TensorProto::BOOL:
    return {0, 1};
  case TensorProto::INT8:
    return {INT8_MIN, INT8_MAX};
  case TensorProto::UINT8:
    return {0, UINT8_MAX};
  case TensorProto::INT16:
    return {INT16_MIN, INT16_MAX};
  case TensorProto::UINT16:
    return {0, UINT16_MAX};
  case TensorProto::INT32:
    return {INT32_MIN, INT32_MAX};
  case TensorProto::UINT32:
    return {0, UINT32_MAX};
  case TensorProto::UINT64:
    return {0, -1}; // The bit pattern of UINT64_MAX.
  default:
    return {INT64_MIN, INT64_MAX};
  }
}

//===----------------------------------------------------------------------===//
// NodeContext
//===----------------------------------------------------------------------===//

llvm::Error NodeContext::error(const llvm::Twine &message) const {
  std::string name = node.name();
  if (name.empty())
    name = node.output_size() > 0 ? "<unnamed, output " + node.output(0) + ">"
                                  : "<unnamed>";
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "node '" + name + "' (" + node.op_type() +
                                     "): " + message);
}

const HostTensor *NodeContext::input(size_t index) const {
  if (index >= inputs.size())
    return nullptr;
  if (static_cast<int>(index) < node.input_size() &&
      node.input(static_cast<int>(index)).empty())
    return nullptr;
  return inputs[index];
}

llvm::Error NodeContext::checkInputCount(size_t minimum, size_t maximum) const {
  size_t count =
      std::max(static_cast<size_t>(node.input_size()), inputs.size());
  // Trailing absent optional inputs do not count.
  while (count > 0 && !input(count - 1))
    --count;
  if (count < minimum || count > maximum) {
    if (minimum == maximum)
      return error("expected " + llvm::Twine(minimum) + " inputs, got " +
                   llvm::Twine(count));
    return error("expected " + llvm::Twine(minimum) + " to " +
                 llvm::Twine(maximum) + " inputs, got " + llvm::Twine(count));
  }
  // An absent input in the middle (an empty name) is only legal where the
  // op marks it optional, which is never among the first `minimum`.
  for (size_t index = 0; index < minimum; ++index)
    if (!input(index))
      return error("required input " + llvm::Twine(index) + " is missing");
  return llvm::Error::success();
}

llvm::Error
NodeContext::requireInputs(std::initializer_list<size_t> indices) const {
  for (size_t index : indices)
    if (!input(index))
      return error("required input " + llvm::Twine(index) + " is missing");
  return llvm::Error::success();
}

llvm::Expected<std::vector<const HostTensor *>>
NodeContext::variadicInputs() const {
  size_t count =
      std::max(static_cast<size_t>(node.input_size()), inputs.size());
  if (count == 0)
    return error("expected at least 1 input");
  std::vector<const HostTensor *> all;
  for (size_t i = 0; i < count; ++i) {
    if (!input(i))
      return error("input " + llvm::Twine(i) + " is missing");
    all.push_back(input(i));
  }
  return all;
}

llvm::Error NodeContext::requireSameElementType(const HostTensor &lhs,
                                                const HostTensor &rhs) const {
  if (lhs.getElementType() == rhs.getElementType())
    return llvm::Error::success();
  return error("input element types differ: " + lhs.describe() + " and " +
               rhs.describe());
}

llvm::Error NodeContext::requireIntegerInput(const HostTensor &tensor,
                                             llvm::StringRef what) const {
  if (tensor.isInteger() && !tensor.isBool())
    return llvm::Error::success();
  return error(what + " must be an integer tensor, got " + tensor.describe());
}

llvm::Error NodeContext::requireFloatInput(const HostTensor &tensor) const {
  if (tensor.isFloat())
    return llvm::Error::success();
  return error("input must be a floating-point tensor, got " +
               tensor.describe());
}

llvm::Expected<std::vector<int64_t>>
NodeContext::shapeInput(const HostTensor &tensor) const {
  if (llvm::Error failure = requireIntegerInput(tensor, "shape"))
    return std::move(failure);
  if (tensor.getRank() > 1)
    return error("shape must be a 1-D tensor, got " + tensor.describe());
  std::vector<int64_t> shape = tensor.toIntVector();
  for (int64_t dim : shape)
    if (dim < 0)
      return error("shape has negative dimension " + llvm::Twine(dim));
  return shape;
}

const onnx::AttributeProto *NodeContext::attribute(llvm::StringRef name) const {
  for (const onnx::AttributeProto &candidate : node.attribute())
    if (candidate.name() == name)
      return &candidate;
  return nullptr;
}

int64_t NodeContext::intAttribute(llvm::StringRef name,
                                  int64_t defaultValue) const {
  const onnx::AttributeProto *found = attribute(name);
  return found ? found->i() : defaultValue;
}

std::optional<std::vector<int64_t>>
NodeContext::intsAttribute(llvm::StringRef name) const {
  const onnx::AttributeProto *found = attribute(name);
  if (!found)
    return std::nullopt;
  return std::vector<int64_t>(found->ints().begin(), found->ints().end());
}

llvm::Expected<std::optional<std::vector<int64_t>>>
NodeContext::intsFromInputOrAttribute(size_t inputIndex, llvm::StringRef name,
                                      int64_t inputOpset) const {
  if (opsetVersion < inputOpset)
    return intsAttribute(name);
  const HostTensor *values = input(inputIndex);
  if (!values)
    return std::nullopt;
  if (llvm::Error failure = requireIntegerInput(*values, name))
    return std::move(failure);
  return values->toIntVector();
}

llvm::Expected<int64_t> NodeContext::normalizeAxis(int64_t axis,
                                                   int64_t rank) const {
  if (axis < -rank || axis >= rank)
    return error("axis " + llvm::Twine(axis) + " is out of range for rank " +
                 llvm::Twine(rank));
  return axis < 0 ? axis + rank : axis;
}

llvm::Expected<std::vector<int64_t>>
NodeContext::normalizeAxes(llvm::ArrayRef<int64_t> axes, int64_t rank) const {
  std::vector<int64_t> normalized;
  std::vector<bool> seen(rank, false);
  for (int64_t axis : axes) {
    llvm::Expected<int64_t> positive = normalizeAxis(axis, rank);
    if (!positive)
      return positive.takeError();
    if (seen[*positive])
      return error("axis " + llvm::Twine(axis) + " is repeated");
    seen[*positive] = true;
    normalized.push_back(*positive);
  }
  return normalized;
}

llvm::Expected<std::vector<int64_t>>
NodeContext::normalizeIndices(const HostTensor &indices, int64_t axis,
                              int64_t axisSize) const {
  std::vector<int64_t> normalized = indices.toIntVector();
  for (int64_t &index : normalized) {
    if (index < -axisSize || index >= axisSize)
      return error("index " + llvm::Twine(index) +
                   " is out of range for axis " + llvm::Twine(axis) +
                   " of size " + llvm::Twine(axisSize));
    if (index < 0)
      index += axisSize;
  }
  return normalized;
}

llvm::Expected<std::vector<int64_t>>
NodeContext::broadcastAll(llvm::ArrayRef<const HostTensor *> tensors) const {
  std::vector<int64_t> shape(tensors.front()->getShape().begin(),
                             tensors.front()->getShape().end());
  for (const HostTensor *tensor : tensors.drop_front()) {
    llvm::Expected<std::vector<int64_t>> merged =
        broadcastShapes(shape, tensor->getShape());
    if (!merged)
      return error(llvm::toString(merged.takeError()));
    shape = std::move(*merged);
  }
  return shape;
}
