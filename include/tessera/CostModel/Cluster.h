//===- Cluster.h - nodes of devices and the links between them -*- C++ -*-===//
//
// A cluster description: `nodes` nodes of `devices_per_node` identical
// devices; the devices of a node share one link level (NVLink), nodes are
// joined by another (InfiniBand). It is read from a small JSON file whose
// format lib/CostModel/README.md documents ("Cluster files"), or named by
// one of the built-ins (BuiltinClusters.cpp), which are written in the same
// format and go through the same parser.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_COSTMODEL_CLUSTER_H
#define TESSERA_COSTMODEL_CLUSTER_H

#include "tessera/CostModel/DeviceModel.h"
#include "tessera/CostModel/LinkModel.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace tessera::cost {

/// Which level of the interconnect a group of devices talks over.
enum class LinkLevel { IntraNode, InterNode };

/// The host of each node, where `--offload optimizer` keeps the fp32
/// masters and AdamW's moments and runs AdamW: its rate and the PCIe
/// copies' (the offloaded executable prints all three at the end of a run).
struct HostModel {
  /// AdamW over fp32 masters and moments on the host's cores, elements a
  /// second (each reads its gradient, writes its compute copy).
  double adamwElementsPerSecond = 0;
  /// Pinned-memory copies: gradients device -> host, copies host -> device.
  double deviceToHostBandwidth = 0, hostToDeviceBandwidth = 0;
};

struct Cluster {
  std::string name;
  std::string description;
  int64_t nodes = 1;
  int64_t devicesPerNode = 1;
  DeviceModel device;
  LinkModel intraNode;
  /// Present exactly when the file has an "inter_node" link; required when
  /// `nodes > 1`.
  std::optional<LinkModel> interNode;
  /// Present exactly when the file has a "host" section: what prices
  /// `--offload optimizer` (tesserac says when only it fits).
  std::optional<HostModel> host;

  int64_t deviceCount() const { return nodes * devicesPerNode; }
  const LinkModel &link(LinkLevel level) const {
    return level == LinkLevel::IntraNode ? intraNode : *interNode;
  }
};

/// Parses a cluster file's text. `source` names it in errors ("cluster file
/// 'x.json': missing field 'device.flops.bf16'").
llvm::Expected<Cluster> parseCluster(llvm::StringRef json,
                                     llvm::StringRef source);

/// `--cluster NAME|FILE`: a built-in name, else the path of a cluster file.
llvm::Expected<Cluster> loadCluster(llvm::StringRef nameOrPath);

/// The names of the built-in clusters: "h200", "h200-multinode",
/// "a100-megatron".
llvm::ArrayRef<llvm::StringRef> builtinClusterNames();

/// The JSON text of a built-in, or nothing for an unknown name.
std::optional<llvm::StringRef> builtinClusterJson(llvm::StringRef name);

} // namespace tessera::cost

#endif // TESSERA_COSTMODEL_CLUSTER_H
