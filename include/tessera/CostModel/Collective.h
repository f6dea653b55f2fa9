//===- Collective.h - the collectives the cost model prices ----*- C++ -*-===//
//
// The communication patterns a sharded training step uses, and how many
// bytes each moves over the slowest link of a ring per byte of its buffer.
//
// The factors are the ones NCCL's tests use to turn a measured time into a
// "bus bandwidth": bus bandwidth = bytes * factor / time. A bus bandwidth is
// (nearly) independent of the group size for ring algorithms, which is why
// the cluster file stores bandwidths in that form and the factor supplies
// the dependence on n.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_COSTMODEL_COLLECTIVE_H
#define TESSERA_COSTMODEL_COLLECTIVE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

namespace tessera::cost {

enum class Collective { AllReduce, AllGather, ReduceScatter, AllToAll, SendRecv };

/// Every collective, in the order the cluster file lists them.
llvm::ArrayRef<Collective> allCollectives();

/// The name used in cluster files and reports: "all_reduce", "all_gather",
/// "reduce_scatter", "all_to_all", "send_recv".
llvm::StringRef collectiveName(Collective collective);
std::optional<Collective> parseCollectiveName(llvm::StringRef name);

/// Bytes crossing a ring link per byte of the collective's buffer, for a
/// group of `groupSize` devices. The buffer is the whole tensor in every
/// case (NCCL's convention): the reduced tensor for all-reduce, the gathered
/// output for all-gather, the input for reduce-scatter, everything one rank
/// sends for all-to-all, the message for send/recv.
///   all-reduce      2(n-1)/n  (reduce-scatter then all-gather)
///   all-gather      (n-1)/n
///   reduce-scatter  (n-1)/n
///   all-to-all      (n-1)/n   (each rank keeps 1/n of its data)
///   send/recv       1
/// A group of one device moves nothing: the factor is 0.
double busFactor(Collective collective, int64_t groupSize);

} // namespace tessera::cost

#endif // TESSERA_COSTMODEL_COLLECTIVE_H
