//===- EvaluationSupport.h - Shared pieces of the constant evaluator -----===//
//
// Internal to the constant evaluator (ConstantEvaluator.cpp and the
// *Evaluation.cpp files beside this header); not a public API.
//
// Every kernel reduces to one primitive: walk an output shape in row-major
// order while keeping a running element offset into each operand, each
// operand advancing by its own stride per dimension. Broadcasting is a stride
// of 0, Transpose permutes strides, Slice scales them by the step, Tile and
// Expand insert 0-stride dimensions. Strides are computed once per op,
// adjacent dimensions that are contiguous for every operand are merged, and
// the innermost dimension runs as a plain loop, so an elementwise op on an
// [8,1,1024,1024] mask costs a handful of instructions per element and no
// allocation beyond the result.
//
// Besides the walk, this header holds what more than one op family needs:
// the wrapping integer arithmetic, the storage dispatch between the float and
// integer halves of a HostTensor, and NodeContext, which gives an op's
// evaluator its inputs, attributes and diagnostics.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_IMPORT_ONNX_CONSTANTEVALUATION_EVALUATIONSUPPORT_H
#define TESSERA_LIB_IMPORT_ONNX_CONSTANTEVALUATION_EVALUATIONSUPPORT_H

#include "tessera/Import/ONNX/ConstantEvaluator.h"

#include "onnx/onnx_pb.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessera::onnx_import::constant_evaluation {

using Strides = llvm::SmallVector<int64_t, 8>;
using FoldResult = llvm::Expected<std::optional<std::vector<HostTensor>>>;

//===----------------------------------------------------------------------===//
// Shape and stride helpers
//===----------------------------------------------------------------------===//

int64_t product(llvm::ArrayRef<int64_t> shape);

/// True when the element count of `shape` exceeds kMaxFoldedElements (checked
/// without overflowing).
bool exceedsFoldLimit(llvm::ArrayRef<int64_t> shape);

Strides contiguousStrides(llvm::ArrayRef<int64_t> shape);

/// Strides that read a contiguous tensor of `inputShape` as if it had been
/// broadcast to `outputShape` (right-aligned; size-1 dimensions repeat).
Strides broadcastStrides(llvm::ArrayRef<int64_t> inputShape,
                         llvm::ArrayRef<int64_t> outputShape);

/// A contiguous shape seen as [outer, shape[axis], inner]: the element counts
/// before and after `axis`. Concat, Gather, Split and CumSum address their
/// axis this way.
struct AxisBlocks {
  int64_t outer;
  int64_t inner;
};
AxisBlocks blocksAroundAxis(llvm::ArrayRef<int64_t> shape, int64_t axis);

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

//===----------------------------------------------------------------------===//
// Tensor storage
//===----------------------------------------------------------------------===//

/// A new tensor of `elementType` and `shape` with zero-initialized storage,
/// to be filled by a kernel.
HostTensor makeResult(int32_t elementType, llvm::ArrayRef<int64_t> shape);

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

/// Calls `body(pointer)` with the mutable storage of `tensor`.
template <typename Body> void withMutableStorage(HostTensor &tensor, Body body) {
  if (tensor.isFloat())
    body(tensor.getMutableFloatData().data());
  else
    body(tensor.getMutableIntData().data());
}

/// Copies the elements of `input` that a strided walk over `outputShape`
/// visits into a new tensor of `outputShape`.
HostTensor stridedCopy(const HostTensor &input,
                       llvm::ArrayRef<int64_t> outputShape,
                       const Strides &strides, int64_t baseOffset);

/// Copies `count` consecutive elements between tensors of the same type.
void copyElements(const HostTensor &source, int64_t sourceOffset,
                  HostTensor &destination, int64_t destinationOffset,
                  int64_t count);

/// Smallest and largest value of an integer element type, for reductions
/// over empty sets.
std::pair<int64_t, int64_t> integerRange(int32_t elementType);

//===----------------------------------------------------------------------===//
// Wrapping arithmetic
//
// The functors are called with float (FLOAT, FLOAT16, BFLOAT16), double,
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
struct MulFunctor {
  template <typename T> T operator()(T a, T b) const {
    return wrappingMul(a, b);
  }
};

//===----------------------------------------------------------------------===//
// NodeContext
//===----------------------------------------------------------------------===//

/// The node being folded with its constant inputs, and the checks and
/// attribute readers every op evaluator uses. Errors name the node and op.
class NodeContext {
public:
  NodeContext(const onnx::NodeProto &node,
              llvm::ArrayRef<const HostTensor *> inputs, int64_t opsetVersion,
              llvm::StringRef modelDirectory)
      : node(node), inputs(inputs), opsetVersion(opsetVersion),
        modelDirectory(modelDirectory) {}

  const onnx::NodeProto &getNode() const { return node; }
  llvm::StringRef getOpType() const { return node.op_type(); }
  int64_t getOpsetVersion() const { return opsetVersion; }
  llvm::StringRef getModelDirectory() const { return modelDirectory; }

  llvm::Error error(const llvm::Twine &message) const;

