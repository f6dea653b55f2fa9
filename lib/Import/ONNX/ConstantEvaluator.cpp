//===- ConstantEvaluator.cpp - Fold ONNX nodes on host tensors ------------===//
//
// Every kernel here reduces to one primitive: walk an output shape in
// row-major order while keeping a running element offset into each operand,
// each operand advancing by its own stride per dimension. Broadcasting is a
// stride of 0, Transpose permutes strides, Slice scales them by the step,
// Tile and Expand insert 0-stride dimensions. Strides are computed once per
// op, adjacent dimensions that are contiguous for every operand are merged,
// and the innermost dimension runs as a plain loop, so an elementwise op on an
// [8,1,1024,1024] mask costs a handful of instructions per element and no
// allocation beyond the result.
//
//===----------------------------------------------------------------------===//

#include "tessera/Import/ONNX/ConstantEvaluator.h"

#include "onnx/onnx_pb.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

using namespace tessera::onnx_import;
using onnx::TensorProto;

namespace {

using Strides = llvm::SmallVector<int64_t, 8>;
using FoldResult = llvm::Expected<std::optional<std::vector<HostTensor>>>;

//===----------------------------------------------------------------------===//
// Shape and stride helpers
//===----------------------------------------------------------------------===//

int64_t product(llvm::ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

/// True when the element count of `shape` exceeds kMaxFoldedElements (checked
/// without overflowing).
bool exceedsFoldLimit(llvm::ArrayRef<int64_t> shape) {
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

Strides contiguousStrides(llvm::ArrayRef<int64_t> shape) {
  Strides strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// Strides that read a contiguous tensor of `inputShape` as if it had been
/// broadcast to `outputShape` (right-aligned; size-1 dimensions repeat).
Strides broadcastStrides(llvm::ArrayRef<int64_t> inputShape,
                         llvm::ArrayRef<int64_t> outputShape) {
  Strides inputStrides = contiguousStrides(inputShape);
  Strides strides(outputShape.size(), 0);
  size_t offset = outputShape.size() - inputShape.size();
  for (size_t d = 0; d < inputShape.size(); ++d)
    strides[offset + d] = inputShape[d] == 1 ? 0 : inputStrides[d];
  return strides;
}

/// Calls `visit(linearIndex, offsets)` for every element of `shape` in
/// row-major order, where offsets[k] starts at baseOffsets[k] and advances by
/// strides[k][d] along dimension d.
template <size_t N, typename Visitor>
void walk(llvm::ArrayRef<int64_t> shape, std::array<Strides, N> strides,
          std::array<int64_t, N> baseOffsets, Visitor &&visit) {
  int64_t total = product(shape);
  if (total == 0)
    return;
  // Drop size-1 dimensions and merge neighbours that are contiguous for every
  // operand, so the inner loop is as long as possible.
  llvm::SmallVector<int64_t, 8> dims;
  std::array<Strides, N> merged;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    bool canMerge = !dims.empty();
    for (size_t k = 0; k < N && canMerge; ++k)
      canMerge = merged[k].back() == strides[k][d] * shape[d];
    if (canMerge) {
      dims.back() *= shape[d];
      for (size_t k = 0; k < N; ++k)
        merged[k].back() = strides[k][d];
      continue;
    }
    dims.push_back(shape[d]);
    for (size_t k = 0; k < N; ++k)
      merged[k].push_back(strides[k][d]);
  }
  if (dims.empty()) {
    visit(int64_t(0), baseOffsets);
    return;
  }

  int64_t rank = static_cast<int64_t>(dims.size());
  int64_t innerSize = dims.back();
  std::array<int64_t, N> innerStride;
  for (size_t k = 0; k < N; ++k)
    innerStride[k] = merged[k].back();
  llvm::SmallVector<int64_t, 8> counter(rank, 0);
  std::array<int64_t, N> rowOffsets = baseOffsets;
  for (int64_t linear = 0; linear < total; linear += innerSize) {
    std::array<int64_t, N> offsets = rowOffsets;
    for (int64_t i = 0; i < innerSize; ++i) {
      visit(linear + i, offsets);
      for (size_t k = 0; k < N; ++k)
        offsets[k] += innerStride[k];
    }
    for (int64_t d = rank - 2; d >= 0; --d) {
      for (size_t k = 0; k < N; ++k)
        rowOffsets[k] += merged[k][d];
      if (++counter[d] < dims[d])
        break;
      for (size_t k = 0; k < N; ++k)
        rowOffsets[k] -= merged[k][d] * dims[d];
      counter[d] = 0;
    }
  }
}

/// A new tensor of `elementType` and `shape` with zero-initialized storage,
/// to be filled by a kernel.
HostTensor makeResult(int32_t elementType, llvm::ArrayRef<int64_t> shape) {
  return HostTensor::zeros(elementType,
                           std::vector<int64_t>(shape.begin(), shape.end()));
}

/// Copies the elements of `input` that a strided walk over `outputShape`
/// visits into a new tensor of `outputShape`.
HostTensor stridedCopy(const HostTensor &input,
                       llvm::ArrayRef<int64_t> outputShape,
                       const Strides &strides, int64_t baseOffset) {
  HostTensor result = makeResult(input.getElementType(), outputShape);
  if (input.isFloat()) {
    const double *source = input.getFloatData().data();
    double *destination = result.getMutableFloatData().data();
    walk<1>(outputShape, {strides}, {baseOffset},
            [&](int64_t i, const std::array<int64_t, 1> &offset) {
              destination[i] = source[offset[0]];
            });
  } else {
    const int64_t *source = input.getIntData().data();
    int64_t *destination = result.getMutableIntData().data();
    walk<1>(outputShape, {strides}, {baseOffset},
            [&](int64_t i, const std::array<int64_t, 1> &offset) {
              destination[i] = source[offset[0]];
            });
  }
  return result;
}

/// Copies `count` consecutive elements between tensors of the same type.
void copyElements(const HostTensor &source, int64_t sourceOffset,
                  HostTensor &destination, int64_t destinationOffset,
                  int64_t count) {
  if (source.isFloat()) {
    const double *from = source.getFloatData().data() + sourceOffset;
    std::copy(from, from + count,
              destination.getMutableFloatData().data() + destinationOffset);
  } else {
    const int64_t *from = source.getIntData().data() + sourceOffset;
    std::copy(from, from + count,
              destination.getMutableIntData().data() + destinationOffset);
  }
}

//===----------------------------------------------------------------------===//
// Elementwise functors
//
// Each functor is called with float (FLOAT, FLOAT16, BFLOAT16), double,
// int64_t (every integer type but UINT64) or uint64_t (UINT64). Integer
// add/sub/mul go through unsigned arithmetic so overflow wraps instead of
// being undefined behaviour.
//===----------------------------------------------------------------------===//

template <typename T> T wrappingAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else
    return a + b;
}

template <typename T> T wrappingMul(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else
    return a * b;
}

struct AddFunctor {
  template <typename T> T operator()(T a, T b) const {
    return wrappingAdd(a, b);
  }
};
struct SubFunctor {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<uint64_t>(a) -
                            static_cast<uint64_t>(b));
    else
      return a - b;
  }
};
struct MulFunctor {
  template <typename T> T operator()(T a, T b) const {
    return wrappingMul(a, b);
  }
};
/// Integer division truncates toward zero (C++ and onnxruntime agree); the
/// caller rejects integer division by zero before calling.
struct DivFunctor {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_signed_v<T> && std::is_integral_v<T>) {
      // INT64_MIN / -1 overflows; wrap like the other integer ops.
      if (b == -1)
        return static_cast<T>(0 - static_cast<uint64_t>(a));
    }
    return a / b;
  }
};
/// NaN wins, as in onnxruntime's Max/Min.
struct MaxFunctor {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a))
        return a;
      if (std::isnan(b))
        return b;
    }
    return a < b ? b : a;
  }
};
struct MinFunctor {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a))
        return a;
      if (std::isnan(b))
        return b;
    }
    return b < a ? b : a;
  }
};

/// Integer power by squaring with wrapping; negative exponents follow
/// onnxruntime, which truncates std::pow's fractional result.
int64_t integerPower(int64_t base, int64_t exponent) {
  if (exponent < 0)
    return static_cast<int64_t>(
        std::pow(static_cast<double>(base), static_cast<double>(exponent)));
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1)
      result = wrappingMul(result, base);
    base = wrappingMul(base, base);
    exponent >>= 1;
  }
  return result;
}

enum class CompareKind { Equal, Less, LessOrEqual, Greater, GreaterOrEqual };

template <typename T> bool compareValues(CompareKind kind, T a, T b) {
  switch (kind) {
  case CompareKind::Equal:
    return a == b;
  case CompareKind::Less:
    return a < b;
  case CompareKind::LessOrEqual:
    return a <= b;
  case CompareKind::Greater:
    return a > b;
  case CompareKind::GreaterOrEqual:
    return a >= b;
  }
  return false;
}

/// Runs `compute(lhsValue, rhsValue)` over the broadcast of two storages.
template <typename In, typename Out, typename Compute>
void broadcastBinary(const In *lhs, llvm::ArrayRef<int64_t> lhsShape,
                     const In *rhs, llvm::ArrayRef<int64_t> rhsShape,
                     llvm::ArrayRef<int64_t> outputShape, Out *output,
                     Compute compute) {
  walk<2>(outputShape,
          {broadcastStrides(lhsShape, outputShape),
           broadcastStrides(rhsShape, outputShape)},
          {0, 0}, [&](int64_t i, const std::array<int64_t, 2> &offsets) {
            output[i] = compute(lhs[offsets[0]], rhs[offsets[1]]);
          });
}

