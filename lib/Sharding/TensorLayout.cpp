//===- TensorLayout.cpp - layouts, their text form and checks
//--------------===//

#include "tessera/Sharding/TensorLayout.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>

using namespace tessera;
using namespace tessera::sharding;

TensorLayout TensorLayout::replicated(unsigned rank) {
  TensorLayout layout;
  layout.dimAxes.assign(rank, kUnsplit);
  return layout;
}

TensorLayout TensorLayout::splitDim(unsigned rank, unsigned dim,
                                    unsigned axis) {
  TensorLayout layout = replicated(rank);
  layout.dimAxes[dim] = static_cast<int>(axis);
  return layout;
}

TensorLayout TensorLayout::partial(unsigned rank, unsigned axis) {
  TensorLayout layout = replicated(rank);
  layout.partialAxes.push_back(axis);
  return layout;
}

bool TensorLayout::isReplicated() const {
  return partialAxes.empty() &&
         llvm::all_of(dimAxes, [](int axis) { return axis == kUnsplit; });
}

int TensorLayout::dimSplitOver(unsigned axis) const {
  for (auto [dim, dimAxis] : llvm::enumerate(dimAxes))
    if (dimAxis == static_cast<int>(axis))
      return static_cast<int>(dim);
  return kUnsplit;
}

bool TensorLayout::isPartialOver(unsigned axis) const {
  return llvm::is_contained(partialAxes, axis);
}

int64_t TensorLayout::splitFactor(const cost::DeviceMesh &mesh) const {
  int64_t factor = 1;
  for (int axis : dimAxes)
    if (axis != kUnsplit)
      factor *= mesh.axes[axis].size;
  return factor;
}

double TensorLayout::localElements(llvm::ArrayRef<int64_t> shape,
                                   const cost::DeviceMesh &mesh) const {
  double elements = 1;
  for (int64_t size : shape)
    elements *= static_cast<double>(size);
  return elements / static_cast<double>(splitFactor(mesh));
}

std::string TensorLayout::print(const cost::DeviceMesh &mesh) const {
  std::string text = "[";
  for (auto [index, axis] : llvm::enumerate(dimAxes)) {
    if (index)
      text += ", ";
    text += axis == kUnsplit ? std::string("-") : mesh.axes[axis].name;
  }
  text += "]";
  if (!partialAxes.empty()) {
    text += " partial(";
    for (auto [index, axis] : llvm::enumerate(partialAxes)) {
      if (index)
        text += ", ";
      text += mesh.axes[axis].name;
    }
    text += ")";
  }
  return text;
}

static llvm::Error layoutError(llvm::StringRef text, const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "invalid tensor layout '" + text +
                                     "': " + why);
}

llvm::Expected<TensorLayout>
sharding::parseTensorLayout(llvm::StringRef text,
                            const cost::DeviceMesh &mesh) {
  llvm::StringRef rest = text.trim();
  if (!rest.consume_front("["))
    return layoutError(text, "expected '['");
  size_t close = rest.find(']');
  if (close == llvm::StringRef::npos)
    return layoutError(text, "expected ']'");
  llvm::StringRef dims = rest.take_front(close).trim();
  rest = rest.drop_front(close + 1).trim();

  TensorLayout layout;
  llvm::SmallVector<bool, 4> axisUsed(mesh.axes.size(), false);
  auto useAxis = [&](llvm::StringRef name) -> llvm::Expected<unsigned> {
    int axis = mesh.axisIndex(name);
    if (axis < 0)
      return layoutError(text, "no mesh axis named '" + name + "' in " +
                                   mesh.describe());
    if (axisUsed[axis])
      return layoutError(text, "mesh axis '" + name + "' is used twice");
    axisUsed[axis] = true;
    return static_cast<unsigned>(axis);
  };

  if (!dims.empty()) {
    llvm::SmallVector<llvm::StringRef, 4> entries;
    dims.split(entries, ',');
    for (llvm::StringRef entry : entries) {
      entry = entry.trim();
      if (entry.empty())
        return layoutError(text, "empty dim entry");
      if (entry == "-") {
        layout.dimAxes.push_back(kUnsplit);
        continue;
      }
      llvm::Expected<unsigned> axis = useAxis(entry);
      if (!axis)
        return axis.takeError();
      layout.dimAxes.push_back(static_cast<int>(*axis));
    }
  }

  if (rest.empty())
    return layout;
  if (!rest.consume_front("partial(") || !rest.consume_back(")"))
    return layoutError(text, "expected 'partial(AXIS, ...)' after the dims");
  llvm::SmallVector<llvm::StringRef, 2> names;
  rest.split(names, ',');
  for (llvm::StringRef name : names) {
    llvm::Expected<unsigned> axis = useAxis(name.trim());
    if (!axis)
      return axis.takeError();
    layout.partialAxes.push_back(*axis);
  }
  llvm::sort(layout.partialAxes);
  return layout;
}

bool sharding::fitsShape(const TensorLayout &layout,
                         llvm::ArrayRef<int64_t> shape,
                         const cost::DeviceMesh &mesh) {
  if (layout.rank() != shape.size())
    return false;
  for (auto [axis, size] : llvm::zip(layout.dimAxes, shape))
    if (axis != kUnsplit && (size < 0 || size % mesh.axes[axis].size != 0))
      return false;
  return true;
}
