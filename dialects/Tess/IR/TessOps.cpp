//===- TessOps.cpp - verifiers of tess ops -------------------------------===//
//
// Rules that are not about result shapes live here; shape rules are checked
// by inference (TessShapeInference.cpp). Messages start with the rule's
// number from TessOps.td.
//
//===----------------------------------------------------------------------===//

#include "Tess/IR/TessOps.h"
#include "TessInference.h"

#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace tessera::tess;

LogicalResult ConstantOp::verifyBeforeInference() {
  Type valueType = getValue().getType();
  if (!llvm::isa<RankedTensorType>(valueType))
    return emitOpError("C1: value must be a ranked tensor, got ") << valueType;
  if (valueType != getType())
    return emitOpError("C1: value of type ")
           << valueType << " does not match the result " << getType();
  return success();
}

LogicalResult ParameterOp::verify() {
  if (getName().empty())
    return emitOpError("C1: a parameter needs a name");
  if (std::optional<ElementsAttr> value = getValue();
      value && value->getType() != getType())
    return emitOpError("C2: value of type ")
           << value->getType() << " does not match the result " << getType();
  return success();
}

static LogicalResult verifyEpsilon(Operation *op, double epsilon) {
  // Written so that NaN fails too.
  if (!(epsilon >= 0))
    return op->emitOpError("C3: epsilon must be >= 0, got ") << epsilon;
  return success();
}

LogicalResult LayerNormOp::verify() {
  return verifyEpsilon(*this, getEpsilon().convertToDouble());
}

LogicalResult RmsNormOp::verify() {
  return verifyEpsilon(*this, getEpsilon().convertToDouble());
}

LogicalResult RotaryOp::verify() {
  RankedTensorType input = getInput().getType();
  int64_t rank = input.getRank();
  if (rank < 1 || input.getDimSize(rank - 1) < 2 ||
      input.getDimSize(rank - 1) % 2 != 0)
    return emitOpError("C1: the last dim of ")
           << input << " must be even and at least 2";
  for (Value angle : {getCos(), getSin()}) {
    auto type = llvm::cast<RankedTensorType>(angle.getType());
    bool broadcasts = type.getRank() == rank &&
                      type.getElementType() == input.getElementType();
    for (int64_t dim = 0; broadcasts && dim < rank; ++dim)
      broadcasts = type.getDimSize(dim) == 1 ||
                   type.getDimSize(dim) == input.getDimSize(dim);
    if (!broadcasts)
      return emitOpError("C2: ") << type << " does not broadcast to " << input;
  }
  if (getResult().getType() != input)
    return emitOpError("C3: the result type ")
           << getResult().getType() << " is not the input's " << input;
  // I64Attr's getter returns the bits unsigned; the count is signed.
  auto rotatedHeads = static_cast<int64_t>(getRotatedHeads());
  if (rotatedHeads != 0 &&
      (rank < 2 || rotatedHeads < 0 ||
       rotatedHeads > input.getDimSize(rank - 2)))
    return emitOpError("C4: rotated_heads ")
           << rotatedHeads << " must be 0 or in [1, dim(-2)] of " << input;
  return success();
}

LogicalResult PackedSwigluOp::verify() {
  return detail::checkPackedGating(getLoc(), getInput().getType(),
                                   getResult().getType(), "the result");
}

LogicalResult SoftmaxOp::verify() {
  int64_t rank = getInput().getType().getRank();
  // I64Attr's getter returns the bits unsigned; the axis is signed.
  int64_t axis = static_cast<int64_t>(getAxis());
  if (!normalizeAxis(axis, rank))
    return emitOpError("C1: axis ")
           << axis << " is out of range for rank " << rank;
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto input = getInput().getType();
  auto result = getResult().getType();
  if (input.getNumElements() != result.getNumElements() ||
      input.getElementType() != result.getElementType())
    return emitOpError("C1: cannot reshape ") << input << " to " << result;
  return success();
}

LogicalResult BroadcastOp::verify() {
  auto input = getInput().getType();
  auto result = getResult().getType();
  if (input.getElementType() != result.getElementType())
    return emitOpError("C1: element types differ");
  int64_t offset = result.getRank() - input.getRank();
  bool stretches = offset >= 0;
  for (int64_t i = 0; stretches && i < input.getRank(); ++i)
    stretches = input.getDimSize(i) == 1 ||
                input.getDimSize(i) == result.getDimSize(i + offset);
  if (!stretches)
    return emitOpError("C2: ") << input << " does not broadcast to " << result;
  return success();
}

LogicalResult SplitOp::verifyBeforeInference() {
  size_t sizes = getSizes().size();
  if (getNumResults() != sizes)
    return emitOpError("C3: ")
           << sizes << " sizes need as many results, got " << getNumResults();
  return success();
}