/// Applies an arithmetic functor with the precision of the element type.
template <typename Functor>
HostTensor applyArithmetic(const HostTensor &lhs, const HostTensor &rhs,
                           llvm::ArrayRef<int64_t> outputShape,
                           Functor functor) {
  int32_t elementType = lhs.getElementType();
  HostTensor result = makeResult(elementType, outputShape);
  if (lhs.isFloat()) {
    const double *a = lhs.getFloatData().data();
    const double *b = rhs.getFloatData().data();
    double *out = result.getMutableFloatData().data();
    if (elementType == TensorProto::DOUBLE) {
      broadcastBinary(a, lhs.getShape(), b, rhs.getShape(), outputShape, out,
                      [&](double x, double y) { return functor(x, y); });
    } else {
      // fp32 semantics; fp16/bf16 are then rounded by normalizeStorage.
      broadcastBinary(a, lhs.getShape(), b, rhs.getShape(), outputShape, out,
                      [&](double x, double y) {
                        return static_cast<double>(functor(
                            static_cast<float>(x), static_cast<float>(y)));
                      });
    }
  } else {
    const int64_t *a = lhs.getIntData().data();
    const int64_t *b = rhs.getIntData().data();
    int64_t *out = result.getMutableIntData().data();
    if (lhs.isUnsigned64()) {
      broadcastBinary(
          a, lhs.getShape(), b, rhs.getShape(), outputShape, out,
          [&](int64_t x, int64_t y) {
            return static_cast<int64_t>(
                functor(static_cast<uint64_t>(x), static_cast<uint64_t>(y)));
          });
    } else {
      broadcastBinary(a, lhs.getShape(), b, rhs.getShape(), outputShape, out,
                      [&](int64_t x, int64_t y) { return functor(x, y); });
    }
  }
  result.normalizeStorage();
  return result;
}

/// Applies a unary floating function with the precision of the element type.
template <typename Functor>
HostTensor applyFloatUnary(const HostTensor &input, Functor functor) {
  HostTensor result = makeResult(input.getElementType(), input.getShape());
  const double *in = input.getFloatData().data();
  double *out = result.getMutableFloatData().data();
  int64_t count = input.numElements();
  if (input.getElementType() == TensorProto::DOUBLE) {
    for (int64_t i = 0; i < count; ++i)
      out[i] = functor(in[i]);
  } else {
    for (int64_t i = 0; i < count; ++i)
      out[i] = static_cast<double>(functor(static_cast<float>(in[i])));
    result.normalizeStorage();
  }
  return result;
}

/// Smallest and largest value of an integer element type, for reductions
/// over empty sets.
std::pair<int64_t, int64_t> integerRange(int32_t elementType) {
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

/// Converts element `index` of `input` to the floating `targetType` the way
/// onnxruntime's Cast does.
double castToFloat(const HostTensor &input, int64_t index, int32_t targetType) {
  if (input.isFloat())
    return roundToFloatElementType(input.getFloatData()[index], targetType);
  int64_t value = input.getIntData()[index];
  if (targetType == TensorProto::DOUBLE)
    return input.isUnsigned64()
               ? static_cast<double>(static_cast<uint64_t>(value))
               : static_cast<double>(value);
  // Integer -> fp32 rounds once, directly; fp16/bf16 then round from fp32.
  float asFloat = input.isUnsigned64()
                      ? static_cast<float>(static_cast<uint64_t>(value))
                      : static_cast<float>(value);
  return roundToFloatElementType(asFloat, targetType);
}

//===----------------------------------------------------------------------===//
// NodeEvaluator
//===----------------------------------------------------------------------===//

class NodeEvaluator {
public:
  NodeEvaluator(const onnx::NodeProto &node,
                llvm::ArrayRef<const HostTensor *> inputs, int64_t opsetVersion,
                llvm::StringRef modelDirectory)
      : node(node), inputs(inputs), opsetVersion(opsetVersion),
        modelDirectory(modelDirectory) {}

  FoldResult evaluate();

private:
  // Diagnostics, inputs and attributes.
  llvm::Error error(const llvm::Twine &message) const;
  const HostTensor *input(size_t index) const;
  llvm::Error checkInputCount(size_t minimum, size_t maximum) const;
  llvm::Error requireInputs(std::initializer_list<size_t> indices) const;
  llvm::Error requireSameElementType(const HostTensor &lhs,
                                     const HostTensor &rhs) const;
  llvm::Error requireIntegerInput(const HostTensor &tensor,
                                  llvm::StringRef what) const;
  llvm::Error requireFloatInput(const HostTensor &tensor) const;
  const onnx::AttributeProto *attribute(llvm::StringRef name) const;
  int64_t intAttribute(llvm::StringRef name, int64_t defaultValue) const;
  std::optional<std::vector<int64_t>> intsAttribute(llvm::StringRef name) const;
  llvm::Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank) const;
  llvm::Expected<std::vector<int64_t>>
  normalizeAxes(llvm::ArrayRef<int64_t> axes, int64_t rank) const;
  llvm::Expected<std::vector<int64_t>>
  broadcastAll(llvm::ArrayRef<const HostTensor *> tensors) const;

  static FoldResult one(HostTensor tensor) {
    std::vector<HostTensor> results;
    results.push_back(std::move(tensor));
    return std::optional<std::vector<HostTensor>>(std::move(results));
  }
  static FoldResult notFolded() {
    return std::optional<std::vector<HostTensor>>();
  }

  // Op families.
  FoldResult evaluateConstant();
  FoldResult evaluateShape();
  FoldResult evaluateSqueeze();
  FoldResult evaluateUnsqueeze();
  FoldResult evaluateReshape();
  FoldResult evaluateConcat();
  FoldResult evaluateGather();
  FoldResult evaluateGatherElements();
  FoldResult evaluateGatherND();
  FoldResult evaluateSlice();
  FoldResult evaluateExpand();
  FoldResult evaluateRange();
  FoldResult evaluateCumSum();
  FoldResult evaluateCast(int32_t targetType);
  FoldResult evaluateTranspose();
  FoldResult evaluateWhere();
  FoldResult evaluateCompare(CompareKind kind);
  FoldResult evaluateLogical();
  FoldResult evaluateArithmetic();
  FoldResult evaluatePow();
  FoldResult evaluateVariadicMaxMin();
  FoldResult evaluateUnary();
  FoldResult evaluateReduce();
  FoldResult evaluateConstantOfShape();
  FoldResult evaluateTrilu();
  FoldResult evaluateSplit();
  FoldResult evaluateTile();

  const onnx::NodeProto &node;
  llvm::ArrayRef<const HostTensor *> inputs;
  int64_t opsetVersion;
  llvm::StringRef modelDirectory;
};

llvm::Error NodeEvaluator::error(const llvm::Twine &message) const {
  std::string name = node.name();
  if (name.empty())
    name = node.output_size() > 0 ? "<unnamed, output " + node.output(0) + ">"
                                  : "<unnamed>";
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "node '" + name + "' (" + node.op_type() +
                                     "): " + message);
}

const HostTensor *NodeEvaluator::input(size_t index) const {
  if (index >= inputs.size())
    return nullptr;
  if (static_cast<int>(index) < node.input_size() &&
      node.input(static_cast<int>(index)).empty())
    return nullptr;
  return inputs[index];
}

llvm::Error NodeEvaluator::checkInputCount(size_t minimum,
                                           size_t maximum) const {
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
  return llvm::Error::success();
}

llvm::Error
NodeEvaluator::requireInputs(std::initializer_list<size_t> indices) const {
  for (size_t index : indices)
    if (!input(index))
      return error("required input " + llvm::Twine(index) + " is missing");
  return llvm::Error::success();
}

llvm::Error NodeEvaluator::requireSameElementType(const HostTensor &lhs,
                                                  const HostTensor &rhs) const {
  if (lhs.getElementType() == rhs.getElementType())
    return llvm::Error::success();
  return error("input element types differ: " + lhs.describe() + " and " +
               rhs.describe());
}

llvm::Error NodeEvaluator::requireIntegerInput(const HostTensor &tensor,
                                               llvm::StringRef what) const {
  if (tensor.isInteger() && !tensor.isBool())
    return llvm::Error::success();
  return error(what + " must be an integer tensor, got " + tensor.describe());
}

llvm::Error NodeEvaluator::requireFloatInput(const HostTensor &tensor) const {
  if (tensor.isFloat())
    return llvm::Error::success();
  return error("input must be a floating-point tensor, got " +
               tensor.describe());
}

const onnx::AttributeProto *
NodeEvaluator::attribute(llvm::StringRef name) const {
  for (const onnx::AttributeProto &candidate : node.attribute())
    if (candidate.name() == name)
      return &candidate;
  return nullptr;
}

int64_t NodeEvaluator::intAttribute(llvm::StringRef name,
                                    int64_t defaultValue) const {
  const onnx::AttributeProto *found = attribute(name);
  return found ? found->i() : defaultValue;
}

std::optional<std::vector<int64_t>>
NodeEvaluator::intsAttribute(llvm::StringRef name) const {
  const onnx::AttributeProto *found = attribute(name);
  if (!found)
    return std::nullopt;
  return std::vector<int64_t>(found->ints().begin(), found->ints().end());
}

