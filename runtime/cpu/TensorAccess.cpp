//===- TensorAccess.cpp - Checking, indexing and viewing tensors ----------===//
//
// See TensorAccess.h. Everything here is bookkeeping; no kernel math.
//
//===----------------------------------------------------------------------===//

#include "TensorAccess.h"

#include "DataTypes.h"
#include "Errors.h"

#include <algorithm>
#include <sstream>
#include <utility>

namespace tessera::cpu {

Shape shapeOf(const tessera_tensor &tensor) {
  return Shape(tensor.shape, tensor.shape + tensor.rank);
}

int64_t elementCount(const tessera_tensor &tensor) {
  int64_t count = 1;
  for (int32_t dim = 0; dim < tensor.rank; ++dim)
    count *= tensor.shape[dim];
  return count;
}

int64_t product(const Shape &shape, size_t begin, size_t end) {
  int64_t result = 1;
  for (size_t dim = begin; dim < end; ++dim)
    result *= shape[dim];
  return result;
}

Shape rowMajorStrides(const Shape &shape) {
  Shape strides(shape.size(), 1);
  for (size_t dim = shape.size(); dim-- > 1;)
    strides[dim - 1] = strides[dim] * shape[dim];
  return strides;
}

std::string formatShape(const Shape &shape) {
  std::ostringstream text;
  text << '[';
  for (size_t dim = 0; dim < shape.size(); ++dim)
    text << (dim ? ", " : "") << shape[dim];
  text << ']';
  return text.str();
}

std::string formatPosition(const Shape &shape, int64_t linearIndex) {
  Shape position(shape.size());
  for (size_t dim = shape.size(); dim-- > 0;) {
    position[dim] = linearIndex % shape[dim];
    linearIndex /= shape[dim];
  }
  return formatShape(position);
}

namespace {

void checkTensor(const tessera_tensor *tensor, const char *name) {
  if (!tensor)
    fail(std::string(name) + " is null");
  if (tensor->rank < 0 || tensor->rank > TESSERA_MAX_RANK)
    fail(std::string(name) + " has rank " + std::to_string(tensor->rank) +
         "; ranks 0 to " + std::to_string(TESSERA_MAX_RANK) + " are supported");
  if (dtypeSize(tensor->dtype) == 0)
    fail(std::string(name) + " has unknown dtype " +
         std::to_string(tensor->dtype));
  for (int32_t dim = 0; dim < tensor->rank; ++dim)
    if (tensor->shape[dim] < 0)
      fail(std::string(name) + " has a negative dim in shape " +
           formatShape(shapeOf(*tensor)));
  if (!tensor->data && elementCount(*tensor) > 0)
    fail(std::string(name) + " has no data");
}

} // namespace

const tessera_tensor &requireTensor(const tessera_tensor *tensor,
                                    const char *name) {
  checkTensor(tensor, name);
  return *tensor;
}

tessera_tensor &requireTensor(tessera_tensor *tensor, const char *name) {
  checkTensor(tensor, name);
  return *tensor;
}

void requireFloatType(const tessera_tensor &tensor, const char *name) {
  if (!isFloatType(tensor.dtype))
    fail(std::string(name) + " must be a floating-point tensor, not " +
         dtypeName(tensor.dtype));
}

void requireIndexType(const tessera_tensor &tensor, const char *name) {
  if (tensor.dtype != TESSERA_I64 && tensor.dtype != TESSERA_I32)
    fail(std::string(name) + " must be i64 or i32, not " +
         dtypeName(tensor.dtype));
}

void requireSameDtype(const tessera_tensor &a, const char *nameA,
                      const tessera_tensor &b, const char *nameB) {
  if (a.dtype != b.dtype)
    fail(std::string(nameA) + " (" + dtypeName(a.dtype) + ") and " + nameB +
         " (" + dtypeName(b.dtype) + ") must have one dtype");
}

void requireShape(const tessera_tensor &tensor, const Shape &expected,
                  const char *name) {
  Shape actual = shapeOf(tensor);
  if (actual != expected)
    fail(std::string(name) + " has shape " + formatShape(actual) +
         ", expected " + formatShape(expected));
}

void requireRowBlock(int64_t first, int64_t rows, int64_t total) {
  if (first < 0 || total < rows || first > total - rows)
    fail("rows [" + std::to_string(first) + ", " +
         std::to_string(first + rows) + ") are not a block of a table of " +
         std::to_string(total) + " rows");
}

void requireLike(const tessera_tensor &tensor, const char *name,
                 const tessera_tensor &like, const char *likeName) {
  requireShape(tensor, shapeOf(like), name);
  requireSameDtype(tensor, name, like, likeName);
}

void requireAxis(int64_t axis, int32_t rank, const char *what) {
  if (axis < 0 || axis >= rank)
    fail(std::string(what) + " " + std::to_string(axis) + " is outside [0, " +
         std::to_string(rank) + ")");
}

Shape broadcastStrides(const tessera_tensor &input, const char *name,
                       const Shape &outputShape) {
  Shape inputShape = shapeOf(input);
  if (inputShape.size() > outputShape.size())
    fail(std::string(name) + " of shape " + formatShape(inputShape) +
         " does not broadcast to " + formatShape(outputShape));
  Shape inputStrides = rowMajorStrides(inputShape);
  size_t leading = outputShape.size() - inputShape.size();
  Shape strides(outputShape.size(), 0);
  for (size_t dim = 0; dim < inputShape.size(); ++dim) {
    int64_t size = inputShape[dim];
    if (size == outputShape[leading + dim])
      strides[leading + dim] = size == 1 ? 0 : inputStrides[dim];
    else if (size != 1)
      fail(std::string(name) + " of shape " + formatShape(inputShape) +
           " does not broadcast to " + formatShape(outputShape));
  }
  return strides;
}

int64_t loadIndexValue(const tessera_tensor &tensor, int64_t index) {
  return loadInteger(tensor.data, tensor.dtype, index);
}

StridedWalker::StridedWalker(Shape walkedShape,
                             std::vector<Shape> operandStrides)
    : shape(std::move(walkedShape)), strides(std::move(operandStrides)),
      position(this->shape.size(), 0), offsets(strides.size(), 0) {}

void StridedWalker::advance() {
  for (size_t dim = shape.size(); dim-- > 0;) {
    ++position[dim];
    for (size_t operand = 0; operand < strides.size(); ++operand)
      offsets[operand] += strides[operand][dim];
    if (position[dim] < shape[dim])
      return;
    for (size_t operand = 0; operand < strides.size(); ++operand)
      offsets[operand] -= strides[operand][dim] * shape[dim];
    position[dim] = 0;
  }
}

FloatInput::FloatInput(const tessera_tensor &tensor, const char *name) {
  requireFloatType(tensor, name);
  if (tensor.dtype == TESSERA_F32) {
    values = static_cast<const float *>(tensor.data);
    return;
  }
  int64_t count = elementCount(tensor);
  converted.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    converted[i] = loadFloat(tensor.data, tensor.dtype, i);
  values = converted.data();
}

FloatInput::FloatInput(FloatInput &&other) noexcept
    : converted(std::move(other.converted)),
      values(converted.empty() ? other.values : converted.data()) {}

FloatOutput::FloatOutput(tessera_tensor &tensor, const char *name,
                         bool loadCurrent)
    : target(tensor) {
  requireFloatType(tensor, name);
  if (tensor.dtype == TESSERA_F32) {
    values = static_cast<float *>(tensor.data);
    return;
  }
  int64_t count = elementCount(tensor);
  scratch.resize(static_cast<size_t>(count));
  if (loadCurrent)
    for (int64_t i = 0; i < count; ++i)
      scratch[i] = loadFloat(tensor.data, tensor.dtype, i);
  values = scratch.data();
}

void FloatOutput::fill(float value) {
  std::fill(values, values + elementCount(target), value);
}

void FloatOutput::commit() {
  if (target.dtype == TESSERA_F32)
    return;
  int64_t count = elementCount(target);
  for (int64_t i = 0; i < count; ++i)
    storeFloat(target.data, target.dtype, i, scratch[i]);
}

} // namespace tessera::cpu
