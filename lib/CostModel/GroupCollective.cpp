//===- GroupCollective.cpp - a collective over devices on several nodes ---===//
//
// The model and why it is NCCL's: GroupCollective.h.
//
//===----------------------------------------------------------------------===//

#include "tessera/CostModel/GroupCollective.h"

#include <algorithm>

namespace tessera::cost {

DeviceGroup stridedGroup(const Cluster &cluster, int64_t size,
                         int64_t stride) {
  int64_t perNode = cluster.devicesPerNode;
  int64_t block = size * stride;
  if (size <= 1 || (block <= perNode && perNode % block == 0))
    return {size, 1};
  if (stride < perNode && perNode % stride == 0 && block % perNode == 0)
    return {size, block / perNode};
  return {size, size};
}

double groupCollectiveTime(const Cluster &cluster, Collective collective,
                           double bytes, const DeviceGroup &group) {
  int64_t devices = group.devices;
  if (devices <= 1 || bytes <= 0)
    return 0;
  if (group.nodes <= 1 || !cluster.interNode)
    return cluster.intraNode.time(collective, bytes, devices);

  const LinkModel &inter = *cluster.interNode;
  int64_t perNode = std::max<int64_t>(1, group.devicesPerNode());
  double n = static_cast<double>(devices);
  double k = static_cast<double>(perNode);
  if (collective == Collective::AllToAll) {
    // The factor (n - 1)/n of the buffer leaves each device: (n - k)/n of it
    // over the device's adapter, (k - 1)/n to its node's other devices.
    double leaving = inter.time(collective, bytes * (n - k) / (n - 1), devices);
    double staying =
        perNode > 1 ? cluster.intraNode.time(collective,
                                             bytes * (k - 1) / (n - 1), devices)
                    : 0;
    return std::max(leaving, staying);
  }
  // One ring a channel, the channels over the node's k adapters: each
  // adapter carries 1/k of what every hop of the ring moves.
  double across = inter.time(collective, bytes / k, devices);
  double inside =
      perNode > 1 ? cluster.intraNode.time(collective, bytes, devices) : 0;
  return std::max(across, inside);
}

double bucketedTime(double bytes, double bucketBytes,
                    llvm::function_ref<double(double)> collective) {
  if (bucketBytes <= 0 || bytes <= bucketBytes)
    return collective(bytes);
  return bytes / bucketBytes * collective(bucketBytes);
}

} // namespace tessera::cost
