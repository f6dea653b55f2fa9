//===- NormalizationHandlers.cpp - ONNX norms and softmax -> tess --------===//

#include "GraphImporter.h"

using namespace mlir;
using namespace tessera::onnx_import;
namespace tess = tessera::tess;

namespace {

/// LayerNormalization's optional Mean and InvStdDev outputs are training
/// internals of ONNX Runtime; Tessera's autodiff recomputes what it needs.
llvm::Error rejectExtraOutputs(GraphImporter &importer) {
  for (int i = 1; i < importer.node().output_size(); ++i)
    if (!importer.node().output(i).empty())
      return importer.nodeError("output " + std::to_string(i) +
                                " (statistics) is not supported");
  return llvm::Error::success();
}

llvm::Error importLayerNormalization(GraphImporter &importer) {
  if (llvm::Error error = rejectExtraOutputs(importer))
    return error;
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  SmallVector<Value, 3> operands = {*input};
  int32_t scaleCount = 0, biasCount = 0;
  if (importer.hasInput(1)) {
    llvm::Expected<Value> scale = importer.tensorInput(1);
    if (!scale)
      return scale.takeError();
    operands.push_back(*scale);
    scaleCount = 1;
  }
  if (importer.hasInput(2)) {
    llvm::Expected<Value> bias = importer.tensorInput(2);
    if (!bias)
      return bias.takeError();
    operands.push_back(*bias);
    biasCount = 1;
  }
  Builder &builder = importer.builder();
  return importer.createResult<tess::LayerNormOp>(
      operands,
      {builder.getNamedAttr("epsilon", builder.getF64FloatAttr(importer.floatAttr(
                                           "epsilon", 1e-5))),
       builder.getNamedAttr("axis",
                            builder.getI64IntegerAttr(importer.intAttr("axis", -1))),
       builder.getNamedAttr("operandSegmentSizes",
                            builder.getDenseI32ArrayAttr(
                                {1, scaleCount, biasCount}))});
}

llvm::Error importSoftmax(GraphImporter &importer) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  if (importer.opset() < 13)
    return importer.nodeError("Softmax before opset 13 flattens its input; "
                              "re-export with opset >= 13");
  Builder &builder = importer.builder();
  return importer.createResult<tess::SoftmaxOp>(
      {*input},
      {builder.getNamedAttr("axis", builder.getI64IntegerAttr(
                                        importer.intAttr("axis", -1)))},
      {input->getType()});
}

} // namespace

void tessera::onnx_import::registerNormalizationHandlers(HandlerTable &table) {
  table["LayerNormalization"] = importLayerNormalization;
  table["Softmax"] = importSoftmax;
}
