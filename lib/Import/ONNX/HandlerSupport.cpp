//===- HandlerSupport.cpp - what several op-family handlers emit alike ---===//
//
// Reshapes are how the handlers of every family bring an operand to the
// shape a tess op wants (a vector to a matrix for MatMul, indexed dims to
// one dim of rows for GatherND) and how ONNX's shape ops become tess; a
// reshape to the type a value already has is no op at all.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

using namespace mlir;
using namespace tessera::onnx_import;
namespace tess = tessera::tess;

llvm::Expected<Value> tessera::onnx_import::reshapeTo(GraphImporter &importer,
                                                      Value input,
                                                      ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, tensorType(input).getElementType());
  if (type == input.getType())
    return input;
  auto op = importer.create<tess::ReshapeOp>({input}, {}, {type});
  if (!op)
    return op.takeError();
  return op->getResult();
}

llvm::Error tessera::onnx_import::setReshaped(GraphImporter &importer,
                                             Value input,
                                             ArrayRef<int64_t> shape) {
  llvm::Expected<Value> reshaped = reshapeTo(importer, input, shape);
  if (!reshaped)
    return reshaped.takeError();
  importer.setResult(0, *reshaped);
  return llvm::Error::success();
}