llvm::Expected<int64_t> NodeEvaluator::normalizeAxis(int64_t axis,
                                                     int64_t rank) const {
  if (axis < -rank || axis >= rank)
    return error("axis " + llvm::Twine(axis) + " is out of range for rank " +
                 llvm::Twine(rank));
  return axis < 0 ? axis + rank : axis;
}

llvm::Expected<std::vector<int64_t>>
NodeEvaluator::normalizeAxes(llvm::ArrayRef<int64_t> axes, int64_t rank) const {
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
NodeEvaluator::broadcastAll(llvm::ArrayRef<const HostTensor *> tensors) const {
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

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

FoldResult NodeEvaluator::evaluate() {
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return notFolded();
  llvm::StringRef opType = node.op_type();

  if (opType == "Constant")
    return evaluateConstant();
  if (opType == "Identity") {
    if (llvm::Error failure = checkInputCount(1, 1))
      return failure;
    return one(*input(0));
  }
  if (opType == "Shape")
    return evaluateShape();
  if (opType == "Size") {
    if (llvm::Error failure = checkInputCount(1, 1))
      return failure;
    return one(HostTensor::scalarInt(input(0)->numElements()));
  }
  if (opType == "Squeeze")
    return evaluateSqueeze();
  if (opType == "Unsqueeze")
    return evaluateUnsqueeze();
  if (opType == "Reshape")
    return evaluateReshape();
  if (opType == "Concat")
    return evaluateConcat();
  if (opType == "Gather")
    return evaluateGather();
  if (opType == "GatherElements")
    return evaluateGatherElements();
  if (opType == "GatherND")
    return evaluateGatherND();
  if (opType == "Slice")
    return evaluateSlice();
  if (opType == "Expand")
    return evaluateExpand();
  if (opType == "Range")
    return evaluateRange();
  if (opType == "CumSum")
    return evaluateCumSum();
  if (opType == "Cast") {
    if (llvm::Error failure = checkInputCount(1, 1))
      return failure;
    const onnx::AttributeProto *to = attribute("to");
    if (!to)
      return error("missing required attribute 'to'");
    return evaluateCast(static_cast<int32_t>(to->i()));
  }
  if (opType == "CastLike") {
    if (llvm::Error failure = checkInputCount(2, 2))
      return failure;
    return evaluateCast(input(1)->getElementType());
  }
  if (opType == "Transpose")
    return evaluateTranspose();
  if (opType == "Where")
    return evaluateWhere();
  if (opType == "Equal")
    return evaluateCompare(CompareKind::Equal);
  if (opType == "Less")
    return evaluateCompare(CompareKind::Less);
  if (opType == "LessOrEqual")
    return evaluateCompare(CompareKind::LessOrEqual);
  if (opType == "Greater")
    return evaluateCompare(CompareKind::Greater);
  if (opType == "GreaterOrEqual")
    return evaluateCompare(CompareKind::GreaterOrEqual);
  if (opType == "Not" || opType == "And" || opType == "Or" || opType == "Xor")
    return evaluateLogical();
  if (opType == "Add" || opType == "Sub" || opType == "Mul" || opType == "Div")
    return evaluateArithmetic();
  if (opType == "Pow")
    return evaluatePow();
  if (opType == "Max" || opType == "Min")
    return evaluateVariadicMaxMin();
  if (opType == "Neg" || opType == "Abs" || opType == "Sqrt" ||
      opType == "Reciprocal" || opType == "Exp" || opType == "Log" ||
      opType == "Tanh" || opType == "Erf" || opType == "Sigmoid" ||
      opType == "Floor" || opType == "Ceil" || opType == "Cos" ||
      opType == "Sin")
    return evaluateUnary();
  if (opType == "ReduceSum" || opType == "ReduceMean" ||
      opType == "ReduceMax" || opType == "ReduceMin" || opType == "ReduceProd")
    return evaluateReduce();
  if (opType == "ConstantOfShape")
    return evaluateConstantOfShape();
  if (opType == "Trilu")
    return evaluateTrilu();
  if (opType == "Split")
    return evaluateSplit();
  if (opType == "Tile")
    return evaluateTile();
  return notFolded();
}

//===----------------------------------------------------------------------===//
// Constants and shapes
//===----------------------------------------------------------------------===//

FoldResult NodeEvaluator::evaluateConstant() {
  if (llvm::Error failure = checkInputCount(0, 0))
    return failure;
  if (const onnx::AttributeProto *value = attribute("value")) {
    llvm::Expected<HostTensor> decoded =
        decodeTensorProto(value->t(), modelDirectory);
    if (!decoded)
      return error(llvm::toString(decoded.takeError()));
    return one(std::move(*decoded));
  }
  if (const onnx::AttributeProto *value = attribute("value_float"))
    return one(HostTensor::scalarDouble(value->f(), TensorProto::FLOAT));
  if (const onnx::AttributeProto *value = attribute("value_floats"))
    return one(HostTensor::fromDoubles(
        TensorProto::FLOAT, {value->floats_size()},
        std::vector<double>(value->floats().begin(), value->floats().end())));
  if (const onnx::AttributeProto *value = attribute("value_int"))
    return one(HostTensor::scalarInt(value->i(), TensorProto::INT64));
  if (const onnx::AttributeProto *value = attribute("value_ints"))
    return one(HostTensor::fromInts(
        TensorProto::INT64, {value->ints_size()},
        std::vector<int64_t>(value->ints().begin(), value->ints().end())));
  // value_string(s) and sparse_value are not numeric tensors we fold.
  if (attribute("value_string") || attribute("value_strings") ||
      attribute("sparse_value"))
    return notFolded();
  return error("has no value attribute");
}

FoldResult NodeEvaluator::evaluateShape() {
  if (llvm::Error failure = checkInputCount(1, 1))
    return failure;
  llvm::ArrayRef<int64_t> shape = input(0)->getShape();
  int64_t rank = static_cast<int64_t>(shape.size());
  auto clampBound = [&](int64_t bound) {
    if (bound < 0)
      bound += rank;
    return std::clamp<int64_t>(bound, 0, rank);
  };
  int64_t start = clampBound(intAttribute("start", 0));
  int64_t end = clampBound(intAttribute("end", rank));
  if (end < start)
    end = start;
  return one(HostTensor::vectorOfInts(shape.slice(start, end - start)));
}

FoldResult NodeEvaluator::evaluateSqueeze() {
  if (llvm::Error failure = checkInputCount(1, 2))
    return failure;
  const HostTensor &data = *input(0);
  std::optional<std::vector<int64_t>> axes;
  if (opsetVersion >= 13) {
    if (const HostTensor *axesInput = input(1)) {
      if (llvm::Error failure = requireIntegerInput(*axesInput, "axes"))
        return failure;
      axes = axesInput->toIntVector();
    }
  } else {
    axes = intsAttribute("axes");
  }
  llvm::ArrayRef<int64_t> shape = data.getShape();
  std::vector<bool> squeezed(shape.size(), false);
  if (axes) {
    llvm::Expected<std::vector<int64_t>> normalized =
        normalizeAxes(*axes, data.getRank());
    if (!normalized)
      return normalized.takeError();
    for (int64_t axis : *normalized) {
      if (shape[axis] != 1)
        return error("cannot squeeze axis " + llvm::Twine(axis) + " of size " +
                     llvm::Twine(shape[axis]));
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
  HostTensor result = data;
  result.setShape(std::move(newShape));
  return one(std::move(result));
}

FoldResult NodeEvaluator::evaluateUnsqueeze() {
  std::vector<int64_t> axes;
  if (opsetVersion >= 13) {
    if (llvm::Error failure = checkInputCount(2, 2))
      return failure;
    if (llvm::Error failure = requireIntegerInput(*input(1), "axes"))
      return failure;
    axes = input(1)->toIntVector();
  } else {
    if (llvm::Error failure = checkInputCount(1, 1))
      return failure;
    std::optional<std::vector<int64_t>> attributeAxes = intsAttribute("axes");
    if (!attributeAxes)
      return error("missing required attribute 'axes'");
    axes = std::move(*attributeAxes);
  }
  const HostTensor &data = *input(0);
  int64_t outputRank = data.getRank() + static_cast<int64_t>(axes.size());
  llvm::Expected<std::vector<int64_t>> normalized =
      normalizeAxes(axes, outputRank);
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
  HostTensor result = data;
  result.setShape(std::move(newShape));
  return one(std::move(result));
}

FoldResult NodeEvaluator::evaluateReshape() {
  if (llvm::Error failure = checkInputCount(2, 2))
    return failure;
  const HostTensor &data = *input(0);
  if (llvm::Error failure = requireIntegerInput(*input(1), "shape"))
    return failure;
  std::vector<int64_t> newShape = input(1)->toIntVector();
  bool allowZero = intAttribute("allowzero", 0) != 0;
  llvm::ArrayRef<int64_t> shape = data.getShape();
  int64_t inferredAxis = -1;
  int64_t knownCount = 1;
  bool hasZero = false;
  for (size_t d = 0; d < newShape.size(); ++d) {
    if (newShape[d] == -1) {
      if (inferredAxis >= 0)
        return error("shape has more than one -1");
      inferredAxis = static_cast<int64_t>(d);
      continue;
    }
    if (newShape[d] < -1)
      return error("shape has invalid dimension " + llvm::Twine(newShape[d]));
    if (newShape[d] == 0) {
      hasZero = true;
      if (!allowZero) {
        if (d >= shape.size())
          return error("shape copies dimension " + llvm::Twine(d) +
                       " with 0 but the input has rank " +
                       llvm::Twine(shape.size()));
        newShape[d] = shape[d];
      }
    }
    knownCount *= newShape[d];
  }
  if (allowZero && hasZero && inferredAxis >= 0)
    return error("shape with allowzero=1 cannot contain both 0 and -1");
  int64_t count = data.numElements();
  if (inferredAxis >= 0) {
    if (knownCount == 0 || count % knownCount != 0)
      return error("cannot infer the -1 dimension reshaping " +
                   data.describe());
    newShape[inferredAxis] = count / knownCount;
  } else if (knownCount != count) {
    return error("cannot reshape " + data.describe() + " (" +
                 llvm::Twine(count) + " elements) to a shape with " +
                 llvm::Twine(knownCount) + " elements");
  }
  HostTensor result = data;
  result.setShape(std::move(newShape));
  return one(std::move(result));
}

FoldResult NodeEvaluator::evaluateConcat() {
  if (node.input_size() < 1 && inputs.empty())
    return error("expected at least 1 input");
  size_t count =
      std::max(static_cast<size_t>(node.input_size()), inputs.size());
  std::vector<const HostTensor *> parts;
  for (size_t i = 0; i < count; ++i) {
    if (!input(i))
      return error("input " + llvm::Twine(i) + " is missing");
    parts.push_back(input(i));
  }
  const onnx::AttributeProto *axisAttribute = attribute("axis");
  if (!axisAttribute)
    return error("missing required attribute 'axis'");
  const HostTensor &first = *parts.front();
  int64_t rank = first.getRank();
  if (rank == 0)
    return error("cannot concatenate scalars");
  llvm::Expected<int64_t> axis = normalizeAxis(axisAttribute->i(), rank);
  if (!axis)
    return axis.takeError();
  std::vector<int64_t> outputShape(first.getShape().begin(),
                                   first.getShape().end());
  outputShape[*axis] = 0;
  for (const HostTensor *part : parts) {
    if (llvm::Error failure = requireSameElementType(first, *part))
      return failure;
    if (part->getRank() != rank)
      return error("inputs have different ranks: " + first.describe() +
                   " and " + part->describe());
    for (int64_t d = 0; d < rank; ++d)
      if (d != *axis && part->getShape()[d] != first.getShape()[d])
        return error("inputs differ outside the concatenation axis: " +
                     first.describe() + " and " + part->describe());
    outputShape[*axis] += part->getShape()[*axis];
  }
  if (exceedsFoldLimit(outputShape))
    return notFolded();
  HostTensor result = makeResult(first.getElementType(), outputShape);
  llvm::ArrayRef<int64_t> outputDims = outputShape;
  int64_t outer = product(outputDims.take_front(*axis));
  int64_t inner = product(outputDims.drop_front(*axis + 1));
  int64_t destination = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (const HostTensor *part : parts) {
      int64_t block = part->getShape()[*axis] * inner;
      copyElements(*part, o * block, result, destination, block);
      destination += block;
    }
  }
  return one(std::move(result));
}

//===----------------------------------------------------------------------===//
// Indexing: Gather, GatherElements, GatherND, Slice, Expand, Transpose, Tile
//===----------------------------------------------------------------------===//

/// Calls `body(sourcePointer, destinationPointer)` with the storage matching
/// the element type of `source` (both tensors share the storage kind).
template <typename Body>
void withStorage(const HostTensor &source, HostTensor &destination, Body body) {
  if (source.isFloat())
    body(source.getFloatData().data(),
         destination.getMutableFloatData().data());
  else
    body(source.getIntData().data(), destination.getMutableIntData().data());
}

/// Checks that every index lies in [-size, size) and returns them made
/// non-negative.
llvm::Expected<std::vector<int64_t>>
normalizeIndices(const HostTensor &indices, int64_t size,
                 llvm::function_ref<llvm::Error(int64_t)> outOfRange) {
  std::vector<int64_t> normalized = indices.toIntVector();
  for (int64_t &index : normalized) {
    if (index < -size || index >= size)
      return outOfRange(index);
    if (index < 0)
      index += size;
  }
  return normalized;
}

FoldResult NodeEvaluator::evaluateGather() {
  if (llvm::Error failure = checkInputCount(2, 2))
    return failure;
  const HostTensor &data = *input(0);
  const HostTensor &indices = *input(1);
  if (llvm::Error failure = requireIntegerInput(indices, "indices"))
    return failure;
  if (data.getRank() == 0)
    return error("cannot gather from a scalar");
  llvm::Expected<int64_t> axis =
      normalizeAxis(intAttribute("axis", 0), data.getRank());
  if (!axis)
    return axis.takeError();
  llvm::ArrayRef<int64_t> dataShape = data.getShape();
  int64_t axisSize = dataShape[*axis];
  llvm::Expected<std::vector<int64_t>> positions =
      normalizeIndices(indices, axisSize, [&](int64_t index) {
        return error("index " + llvm::Twine(index) +
                     " is out of range for axis " + llvm::Twine(*axis) +
                     " of size " + llvm::Twine(axisSize));
      });
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
  int64_t outer = product(dataShape.take_front(*axis));
  int64_t inner = product(dataShape.drop_front(*axis + 1));
  int64_t destination = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t position : *positions) {
      copyElements(data, (o * axisSize + position) * inner, result, destination,
                   inner);
      destination += inner;
    }
  }
  return one(std::move(result));
}

FoldResult NodeEvaluator::evaluateGatherElements() {
  if (llvm::Error failure = checkInputCount(2, 2))
    return failure;
  const HostTensor &data = *input(0);
  const HostTensor &indices = *input(1);
  if (llvm::Error failure = requireIntegerInput(indices, "indices"))
    return failure;
  int64_t rank = data.getRank();
  if (rank == 0 || indices.getRank() != rank)
    return error("data " + data.describe() + " and indices " +
                 indices.describe() + " must have the same non-zero rank");
  llvm::Expected<int64_t> axis = normalizeAxis(intAttribute("axis", 0), rank);
  if (!axis)
    return axis.takeError();
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis && indices.getShape()[d] > data.getShape()[d])
      return error("indices " + indices.describe() + " are larger than data " +
                   data.describe() + " outside the gather axis");
  int64_t axisSize = data.getShape()[*axis];
  llvm::Expected<std::vector<int64_t>> positions =
      normalizeIndices(indices, axisSize, [&](int64_t index) {
        return error("index " + llvm::Twine(index) +
                     " is out of range for axis " + llvm::Twine(*axis) +
                     " of size " + llvm::Twine(axisSize));
      });
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
  return one(std::move(result));
}

