//===- TessCollectiveOps.cpp - the mesh attribute and the collectives ----===//
//
// Syntax and rules of TessCollectiveOps.td: `#tess.mesh<dp = 2, tp = 2>`,
// and the shape rules of the collectives against the size of their axis in
// the module's mesh.
//
//===----------------------------------------------------------------------===//

#include "Tess/IR/TessOps.h"
#include "TessInference.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace tessera::tess;
using tessera::tess::detail::shapeString;

namespace tessera::tess {
/// What collectives write: the other ranks' view of this one. Declaring it
/// keeps passes from dropping, merging or reordering collectives, which
/// every rank must call in one order.
struct CommunicationResource
    : SideEffects::Resource::Base<CommunicationResource> {
  StringRef getName() final { return "tess::Communication"; }
};
} // namespace tessera::tess

//===----------------------------------------------------------------------===//
// #tess.mesh
//===----------------------------------------------------------------------===//

ParseResult MeshAttr::parseMeshAxes(AsmParser &parser,
                                    SmallVector<StringAttr> &names,
                                    SmallVector<int64_t> &sizes) {
  // An empty list parses, so that the verifier's C1 names the problem.
  std::string name;
  if (failed(parser.parseOptionalKeywordOrString(&name)))
    return success();
  while (true) {
    int64_t size;
    if (parser.parseEqual() || parser.parseInteger(size))
      return failure();
    names.push_back(StringAttr::get(parser.getContext(), name));
    sizes.push_back(size);
    if (failed(parser.parseOptionalComma()))
      return success();
    if (parser.parseKeywordOrString(&name))
      return failure();
  }
}

void MeshAttr::printMeshAxes(AsmPrinter &printer, ArrayRef<StringAttr> names,
                             ArrayRef<int64_t> sizes) {
  llvm::interleaveComma(llvm::zip(names, sizes), printer, [&](auto axis) {
    printer.printKeywordOrString(std::get<0>(axis).getValue());
    printer << " = " << std::get<1>(axis);
  });
}

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<StringAttr> names,
                               ArrayRef<int64_t> sizes) {
  if (names.empty())
    return emitError() << "C1: a mesh needs at least one axis";
  if (names.size() != sizes.size())
    return emitError() << "a mesh needs one size per axis name";
  llvm::StringSet<> seen;
  for (auto [name, size] : llvm::zip(names, sizes)) {
    if (name.getValue().empty() || !seen.insert(name.getValue()).second)
      return emitError() << "C2: mesh axis names must be non-empty and "
                            "distinct, got '"
                         << name.getValue() << "' twice or empty";
    if (size < 1)
      return emitError() << "C3: mesh axis '" << name.getValue()
                         << "' must have size >= 1, got " << size;
  }
  return success();
}

std::optional<unsigned> MeshAttr::axisIndex(StringRef name) const {
  for (auto [index, axis] : llvm::enumerate(getNames()))
    if (axis.getValue() == name)
      return index;
  return std::nullopt;
}

std::optional<int64_t> MeshAttr::axisSize(StringRef name) const {
  if (std::optional<unsigned> index = axisIndex(name))
    return getSizes()[*index];
  return std::nullopt;
}

int64_t MeshAttr::rankCount() const {
  int64_t count = 1;
  for (int64_t size : getSizes())
    count *= size;
  return count;
}

