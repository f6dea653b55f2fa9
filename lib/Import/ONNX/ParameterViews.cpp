//===- ParameterViews.cpp - initializers derived from a parameter ---------===//
//
// A view is tried against sources only where their shapes allow the form
// (equal element counts for a copy, equal dims but one for a slice or a
// concatenation's piece) and their data is inline; random or trained
// weights differ in their first elements, so a comparison that will fail
// fails at once. The exporters' raw little-endian bytes are compared in
// place (an inline model may hold up to 2 GB of weights); only tensors
// written in the typed fields (small, hand-made ones) are decoded, and only
// a cast compares values rather than bytes.
//
//===----------------------------------------------------------------------===//

#include "ParameterViews.h"

#include "tessera/Import/ONNX/HostTensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/Endian.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

using namespace tessera::onnx_import;

namespace {

bool isFloat(int32_t type) {
  return type == onnx::TensorProto::FLOAT ||
         type == onnx::TensorProto::FLOAT16 ||
         type == onnx::TensorProto::BFLOAT16 ||
         type == onnx::TensorProto::DOUBLE;
}

int64_t product(llvm::ArrayRef<int64_t> dims) {
  int64_t count = 1;
  for (int64_t dim : dims)
    count *= dim;
  return count;
}

/// A tensor's elements, compared in place in its raw bytes, or its typed
/// fields decoded (as doubles).
class Elements {
public:
  explicit Elements(const onnx::TensorProto &tensor)
      : type(tensor.data_type()) {
    int64_t size = elementByteSize(type);
    count = product(
        llvm::ArrayRef<int64_t>(tensor.dims().data(), tensor.dims().size()));
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
  bool uniform() const {
    for (int64_t i = 1; i < count; ++i)
      if (!holds(i, *this, 0))
        return false;
    return true;
  }
  /// Whether element `index` is `source`'s element `sourceIndex` cast to
  /// this tensor's element type (tess.cast rounds as roundToFloatElementType).
  bool holds(int64_t index, const Elements &source, int64_t sourceIndex) const {
    if (type == source.type && elementSize == source.elementSize)
      return std::memcmp(bytes + index * elementSize,
                         source.bytes + sourceIndex * elementSize,
                         elementSize) == 0;
    return valueAt(index) ==
           roundToFloatElementType(source.valueAt(sourceIndex), type);
  }

private:
  double valueAt(int64_t index) const {
    if (!decoded.empty())
      return decoded[index];
    using llvm::support::endian::read;
    const char *at = bytes + index * elementSize;
    switch (type) {
    case onnx::TensorProto::FLOAT:
      return llvm::bit_cast<float>(
          read<uint32_t, llvm::endianness::little>(at));
    case onnx::TensorProto::FLOAT16:
      return halfBitsToFloat(read<uint16_t, llvm::endianness::little>(at));
    case onnx::TensorProto::BFLOAT16:
      return bfloat16BitsToFloat(read<uint16_t, llvm::endianness::little>(at));
    default:
      return llvm::bit_cast<double>(
          read<uint64_t, llvm::endianness::little>(at));
    }
  }

  int32_t type;
  int64_t count = 0;
  std::vector<double> decoded;
  const char *bytes = nullptr;
  int64_t elementSize = 0;
};

/// A float initializer with inline data that may be a view or a source.
struct Candidate {
  const onnx::TensorProto *tensor;
  std::vector<int64_t> shape;
  bool source;
};

/// A view's elements read in the layout of the function of its sources:
/// as stored, or (`transposed`, rank 2) as its transpose, of `shape`.
struct Reading {
  const Elements *elements;
  std::vector<int64_t> shape;
  bool transposed;

  /// The stored index of the element at row-major `index` of `shape`.
  int64_t stored(int64_t index) const {
    if (!transposed)
      return index;
    return (index % shape[1]) * shape[0] + index / shape[1];
  }
};

/// Whether `view` holds, at [viewOffset, viewOffset + length) along `axis`,
/// `source`'s [sourceOffset, sourceOffset + length) along that axis; every
/// other dim of the two is equal.
bool windowMatches(const Reading &view, int64_t viewOffset,
                   const Elements &source, llvm::ArrayRef<int64_t> sourceShape,
                   int64_t sourceOffset, int64_t axis, int64_t length) {
  llvm::ArrayRef<int64_t> shape = view.shape;
  int64_t outer = product(shape.take_front(axis));
  int64_t inner = product(shape.drop_front(axis + 1));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t t = 0; t < length; ++t)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t viewIndex = (o * shape[axis] + viewOffset + t) * inner + i;
        int64_t sourceIndex =
            (o * sourceShape[axis] + sourceOffset + t) * inner + i;
        if (!view.elements->holds(view.stored(viewIndex), source, sourceIndex))
          return false;
      }
  return true;
}