  /// Input `index`, or nullptr when the optional input is absent.
  const HostTensor *input(size_t index) const;
  llvm::Error checkInputCount(size_t minimum, size_t maximum) const;
  llvm::Error requireInputs(std::initializer_list<size_t> indices) const;
  /// Every input of a variadic op (Concat, Max, Min); each must be present.
  llvm::Expected<std::vector<const HostTensor *>> variadicInputs() const;
  llvm::Error requireSameElementType(const HostTensor &lhs,
                                     const HostTensor &rhs) const;
  llvm::Error requireIntegerInput(const HostTensor &tensor,
                                  llvm::StringRef what) const;
  llvm::Error requireFloatInput(const HostTensor &tensor) const;
  /// A shape operand (Expand, ConstantOfShape): a 1-D integer tensor with no
  /// negative entry.
  llvm::Expected<std::vector<int64_t>>
  shapeInput(const HostTensor &tensor) const;

  const onnx::AttributeProto *attribute(llvm::StringRef name) const;
  int64_t intAttribute(llvm::StringRef name, int64_t defaultValue) const;
  std::optional<std::vector<int64_t>> intsAttribute(llvm::StringRef name) const;
  /// A list that ONNX moved from attribute `name` to optional input
  /// `inputIndex` in opset `inputOpset` (Squeeze axes, Reduce axes, Split
  /// sizes): read from wherever this node's opset keeps it.
  llvm::Expected<std::optional<std::vector<int64_t>>>
  intsFromInputOrAttribute(size_t inputIndex, llvm::StringRef name,
                           int64_t inputOpset) const;

  llvm::Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank) const;
  llvm::Expected<std::vector<int64_t>>
  normalizeAxes(llvm::ArrayRef<int64_t> axes, int64_t rank) const;
  /// The entries of `indices` made non-negative, each checked to lie in
  /// [-axisSize, axisSize) along data axis `axis`.
  llvm::Expected<std::vector<int64_t>>
  normalizeIndices(const HostTensor &indices, int64_t axis,
                   int64_t axisSize) const;
  llvm::Expected<std::vector<int64_t>>
  broadcastAll(llvm::ArrayRef<const HostTensor *> tensors) const;

private:
  const onnx::NodeProto &node;
  llvm::ArrayRef<const HostTensor *> inputs;
  int64_t opsetVersion;
  llvm::StringRef modelDirectory;
};

inline FoldResult foldedTo(HostTensor tensor) {
  std::vector<HostTensor> results;
  results.push_back(std::move(tensor));
  return std::optional<std::vector<HostTensor>>(std::move(results));
}

inline FoldResult notFolded() {
  return std::optional<std::vector<HostTensor>>();
}

//===----------------------------------------------------------------------===//
// Op evaluators, by family
//
// Each evaluates the node in `context`; ConstantEvaluator.cpp maps op types
// to them.
//===----------------------------------------------------------------------===//

// ElementwiseEvaluation.cpp
FoldResult evaluateCast(const NodeContext &context);
FoldResult evaluateCastLike(const NodeContext &context);
FoldResult evaluateWhere(const NodeContext &context);
FoldResult evaluateCompare(const NodeContext &context);
FoldResult evaluateLogical(const NodeContext &context);
FoldResult evaluateArithmetic(const NodeContext &context);
FoldResult evaluatePow(const NodeContext &context);
FoldResult evaluateVariadicMaxMin(const NodeContext &context);
FoldResult evaluateUnary(const NodeContext &context);

// IndexingEvaluation.cpp
FoldResult evaluateIdentity(const NodeContext &context);
FoldResult evaluateShape(const NodeContext &context);
FoldResult evaluateSize(const NodeContext &context);
FoldResult evaluateSqueeze(const NodeContext &context);
FoldResult evaluateUnsqueeze(const NodeContext &context);
FoldResult evaluateReshape(const NodeContext &context);
FoldResult evaluateConcat(const NodeContext &context);
FoldResult evaluateSplit(const NodeContext &context);
FoldResult evaluateGather(const NodeContext &context);
FoldResult evaluateGatherElements(const NodeContext &context);
FoldResult evaluateGatherND(const NodeContext &context);
FoldResult evaluateScatterND(const NodeContext &context);
FoldResult evaluateSlice(const NodeContext &context);
FoldResult evaluateExpand(const NodeContext &context);
FoldResult evaluateTranspose(const NodeContext &context);
FoldResult evaluateTile(const NodeContext &context);

// GeneratorEvaluation.cpp
FoldResult evaluateConstant(const NodeContext &context);
FoldResult evaluateConstantOfShape(const NodeContext &context);
FoldResult evaluateRange(const NodeContext &context);
FoldResult evaluateTrilu(const NodeContext &context);
FoldResult evaluateCumSum(const NodeContext &context);

// ReductionEvaluation.cpp
FoldResult evaluateReduce(const NodeContext &context);

} // namespace tessera::onnx_import::constant_evaluation

#endif // TESSERA_LIB_IMPORT_ONNX_CONSTANTEVALUATION_EVALUATIONSUPPORT_H