MeshAttr MeshAttr::lookup(Operation *op) {
  for (Operation *ancestor = op; ancestor;
       ancestor = ancestor->getParentOp())
    if (auto module = dyn_cast<ModuleOp>(ancestor))
      if (auto mesh = module->getAttrOfType<MeshAttr>("tess.mesh"))
        return mesh;
  return {};
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

namespace {

/// C1 of every op on a mesh axis: the axis's size, or failure.
FailureOr<int64_t> verifyAxis(Operation *op, StringRef axis) {
  MeshAttr mesh = MeshAttr::lookup(op);
  if (!mesh)
    return op->emitOpError("C1: needs a module with a tess.mesh attribute");
  std::optional<int64_t> size = mesh.axisSize(axis);
  if (!size)
    return op->emitOpError("C1: axis '")
           << axis << "' is not an axis of the mesh " << mesh;
  return *size;
}

/// C2: `dim` is a dim of `type`.
LogicalResult verifyDim(Operation *op, RankedTensorType type, int64_t dim,
                        StringRef what) {
  if (dim < 0 || dim >= type.getRank())
    return op->emitOpError("C2: ")
           << what << " " << dim << " is not in [0, " << type.getRank()
           << ")";
  return success();
}

/// C3: the result is the input with each dim in `scaled` multiplied (a
/// positive factor) or divided (negative) by the axis size.
LogicalResult
verifyResultShape(Operation *op, int64_t axisSize,
                  ArrayRef<std::pair<int64_t, bool>> scaled) {
  auto input = llvm::cast<RankedTensorType>(op->getOperand(0).getType());
  auto result = llvm::cast<RankedTensorType>(op->getResult(0).getType());
  SmallVector<int64_t> expected(input.getShape());
  for (auto [dim, multiply] : scaled) {
    if (multiply) {
      expected[dim] *= axisSize;
      continue;
    }
    if (expected[dim] % axisSize != 0)
      return op->emitOpError("C3: dim ")
             << dim << " of size " << expected[dim]
             << " does not divide by the axis size " << axisSize;
    expected[dim] /= axisSize;
  }
  if (result.getElementType() != input.getElementType() ||
      result.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError("C3: result must be ")
           << shapeString(expected) << " of " << input.getElementType()
           << ", got " << result;
  return success();
}

/// C1 to C3 of the ops that change one dim.
LogicalResult verifyOneDim(Operation *op, StringRef axis, int64_t dim,
                           bool multiply) {
  FailureOr<int64_t> size = verifyAxis(op, axis);
  if (failed(size))
    return failure();
  auto input = llvm::cast<RankedTensorType>(op->getOperand(0).getType());
  if (failed(verifyDim(op, input, dim, "dim")))
    return failure();
  return verifyResultShape(op, *size, {{dim, multiply}});
}

void writeCommunication(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  effects.emplace_back(MemoryEffects::Write::get(),
                       CommunicationResource::get());
}

int64_t axisSizeOf(Operation *op, StringRef axis) {
  return MeshAttr::lookup(op).axisSize(axis).value_or(1);
}

} // namespace

LogicalResult AllReduceOp::verify() {
  return success(succeeded(verifyAxis(*this, getAxis())));
}

LogicalResult AllGatherOp::verify() {
  return verifyOneDim(*this, getAxis(), getDim(), /*multiply=*/true);
}

LogicalResult ReduceScatterOp::verify() {
  return verifyOneDim(*this, getAxis(), getDim(), /*multiply=*/false);
}

LogicalResult ShardSliceOp::verify() {
  return verifyOneDim(*this, getAxis(), getDim(), /*multiply=*/false);
}

LogicalResult AllToAllOp::verify() {
  FailureOr<int64_t> size = verifyAxis(*this, getAxis());
  if (failed(size))
    return failure();
  RankedTensorType input = getInput().getType();
  if (failed(verifyDim(*this, input, getSplitDim(), "split_dim")) ||
      failed(verifyDim(*this, input, getConcatDim(), "concat_dim")))
    return failure();
  return verifyResultShape(*this, *size,
                           {{getSplitDim(), false}, {getConcatDim(), true}});
}

#define TESS_COLLECTIVE_COMMON(Op)                                             \
  int64_t Op::getAxisSize() { return axisSizeOf(*this, getAxis()); }
TESS_COLLECTIVE_COMMON(AllReduceOp)
TESS_COLLECTIVE_COMMON(AllGatherOp)
TESS_COLLECTIVE_COMMON(ReduceScatterOp)
TESS_COLLECTIVE_COMMON(AllToAllOp)
TESS_COLLECTIVE_COMMON(ShardSliceOp)
#undef TESS_COLLECTIVE_COMMON

#define TESS_COLLECTIVE_EFFECTS(Op)                                            \
  void Op::getEffects(                                                         \
      SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>      \
          &effects) {                                                          \
    writeCommunication(effects);                                               \
  }
TESS_COLLECTIVE_EFFECTS(AllReduceOp)
TESS_COLLECTIVE_EFFECTS(AllGatherOp)
TESS_COLLECTIVE_EFFECTS(ReduceScatterOp)
TESS_COLLECTIVE_EFFECTS(AllToAllOp)
#undef TESS_COLLECTIVE_EFFECTS
