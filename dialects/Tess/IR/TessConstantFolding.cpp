//===- TessConstantFolding.cpp - evaluating tess ops on constants --------===//
//
// Elements are read one at a time through DenseElementsAttr's random-access
// iterators (which also serve splats), so that a small window of a large
// constant (a slice) costs only the elements it copies.
//
//===----------------------------------------------------------------------===//

#include "TessConstantFolding.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace tessera::tess::folding;

namespace {

/// The elements of a dense constant of integers or floats.
class ElementReader {
public:
  static std::optional<ElementReader> get(Attribute attr) {
    auto dense = llvm::dyn_cast_if_present<DenseElementsAttr>(attr);
    if (!dense)
      return std::nullopt;
    Type element = dense.getElementType();
    if (!llvm::isa<FloatType, IntegerType>(element))
      return std::nullopt;
    return ElementReader(dense, llvm::isa<FloatType>(element));
  }

  Element at(int64_t linearIndex) const {
    if (isFloat)
      return *(attr.value_begin<APFloat>() + linearIndex);
    return *(attr.value_begin<APInt>() + linearIndex);
  }

  bool isSplat() const { return attr.isSplat(); }
  ArrayRef<int64_t> shape() const { return attr.getType().getShape(); }

private:
  ElementReader(DenseElementsAttr attr, bool isFloat)
      : attr(attr), isFloat(isFloat) {}

  DenseElementsAttr attr;
  bool isFloat;
};

/// Builds a constant of `type` from its elements (one element: a splat).
/// Null when an element does not have the type's element type.
Attribute buildConstant(RankedTensorType type, ArrayRef<Element> values) {
  Type elementType = type.getElementType();
  if (auto floatType = llvm::dyn_cast<FloatType>(elementType)) {
    SmallVector<APFloat> floats;
    for (const Element &value : values) {
      const auto *element = std::get_if<APFloat>(&value);
      if (!element ||
          &element->getSemantics() != &floatType.getFloatSemantics())
        return {};
      floats.push_back(*element);
    }
    return DenseElementsAttr::get(type, floats);
  }
  if (!llvm::isa<IntegerType>(elementType))
    return {};
  SmallVector<APInt> integers;
  for (const Element &value : values) {
    const auto *element = std::get_if<APInt>(&value);
    if (!element ||
        element->getBitWidth() != elementType.getIntOrFloatBitWidth())
      return {};
    integers.push_back(*element);
  }
  return DenseElementsAttr::get(type, integers);
}

/// Row-major position of `index` in `shape`.
int64_t linearize(ArrayRef<int64_t> index, ArrayRef<int64_t> shape) {
  int64_t linear = 0;
  for (auto [position, size] : llvm::zip_equal(index, shape))
    linear = linear * size + position;
  return linear;
}

/// Calls `visit` with every index of `shape`, in row-major order.
void forEachIndex(ArrayRef<int64_t> shape,
                  llvm::function_ref<void(ArrayRef<int64_t>)> visit) {
  if (llvm::is_contained(shape, 0))
    return;
  SmallVector<int64_t> index(shape.size(), 0);
  while (true) {
    visit(index);
    int64_t dim = static_cast<int64_t>(shape.size()) - 1;
    for (; dim >= 0; --dim) {
      if (++index[dim] < shape[dim])
        break;
      index[dim] = 0;
    }
    if (dim < 0)
      return;
  }
}

/// Right-aligns `resultIndex` on `shape`, with size-1 dims stretched: the
/// element of a broadcast operand that a result element reads.
int64_t broadcastSource(ArrayRef<int64_t> resultIndex,
                        ArrayRef<int64_t> shape) {
  size_t offset = resultIndex.size() - shape.size();
  int64_t linear = 0;
  for (auto [dim, size] : llvm::enumerate(shape))
    linear = linear * size + (size == 1 ? 0 : resultIndex[dim + offset]);
  return linear;
}

} // namespace

Attribute tessera::tess::folding::foldElementwise(ArrayRef<Attribute> operands,
                                                  RankedTensorType resultType,
                                                  ElementFunction compute) {
  SmallVector<ElementReader> readers;
  for (Attribute operand : operands) {
    std::optional<ElementReader> reader = ElementReader::get(operand);
    if (!reader)
      return {};
    readers.push_back(*reader);
  }

  SmallVector<Element> arguments;
  if (llvm::all_of(readers, [](const ElementReader &r) { return r.isSplat(); })) {
    for (const ElementReader &reader : readers)
      arguments.push_back(reader.at(0));
    std::optional<Element> value = compute(arguments);
    if (!value)
      return {};
    return buildConstant(resultType, *value);
  }

  if (resultType.getNumElements() > kMaxFoldedElements)
    return {};
  SmallVector<Element> values;
  bool computed = true;
  forEachIndex(resultType.getShape(), [&](ArrayRef<int64_t> index) {
    if (!computed)
      return;
    arguments.clear();
    for (const ElementReader &reader : readers)
      arguments.push_back(reader.at(broadcastSource(index, reader.shape())));
    std::optional<Element> value = compute(arguments);
    if (!value) {
      computed = false;
      return;
    }
    values.push_back(std::move(*value));
  });
  if (!computed)
    return {};
  return buildConstant(resultType, values);
}

Attribute tessera::tess::folding::foldDataMovement(ArrayRef<Attribute> inputs,
                                                   RankedTensorType resultType,
                                                   SourceFunction source) {
  SmallVector<ElementReader> readers;
  for (Attribute input : inputs) {
    std::optional<ElementReader> reader = ElementReader::get(input);
    if (!reader)
      return {};
    readers.push_back(*reader);
  }
  if (resultType.getNumElements() > kMaxFoldedElements)
    return {};
  SmallVector<Element> values;
  SmallVector<int64_t> inputIndex;
  forEachIndex(resultType.getShape(), [&](ArrayRef<int64_t> index) {
    inputIndex.clear();
    const ElementReader &reader = readers[source(index, inputIndex)];
    values.push_back(reader.at(linearize(inputIndex, reader.shape())));
  });
  return buildConstant(resultType, values);
}
