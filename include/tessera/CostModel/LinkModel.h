//===- LinkModel.h - alpha-beta time of collectives on one link -*- C++ -*-===//
//
// How long a collective takes on one level of the interconnect (NVLink inside
// a node, InfiniBand between nodes):
//
//   time(bytes, n) = latency + bytes * busFactor(collective, n) / bandwidth
//
// the alpha-beta model, with `bandwidth` a bus bandwidth (Collective.h).
// Real collectives are far from that line for small and medium messages
// (NCCL switches protocols and algorithms by size), so a collective may also
// carry a table of bus bandwidths measured by message size; where present,
// it takes precedence over the two constants (see CollectiveModel::time).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_COSTMODEL_LINKMODEL_H
#define TESSERA_COSTMODEL_LINKMODEL_H

#include "tessera/CostModel/Collective.h"

#include <array>
#include <string>
#include <vector>

namespace tessera::cost {

/// One measurement: a message of `bytes` reached `busBandwidth` bytes/s.
struct MeasuredBandwidth {
  double bytes = 0;
  double busBandwidth = 0;
};

/// The time model of one collective on one link.
struct CollectiveModel {
  Collective collective = Collective::AllReduce;
  /// alpha, in seconds: the time of a message too small to notice.
  double latency = 0;
  /// beta, a bus bandwidth in bytes/s: the slope for large messages.
  double bandwidth = 0;
  /// Measured points, sorted by bytes, strictly increasing; may be empty.
  std::vector<MeasuredBandwidth> measured;
  /// The group size the measurements were taken with (documentation only:
  /// a bus bandwidth already factors the group size out).
  int64_t measuredGroupSize = 0;

  /// Seconds for a collective over `bytes` (NCCL's buffer convention) in a
  /// group of `groupSize` devices; 0 for a group of one or no bytes.
  /// Without measurements: the alpha-beta line. With them: inside the
  /// measured range, the bus bandwidth interpolated linearly in
  /// log(bytes)/log(bandwidth) between the neighbouring points; below it, a
  /// straight line from `latency` at 0 bytes to the first point's time;
  /// above it, the last point's time plus the extra bytes at the last
  /// point's bandwidth. The curve is continuous and never decreasing.
  double time(double bytes, int64_t groupSize) const;
};

/// One level of the interconnect.
struct LinkModel {
  std::string name;
  /// Indexed by Collective.
  std::array<CollectiveModel, 5> collectives;

  const CollectiveModel &get(Collective collective) const {
    return collectives[static_cast<size_t>(collective)];
  }
  double time(Collective collective, double bytes, int64_t groupSize) const {
    return get(collective).time(bytes, groupSize);
  }
};

} // namespace tessera::cost

#endif // TESSERA_COSTMODEL_LINKMODEL_H