LogicalResult tessera::tess::verifyMeshAxisAttr(Operation *op, StringRef name,
                                                std::optional<StringRef> axis,
                                                StringRef rule) {
  if (!axis)
    return success();
  MeshAttr mesh = MeshAttr::lookup(op);
  if (!mesh)
    return op->emitOpError(rule)
           << ": " << name << " '" << *axis
           << "' needs a module with a tess.mesh attribute";
  if (!mesh.axisSize(*axis))
    return op->emitOpError(rule) << ": " << name << " '" << *axis
                                 << "' is not an axis of the mesh " << mesh;
  return success();
}

LogicalResult tessera::tess::verifyStreamAxis(Operation *op, StringRef name,
                                              std::optional<StringRef> axis,
                                              double rate, StringRef rule) {
  if (axis && !(rate > 0))
    return op->emitOpError(rule)
           << ": " << name << " '" << *axis
           << "' on an op that draws no random numbers (rate 0)";
  return verifyMeshAxisAttr(op, name, axis, rule);
}

SmallVector<tessera::tess::StreamBlock, 2>
tessera::tess::streamBlocks(Operation *op) {
  auto shape = [](Value value) {
    return llvm::cast<RankedTensorType>(value.getType()).getShape();
  };
  auto attention = [&](Value query, Value key) {
    ArrayRef<int64_t> q = shape(query);
    uint64_t head = static_cast<uint64_t>(q[2] * shape(key)[2]);
    return SmallVector<StreamBlock, 2>{
        {"stream_axis", 0,
         static_cast<uint64_t>(q[0]) *
             static_cast<uint64_t>(kAttentionDropoutHeads) * head},
        {"head_stream_axis", 1, static_cast<uint64_t>(q[1]) * head}};
  };
  if (auto forward = dyn_cast<AttentionOp>(op))
    return attention(forward.getQuery(), forward.getKey());
  if (auto grad = dyn_cast<AttentionGradOp>(op))
    return attention(grad.getQuery(), grad.getKey());
  return {{"stream_axis", 0,
           static_cast<uint64_t>(
               llvm::cast<RankedTensorType>(op->getResult(0).getType())
                   .getNumElements())}};
}

int64_t tessera::tess::wholeTableRows(Operation *op, Value table) {
  int64_t rows = llvm::cast<RankedTensorType>(table.getType()).getDimSize(0);
  auto axis = op->getAttrOfType<StringAttr>("rows_axis");
  if (!axis)
    return rows;
  // (The op's verifier checked that the module's mesh has the axis.)
  return rows * *MeshAttr::lookup(op).axisSize(axis.getValue());
}

bool tessera::tess::readOnlyByLookups(Value table) {
  return !table.use_empty() &&
         llvm::all_of(table.getUsers(), [&](Operation *user) {
           auto lookup = llvm::dyn_cast<EmbeddingOp>(user);
           return lookup && lookup.getTable() == table;
         });
}

LogicalResult EmbeddingOp::verify() {
  return verifyMeshAxisAttr(*this, "rows_axis", getRowsAxis(), "C4");
}

LogicalResult DropoutOp::verify() {
  double rate = getRate().convertToDouble();
  if (!(rate >= 0 && rate < 1))
    return emitOpError("C1: rate must be in [0, 1), got ") << rate;
  return verifyStreamAxis(*this, "stream_axis", getStreamAxis(), rate, "C2");
}

LogicalResult tessera::tess::verifyAttentionStreamAxes(
    Operation *op, std::optional<StringRef> streamAxis,
    std::optional<StringRef> headStreamAxis, double dropout) {
  if (failed(verifyStreamAxis(op, "stream_axis", streamAxis, dropout, "C10")))
    return failure();
  return verifyStreamAxis(op, "head_stream_axis", headStreamAxis, dropout,
                          "C10");
}

LogicalResult AttentionOp::verify() {
  return verifyAttentionStreamAxes(*this, getStreamAxis(), getHeadStreamAxis(),
                                   getDropout().convertToDouble());
}

void DropoutOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  effects.emplace_back(MemoryEffects::Write::get(),
                       RandomNumbersResource::get());
}

/// Attention is pure unless it drops out attention weights, which draws
/// random numbers like tess.dropout.
void AttentionOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  if (getDropout().convertToDouble() > 0)
    effects.emplace_back(MemoryEffects::Write::get(),
                         RandomNumbersResource::get());
}

Speculation::Speculatability AttentionOp::getSpeculatability() {
  return getDropout().convertToDouble() > 0 ? Speculation::NotSpeculatable
                                            : Speculation::Speculatable;
}

#define GET_OP_CLASSES
#include "Tess/IR/TessOps.cpp.inc"