FoldResult NodeEvaluator::evaluateGatherND() {
  if (llvm::Error failure = checkInputCount(2, 2))
    return failure;
  const HostTensor &data = *input(0);
  const HostTensor &indices = *input(1);
  if (llvm::Error failure = requireIntegerInput(indices, "indices"))
    return failure;
  llvm::ArrayRef<int64_t> dataShape = data.getShape();
  llvm::ArrayRef<int64_t> indicesShape = indices.getShape();
  int64_t dataRank = data.getRank();
  int64_t indicesRank = indices.getRank();
  int64_t batchDims = intAttribute("batch_dims", 0);
  if (dataRank < 1 || indicesRank < 1)
    return error("data and indices must have rank at least 1");
  if (batchDims < 0 || batchDims >= std::min(dataRank, indicesRank))
    return error("batch_dims " + llvm::Twine(batchDims) +
                 " must be less than the ranks of data and indices");
  for (int64_t d = 0; d < batchDims; ++d)
    if (dataShape[d] != indicesShape[d])
      return error("batch dimension " + llvm::Twine(d) + " differs: data " +
                   data.describe() + ", indices " + indices.describe());
  int64_t tupleSize = indicesShape.back();
  if (tupleSize < 1 || tupleSize > dataRank - batchDims)
    return error("last indices dimension " + llvm::Twine(tupleSize) +
                 " must be between 1 and " + llvm::Twine(dataRank - batchDims));

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
        return error("index " + llvm::Twine(index) +
                     " is out of range for data dimension " +
                     llvm::Twine(batchDims + k) + " of size " +
                     llvm::Twine(size));
      if (index < 0)
        index += size;
      offset += index * dataStrides[batchDims + k];
    }
    copyElements(data, offset, result, tuple * sliceSize, sliceSize);
  }
  return one(std::move(result));
}

