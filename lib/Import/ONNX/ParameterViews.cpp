//===- ParameterViews.cpp - initializers that are another's copy ---------===//
//
// Pairs are compared only where their shapes allow it (equal, or reversed
// for rank 2) and their data is inline; random or trained weights differ in
// their first elements, so a comparison that will fail fails at once.
//
//===----------------------------------------------------------------------===//

#include "ParameterViews.h"

#include "tessera/Import/ONNX/HostTensor.h"

#include "llvm/ADT/StringSet.h"

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

/// Whether `view` holds `source`'s values: the same layout, or (`transposed`)
/// view[j][i] == source[i][j].
bool holdsValuesOf(const HostTensor &view, const HostTensor &source,
                   bool transposed) {
  int64_t count = source.numElements();
  if (view.numElements() != count)
    return false;
  if (!transposed) {
    for (int64_t i = 0; i < count; ++i)
      if (view.getDouble(i) != source.getDouble(i))
        return false;
    return true;
  }
  int64_t rows = source.getShape()[0], columns = source.getShape()[1];
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < columns; ++j)
      if (view.getDouble(j * rows + i) != source.getDouble(i * columns + j))
        return false;
  return true;
}

} // namespace

llvm::StringMap<ParameterView> tessera::onnx_import::findParameterViews(
    const onnx::GraphProto &graph,
    llvm::function_ref<bool(const onnx::TensorProto &)> canBeSource) {
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

  // Decoded once, and only where another candidate has a matching shape.
  std::map<const onnx::TensorProto *, std::unique_ptr<HostTensor>> decoded;
  auto valuesOf = [&](const onnx::TensorProto *tensor) -> const HostTensor * {
    auto [it, inserted] = decoded.try_emplace(tensor);
    if (inserted) {
      llvm::Expected<HostTensor> values = decodeTensorProto(*tensor, "");
      if (values)
        it->second = std::make_unique<HostTensor>(std::move(*values));
      else
        llvm::consumeError(values.takeError());
    }
    return it->second.get();
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
      const HostTensor *sourceValues = valuesOf(source);
      const HostTensor *viewValues = valuesOf(view);
      if (sourceValues && viewValues &&
          holdsValuesOf(*viewValues, *sourceValues, *transposed))
        views[view->name()] = ParameterView{source->name(), *transposed};
    }
  }
  return views;
}
