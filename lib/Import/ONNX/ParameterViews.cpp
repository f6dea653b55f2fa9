//===- ParameterViews.cpp - initializers that are another's copy ---------===//
//
// Pairs are compared only where their shapes allow it (equal, or reversed
// for rank 2) and their data is inline; random or trained weights differ in
// their first elements, so a comparison that will fail fails at once. The
// exporters' raw little-endian bytes are compared in place (an inline model
// may hold up to 2 GB of weights); only tensors written in the typed fields
// (small, hand-made ones) are decoded.
//
//===----------------------------------------------------------------------===//

#include "ParameterViews.h"

#include "tessera/Import/ONNX/HostTensor.h"

#include "llvm/ADT/StringSet.h"

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <vector>

using namespace tessera::onnx_import;

namespace {

bool isFloat(int32_t type) {
  return type == onnx::TensorProto::FLOAT ||
         type == onnx::TensorProto::FLOAT16 ||
         type == onnx::TensorProto::BFLOAT16 ||
         type == onnx::TensorProto::DOUBLE;
}

/// A tensor's elements as fixed-size byte strings: its raw data in place,
/// or its typed fields decoded (as doubles).
class Elements {
public:
  explicit Elements(const onnx::TensorProto &tensor) {
    int64_t size = elementByteSize(tensor.data_type());
    int64_t count = 1;
    for (int64_t dim : tensor.dims())
      count *= dim;
    if (tensor.has_raw_data() &&
        static_cast<int64_t>(tensor.raw_data().size()) == count * size) {
      bytes = tensor.raw_data().data();
      elementSize = size;
      return;
    }
    llvm::Expected<HostTensor> values = decodeTensorProto(tensor, "");
    if (!values) {
      llvm::consumeError(values.takeError());
      return;
    }
    decoded = values->getFloatData();
    bytes = reinterpret_cast<const char *>(decoded.data());
    elementSize = sizeof(double);
  }

  bool valid() const { return bytes != nullptr; }
  /// Whether every element equals the first (a zero-initialized weight): no
  /// value can tell a copy of it from another weight initialized alike.
  bool uniform(int64_t count) const {
    for (int64_t i = 1; i < count; ++i)
      if (!sameAs(i, *this, 0))
        return false;
    return true;
  }
  bool sameAs(int64_t index, const Elements &other, int64_t otherIndex) const {
    return elementSize == other.elementSize &&
           std::memcmp(bytes + index * elementSize,
                       other.bytes + otherIndex * elementSize,
                       elementSize) == 0;
  }

private:
  std::vector<double> decoded;
  const char *bytes = nullptr;
  int64_t elementSize = 0;
};

/// Whether `view` holds `source`'s `rows` x `columns` values: the same
/// layout, or (`transposed`) view[j][i] == source[i][j].
bool holdsValuesOf(const Elements &view, const Elements &source, int64_t rows,
                   int64_t columns, bool transposed) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < columns; ++j)
      if (!view.sameAs(transposed ? j * rows + i : i * columns + j, source,
                       i * columns + j))
        return false;
  return true;
}

} // namespace

llvm::StringMap<ParameterView> tessera::onnx_import::findParameterViews(
    const onnx::GraphProto &graph,
    llvm::function_ref<bool(const onnx::TensorProto &)> canBeSource,
    llvm::function_ref<bool(const onnx::TensorProto &)> canBeView) {
  std::vector<const onnx::TensorProto *> candidates;
  std::map<std::vector<int64_t>, int> shapeCounts;
  for (const onnx::TensorProto &tensor : graph.initializer()) {
    if (!isFloat(tensor.data_type()) || tensor.dims_size() < 2 ||
        tensor.data_location() == onnx::TensorProto::EXTERNAL)
      continue;
    candidates.push_back(&tensor);
    ++shapeCounts[std::vector<int64_t>(tensor.dims().begin(),
                                       tensor.dims().end())];
  }
  llvm::StringSet<> gathered;
  for (const onnx::NodeProto &node : graph.node())
    if (node.op_type() == "Gather" && node.input_size() > 0)
      gathered.insert(node.input(0));

  // Read once, and only where another candidate has a matching shape.
  std::map<const onnx::TensorProto *, std::unique_ptr<Elements>> elements;
  auto elementsOf = [&](const onnx::TensorProto *tensor) -> const Elements & {
    std::unique_ptr<Elements> &read = elements[tensor];
    if (!read)
      read = std::make_unique<Elements>(*tensor);
    return *read;
  };

  // Sources first: those a Gather reads (the embedding of a tied head).
  std::vector<const onnx::TensorProto *> sources;
  for (const onnx::TensorProto *tensor : candidates)
    if (canBeSource(*tensor) && gathered.contains(tensor->name()))
      sources.push_back(tensor);
  for (const onnx::TensorProto *tensor : candidates)
    if (canBeSource(*tensor) && !gathered.contains(tensor->name()))
      sources.push_back(tensor);

  llvm::StringMap<ParameterView> views;
  for (const onnx::TensorProto *source : sources) {
    if (views.count(source->name()))
      continue;
    std::vector<int64_t> shape(source->dims().begin(), source->dims().end());
    std::vector<int64_t> reversed(shape.rbegin(), shape.rend());
    bool sameShapes = shapeCounts[shape] > 1;
    bool transposedShapes = shape.size() == 2 && shapeCounts.count(reversed);
    if (!sameShapes && !transposedShapes)
      continue;
    for (const onnx::TensorProto *view : candidates) {
      if (view == source || views.count(view->name()) ||
          view->data_type() != source->data_type())
        continue;
      std::vector<int64_t> viewShape(view->dims().begin(), view->dims().end());
      std::optional<bool> transposed;
      if (viewShape == shape)
        transposed = false;
      else if (shape.size() == 2 && viewShape == reversed)
        transposed = true;
      if (!transposed)
        continue;
      if (!canBeView(*view))
        continue;
      const Elements &sourceElements = elementsOf(source);
      const Elements &viewElements = elementsOf(view);
      // Rank > 2 copies compare as one row of all their elements.
      int64_t rows = shape.size() == 2 ? shape[0] : 1;
      int64_t columns = 1;
      for (int64_t dim : shape)
        columns *= dim;
      columns /= rows == 0 ? 1 : rows;
      if (sourceElements.valid() && viewElements.valid() &&
          !sourceElements.uniform(rows * columns) &&
          holdsValuesOf(viewElements, sourceElements, rows, columns,
                        *transposed))
        views[view->name()] = ParameterView{source->name(), *transposed};
    }
  }
  return views;
}
