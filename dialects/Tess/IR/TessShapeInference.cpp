//===- TessShapeInference.cpp - result types of tess ops -----------------===//
//
// Every op whose result shape follows from its operands and attributes infers
// it here (InferTypeOpInterface). Inference doubles as the verifier for those
// rules: MLIR checks the declared result type against the inferred one, and a
// rule that fails is reported here with its number from TessOps.td.
//
//===----------------------------------------------------------------------===//

#include "Tess/IR/TessOps.h"
#include "TessInference.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

#include <cmath>

using namespace mlir;
using namespace tessera::tess;

std::optional<llvm::SmallVector<int64_t>>
tessera::tess::broadcastShapes(llvm::ArrayRef<int64_t> lhs,
                               llvm::ArrayRef<int64_t> rhs) {
  size_t rank = std::max(lhs.size(), rhs.size());
  llvm::SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t l = i < rank - lhs.size() ? 1 : lhs[i - (rank - lhs.size())];
    int64_t r = i < rank - rhs.size() ? 1 : rhs[i - (rank - rhs.size())];
    if (l != r && l != 1 && r != 1)
      return std::nullopt;
    result[i] = l == 1 ? r : l;
  }
  return result;
}

std::optional<int64_t> tessera::tess::normalizeAxis(int64_t axis,
                                                    int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

std::string tessera::tess::detail::shapeString(ArrayRef<int64_t> shape) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(shape, os);
  os << "]";
  return text;
}

