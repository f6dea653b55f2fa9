//===- PrefixSumHandlers.cpp - ONNX CumSum on run-time tensors -> tess ---===//
//
// RoBERTa numbers its positions by a running count of the non-padding
// tokens, `cumsum(input_ids != pad, dim=1)`: a CumSum over the input, which
// the constant evaluator cannot fold. tess has no scan op; the sum is
// written with ops every backend has, as a Hillis-Steele scan: log2(n)
// rounds, round r adding to each element the partial sum 2^r places before
// it (a slice of the running result, shifted by concatenating zeros).
//
//   x          = [a, b, c, d]
//   + shift 1  = [a, a+b, b+c, c+d]
//   + shift 2  = [a, a+b, a+b+c, a+b+c+d]
//
// Integer sums are exact; a float sum adds the same terms in another order
// than a sequential scan (a rounding difference, not an error). Slice,
// concat and add have VJPs, so a float CumSum also trains.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

using namespace mlir;
using namespace tessera::onnx_import;
namespace tess = tessera::tess;

namespace {

/// `input` moved `distance` places along `axis`, towards the end (or the
/// start, for a reverse scan), with zeros filling the places it left.
llvm::Expected<Value> shiftAlong(GraphImporter &importer, Value input,
                                 int64_t axis, int64_t distance, bool reverse) {
  auto &builder = importer.builder();
  RankedTensorType type = tensorType(input);
  ArrayRef<int64_t> shape = type.getShape();
  int64_t extent = shape[axis];
  SmallVector<int64_t> zerosShape(shape);
  zerosShape[axis] = std::min(distance, extent);
  auto zerosType = RankedTensorType::get(zerosShape, type.getElementType());
  auto zeros = importer.create<tess::ConstantOp>(
      {}, {builder.getNamedAttr(
              "value", DenseElementsAttr::get(
                           zerosType, builder.getZeroAttr(type.getElementType())))});
  if (!zeros)
    return zeros.takeError();
  // Shifted by the whole extent (an exclusive sum over one element), only
  // zeros are left.
  if (distance >= extent)
    return zeros->getResult();
  SmallVector<int64_t> starts(shape.size(), 0), limits(shape),
      strides(shape.size(), 1);
  starts[axis] = reverse ? distance : 0;
  limits[axis] = reverse ? extent : extent - distance;
  auto kept = importer.create<tess::SliceOp>(
      {input},
      {builder.getNamedAttr("starts", builder.getDenseI64ArrayAttr(starts)),
       builder.getNamedAttr("limits", builder.getDenseI64ArrayAttr(limits)),
       builder.getNamedAttr("strides", builder.getDenseI64ArrayAttr(strides))});
  if (!kept)
    return kept.takeError();
  SmallVector<Value, 2> pieces = {zeros->getResult(), kept->getResult()};
  if (reverse)
    std::swap(pieces[0], pieces[1]);
  auto shifted = importer.create<tess::ConcatOp>(
      pieces, {builder.getNamedAttr("axis", builder.getI64IntegerAttr(axis))});
  if (!shifted)
    return shifted.takeError();
  return shifted->getResult();
}

llvm::Error importCumSum(GraphImporter &importer) {
  llvm::Expected<Value> input = importer.tensorInput(0);
  if (!input)
    return input.takeError();
  llvm::Expected<const HostTensor *> axisInput =
      importer.requireConstantInput(1, "axis");
  if (!axisInput)
    return axisInput.takeError();
  if ((*axisInput)->numElements() != 1)
    return importer.nodeError("axis must be a scalar");
  RankedTensorType type = tensorType(*input);
  if (type.getElementType().isInteger(1))
    return importer.nodeError("CumSum does not accept bool inputs");
  auto axis = tess::normalizeAxis((*axisInput)->getScalarInt(), type.getRank());
  if (!axis)
    return importer.nodeError("axis " +
                              std::to_string((*axisInput)->getScalarInt()) +
                              " is out of range for rank " +
                              std::to_string(type.getRank()));
  bool reverse = importer.intAttr("reverse", 0) != 0;
  int64_t extent = type.getDimSize(*axis);
  Value sum = *input;
  // An exclusive sum is the inclusive sum of the input shifted by one.
  if (importer.intAttr("exclusive", 0) != 0 && extent > 0) {
    llvm::Expected<Value> shifted =
        shiftAlong(importer, sum, *axis, 1, reverse);
    if (!shifted)
      return shifted.takeError();
    sum = *shifted;
  }
  for (int64_t distance = 1; distance < extent; distance *= 2) {
    llvm::Expected<Value> shifted =
        shiftAlong(importer, sum, *axis, distance, reverse);
    if (!shifted)
      return shifted.takeError();
    auto added = importer.create<tess::AddOp>({sum, *shifted});
    if (!added)
      return added.takeError();
    sum = added->getResult();
  }
  importer.setResult(0, sum);
  return llvm::Error::success();
}

} // namespace

void tessera::onnx_import::registerPrefixSumHandlers(HandlerTable &table) {
  table["CumSum"] = importCumSum;
}
