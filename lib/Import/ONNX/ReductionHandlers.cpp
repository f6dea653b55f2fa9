//===- ReductionHandlers.cpp - ONNX reductions -> tess -------------------===//

#include "GraphImporter.h"

using namespace mlir;
using namespace tessera::onnx_import;
namespace tess = tessera::tess;

namespace {

/// ReduceSum took its axes as an input from opset 13, the others from
/// opset 18; before that they are an attribute. No axes means all dims,
/// unless noop_with_empty_axes asks for the identity.
template <typename OpTy>
llvm::Error importReduction(GraphImporter &importer, int64_t axesInputOpset) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  int64_t rank = llvm::cast<RankedTensorType>(input->getType()).getRank();
  std::vector<int64_t> axes;
  if (importer.opset() >= axesInputOpset && importer.hasInput(1)) {
    llvm::Expected<const HostTensor *> given =
        importer.requireConstantInput(1, "axes");
    if (!given)
      return given.takeError();
    axes = (*given)->toIntVector();
  } else if (auto attr = importer.intsAttr("axes")) {
    axes = *attr;
  }
  if (axes.empty()) {
    if (importer.intAttr("noop_with_empty_axes", 0)) {
      importer.setResult(0, *input);
      return llvm::Error::success();
    }
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  SmallVector<NamedAttribute, 2> attributes = {importer.builder().getNamedAttr(
      "dims", importer.builder().getDenseI64ArrayAttr(axes))};
  if (importer.intAttr("keepdims", 1))
    attributes.push_back(importer.builder().getNamedAttr(
        "keep_dims", importer.builder().getUnitAttr()));
  return importer.createResult<OpTy>({*input}, attributes);
}

} // namespace

void tessera::onnx_import::registerReductionHandlers(HandlerTable &table) {
  table["ReduceSum"] = [](GraphImporter &importer) {
    return importReduction<tess::ReduceSumOp>(importer, 13);
  };
  table["ReduceMean"] = [](GraphImporter &importer) {
    return importReduction<tess::ReduceMeanOp>(importer, 18);
  };
  table["ReduceMax"] = [](GraphImporter &importer) {
    return importReduction<tess::ReduceMaxOp>(importer, 18);
  };
  table["ReduceMin"] = [](GraphImporter &importer) {
    return importReduction<tess::ReduceMinOp>(importer, 18);
  };
}