namespace {

using tessera::tess::detail::shapeString;

RankedTensorType rankedType(Value value) {
  return llvm::cast<RankedTensorType>(value.getType());
}

/// Result of an elementwise op over broadcast operands. `resultElement` is
/// null when the result keeps the operands' element type.
LogicalResult inferBroadcast(std::optional<Location> location,
                             ArrayRef<Value> operands, Type resultElement,
                             SmallVectorImpl<Type> &inferred) {
  Type element = rankedType(operands.front()).getElementType();
  SmallVector<int64_t> shape(rankedType(operands.front()).getShape());
  for (Value operand : operands.drop_front()) {
    RankedTensorType type = rankedType(operand);
    if (type.getElementType() != element)
      return emitOptionalError(location, "C1: operands have different element "
                                         "types: ",
                               element, " and ", type.getElementType());
    auto broadcast = broadcastShapes(shape, type.getShape());
    if (!broadcast)
      return emitOptionalError(location, "C2: shapes ", shapeString(shape),
                               " and ", shapeString(type.getShape()),
                               " do not broadcast");
    shape = *broadcast;
  }
  inferred.push_back(
      RankedTensorType::get(shape, resultElement ? resultElement : element));
  return success();
}

/// Reduces over a list of dims, checking each is valid and distinct.
FailureOr<SmallVector<int64_t>>
normalizeDims(std::optional<Location> location, ArrayRef<int64_t> dims,
              int64_t rank, StringRef rule) {
  SmallVector<int64_t> normalized;
  llvm::SmallSet<int64_t, 4> seen;
  for (int64_t dim : dims) {
    auto axis = normalizeAxis(dim, rank);
    if (!axis || !seen.insert(*axis).second) {
      (void)emitOptionalError(location, rule, ": dim ", dim,
                              " is out of range or repeated for rank ", rank);
      return failure();
    }
    normalized.push_back(*axis);
  }
  return normalized;
}

LogicalResult inferReduction(std::optional<Location> location, Value input,
                             ArrayRef<int64_t> dims, bool keepDims,
                             SmallVectorImpl<Type> &inferred) {
  RankedTensorType type = rankedType(input);
  auto normalized = normalizeDims(location, dims, type.getRank(), "C1");
  if (failed(normalized))
    return failure();
  SmallVector<int64_t> shape;
  for (auto [index, size] : llvm::enumerate(type.getShape())) {
    if (!llvm::is_contained(*normalized, static_cast<int64_t>(index)))
      shape.push_back(size);
    else if (keepDims)
      shape.push_back(1);
  }
  inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

/// Checks a norm's scale/bias against the normalized trailing shape.
LogicalResult checkNormParameter(std::optional<Location> location,
                                 RankedTensorType input, int64_t axis,
                                 Value parameter, StringRef what) {
  if (!parameter)
    return success();
  RankedTensorType type = rankedType(parameter);
  ArrayRef<int64_t> normalized = input.getShape().drop_front(axis);
  if (type.getShape() != normalized ||
      type.getElementType() != input.getElementType())
    return emitOptionalError(location, "C2: ", what, " must be ",
                             RankedTensorType::get(normalized,
                                                   input.getElementType()),
                             ", got ", type);
  return success();
}

} // namespace

LogicalResult tessera::tess::detail::inferNorm(std::optional<Location> location,
                                               Value input, int64_t axis,
                                               Value scale, Value bias,
                                               SmallVectorImpl<Type> &inferred) {
  RankedTensorType type = rankedType(input);
  auto normalizedAxis = normalizeAxis(axis, type.getRank());
  if (!normalizedAxis)
    return emitOptionalError(location, "C1: axis ", axis,
                             " is out of range for rank ", type.getRank());
  if (failed(checkNormParameter(location, type, *normalizedAxis, scale,
                                "scale")) ||
      failed(checkNormParameter(location, type, *normalizedAxis, bias, "bias")))
    return failure();
  inferred.push_back(type);
  return success();
}

using tessera::tess::detail::inferNorm;

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

#define TESS_INFER_BROADCAST(OP, RESULT_ELEMENT)                               \
  LogicalResult OP::inferReturnTypes(MLIRContext *context,                     \
                                     std::optional<Location> location,         \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    (void)context;                                                             \
    return inferBroadcast(location, {adaptor.getLhs(), adaptor.getRhs()},      \
                          RESULT_ELEMENT, inferred);                           \
  }

TESS_INFER_BROADCAST(AddOp, Type())
TESS_INFER_BROADCAST(SubOp, Type())
TESS_INFER_BROADCAST(MulOp, Type())
TESS_INFER_BROADCAST(DivOp, Type())
TESS_INFER_BROADCAST(PowOp, Type())
TESS_INFER_BROADCAST(MaximumOp, Type())
TESS_INFER_BROADCAST(MinimumOp, Type())
TESS_INFER_BROADCAST(LogicalAndOp, Type())
TESS_INFER_BROADCAST(LogicalOrOp, Type())
TESS_INFER_BROADCAST(CompareOp, IntegerType::get(context, 1))
#undef TESS_INFER_BROADCAST

LogicalResult tessera::tess::detail::checkPackedGating(
    std::optional<Location> location, Type input, Type halved,
    StringRef halvedName) {
  auto packed = llvm::cast<RankedTensorType>(input);
  int64_t rank = packed.getRank();
  if (rank < 1 || packed.isDynamicDim(rank - 1) ||
      packed.getDimSize(rank - 1) % 2 != 0)
    return emitOptionalError(location, "C1: the last dim of ", packed,
                             " must be static and even");
  SmallVector<int64_t> shape(packed.getShape());
  shape.back() /= 2;
  if (halved != packed.clone(shape))
    return emitOptionalError(location, "C2: ", halvedName, " ", halved,
                             " must be ", packed.clone(shape),
                             ": the input's type with the last dim halved");
  return success();
}

LogicalResult WhereOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  SmallVector<Type, 1> branches;
  if (failed(inferBroadcast(location,
                            {adaptor.getOnTrue(), adaptor.getOnFalse()},
                            Type(), branches)))
    return failure();
  auto branchType = llvm::cast<RankedTensorType>(branches.front());
  auto shape = broadcastShapes(branchType.getShape(),
                               rankedType(adaptor.getCondition()).getShape());
  if (!shape)
    return emitOptionalError(location, "C2: the condition's shape does not "
                                       "broadcast with the branches'");
  inferred.push_back(
      RankedTensorType::get(*shape, branchType.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> location,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &inferred) {
  Type valueType = adaptor.getValue().getType();
  if (!llvm::isa<RankedTensorType>(valueType))
    return emitOptionalError(location, "C1: value must be a ranked tensor, "
                                       "got ",
                             valueType);
  inferred.push_back(valueType);
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

LogicalResult tessera::tess::detail::inferMatmul(
    std::optional<Location> location, Value lhsValue, Value rhsValue,
    bool transposeLhs, bool transposeRhs, SmallVectorImpl<Type> &inferred) {
  RankedTensorType lhs = rankedType(lhsValue);
  RankedTensorType rhs = rankedType(rhsValue);
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return emitOptionalError(location, "C1: operands must have rank >= 2");
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(location, "C2: operands have different element "
                                       "types");
  ArrayRef<int64_t> l = lhs.getShape(), r = rhs.getShape();
  int64_t m = transposeLhs ? l.back() : l[l.size() - 2];
  int64_t lk = transposeLhs ? l[l.size() - 2] : l.back();
  int64_t rk = transposeRhs ? r.back() : r[r.size() - 2];
  int64_t n = transposeRhs ? r[r.size() - 2] : r.back();
  if (lk != rk)
    return emitOptionalError(location, "C3: contracted dims differ: ", lk,
                             " vs ", rk);
  auto batch = broadcastShapes(l.drop_back(2), r.drop_back(2));
  if (!batch)
    return emitOptionalError(location, "C4: batch dims do not broadcast");
  batch->push_back(m);
  batch->push_back(n);
  inferred.push_back(RankedTensorType::get(*batch, lhs.getElementType()));
  return success();
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  return detail::inferMatmul(location, adaptor.getLhs(), adaptor.getRhs(),
                             adaptor.getTransposeLhs(),
                             adaptor.getTransposeRhs(), inferred);
}

LogicalResult tessera::tess::detail::inferLinear(
    std::optional<Location> location, Value inputValue, Value weightValue,
    Value bias, bool transposed, SmallVectorImpl<Type> &inferred) {
  RankedTensorType input = rankedType(inputValue);
  RankedTensorType weight = rankedType(weightValue);
  if (input.getRank() < 1 || weight.getRank() != 2)
    return emitOptionalError(location, "C1: input must have rank >= 1 and "
                                       "weight rank 2");
  if (input.getElementType() != weight.getElementType())
    return emitOptionalError(location, "C2: input and weight have different "
                                       "element types");
  int64_t in = weight.getDimSize(transposed ? 1 : 0);
  int64_t out = weight.getDimSize(transposed ? 0 : 1);
  if (input.getShape().back() != in)
    return emitOptionalError(location, "C3: input features ",
                             input.getShape().back(), " != weight's ", in);
  if (bias) {
    RankedTensorType biasType = rankedType(bias);
    if (biasType.getShape() != ArrayRef<int64_t>{out} ||
        biasType.getElementType() != input.getElementType())
      return emitOptionalError(location, "C4: bias must be [", out, "] of ",
                               input.getElementType());
  }
  SmallVector<int64_t> shape(input.getShape().drop_back());
  shape.push_back(out);
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  return detail::inferLinear(location, adaptor.getInput(),
                             adaptor.getWeight(), adaptor.getBias(),
                             adaptor.getTransposeWeight(), inferred);
}

//===----------------------------------------------------------------------===//
// Transformer layers
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  return inferNorm(location, adaptor.getInput(), adaptor.getAxis(),
                   adaptor.getScale(), adaptor.getBias(), inferred);
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> location,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  return inferNorm(location, adaptor.getInput(), adaptor.getAxis(),
                   adaptor.getScale(), Value(), inferred);
}

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  RankedTensorType table = rankedType(adaptor.getTable());
  if (table.getRank() != 2)
    return emitOptionalError(location, "C1: the table must have rank 2");
  RankedTensorType indices = rankedType(adaptor.getIndices());
  if (indices.getRank() < 1)
    return emitOptionalError(location, "C3: indices must have rank >= 1; "
                                       "look one id up with tess.gather");
  SmallVector<int64_t> shape(indices.getShape());
  shape.push_back(table.getDimSize(1));
  inferred.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  return detail::inferAttention(
      location, adaptor.getQuery(), adaptor.getKey(), adaptor.getValue(),
      adaptor.getMask(), adaptor.getCausal(),
      adaptor.getScale().convertToDouble(),
      adaptor.getDropout().convertToDouble(),
      static_cast<int64_t>(adaptor.getWindow()),
      adaptor.getSoftcap().convertToDouble(), inferred);
}

LogicalResult tessera::tess::detail::inferAttention(
    std::optional<Location> location, Value query, Value key, Value value,
    Value mask, bool causal, double scale, double dropout, int64_t window,
    double softcap, SmallVectorImpl<Type> &inferred) {
  RankedTensorType q = rankedType(query);
  RankedTensorType k = rankedType(key);
  RankedTensorType v = rankedType(value);
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4 ||
      q.getElementType() != k.getElementType() ||
      q.getElementType() != v.getElementType())
    return emitOptionalError(location, "C1: query, key and value must be "
                                       "rank-4 tensors of one element type");
  if (k.getDimSize(0) != v.getDimSize(0) ||
      k.getDimSize(1) != v.getDimSize(1) ||
      k.getDimSize(2) != v.getDimSize(2) ||
      q.getDimSize(0) != k.getDimSize(0) || q.getDimSize(3) != k.getDimSize(3))
    return emitOptionalError(location, "C2: query ", q, ", key ", k,
                             " and value ", v, " do not agree");
  if (k.getDimSize(1) < 1 || q.getDimSize(1) % k.getDimSize(1) != 0)
    return emitOptionalError(location, "C3: ", q.getDimSize(1),
                             " query heads are not a multiple of ",
                             k.getDimSize(1),
                             " key/value heads (at least one)");
  if (mask) {
    RankedTensorType maskType = rankedType(mask);
    SmallVector<int64_t> scores = {q.getDimSize(0), q.getDimSize(1),
                                   q.getDimSize(2), k.getDimSize(2)};
    if (maskType.getElementType() != q.getElementType())
      return emitOptionalError(location, "C4: mask element type ",
                               maskType.getElementType(),
                               " differs from the query's ",
                               q.getElementType());
    auto broadcast = broadcastShapes(maskType.getShape(), scores);
    if (!broadcast || ArrayRef<int64_t>(*broadcast) != ArrayRef<int64_t>(scores))
      return emitOptionalError(location, "C4: mask ", maskType,
                               " does not broadcast to the scores ",
                               shapeString(scores));
  }
  // Written so that NaN fails too.
  if (!(scale > 0) || std::isinf(scale))
    return emitOptionalError(location, "C5: scale must be positive and "
                                       "finite, got ",
                             scale);
  if (!(dropout >= 0 && dropout < 1))
    return emitOptionalError(location, "C7: dropout must be in [0, 1), got ",
                             dropout);
  if (dropout != 0 && q.getDimSize(1) > kAttentionDropoutHeads)
    return emitOptionalError(location, "C7: dropout over ", q.getDimSize(1),
                             " query heads: at most ", kAttentionDropoutHeads,
                             " (the head stride of the dropout index)");
  if (causal && q.getDimSize(2) > k.getDimSize(2))
    return emitOptionalError(location, "C6: a causal attention needs no more "
                                       "queries than keys");
  // The band is measured back from the causal diagonal, which only a
  // causal attention has.
  if (window < 0 || (window > 0 && !causal))
    return emitOptionalError(location, "C8: window ", window,
                             " must be 0 (none) or positive with causal");
  if (!(softcap >= 0.0) || !std::isfinite(softcap))
    return emitOptionalError(location, "C9: softcap ", softcap,
                             " must be 0 (none) or positive and finite");
  inferred.push_back(RankedTensorType::get(
      {q.getDimSize(0), q.getDimSize(1), q.getDimSize(2), v.getDimSize(3)},
      q.getElementType()));
  return success();
}

