//===- ElementwiseHandlers.cpp - ONNX elementwise ops -> tess ------------===//
//
// Arithmetic, comparisons, activations and casts on run-time tensors. Their
// decomposed patterns (GELU chains, x * sigmoid(x)) are imported as written
// and fused later by tess-fuse-activations, where they can be tested alone.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

using namespace mlir;
using namespace tessera::onnx_import;
namespace tess = tessera::tess;

namespace {

template <typename OpTy>
llvm::Error importUnary(GraphImporter &importer) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  return importer.createResult<OpTy>({*input}, {}, {input->getType()});
}

/// Binary ops, and ONNX's variadic Max/Min/Sum folded left to right.
template <typename OpTy>
llvm::Error importBinary(GraphImporter &importer) {
  llvm::Expected<Value> accumulated = importer.tensorInput(0);
  if (!accumulated)
    return accumulated.takeError();
  for (unsigned i = 1; i < importer.numInputs(); ++i) {
    llvm::Expected<Value> rhs = importer.tensorInput(i);
    if (!rhs)
      return rhs.takeError();
    auto op = importer.create<OpTy>({*accumulated, *rhs});
    if (!op)
      return op.takeError();
    *accumulated = op->getResult();
  }
  importer.setResult(0, *accumulated);
  return llvm::Error::success();
}

llvm::Error importCastTo(GraphImporter &importer, Value input, Type element) {
  auto inputType = llvm::cast<RankedTensorType>(input.getType());
  return importer.createResult<tess::CastOp>(
      {input}, {}, {RankedTensorType::get(inputType.getShape(), element)});
}

/// ONNX Pow allows an exponent of another type; tess.pow does not, so the
/// exponent is cast to the base's type first.
llvm::Error importPow(GraphImporter &importer) {
  llvm::Expected<Value> base = importer.tensorInput(0);
  llvm::Expected<Value> exponent =
      base ? importer.tensorInput(1) : llvm::Expected<Value>(Value());
  if (!base)
    return base.takeError();
  if (!exponent)
    return exponent.takeError();
  auto baseType = llvm::cast<RankedTensorType>(base->getType());
  auto exponentType = llvm::cast<RankedTensorType>(exponent->getType());
  if (exponentType.getElementType() != baseType.getElementType()) {
    auto cast = importer.create<tess::CastOp>(
        {*exponent}, {},
        {RankedTensorType::get(exponentType.getShape(),
                               baseType.getElementType())});
    if (!cast)
      return cast.takeError();
    *exponent = cast->getResult();
  }
  return importer.createResult<tess::PowOp>({*base, *exponent});
}

template <tess::ComparisonPredicate predicate>
llvm::Error importComparison(GraphImporter &importer) {
  llvm::Expected<Value> lhs = importer.tensorInput(0);
  if (!lhs)
    return lhs.takeError();
  llvm::Expected<Value> rhs = importer.tensorInput(1);
  if (!rhs)
    return rhs.takeError();
  return importer.createResult<tess::CompareOp>(
      {*lhs, *rhs},
      {importer.builder().getNamedAttr(
          "predicate", tess::ComparisonPredicateAttr::get(importer.context(),
                                                          predicate))});
}

/// IsNaN(x) is `x != x`: under IEEE comparison only NaN differs from itself.
/// PyTorch's decomposed scaled_dot_product_attention uses it to zero the
/// probabilities of fully masked rows.
llvm::Error importIsNaN(GraphImporter &importer) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  if (!llvm::isa<FloatType>(
          llvm::cast<RankedTensorType>(input->getType()).getElementType()))
    return importer.nodeError("IsNaN needs a floating-point input");
  auto notEqual = tess::ComparisonPredicateAttr::get(
      importer.context(), tess::ComparisonPredicate::ne);
  return importer.createResult<tess::CompareOp>(
      {*input, *input},
      {importer.builder().getNamedAttr("predicate", notEqual)});
}

llvm::Error importWhere(GraphImporter &importer) {
  SmallVector<Value, 3> operands;
  for (unsigned i = 0; i < 3; ++i) {
    llvm::Expected<Value> operand = importer.tensorInput(i);
    if (!operand)
      return operand.takeError();
    operands.push_back(*operand);
  }
  return importer.createResult<tess::WhereOp>(operands);
}

llvm::Error importGelu(GraphImporter &importer) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  std::string approximate = importer.stringAttr("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return importer.nodeError("unknown GELU approximation '" + approximate +
                              "'");
  auto approximation = tess::GeluApproximationAttr::get(
      importer.context(), approximate == "tanh"
                              ? tess::GeluApproximation::tanh
                              : tess::GeluApproximation::none);
  return importer.createResult<tess::GeluOp>(
      {*input}, {importer.builder().getNamedAttr("approximation", approximation)},
      {input->getType()});
}