/// The one axis along which `shape` and `other` (of equal rank) differ.
std::optional<int64_t> onlyDifferingAxis(llvm::ArrayRef<int64_t> shape,
                                         llvm::ArrayRef<int64_t> other) {
  if (shape.size() != other.size())
    return std::nullopt;
  std::optional<int64_t> axis;
  for (auto [index, dims] : llvm::enumerate(llvm::zip(shape, other))) {
    if (std::get<0>(dims) == std::get<1>(dims))
      continue;
    if (axis)
      return std::nullopt;
    axis = index;
  }
  return axis;
}

/// Finds the view a reading is, of `sources` (those still allowed).
class ViewMatcher {
public:
  ViewMatcher(const std::vector<const Candidate *> &sources,
              llvm::function_ref<const Elements *(const Candidate &)> read)
      : sources(sources), read(read) {}

  std::optional<ParameterView> match(const Reading &view,
                                     const Candidate &self) const {
    if (std::optional<ParameterView> copy = matchCopy(view, self))
      return copy;
    for (int64_t axis = 0; axis < static_cast<int64_t>(view.shape.size());
         ++axis)
      if (std::optional<ParameterView> pieces =
              matchConcatenation(view, self, axis))
        return pieces;
    return matchSlice(view, self);
  }

private:
  /// The same elements in the same order: a copy, a reshape or a cast (a
  /// transposed reading only of the transposed shape).
  std::optional<ParameterView> matchCopy(const Reading &view,
                                         const Candidate &self) const {
    int64_t count = product(view.shape);
    for (const Candidate *source : sources) {
      if (source == &self || product(source->shape) != count ||
          (view.transposed && source->shape != view.shape))
        continue;
      const Elements *elements = read(*source);
      if (!elements)
        continue;
      bool same = true;
      for (int64_t i = 0; i < count && same; ++i)
        same = view.elements->holds(view.stored(i), *elements, i);
      if (same)
        return ParameterView{
            {source->tensor->name()}, 0, std::nullopt, 0, view.transposed};
    }
    return std::nullopt;
  }

  /// Two or more sources one after another along `axis`, each taken as the
  /// first that fits where the previous one ends.
  std::optional<ParameterView> matchConcatenation(const Reading &view,
                                                  const Candidate &self,
                                                  int64_t axis) const {
    ParameterView pieces{{}, axis, std::nullopt, 0, view.transposed};
    int64_t offset = 0;
    int64_t length = view.shape[axis];
    while (offset < length) {
      const Candidate *next = nullptr;
      for (const Candidate *source : sources) {
        if (source == &self ||
            onlyDifferingAxis(view.shape, source->shape) != axis ||
            source->shape[axis] > length - offset)
          continue;
        const Elements *elements = read(*source);
        if (elements && windowMatches(view, offset, *elements, source->shape, 0,
                                      axis, source->shape[axis])) {
          next = source;
          break;
        }
      }
      if (!next)
        return std::nullopt;
      pieces.sources.push_back(next->tensor->name());
      offset += next->shape[axis];
    }
    if (pieces.sources.size() < 2)
      return std::nullopt;
    return pieces;
  }

  /// A window along one axis of a source that holds more along it.
  std::optional<ParameterView> matchSlice(const Reading &view,
                                          const Candidate &self) const {
    for (const Candidate *source : sources) {
      std::optional<int64_t> axis =
          onlyDifferingAxis(view.shape, source->shape);
      if (source == &self || !axis || source->shape[*axis] < view.shape[*axis])
        continue;
      const Elements *elements = read(*source);
      if (!elements)
        continue;
      int64_t length = view.shape[*axis];
      for (int64_t start = 0; start + length <= source->shape[*axis]; ++start)
        if (windowMatches(view, 0, *elements, source->shape, start, *axis,
                          length))
          return ParameterView{
              {source->tensor->name()}, 0, *axis, start, view.transposed};
    }
    return std::nullopt;
  }