LogicalResult PackedAttentionOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  return detail::inferPackedAttention(
      location, adaptor.getQkv(),
      static_cast<int64_t>(adaptor.getQueryHeads()),
      static_cast<int64_t>(adaptor.getKeyHeads()),
      adaptor.getScale().convertToDouble(), inferred);
}

LogicalResult tessera::tess::detail::inferPackedAttention(
    std::optional<Location> location, Value qkv, int64_t queryHeads,
    int64_t keyHeads, double scale, SmallVectorImpl<Type> &inferred) {
  RankedTensorType packed = rankedType(qkv);
  if (packed.getRank() != 3)
    return emitOptionalError(location, "C1: qkv must have rank 3 ([batch, "
                                       "seq, (Hq + 2 Hkv) head_dim]), got ",
                             packed);
  if (queryHeads < 1 || keyHeads < 1 || queryHeads % keyHeads != 0)
    return emitOptionalError(location, "C2: ", queryHeads,
                             " query heads are not a positive multiple of ",
                             keyHeads, " key/value heads");
  int64_t width = packed.getDimSize(2), heads = queryHeads + 2 * keyHeads;
  if (width % heads != 0)
    return emitOptionalError(location, "C3: qkv's last dim ", width,
                             " is not a multiple of ", heads,
                             " heads (query_heads + 2 key_heads)");
  if (!(scale > 0) || std::isinf(scale))
    return emitOptionalError(location, "C4: scale must be positive and "
                                       "finite, got ",
                             scale);
  int64_t batch = packed.getDimSize(0), seq = packed.getDimSize(1);
  inferred.push_back(RankedTensorType::get(
      {batch, seq, queryHeads * (width / heads)}, packed.getElementType()));
  inferred.push_back(RankedTensorType::get(
      {batch, queryHeads, seq}, Float32Type::get(qkv.getContext())));
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  RankedTensorType type = rankedType(adaptor.getInput());
  ArrayRef<int64_t> permutation = adaptor.getPermutation();
  SmallVector<bool> used(type.getRank(), false);
  if (static_cast<int64_t>(permutation.size()) != type.getRank())
    return emitOptionalError(location, "C1: permutation has ",
                             permutation.size(), " entries for rank ",
                             type.getRank());
  SmallVector<int64_t> shape;
  for (int64_t dim : permutation) {
    if (dim < 0 || dim >= type.getRank() || used[dim])
      return emitOptionalError(location, "C1: ", shapeString(permutation),
                               " is not a permutation of [0, ",
                               type.getRank(), ")");
    used[dim] = true;
    shape.push_back(type.getDimSize(dim));
  }
  inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  RankedTensorType type = rankedType(adaptor.getInput());
  ArrayRef<int64_t> starts = adaptor.getStarts(), limits = adaptor.getLimits(),
                    strides = adaptor.getStrides();
  int64_t rank = type.getRank();
  if (static_cast<int64_t>(starts.size()) != rank ||
      static_cast<int64_t>(limits.size()) != rank ||
      static_cast<int64_t>(strides.size()) != rank)
    return emitOptionalError(location, "C1: starts, limits and strides need ",
                             rank, " entries each");
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i) {
    if (starts[i] < 0 || starts[i] > limits[i] ||
        limits[i] > type.getDimSize(i))
      return emitOptionalError(location, "C2: dim ", i, " window [", starts[i],
                               ", ", limits[i], ") is not inside [0, ",
                               type.getDimSize(i), "]");
    if (strides[i] < 1)
      return emitOptionalError(location, "C3: stride of dim ", i,
                               " must be >= 1");
    // ceil((limit - start) / stride), without overflow for huge strides.
    int64_t extent = limits[i] - starts[i];
    shape.push_back(extent == 0 ? 0 : (extent - 1) / strides[i] + 1);
  }
  inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  RankedTensorType type = rankedType(adaptor.getInput());
  auto axis = normalizeAxis(adaptor.getAxis(), type.getRank());
  if (!axis)
    return emitOptionalError(location, "C1: axis ",
                             static_cast<int64_t>(adaptor.getAxis()),
                             " is out of range for rank ", type.getRank());
  int64_t dim = type.getDimSize(*axis);
  int64_t total = 0;
  for (int64_t size : adaptor.getSizes()) {
    if (size <= 0)
      return emitOptionalError(location, "C2: split sizes must be positive");
    // Compared before adding, so that huge sizes cannot overflow the sum.
    if (size > dim - total)
      return emitOptionalError(location, "C2: split sizes sum to more than "
                                         "the dim, ",
                               dim);
    total += size;
    SmallVector<int64_t> shape(type.getShape());
    shape[*axis] = size;
    inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
  }
  if (total != dim)
    return emitOptionalError(location, "C2: split sizes sum to ", total,
                             ", the dim is ", dim);
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  if (adaptor.getInputs().empty())
    return emitOptionalError(location, "C1: concat needs at least one input");
  RankedTensorType first = rankedType(adaptor.getInputs().front());
  auto axis = normalizeAxis(adaptor.getAxis(), first.getRank());
  if (!axis)
    return emitOptionalError(location, "C3: axis ",
                             static_cast<int64_t>(adaptor.getAxis()),
                             " is out of range for rank ", first.getRank());
  SmallVector<int64_t> shape(first.getShape());
  shape[*axis] = 0;
  for (Value input : adaptor.getInputs()) {
    RankedTensorType type = rankedType(input);
    if (type.getRank() != first.getRank() ||
        type.getElementType() != first.getElementType())
      return emitOptionalError(location, "C2: inputs differ in rank or "
                                         "element type");
    for (int64_t i = 0; i < type.getRank(); ++i)
      if (i != *axis && type.getDimSize(i) != first.getDimSize(i))
        return emitOptionalError(location, "C4: inputs differ in dim ", i);
    shape[*axis] += type.getDimSize(*axis);
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  RankedTensorType type = rankedType(adaptor.getInput());
  auto axis = normalizeAxis(adaptor.getAxis(), type.getRank());
  if (!axis)
    return emitOptionalError(location, "C1: axis ",
                             static_cast<int64_t>(adaptor.getAxis()),
                             " is out of range for rank ", type.getRank());
  SmallVector<int64_t> shape(type.getShape().take_front(*axis));
  llvm::append_range(shape, rankedType(adaptor.getIndices()).getShape());
  llvm::append_range(shape, type.getShape().drop_front(*axis + 1));
  inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

#define TESS_INFER_REDUCTION(OP)                                               \
  LogicalResult OP::inferReturnTypes(MLIRContext *,                            \
                                     std::optional<Location> location,         \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    return inferReduction(location, adaptor.getInput(), adaptor.getDims(),     \
                          adaptor.getKeepDims(), inferred);                    \
  }

TESS_INFER_REDUCTION(ReduceSumOp)
TESS_INFER_REDUCTION(ReduceMeanOp)
TESS_INFER_REDUCTION(ReduceMaxOp)
TESS_INFER_REDUCTION(ReduceMinOp)
#undef TESS_INFER_REDUCTION
