//===- ContractionHandlers.cpp - ONNX MatMul and Gemm -> tess ------------===//
//
// Gemm is a dense layer by definition (A @ B + C), so it becomes
// `tess.linear` at once. MatMul stays `tess.matmul`: whether it is a layer
// (one side a weight) or an activation product (attention) is decided by
// tess-fuse-linear and tess-fuse-attention.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

using namespace mlir;
using namespace tessera::onnx_import;
namespace tess = tessera::tess;

namespace {

/// ONNX MatMul follows numpy.matmul: a rank-1 operand is promoted to a
/// matrix and the added dim removed from the result.
llvm::Error importMatMul(GraphImporter &importer) {
  llvm::Expected<Value> lhs = importer.tensorInput(0);
  if (!lhs)
    return lhs.takeError();
  llvm::Expected<Value> rhs = importer.tensorInput(1);
  if (!rhs)
    return rhs.takeError();
  int64_t lhsRank = tensorType(*lhs).getRank(), rhsRank = tensorType(*rhs).getRank();
  if (lhsRank == 0 || rhsRank == 0)
    return importer.nodeError("MatMul operands must have rank >= 1");
  if (lhsRank == 1)
    lhs = reshapeTo(importer, *lhs, {1, tensorType(*lhs).getDimSize(0)});
  if (!lhs)
    return lhs.takeError();
  if (rhsRank == 1)
    rhs = reshapeTo(importer, *rhs, {tensorType(*rhs).getDimSize(0), 1});
  if (!rhs)
    return rhs.takeError();
  auto product = importer.create<tess::MatmulOp>({*lhs, *rhs});
  if (!product)
    return product.takeError();
  Value result = product->getResult();
  if (lhsRank == 1 || rhsRank == 1) {
    SmallVector<int64_t> shape(tensorType(result).getShape());
    if (rhsRank == 1)
      shape.pop_back();
    if (lhsRank == 1)
      shape.erase(shape.end() - (rhsRank == 1 ? 1 : 2));
    llvm::Expected<Value> squeezed = reshapeTo(importer, result, shape);
    if (!squeezed)
      return squeezed.takeError();
    result = *squeezed;
  }
  importer.setResult(0, result);
  return llvm::Error::success();
}

llvm::Expected<Value> scaleBy(GraphImporter &importer, Value value,
                              double factor) {
  if (factor == 1.0)
    return value;
  Type element = tensorType(value).getElementType();
  auto scalarType = RankedTensorType::get({}, element);
  auto constant = importer.create<tess::ConstantOp>(
      {}, {importer.builder().getNamedAttr(
              "value", DenseElementsAttr::get(
                           scalarType, importer.builder().getFloatAttr(
                                           element, factor)))});
  if (!constant)
    return constant.takeError();
  auto product = importer.create<tess::MulOp>({value, constant->getResult()});
  if (!product)
    return product.takeError();
  return product->getResult();
}

/// Y = alpha * op(A) @ op(B) + beta * C.
llvm::Error importGemm(GraphImporter &importer) {
  llvm::Expected<Value> a = importer.tensorInput(0);
  if (!a)
    return a.takeError();
  llvm::Expected<Value> b = importer.tensorInput(1);
  if (!b)
    return b.takeError();
  if (tensorType(*a).getRank() != 2 || tensorType(*b).getRank() != 2)
    return importer.nodeError("Gemm operands must be matrices");
  if (importer.intAttr("transA", 0)) {
    auto transposed = importer.create<tess::TransposeOp>(
        {*a}, {importer.builder().getNamedAttr(
                  "permutation", importer.builder().getDenseI64ArrayAttr(
                                     {1, 0}))});
    if (!transposed)
      return transposed.takeError();
    *a = transposed->getResult();
  }
  bool transposeWeight = importer.intAttr("transB", 0) != 0;
  double alpha = importer.floatAttr("alpha", 1.0);
  double beta = importer.floatAttr("beta", 1.0);

  // A bias of shape [N] with alpha = beta = 1 goes into the linear op; any
  // other C is added afterwards with broadcasting, as ONNX defines it.
  Value bias;
  if (importer.hasInput(2)) {
    llvm::Expected<Value> c = importer.tensorInput(2);
    if (!c)
      return c.takeError();
    bias = *c;
  }
  int64_t outFeatures = tensorType(*b).getDimSize(transposeWeight ? 0 : 1);
  bool biasInLinear = bias && alpha == 1.0 && beta == 1.0 &&
                      tensorType(bias).getShape() == ArrayRef<int64_t>{outFeatures};
  SmallVector<Value, 3> operands = {*a, *b};
  if (biasInLinear)
    operands.push_back(bias);
  SmallVector<NamedAttribute> attributes;
  if (transposeWeight)
    attributes.push_back(importer.builder().getNamedAttr(
        "transpose_weight", importer.builder().getUnitAttr()));
  auto linear = importer.create<tess::LinearOp>(operands, attributes);
  if (!linear)
    return linear.takeError();
  llvm::Expected<Value> result = scaleBy(importer, linear->getResult(), alpha);
  if (!result)
    return result.takeError();
  if (bias && !biasInLinear) {
    llvm::Expected<Value> scaledBias = scaleBy(importer, bias, beta);
    if (!scaledBias)
      return scaledBias.takeError();
    auto sum = importer.create<tess::AddOp>({*result, *scaledBias});
    if (!sum)
      return sum.takeError();
    *result = sum->getResult();
  }
  importer.setResult(0, *result);
  return llvm::Error::success();
}

} // namespace

void tessera::onnx_import::registerContractionHandlers(HandlerTable &table) {
  table["MatMul"] = importMatMul;
  table["Gemm"] = importGemm;
}
