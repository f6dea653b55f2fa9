//===- Collective.cpp - names and ring factors of the collectives ---------===//

#include "tessera/CostModel/Collective.h"

namespace tessera::cost {

llvm::ArrayRef<Collective> allCollectives() {
  static const Collective all[] = {
      Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
      Collective::AllToAll, Collective::SendRecv};
  return all;
}

llvm::StringRef collectiveName(Collective collective) {
  switch (collective) {
  case Collective::AllReduce:
    return "all_reduce";
  case Collective::AllGather:
    return "all_gather";
  case Collective::ReduceScatter:
    return "reduce_scatter";
  case Collective::AllToAll:
    return "all_to_all";
  case Collective::SendRecv:
    return "send_recv";
  }
  return "unknown";
}

std::optional<Collective> parseCollectiveName(llvm::StringRef name) {
  for (Collective collective : allCollectives())
    if (collectiveName(collective) == name)
      return collective;
  return std::nullopt;
}

double busFactor(Collective collective, int64_t groupSize) {
  if (groupSize <= 1)
    return 0;
  double n = static_cast<double>(groupSize);
  switch (collective) {
  case Collective::AllReduce:
    return 2 * (n - 1) / n;
  case Collective::AllGather:
  case Collective::ReduceScatter:
  case Collective::AllToAll:
    return (n - 1) / n;
  case Collective::SendRecv:
    return 1;
  }
  return 0;
}

} // namespace tessera::cost