FoldResult NodeEvaluator::evaluateSlice() {
  std::vector<int64_t> starts, ends, axes, steps;
  if (opsetVersion < 10) {
    if (llvm::Error failure = checkInputCount(1, 1))
      return failure;
    std::optional<std::vector<int64_t>> startsAttribute =
        intsAttribute("starts");
    std::optional<std::vector<int64_t>> endsAttribute = intsAttribute("ends");
    if (!startsAttribute || !endsAttribute)
      return error("missing required attribute 'starts' or 'ends'");
    starts = std::move(*startsAttribute);
    ends = std::move(*endsAttribute);
    axes = intsAttribute("axes").value_or(std::vector<int64_t>());
  } else {
    if (llvm::Error failure = checkInputCount(3, 5))
      return failure;
    if (llvm::Error failure = requireInputs({1, 2}))
      return failure;
    for (size_t i = 1; i <= 4; ++i)
      if (input(i))
        if (llvm::Error failure =
                requireIntegerInput(*input(i), i == 1   ? "starts"
                                               : i == 2 ? "ends"
                                               : i == 3 ? "axes"
                                                        : "steps"))
          return failure;
    starts = input(1)->toIntVector();
    ends = input(2)->toIntVector();
    if (input(3))
      axes = input(3)->toIntVector();
    if (input(4))
      steps = input(4)->toIntVector();
  }
  const HostTensor &data = *input(0);
  int64_t rank = data.getRank();
  if (axes.empty() && !(opsetVersion >= 10 && input(3)))
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  if (steps.empty() && !(opsetVersion >= 10 && input(4)))
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return error("starts, ends, axes and steps must have the same length");
  llvm::Expected<std::vector<int64_t>> normalizedAxes =
      normalizeAxes(axes, rank);
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
      return error("slice step for axis " + llvm::Twine(axis) +
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
  return one(stridedCopy(data, outputShape, walkStrides, baseOffset));
}

FoldResult NodeEvaluator::evaluateExpand() {
  if (llvm::Error failure = checkInputCount(2, 2))
    return failure;
  const HostTensor &data = *input(0);
  const HostTensor &shapeInput = *input(1);
  if (llvm::Error failure = requireIntegerInput(shapeInput, "shape"))
    return failure;
  if (shapeInput.getRank() > 1)
    return error("shape must be a 1-D tensor, got " + shapeInput.describe());
  std::vector<int64_t> requested = shapeInput.toIntVector();
  for (int64_t dim : requested)
    if (dim < 0)
      return error("shape has negative dimension " + llvm::Twine(dim));
  llvm::Expected<std::vector<int64_t>> outputShape =
      broadcastShapes(data.getShape(), requested);
  if (!outputShape)
    return error(llvm::toString(outputShape.takeError()));
  if (exceedsFoldLimit(*outputShape))
    return notFolded();
  return one(stridedCopy(data, *outputShape,
                         broadcastStrides(data.getShape(), *outputShape), 0));
}

FoldResult NodeEvaluator::evaluateTranspose() {
  if (llvm::Error failure = checkInputCount(1, 1))
    return failure;
  const HostTensor &data = *input(0);
  int64_t rank = data.getRank();
  std::vector<int64_t> permutation;
  if (std::optional<std::vector<int64_t>> perm = intsAttribute("perm")) {
    permutation = std::move(*perm);
  } else {
    for (int64_t d = rank - 1; d >= 0; --d)
      permutation.push_back(d);
  }
  if (static_cast<int64_t>(permutation.size()) != rank)
    return error("perm has " + llvm::Twine(permutation.size()) +
                 " entries for an input of rank " + llvm::Twine(rank));
  std::vector<bool> used(rank, false);
  for (int64_t axis : permutation) {
    if (axis < 0 || axis >= rank || used[axis])
      return error("perm is not a permutation of 0.." + llvm::Twine(rank - 1));
    used[axis] = true;
  }
  Strides dataStrides = contiguousStrides(data.getShape());
  std::vector<int64_t> outputShape;
  Strides walkStrides;
  for (int64_t axis : permutation) {
    outputShape.push_back(data.getShape()[axis]);
    walkStrides.push_back(dataStrides[axis]);
  }
  return one(stridedCopy(data, outputShape, walkStrides, 0));
}

FoldResult NodeEvaluator::evaluateTile() {
  if (llvm::Error failure = checkInputCount(2, 2))
    return failure;
  const HostTensor &data = *input(0);
  const HostTensor &repeatsInput = *input(1);
  if (llvm::Error failure = requireIntegerInput(repeatsInput, "repeats"))
    return failure;
  std::vector<int64_t> repeats = repeatsInput.toIntVector();
  int64_t rank = data.getRank();
  if (static_cast<int64_t>(repeats.size()) != rank)
    return error("repeats has " + llvm::Twine(repeats.size()) +
                 " entries for an input of rank " + llvm::Twine(rank));
  // Output dimension d, read as (repeat, position) pairs, is a row-major walk
  // over [repeats[d], size[d]] with stride 0 for the repeat.
  Strides dataStrides = contiguousStrides(data.getShape());
  std::vector<int64_t> pairedShape, outputShape;
  Strides pairedStrides;
  for (int64_t d = 0; d < rank; ++d) {
    if (repeats[d] < 0)
      return error("repeats has negative entry " + llvm::Twine(repeats[d]));
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
  return one(std::move(result));
}

//===----------------------------------------------------------------------===//
// Generators: Range, ConstantOfShape, CumSum, Trilu, Split
//===----------------------------------------------------------------------===//

FoldResult NodeEvaluator::evaluateRange() {
  if (llvm::Error failure = checkInputCount(3, 3))
    return failure;
  const HostTensor &start = *input(0);
  const HostTensor &limit = *input(1);
  const HostTensor &delta = *input(2);
  for (const HostTensor *operand : {&start, &limit, &delta}) {
    if (operand->numElements() != 1)
      return error("start, limit and delta must be scalars, got " +
                   operand->describe());
    if (llvm::Error failure = requireSameElementType(start, *operand))
      return failure;
  }
  if (start.isBool())
    return error("Range does not accept BOOL inputs");
  int32_t elementType = start.getElementType();

  if (start.isFloat()) {
    // onnxruntime computes the count as ceil((limit - start) / delta) with
    // the difference in the element type, then accumulates value += delta in
    // the element type.
    auto generate = [&](auto first, auto last, auto step) -> FoldResult {
      if (step == 0)
        return error("delta must not be 0");
      double count = std::ceil(static_cast<double>(last - first) /
                               static_cast<double>(step));
      if (std::isnan(count))
        return error("start, limit and delta must be finite");
      if (count > static_cast<double>(kMaxFoldedElements))
        return notFolded();
      int64_t length = count > 0 ? static_cast<int64_t>(count) : 0;
      std::vector<double> values;
      values.reserve(length);
      auto value = first;
      for (int64_t i = 0; i < length; ++i) {
        values.push_back(static_cast<double>(value));
        value += step;
      }
      return one(
          HostTensor::fromDoubles(elementType, {length}, std::move(values)));
    };
    if (elementType == TensorProto::DOUBLE)
      return generate(start.getScalarDouble(), limit.getScalarDouble(),
                      delta.getScalarDouble());
    return generate(static_cast<float>(start.getScalarDouble()),
                    static_cast<float>(limit.getScalarDouble()),
                    static_cast<float>(delta.getScalarDouble()));
  }

  int64_t first = start.getScalarInt();
  int64_t last = limit.getScalarInt();
  int64_t step = delta.getScalarInt();
  if (step == 0)
    return error("delta must not be 0");
  // Exact integer ceil((last - first) / step); a span that overflows int64 is
  // far beyond the fold limit anyway.
  int64_t span;
  if (__builtin_sub_overflow(last, first, &span))
    return notFolded();
  int64_t length = 0;
  if (step > 0 && span > 0)
    length = (span - 1) / step + 1;
  else if (step < 0 && span < 0)
    length = (span + 1) / step + 1;
  if (length > kMaxFoldedElements)
    return notFolded();
  std::vector<int64_t> values(length);
  for (int64_t i = 0; i < length; ++i)
    values[i] = wrappingAdd(first, wrappingMul(i, step));
  return one(HostTensor::fromInts(elementType, {length}, std::move(values)));
}

FoldResult NodeEvaluator::evaluateConstantOfShape() {
  if (llvm::Error failure = checkInputCount(1, 1))
    return failure;
  const HostTensor &shapeInput = *input(0);
  if (llvm::Error failure = requireIntegerInput(shapeInput, "shape"))
    return failure;
  if (shapeInput.getRank() > 1)
    return error("shape must be a 1-D tensor, got " + shapeInput.describe());
  std::vector<int64_t> shape = shapeInput.toIntVector();
  for (int64_t dim : shape)
    if (dim < 0)
      return error("shape has negative dimension " + llvm::Twine(dim));
  HostTensor fill = HostTensor::scalarDouble(0.0, TensorProto::FLOAT);
  if (const onnx::AttributeProto *value = attribute("value")) {
    llvm::Expected<HostTensor> decoded =
        decodeTensorProto(value->t(), modelDirectory);
    if (!decoded)
      return error(llvm::toString(decoded.takeError()));
    if (decoded->numElements() != 1)
      return error("value must hold exactly one element, got " +
                   decoded->describe());
    fill = std::move(*decoded);
  }
  if (exceedsFoldLimit(shape))
    return notFolded();
  HostTensor result = makeResult(fill.getElementType(), shape);
  if (result.isFloat())
    std::fill(result.getMutableFloatData().begin(),
              result.getMutableFloatData().end(), fill.getFloatData()[0]);
  else
    std::fill(result.getMutableIntData().begin(),
              result.getMutableIntData().end(), fill.getIntData()[0]);
  return one(std::move(result));
}

FoldResult NodeEvaluator::evaluateCumSum() {
  if (llvm::Error failure = checkInputCount(2, 2))
    return failure;
  const HostTensor &data = *input(0);
  const HostTensor &axisInput = *input(1);
  if (llvm::Error failure = requireIntegerInput(axisInput, "axis"))
    return failure;
  if (axisInput.numElements() != 1)
    return error("axis must be a scalar, got " + axisInput.describe());
  if (data.isBool())
    return error("CumSum does not accept BOOL inputs");
  if (data.getRank() == 0)
    return error("input must have rank at least 1");
  llvm::Expected<int64_t> axis =
      normalizeAxis(axisInput.getScalarInt(), data.getRank());
  if (!axis)
    return axis.takeError();
  bool exclusive = intAttribute("exclusive", 0) != 0;
  bool reverse = intAttribute("reverse", 0) != 0;
  llvm::ArrayRef<int64_t> shape = data.getShape();
  int64_t outer = product(shape.take_front(*axis));
  int64_t axisSize = shape[*axis];
  int64_t inner = product(shape.drop_front(*axis + 1));
  int32_t elementType = data.getElementType();
  HostTensor result = makeResult(elementType, shape);

  // Runs the scan with accumulator type Accumulator; `round` brings each
  // partial sum back to the element type, as onnxruntime accumulates in it.
  auto scan = [&](const auto *source, auto *destination, auto zero,
                  auto round) {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        auto sum = zero;
        for (int64_t step = 0; step < axisSize; ++step) {
          int64_t k = reverse ? axisSize - 1 - step : step;
          int64_t offset = (o * axisSize + k) * inner + i;
          auto next = round(
              wrappingAdd(sum, static_cast<decltype(zero)>(source[offset])));
          destination[offset] = exclusive ? sum : next;
          sum = next;
        }
      }
    }
  };
  if (elementType == TensorProto::DOUBLE) {
    scan(data.getFloatData().data(), result.getMutableFloatData().data(), 0.0,
         [](double value) { return value; });
  } else if (data.isFloat()) {
    scan(data.getFloatData().data(), result.getMutableFloatData().data(), 0.0f,
         [&](float value) {
           return static_cast<float>(
               roundToFloatElementType(value, elementType));
         });
  } else {
    scan(data.getIntData().data(), result.getMutableIntData().data(),
         int64_t(0), [](int64_t value) { return value; });
    result.normalizeStorage();
  }
  return one(std::move(result));
}