  const std::vector<const Candidate *> &sources;
  llvm::function_ref<const Elements *(const Candidate &)> read;
};

/// Whether the exporter, not the module, named the tensor (torch.onnx's
/// `val_N`, the legacy exporter's `onnx::MatMul_N`).
bool hasExporterName(llvm::StringRef name) {
  return name.starts_with("val_") || name.starts_with("onnx::");
}

} // namespace

llvm::StringMap<ParameterView> tessera::onnx_import::findParameterViews(
    const onnx::GraphProto &graph,
    llvm::function_ref<bool(const onnx::TensorProto &)> canBeSource,
    llvm::function_ref<bool(const onnx::TensorProto &)> canBeView) {
  std::vector<Candidate> candidates;
  for (const onnx::TensorProto &tensor : graph.initializer()) {
    std::vector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
    if (!isFloat(tensor.data_type()) || shape.empty() || product(shape) < 2 ||
        tensor.data_location() == onnx::TensorProto::EXTERNAL)
      continue;
    candidates.push_back({&tensor, std::move(shape), canBeSource(tensor)});
  }
  llvm::StringSet<> gathered;
  for (const onnx::NodeProto &node : graph.node())
    if (node.op_type() == "Gather" && node.input_size() > 0)
      gathered.insert(node.input(0));

  // Read once, and only when a comparison needs it; a source whose values
  // do not vary (or that cannot be read) is no source.
  std::map<const Candidate *, std::unique_ptr<Elements>> elements;
  auto elementsOf = [&](const Candidate &candidate) -> const Elements & {
    std::unique_ptr<Elements> &read = elements[&candidate];
    if (!read)
      read = std::make_unique<Elements>(*candidate.tensor);
    return *read;
  };
  std::map<const Candidate *, bool> usable;
  auto readSource = [&](const Candidate &source) -> const Elements * {
    auto known = usable.find(&source);
    const Elements &read = elementsOf(source);
    if (known == usable.end())
      known = usable.emplace(&source, read.valid() && !read.uniform()).first;
    return known->second ? &read : nullptr;
  };

  // Views are tried in the order that leaves PyTorch's tensors as sources:
  // tensors that are not trained, then the exporter's, then the module's,
  // and embeddings (a Gather's table, a tied head's source) last; within a
  // rank the later in the file, so that of two equal tensors the first is
  // the source.
  auto rank = [&](const Candidate &candidate) {
    if (!candidate.source)
      return 0;
    if (gathered.contains(candidate.tensor->name()))
      return 3;
    return hasExporterName(candidate.tensor->name()) ? 1 : 2;
  };
  std::vector<const Candidate *> order;
  for (const Candidate &candidate : llvm::reverse(candidates))
    order.push_back(&candidate);
  std::stable_sort(order.begin(), order.end(),
                   [&](const Candidate *a, const Candidate *b) {
                     return rank(*a) < rank(*b);
                   });

  std::vector<const Candidate *> sources;
  for (const Candidate &candidate : candidates)
    if (candidate.source)
      sources.push_back(&candidate);
  ViewMatcher matcher(sources, readSource);
  llvm::StringMap<ParameterView> views;
  llvm::StringSet<> usedAsSource;
  for (const Candidate *candidate : order) {
    if (usedAsSource.contains(candidate->tensor->name()) ||
        !canBeView(*candidate->tensor))
      continue;
    const Elements &read = elementsOf(*candidate);
    if (!read.valid() || read.uniform())
      continue;
    std::optional<ParameterView> view;
    for (bool transposed : {false, true}) {
      if (transposed && candidate->shape.size() != 2)
        break;
      std::vector<int64_t> shape = candidate->shape;
      if (transposed)
        std::swap(shape[0], shape[1]);
      view = matcher.match(Reading{&read, shape, transposed}, *candidate);
      if (view)
        break;
    }
    if (!view)
      continue;
    for (const std::string &source : view->sources)
      usedAsSource.insert(source);
    views[candidate->tensor->name()] = std::move(*view);
    // A view is no longer a source: every view reads a parameter.
    llvm::erase(sources, candidate);
  }
  return views;
}