llvm::Error importIdentity(GraphImporter &importer) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  importer.setResult(0, *input);
  return llvm::Error::success();
}

/// Dropout is the identity unless the graph was exported in training mode
/// (training_mode = true): then it is real training-time dropout with the
/// exported ratio, which the training program must reproduce.
llvm::Error importDropout(GraphImporter &importer) {
  if (importer.node().output_size() > 1 && !importer.node().output(1).empty())
    return importer.nodeError("Dropout's mask output is not supported");
  bool training = false;
  if (importer.hasInput(2)) {
    llvm::Expected<const HostTensor *> mode =
        importer.requireConstantInput(2, "training_mode");
    if (!mode)
      return mode.takeError();
    training = (*mode)->getScalarInt() != 0;
  }
  double ratio = 0.5;
  if (importer.hasInput(1)) {
    llvm::Expected<const HostTensor *> given =
        importer.requireConstantInput(1, "ratio");
    if (!given)
      return given.takeError();
    ratio = (*given)->getScalarDouble();
  }
  if (!training || ratio == 0.0)
    return importIdentity(importer);
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  return importer.createResult<tess::DropoutOp>(
      {*input},
      {importer.builder().getNamedAttr(
          "rate", importer.builder().getF64FloatAttr(ratio))},
      {input->getType()});
}

llvm::Error importCast(GraphImporter &importer) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  int64_t to = importer.intAttr("to", 0);
  Type element = convertElementType(to, importer.context());
  if (!element)
    return importer.nodeError("cannot cast to ONNX type " +
                              elementTypeName(to));
  return importCastTo(importer, *input, element);
}

llvm::Error importCastLike(GraphImporter &importer) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  Type element;
  if (const HostTensor *like = importer.constantInput(1))
    element = convertElementType(like->getElementType(), importer.context());
  else if (llvm::Expected<Value> like = importer.tensorInput(1))
    element = llvm::cast<RankedTensorType>(like->getType()).getElementType();
  else
    return like.takeError();
  if (!element)
    return importer.nodeError("unsupported target type");
  return importCastTo(importer, *input, element);
}

} // namespace

void tessera::onnx_import::registerElementwiseHandlers(HandlerTable &table) {
  table["Add"] = importBinary<tess::AddOp>;
  table["Sum"] = importBinary<tess::AddOp>;
  table["Sub"] = importBinary<tess::SubOp>;
  table["Mul"] = importBinary<tess::MulOp>;
  table["Div"] = importBinary<tess::DivOp>;
  table["Max"] = importBinary<tess::MaximumOp>;
  table["Min"] = importBinary<tess::MinimumOp>;
  table["And"] = importBinary<tess::LogicalAndOp>;
  table["Or"] = importBinary<tess::LogicalOrOp>;
  table["Pow"] = importPow;
  table["Equal"] = importComparison<tess::ComparisonPredicate::eq>;
  table["Less"] = importComparison<tess::ComparisonPredicate::lt>;
  table["LessOrEqual"] = importComparison<tess::ComparisonPredicate::le>;
  table["Greater"] = importComparison<tess::ComparisonPredicate::gt>;
  table["GreaterOrEqual"] = importComparison<tess::ComparisonPredicate::ge>;
  table["IsNaN"] = importIsNaN;
  table["Not"] = importUnary<tess::LogicalNotOp>;
  table["Where"] = importWhere;
  table["Neg"] = importUnary<tess::NegOp>;
  table["Abs"] = importUnary<tess::AbsOp>;
  table["Exp"] = importUnary<tess::ExpOp>;
  table["Log"] = importUnary<tess::LogOp>;
  table["Sqrt"] = importUnary<tess::SqrtOp>;
  table["Reciprocal"] = importUnary<tess::ReciprocalOp>;
  table["Tanh"] = importUnary<tess::TanhOp>;
  table["Erf"] = importUnary<tess::ErfOp>;
  table["Sigmoid"] = importUnary<tess::SigmoidOp>;
  table["Relu"] = importUnary<tess::ReluOp>;
  table["Cos"] = importUnary<tess::CosOp>;
  table["Sin"] = importUnary<tess::SinOp>;
  table["Gelu"] = importGelu;
  table["Identity"] = importIdentity;
  table["Dropout"] = importDropout;
  table["Cast"] = importCast;
  table["CastLike"] = importCastLike;
}