FoldResult NodeEvaluator::evaluateTrilu() {
  if (llvm::Error failure = checkInputCount(1, 2))
    return failure;
  const HostTensor &data = *input(0);
  if (data.getRank() < 2)
    return error("input must have rank at least 2, got " + data.describe());
  int64_t diagonal = 0;
  if (const HostTensor *k = input(1)) {
    if (llvm::Error failure = requireIntegerInput(*k, "k"))
      return failure;
    if (k->numElements() != 1)
      return error("k must be a scalar, got " + k->describe());
    diagonal = k->getScalarInt();
  }
  bool upper = intAttribute("upper", 1) != 0;
  llvm::ArrayRef<int64_t> shape = data.getShape();
  int64_t rows = shape[shape.size() - 2];
  int64_t columns = shape.back();
  int64_t matrices = product(shape.drop_back(2));
  HostTensor result = data;
  auto clear = [&](auto *values) {
    for (int64_t m = 0; m < matrices; ++m)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < columns; ++c) {
          bool keep = upper ? c - r >= diagonal : c - r <= diagonal;
          if (!keep)
            values[(m * rows + r) * columns + c] = 0;
        }
  };
  if (result.isFloat())
    clear(result.getMutableFloatData().data());
  else
    clear(result.getMutableIntData().data());
  return one(std::move(result));
}

FoldResult NodeEvaluator::evaluateSplit() {
  if (llvm::Error failure = checkInputCount(1, 2))
    return failure;
  const HostTensor &data = *input(0);
  if (data.getRank() == 0)
    return error("cannot split a scalar");
  llvm::Expected<int64_t> axis =
      normalizeAxis(intAttribute("axis", 0), data.getRank());
  if (!axis)
    return axis.takeError();
  int64_t outputCount = node.output_size();
  if (outputCount < 1)
    return error("has no outputs");
  llvm::ArrayRef<int64_t> shape = data.getShape();
  int64_t axisSize = shape[*axis];

  std::optional<std::vector<int64_t>> sizes;
  if (opsetVersion >= 13) {
    if (const HostTensor *split = input(1)) {
      if (llvm::Error failure = requireIntegerInput(*split, "split"))
        return failure;
      sizes = split->toIntVector();
    }
  } else {
    sizes = intsAttribute("split");
  }
  const onnx::AttributeProto *numOutputs =
      opsetVersion >= 18 ? attribute("num_outputs") : nullptr;
  if (sizes && numOutputs)
    return error("cannot have both 'split' and 'num_outputs'");
  if (sizes) {
    if (static_cast<int64_t>(sizes->size()) != outputCount)
      return error("split has " + llvm::Twine(sizes->size()) + " entries for " +
                   llvm::Twine(outputCount) + " outputs");
    int64_t total = 0;
    for (int64_t size : *sizes) {
      if (size < 0)
        return error("split has negative entry " + llvm::Twine(size));
      total += size;
    }
    if (total != axisSize)
      return error("split sizes add up to " + llvm::Twine(total) +
                   " but axis " + llvm::Twine(*axis) + " has size " +
                   llvm::Twine(axisSize));
  } else {
    if (numOutputs && numOutputs->i() != outputCount)
      return error("num_outputs is " + llvm::Twine(numOutputs->i()) +
                   " but the node has " + llvm::Twine(outputCount) +
                   " outputs");
    sizes.emplace();
    if (axisSize % outputCount == 0) {
      sizes->assign(outputCount, axisSize / outputCount);
    } else if (numOutputs) {
      // Opset 18: equal chunks of ceil(size / n), the last one smaller.
      int64_t chunk = (axisSize + outputCount - 1) / outputCount;
      int64_t last = axisSize - chunk * (outputCount - 1);
      if (last <= 0)
        return error("cannot split axis of size " + llvm::Twine(axisSize) +
                     " into " + llvm::Twine(outputCount) + " outputs");
      sizes->assign(outputCount - 1, chunk);
      sizes->push_back(last);
    } else {
      return error("cannot split axis of size " + llvm::Twine(axisSize) +
                   " evenly into " + llvm::Twine(outputCount) + " outputs");
    }
  }

  int64_t outer = product(shape.take_front(*axis));
  int64_t inner = product(shape.drop_front(*axis + 1));
  std::vector<HostTensor> results;
  int64_t axisOffset = 0;
  for (int64_t size : *sizes) {
    std::vector<int64_t> partShape(shape.begin(), shape.end());
    partShape[*axis] = size;
    HostTensor part = makeResult(data.getElementType(), partShape);
    for (int64_t o = 0; o < outer; ++o)
      copyElements(data, (o * axisSize + axisOffset) * inner, part,
                   o * size * inner, size * inner);
    axisOffset += size;
    results.push_back(std::move(part));
  }
  return std::optional<std::vector<HostTensor>>(std::move(results));
}

//===----------------------------------------------------------------------===//
// Elementwise: Cast, Where, comparisons, logic, arithmetic, unary math
//===----------------------------------------------------------------------===//

FoldResult NodeEvaluator::evaluateCast(int32_t targetType) {
  if (!isSupportedElementType(targetType))
    return notFolded();
  const HostTensor &data = *input(0);
  HostTensor result = makeResult(targetType, data.getShape());
  int64_t count = data.numElements();
  if (result.isFloat()) {
    std::vector<double> &out = result.getMutableFloatData();
    for (int64_t i = 0; i < count; ++i)
      out[i] = castToFloat(data, i, targetType);
    return one(std::move(result));
  }
  std::vector<int64_t> &out = result.getMutableIntData();
  if (!data.isFloat()) {
    llvm::ArrayRef<int64_t> in = data.getIntData();
    for (int64_t i = 0; i < count; ++i)
      out[i] = wrapToIntegerElementType(in[i], targetType);
    return one(std::move(result));
  }
  llvm::ArrayRef<double> in = data.getFloatData();
  if (targetType == TensorProto::BOOL) {
    for (int64_t i = 0; i < count; ++i)
      out[i] = in[i] != 0.0; // NaN is nonzero, hence true.
    return one(std::move(result));
  }
  // Floating -> integer truncates toward zero. ONNX leaves values outside
  // the target range (and NaN) undefined, so those are not folded: the
  // backend's own Cast decides.
  auto [lowest, highest] = integerRange(targetType);
  for (int64_t i = 0; i < count; ++i) {
    double truncated = std::trunc(in[i]);
    if (targetType == TensorProto::UINT64) {
      if (!(truncated >= 0.0 && truncated < 0x1p64))
        return notFolded();
      out[i] = static_cast<int64_t>(static_cast<uint64_t>(truncated));
      continue;
    }
    if (!(truncated >= -0x1p63 && truncated < 0x1p63))
      return notFolded();
    int64_t value = static_cast<int64_t>(truncated);
    if (value < lowest || value > highest)
      return notFolded();
    out[i] = value;
  }
  return one(std::move(result));
}

FoldResult NodeEvaluator::evaluateWhere() {
  if (llvm::Error failure = checkInputCount(3, 3))
    return failure;
  const HostTensor &condition = *input(0);
  const HostTensor &onTrue = *input(1);
  const HostTensor &onFalse = *input(2);
  if (!condition.isBool())
    return error("condition must be BOOL, got " + condition.describe());
  if (llvm::Error failure = requireSameElementType(onTrue, onFalse))
    return failure;
  llvm::Expected<std::vector<int64_t>> outputShape =
      broadcastAll({&condition, &onTrue, &onFalse});
  if (!outputShape)
    return outputShape.takeError();
  if (exceedsFoldLimit(*outputShape))
    return notFolded();
  HostTensor result = makeResult(onTrue.getElementType(), *outputShape);
  const int64_t *choose = condition.getIntData().data();
  std::array<Strides, 3> strides = {
      broadcastStrides(condition.getShape(), *outputShape),
      broadcastStrides(onTrue.getShape(), *outputShape),
      broadcastStrides(onFalse.getShape(), *outputShape)};
  auto select = [&](const auto *trueValues, const auto *falseValues,
                    auto *destination) {
    walk<3>(*outputShape, strides, {0, 0, 0},
            [&](int64_t i, const std::array<int64_t, 3> &offsets) {
              destination[i] = choose[offsets[0]] ? trueValues[offsets[1]]
                                                  : falseValues[offsets[2]];
            });
  };
  if (result.isFloat())
    select(onTrue.getFloatData().data(), onFalse.getFloatData().data(),
           result.getMutableFloatData().data());
  else
    select(onTrue.getIntData().data(), onFalse.getIntData().data(),
           result.getMutableIntData().data());
  return one(std::move(result));
}

