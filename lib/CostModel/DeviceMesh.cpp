//===- DeviceMesh.cpp - parsing --mesh and placing it on a cluster --------===//

#include "tessera/CostModel/DeviceMesh.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

using namespace llvm;

namespace tessera::cost {
namespace {

Error meshError(StringRef spec, const Twine &message) {
  return createStringError(inconvertibleErrorCode(),
                           "--mesh " + spec + ": " + message);
}

bool isAxisName(StringRef name) {
  if (name.empty() || !(isAlpha(name.front()) || name.front() == '_'))
    return false;
  return llvm::all_of(name, [](char c) { return isAlnum(c) || c == '_'; });
}

/// The conventional names of `count` unnamed axes, outermost first.
ArrayRef<StringRef> defaultAxisNames(size_t count) {
  static const StringRef one[] = {"dp"};
  static const StringRef two[] = {"dp", "tp"};
  static const StringRef three[] = {"pp", "dp", "tp"};
  switch (count) {
  case 1:
    return one;
  case 2:
    return two;
  case 3:
    return three;
  default:
    return {};
  }
}

} // namespace

int64_t DeviceMesh::deviceCount() const {
  int64_t count = 1;
  for (const MeshAxis &axis : axes)
    count *= axis.size;
  return count;
}

std::string DeviceMesh::describe() const {
  if (axes.empty())
    return "1 device";
  std::string text;
  for (const MeshAxis &axis : axes)
    text += formatv("{0}{1}={2}", text.empty() ? "" : ",", axis.name,
                    axis.size)
                .str();
  return text;
}

int DeviceMesh::axisIndex(StringRef name) const {
  for (auto [index, axis] : llvm::enumerate(axes))
    if (axis.name == name)
      return static_cast<int>(index);
  return -1;
}

Expected<DeviceMesh> parseMesh(StringRef spec) {
  DeviceMesh mesh;
  spec = spec.trim();
  if (spec.empty())
    return mesh;

  bool named = spec.contains('=');
  SmallVector<StringRef> parts;
  spec.split(parts, named ? ',' : 'x', /*MaxSplit=*/-1, /*KeepEmpty=*/true);
  StringSet<> seen;
  for (StringRef part : parts) {
    StringRef name, sizeText = part.trim();
    if (named) {
      auto [left, right] = part.split('=');
      name = left.trim();
      sizeText = right.trim();
      if (!isAxisName(name))
        return meshError(spec, "'" + part +
                                   "': expected NAME=N with NAME an "
                                   "identifier, e.g. dp=2,tp=4");
      if (!seen.insert(name).second)
        return meshError(spec, "axis '" + name + "' is named twice");
    }
    int64_t size;
    if (sizeText.getAsInteger(10, size) || size <= 0)
      return meshError(spec, "'" + part +
                                 "': an axis size must be a positive integer "
                                 "(write 2x4 or dp=2,tp=4)");
    mesh.axes.push_back({name.str(), size, 1, LinkLevel::IntraNode});
  }

  if (!named) {
    ArrayRef<StringRef> names = defaultAxisNames(mesh.axes.size());
    if (names.empty())
      return meshError(spec, formatv("{0} axes need names, e.g. "
                                     "pp=2,dp=2,cp=2,tp=2",
                                     mesh.axes.size())
                                 .str());
    for (auto [axis, name] : llvm::zip(mesh.axes, names))
      axis.name = name.str();
  }

  int64_t stride = 1;
  for (MeshAxis &axis : llvm::reverse(mesh.axes)) {
    axis.stride = stride;
    stride *= axis.size;
  }
  return mesh;
}

Error placeOnCluster(DeviceMesh &mesh, const Cluster &cluster) {
  int64_t devices = mesh.deviceCount();
  int64_t perNode = cluster.devicesPerNode;
  std::string spec = mesh.describe();
  if (devices > cluster.deviceCount())
    return meshError(spec, formatv("needs {0} devices, but cluster '{1}' has "
                                   "{2} ({3} node(s) of {4})",
                                   devices, cluster.name,
                                   cluster.deviceCount(), cluster.nodes,
                                   perNode)
                               .str());
  if (devices > perNode && devices % perNode != 0)
    return meshError(spec, formatv("{0} devices span more than one node of "
                                   "{1} on cluster '{2}': a mesh larger than "
                                   "a node must use whole nodes",
                                   devices, perNode, cluster.name)
                               .str());
  for (MeshAxis &axis : mesh.axes) {
    // A group of this axis lies inside an aligned block of stride * size
    // consecutive devices; it stays in one node when the whole mesh does or
    // when such blocks tile a node.
    int64_t block = axis.stride * axis.size;
    bool insideNode =
        devices <= perNode || (block <= perNode && perNode % block == 0);
    axis.level = insideNode ? LinkLevel::IntraNode : LinkLevel::InterNode;
    if (!insideNode && !cluster.interNode)
      return meshError(spec, "axis '" + axis.name +
                                 "' crosses nodes, but cluster '" +
                                 cluster.name + "' has no inter-node link");
  }
  return Error::success();
}

DeviceGroup axisGroup(const DeviceMesh &mesh, const Cluster &cluster,
                      unsigned axis) {
  const MeshAxis &meshAxis = mesh.axes[axis];
  if (meshAxis.level == LinkLevel::IntraNode)
    return {meshAxis.size, 1};
  return stridedGroup(cluster, meshAxis.size, meshAxis.stride);
}

double axisCollectiveTime(const DeviceMesh &mesh, const Cluster &cluster,
                          unsigned axis, Collective collective, double bytes) {
  return groupCollectiveTime(cluster, collective, bytes,
                             axisGroup(mesh, cluster, axis));
}

double meshAllReduceTime(const DeviceMesh &mesh, const Cluster &cluster,
                         double bytes) {
  int64_t devices = mesh.deviceCount();
  DeviceGroup group = devices <= cluster.devicesPerNode
                          ? DeviceGroup{devices, 1}
                          : stridedGroup(cluster, devices, 1);
  return groupCollectiveTime(cluster, Collective::AllReduce, bytes, group);
}

} // namespace tessera::cost