FoldResult NodeEvaluator::evaluateCompare(CompareKind kind) {
  if (llvm::Error failure = checkInputCount(2, 2))
    return failure;
  const HostTensor &lhs = *input(0);
  const HostTensor &rhs = *input(1);
  if (llvm::Error failure = requireSameElementType(lhs, rhs))
    return failure;
  llvm::Expected<std::vector<int64_t>> outputShape = broadcastAll({&lhs, &rhs});
  if (!outputShape)
    return outputShape.takeError();
  if (exceedsFoldLimit(*outputShape))
    return notFolded();
  HostTensor result = makeResult(TensorProto::BOOL, *outputShape);
  int64_t *out = result.getMutableIntData().data();
  if (lhs.isFloat()) {
    // Stored doubles are exact, so comparing them equals comparing in the
    // element type.
    broadcastBinary(lhs.getFloatData().data(), lhs.getShape(),
                    rhs.getFloatData().data(), rhs.getShape(), *outputShape,
                    out, [kind](double a, double b) -> int64_t {
                      return compareValues(kind, a, b);
                    });
  } else if (lhs.isUnsigned64()) {
    broadcastBinary(lhs.getIntData().data(), lhs.getShape(),
                    rhs.getIntData().data(), rhs.getShape(), *outputShape, out,
                    [kind](int64_t a, int64_t b) -> int64_t {
                      return compareValues(kind, static_cast<uint64_t>(a),
                                           static_cast<uint64_t>(b));
                    });
  } else {
    broadcastBinary(lhs.getIntData().data(), lhs.getShape(),
                    rhs.getIntData().data(), rhs.getShape(), *outputShape, out,
                    [kind](int64_t a, int64_t b) -> int64_t {
                      return compareValues(kind, a, b);
                    });
  }
  return one(std::move(result));
}

FoldResult NodeEvaluator::evaluateLogical() {
  llvm::StringRef opType = node.op_type();
  bool isNot = opType == "Not";
  if (llvm::Error failure = checkInputCount(isNot ? 1 : 2, isNot ? 1 : 2))
    return failure;
  for (size_t i = 0; i < (isNot ? 1u : 2u); ++i)
    if (!input(i)->isBool())
      return error("inputs must be BOOL, got " + input(i)->describe());
  const HostTensor &lhs = *input(0);
  if (isNot) {
    HostTensor result = lhs;
    for (int64_t &value : result.getMutableIntData())
      value = !value;
    return one(std::move(result));
  }
  const HostTensor &rhs = *input(1);
  llvm::Expected<std::vector<int64_t>> outputShape = broadcastAll({&lhs, &rhs});
  if (!outputShape)
    return outputShape.takeError();
  if (exceedsFoldLimit(*outputShape))
    return notFolded();
  HostTensor result = makeResult(TensorProto::BOOL, *outputShape);
  int64_t *out = result.getMutableIntData().data();
  const int64_t *a = lhs.getIntData().data();
  const int64_t *b = rhs.getIntData().data();
  if (opType == "And")
    broadcastBinary(a, lhs.getShape(), b, rhs.getShape(), *outputShape, out,
                    [](int64_t x, int64_t y) -> int64_t { return x & y; });
  else if (opType == "Or")
    broadcastBinary(a, lhs.getShape(), b, rhs.getShape(), *outputShape, out,
                    [](int64_t x, int64_t y) -> int64_t { return x | y; });
  else
    broadcastBinary(a, lhs.getShape(), b, rhs.getShape(), *outputShape, out,
                    [](int64_t x, int64_t y) -> int64_t { return x ^ y; });
  return one(std::move(result));
}

FoldResult NodeEvaluator::evaluateArithmetic() {
  if (llvm::Error failure = checkInputCount(2, 2))
    return failure;
  const HostTensor &lhs = *input(0);
  const HostTensor &rhs = *input(1);
  if (llvm::Error failure = requireSameElementType(lhs, rhs))
    return failure;
  if (lhs.isBool())
    return error("arithmetic on BOOL tensors is not defined");
  llvm::Expected<std::vector<int64_t>> outputShape = broadcastAll({&lhs, &rhs});
  if (!outputShape)
    return outputShape.takeError();
  if (exceedsFoldLimit(*outputShape))
    return notFolded();
  llvm::StringRef opType = node.op_type();
  if (opType == "Add")
    return one(applyArithmetic(lhs, rhs, *outputShape, AddFunctor()));
  if (opType == "Sub")
    return one(applyArithmetic(lhs, rhs, *outputShape, SubFunctor()));
  if (opType == "Mul")
    return one(applyArithmetic(lhs, rhs, *outputShape, MulFunctor()));
  if (rhs.isInteger() && llvm::is_contained(rhs.getIntData(), 0))
    return error("integer division by zero");
  return one(applyArithmetic(lhs, rhs, *outputShape, DivFunctor()));
}

FoldResult NodeEvaluator::evaluatePow() {
  if (llvm::Error failure = checkInputCount(2, 2))
    return failure;
  const HostTensor &base = *input(0);
  const HostTensor &exponent = *input(1);
  if (base.isBool() || exponent.isBool())
    return error("Pow does not accept BOOL inputs");
  llvm::Expected<std::vector<int64_t>> outputShape =
      broadcastAll({&base, &exponent});
  if (!outputShape)
    return outputShape.takeError();
  if (exceedsFoldLimit(*outputShape))
    return notFolded();
  int32_t elementType = base.getElementType();
  HostTensor result = makeResult(elementType, *outputShape);
  // The exponent may have a different type than the base; read it as double
  // (floating exponents) or int64 (integer exponents).
  std::vector<double> exponentValues(exponent.numElements());
  for (int64_t i = 0, e = exponent.numElements(); i < e; ++i)
    exponentValues[i] = exponent.getDouble(i);
  if (base.isFloat()) {
    double *out = result.getMutableFloatData().data();
    if (elementType == TensorProto::DOUBLE)
      broadcastBinary(base.getFloatData().data(), base.getShape(),
                      exponentValues.data(), exponent.getShape(), *outputShape,
                      out, [](double x, double y) { return std::pow(x, y); });
    else
      broadcastBinary(base.getFloatData().data(), base.getShape(),
                      exponentValues.data(), exponent.getShape(), *outputShape,
                      out, [](double x, double y) {
                        return static_cast<double>(std::pow(
                            static_cast<float>(x), static_cast<float>(y)));
                      });
    result.normalizeStorage();
    return one(std::move(result));
  }
  int64_t *out = result.getMutableIntData().data();
  if (exponent.isFloat()) {
    // onnxruntime: static_cast<T>(std::pow(base, exponent)).
    std::vector<double> baseValues(base.numElements());
    for (int64_t i = 0, e = base.numElements(); i < e; ++i)
      baseValues[i] = base.getDouble(i);
    double limit = 0x1p63;
    bool representable = true;
    broadcastBinary(baseValues.data(), base.getShape(), exponentValues.data(),
                    exponent.getShape(), *outputShape, out,
                    [&](double x, double y) -> int64_t {
                      double value = std::trunc(std::pow(x, y));
                      if (!(value >= -limit && value < limit)) {
                        representable = false;
                        return 0;
                      }
                      return static_cast<int64_t>(value);
                    });
    if (!representable)
      return notFolded();
  } else {
    broadcastBinary(base.getIntData().data(), base.getShape(),
                    exponent.getIntData().data(), exponent.getShape(),
                    *outputShape, out, integerPower);
  }
  result.normalizeStorage();
  return one(std::move(result));
}

FoldResult NodeEvaluator::evaluateVariadicMaxMin() {
  size_t count =
      std::max(static_cast<size_t>(node.input_size()), inputs.size());
  if (count == 0)
    return error("expected at least 1 input");
  for (size_t i = 0; i < count; ++i)
    if (!input(i))
      return error("input " + llvm::Twine(i) + " is missing");
  bool isMax = node.op_type() == "Max";
  HostTensor result = *input(0);
  if (result.isBool())
    return error("Max/Min do not accept BOOL inputs");
  for (size_t i = 1; i < count; ++i) {
    const HostTensor &next = *input(i);
    if (llvm::Error failure = requireSameElementType(result, next))
      return failure;
    llvm::Expected<std::vector<int64_t>> outputShape =
        broadcastAll({&result, &next});
    if (!outputShape)
      return outputShape.takeError();
    if (exceedsFoldLimit(*outputShape))
      return notFolded();
    result = isMax ? applyArithmetic(result, next, *outputShape, MaxFunctor())
                   : applyArithmetic(result, next, *outputShape, MinFunctor());
  }
  return one(std::move(result));
}

FoldResult NodeEvaluator::evaluateUnary() {
  if (llvm::Error failure = checkInputCount(1, 1))
    return failure;
  const HostTensor &data = *input(0);
  llvm::StringRef opType = node.op_type();
  if (data.isBool())
    return error("input must be numeric, got " + data.describe());

  if (opType == "Neg" || opType == "Abs") {
    bool isNeg = opType == "Neg";
    if (data.isFloat())
      return one(
          isNeg ? applyFloatUnary(data, [](auto x) { return -x; })
                : applyFloatUnary(data, [](auto x) { return std::fabs(x); }));
    bool isUnsigned = data.getElementType() == TensorProto::UINT8 ||
                      data.getElementType() == TensorProto::UINT16 ||
                      data.getElementType() == TensorProto::UINT32 ||
                      data.isUnsigned64();
    if (isNeg && isUnsigned)
      return error("Neg does not accept unsigned input " + data.describe());
    HostTensor result = data;
    if (!isUnsigned) {
      for (int64_t &value : result.getMutableIntData())
        if (isNeg || value < 0)
          value = static_cast<int64_t>(0 - static_cast<uint64_t>(value));
      result.normalizeStorage();
    }
    return one(std::move(result));
  }

  if (llvm::Error failure = requireFloatInput(data))
    return failure;
  if (opType == "Sqrt")
    return one(applyFloatUnary(data, [](auto x) { return std::sqrt(x); }));
  if (opType == "Reciprocal")
    return one(applyFloatUnary(
        data, [](auto x) { return static_cast<decltype(x)>(1) / x; }));
  if (opType == "Exp")
    return one(applyFloatUnary(data, [](auto x) { return std::exp(x); }));
  if (opType == "Log")
    return one(applyFloatUnary(data, [](auto x) { return std::log(x); }));
  if (opType == "Tanh")
    return one(applyFloatUnary(data, [](auto x) { return std::tanh(x); }));
  if (opType == "Erf")
    return one(applyFloatUnary(data, [](auto x) { return std::erf(x); }));
  if (opType == "Cos")
    return one(applyFloatUnary(data, [](auto x) { return std::cos(x); }));
  if (opType == "Sin")
    return one(applyFloatUnary(data, [](auto x) { return std::sin(x); }));
  if (opType == "Sigmoid")
    return one(applyFloatUnary(data, [](auto x) {
      using T = decltype(x);
      return static_cast<T>(1) / (static_cast<T>(1) + std::exp(-x));
    }));
  if (opType == "Floor")
    return one(applyFloatUnary(data, [](auto x) { return std::floor(x); }));
  return one(applyFloatUnary(data, [](auto x) { return std::ceil(x); }));
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

FoldResult NodeEvaluator::evaluateReduce() {
  llvm::StringRef opType = node.op_type();
  enum class Kind { Sum, Mean, Max, Min, Prod };
  Kind kind = llvm::StringSwitch<Kind>(opType)
                  .Case("ReduceSum", Kind::Sum)
                  .Case("ReduceMean", Kind::Mean)
                  .Case("ReduceMax", Kind::Max)
                  .Case("ReduceMin", Kind::Min)
                  .Default(Kind::Prod);
  // ReduceSum took axes as an input from opset 13, the others from 18.
  int64_t axesInputOpset = kind == Kind::Sum ? 13 : 18;
  if (llvm::Error failure =
          checkInputCount(1, opsetVersion >= axesInputOpset ? 2 : 1))
    return failure;
  const HostTensor &data = *input(0);
  std::optional<std::vector<int64_t>> axes;
  if (opsetVersion >= axesInputOpset) {
    if (const HostTensor *axesInput = input(1)) {
      if (llvm::Error failure = requireIntegerInput(*axesInput, "axes"))
        return failure;
      axes = axesInput->toIntVector();
    }
  } else {
    axes = intsAttribute("axes");
  }
  bool keepDims = intAttribute("keepdims", 1) != 0;
  bool noopWithEmptyAxes = intAttribute("noop_with_empty_axes", 0) != 0;
  if ((!axes || axes->empty()) && noopWithEmptyAxes)
    return one(data);

  int64_t rank = data.getRank();
  std::vector<bool> reduced(rank, !axes || axes->empty());
  if (axes && !axes->empty()) {
    for (int64_t axis : *axes) {
      llvm::Expected<int64_t> positive = normalizeAxis(axis, rank);
      if (!positive)
        return positive.takeError();
      reduced[*positive] = true;
    }
  }
  llvm::ArrayRef<int64_t> shape = data.getShape();
  std::vector<int64_t> keptShape, outputShape;
  int64_t reductionSize = 1;
  for (int64_t d = 0; d < rank; ++d) {
    keptShape.push_back(reduced[d] ? 1 : shape[d]);
    if (reduced[d])
      reductionSize *= shape[d];
    if (!reduced[d] || keepDims)
      outputShape.push_back(keptShape.back());
  }
  Strides outputStrides = contiguousStrides(keptShape);
  for (int64_t d = 0; d < rank; ++d)
    if (reduced[d])
      outputStrides[d] = 0;
  int64_t outputCount = product(keptShape);
  int32_t elementType = data.getElementType();

  // Accumulates every input element into its output slot.
  auto accumulate = [&](const auto *source, auto *accumulators, auto combine) {
    walk<1>(shape, {outputStrides}, {0},
            [&](int64_t i, const std::array<int64_t, 1> &offset) {
              accumulators[offset[0]] =
                  combine(accumulators[offset[0]], source[i]);
            });
  };

  if (data.isFloat()) {
    // Accumulate in double and round once, so the result is the correctly
    // rounded reduction rather than one particular summation order.
    double initial = kind == Kind::Prod  ? 1.0
                     : kind == Kind::Max ? -INFINITY
                     : kind == Kind::Min ? INFINITY
                                         : 0.0;
    std::vector<double> values(outputCount, initial);
    const double *source = data.getFloatData().data();
    switch (kind) {
    case Kind::Sum:
    case Kind::Mean:
      accumulate(source, values.data(),
                 [](double acc, double x) { return acc + x; });
      break;
    case Kind::Prod:
      accumulate(source, values.data(),
                 [](double acc, double x) { return acc * x; });
      break;
    case Kind::Max:
      accumulate(source, values.data(), [](double acc, double x) {
        return std::isnan(x) || x > acc ? x : acc;
      });
      break;
    case Kind::Min:
      accumulate(source, values.data(), [](double acc, double x) {
        return std::isnan(x) || x < acc ? x : acc;
      });
      break;
    }
    if (kind == Kind::Mean)
      for (double &value : values)
        value /= static_cast<double>(reductionSize);
    return one(HostTensor::fromDoubles(elementType, std::move(outputShape),
                                       std::move(values)));
  }

  auto [lowest, highest] = integerRange(elementType);
  bool isUnsigned64 = data.isUnsigned64();
  int64_t initial = kind == Kind::Prod  ? 1
                    : kind == Kind::Max ? lowest
                    : kind == Kind::Min ? highest
                                        : 0;
  std::vector<int64_t> values(outputCount, initial);
  const int64_t *source = data.getIntData().data();
  switch (kind) {
  case Kind::Sum:
  case Kind::Mean:
    accumulate(source, values.data(), AddFunctor());
    break;
  case Kind::Prod:
    accumulate(source, values.data(), MulFunctor());
    break;
  case Kind::Max:
  case Kind::Min: {
    bool isMax = kind == Kind::Max;
    accumulate(source, values.data(), [&](int64_t acc, int64_t x) {
      bool greater = isUnsigned64
                         ? static_cast<uint64_t>(x) > static_cast<uint64_t>(acc)
                         : x > acc;
      bool less = isUnsigned64
                      ? static_cast<uint64_t>(x) < static_cast<uint64_t>(acc)
                      : x < acc;
      return (isMax ? greater : less) ? x : acc;
    });
    break;
  }
  }
  if (kind == Kind::Mean) {
    // Integer mean truncates like onnxruntime; the mean of nothing is 0/0.
    if (reductionSize == 0)
      return notFolded();
    for (int64_t &value : values)
      value = isUnsigned64
                  ? static_cast<int64_t>(static_cast<uint64_t>(value) /
                                         static_cast<uint64_t>(reductionSize))
                  : value / reductionSize;
  }
  return one(HostTensor::fromInts(elementType, std::move(outputShape),
                                  std::move(values)));
}

} // namespace

//===----------------------------------------------------------------------===//
// Public entry points
//===----------------------------------------------------------------------===//

llvm::Expected<std::vector<int64_t>>
tessera::onnx_import::broadcastShapes(llvm::ArrayRef<int64_t> lhs,
                                      llvm::ArrayRef<int64_t> rhs) {
  size_t rank = std::max(lhs.size(), rhs.size());
  std::vector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the right; missing leading dimensions act as 1.
    int64_t a = i < rank - lhs.size() ? 1 : lhs[i - (rank - lhs.size())];
    int64_t b = i < rank - rhs.size() ? 1 : rhs[i - (rank - rhs.size())];
    if (a != b && a != 1 && b != 1) {
      auto format = [](llvm::ArrayRef<int64_t> shape) {
        std::string text = "[";
        for (size_t d = 0; d < shape.size(); ++d)
          text += (d ? "x" : "") + std::to_string(shape[d]);
        return text + "]";
      };
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "shapes " + format(lhs) + " and " +
                                         format(rhs) + " do not broadcast");
    }
    result[i] = a == 1 ? b : a;
  }
  return result;
}

llvm::Expected<std::optional<std::vector<HostTensor>>>
tessera::onnx_import::evaluateNode(const onnx::NodeProto &node,
                                   llvm::ArrayRef<const HostTensor *> inputs,
                                   int64_t opsetVersion,
                                   llvm::StringRef modelDirectory) {
  return NodeEvaluator(node, inputs, opsetVersion, modelDirectory).evaluate();
}
