//===- LaunchEnvironment.cpp - Rank, world and master from the environment ===//
//
// Three launchers, three spellings of the same facts (see launch.h). Each is
// read strictly: a variable that is set must be a whole decimal number in
// range, and the facts must agree with each other (rank < world size, local
// rank < local world size), because a rank that misreads its place
// deadlocks the whole job far away from the cause.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/launch.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>

namespace tessera::comm {
namespace {

constexpr int32_t kDefaultMasterPort = 29500;

[[noreturn]] void fail(const std::string &message) { throw CommError(message); }

class Reader {
public:
  explicit Reader(const Environment &environment) : environment(environment) {}

  std::optional<std::string> text(const char *name) const {
    return environment(name);
  }
  bool has(const char *name) const { return environment(name).has_value(); }

  /// The integer value of `name` in [minimum, maximum].
  std::optional<int32_t> integer(const char *name, int64_t minimum,
                                 int64_t maximum) const {
    std::optional<std::string> value = environment(name);
    if (!value)
      return std::nullopt;
    const char *begin = value->c_str();
    char *end = nullptr;
    errno = 0;
    long long number = std::strtoll(begin, &end, 10);
    if (value->empty() || end != begin + value->size() || errno == ERANGE)
      fail(std::string(name) + "='" + *value + "' is not an integer");
    if (number < minimum || number > maximum)
      fail(std::string(name) + "=" + *value + " is out of range [" +
           std::to_string(minimum) + ", " + std::to_string(maximum) + "]");
    return static_cast<int32_t>(number);
  }

  int32_t required(const char *name, int64_t minimum, int64_t maximum,
                   const char *because) const {
    std::optional<int32_t> value = integer(name, minimum, maximum);
    if (!value)
      fail(std::string(name) + " is not set (" + because + ")");
    return *value;
  }

private:
  const Environment &environment;
};

constexpr int64_t kMaxRanks = 1 << 20;

void requireBelow(const char *rankName, int32_t rank, const char *sizeName,
                  int32_t size) {
  if (rank >= size)
    fail(std::string(rankName) + "=" + std::to_string(rank) + " is not below " +
         sizeName + "=" + std::to_string(size));
}

void readMaster(const Reader &reader, LaunchInfo &info, int32_t defaultPort,
                bool addressRequired, const char *because) {
  std::optional<std::string> address = reader.text("MASTER_ADDR");
  if (address && address->empty())
    fail("MASTER_ADDR is set but empty");
  if (address)
    info.masterAddress = *address;
  else if (addressRequired)
    fail(std::string("MASTER_ADDR is not set (") + because + ")");
  info.masterPort =
      reader.integer("MASTER_PORT", 1, 65535).value_or(defaultPort);
}

LaunchInfo readTorchrun(const Reader &reader) {
  LaunchInfo info;
  info.source = "torchrun";
  info.worldSize = reader.required("WORLD_SIZE", 1, kMaxRanks,
                                   "RANK is set, so the run is torchrun-style");
  info.rank = reader.required(
      "RANK", 0, kMaxRanks, "WORLD_SIZE is set, so the run is torchrun-style");
  requireBelow("RANK", info.rank, "WORLD_SIZE", info.worldSize);
  // torchrun always sets LOCAL_RANK; a hand-written launch of one rank per
  // node may leave it out, which means GPU 0.
  info.localRank = reader.integer("LOCAL_RANK", 0, kMaxRanks).value_or(0);
  info.localWorldSize = reader.integer("LOCAL_WORLD_SIZE", 1, kMaxRanks)
                            .value_or(info.localRank + 1);
  requireBelow("LOCAL_RANK", info.localRank, "LOCAL_WORLD_SIZE",
               info.localWorldSize);
  if (info.localWorldSize > info.worldSize)
    fail("LOCAL_WORLD_SIZE=" + std::to_string(info.localWorldSize) +
         " is larger than WORLD_SIZE=" + std::to_string(info.worldSize));
  readMaster(reader, info, kDefaultMasterPort, info.worldSize > 1,
             "torchrun-style runs of more than one rank meet there");
  return info;
}

LaunchInfo readOpenMpi(const Reader &reader) {
  LaunchInfo info;
  info.source = "OpenMPI";
  info.worldSize = reader.required("OMPI_COMM_WORLD_SIZE", 1, kMaxRanks,
                                   "OMPI_COMM_WORLD_RANK is set");
  info.rank = reader.required("OMPI_COMM_WORLD_RANK", 0, kMaxRanks,
                              "OMPI_COMM_WORLD_SIZE is set");
  requireBelow("OMPI_COMM_WORLD_RANK", info.rank, "OMPI_COMM_WORLD_SIZE",
               info.worldSize);
  info.localRank = reader.required("OMPI_COMM_WORLD_LOCAL_RANK", 0, kMaxRanks,
                                   "mpirun sets it; it picks the GPU");
  info.localWorldSize =
      reader.integer("OMPI_COMM_WORLD_LOCAL_SIZE", 1, kMaxRanks)
          .value_or(info.worldSize);
  requireBelow("OMPI_COMM_WORLD_LOCAL_RANK", info.localRank,
               "OMPI_COMM_WORLD_LOCAL_SIZE", info.localWorldSize);
  // Every rank on this node: rank 0 is local, so the loopback reaches it.
  bool singleNode = info.localWorldSize == info.worldSize;
  readMaster(reader, info, kDefaultMasterPort, !singleNode,
             "the ranks span several nodes; set it to rank 0's host");
  return info;
}

LaunchInfo readSlurm(const Reader &reader) {
  LaunchInfo info;
  info.source = "Slurm";
  info.worldSize =
      reader.required("SLURM_NTASKS", 1, kMaxRanks, "SLURM_PROCID is set");
  info.rank = *reader.integer("SLURM_PROCID", 0, kMaxRanks);
  requireBelow("SLURM_PROCID", info.rank, "SLURM_NTASKS", info.worldSize);
  info.localRank = reader.required("SLURM_LOCALID", 0, kMaxRanks,
                                   "srun sets it; it picks the GPU");
  info.localWorldSize = info.localRank + 1;
  std::optional<std::string> nodes = reader.text("SLURM_JOB_NODELIST");
  if (!nodes)
    nodes = reader.text("SLURM_NODELIST");
  if (!reader.has("MASTER_ADDR") && info.worldSize > 1) {
    if (!nodes || nodes->empty())
      fail("neither MASTER_ADDR nor SLURM_JOB_NODELIST is set (the ranks "
           "need rank 0's host)");
    info.masterAddress = firstSlurmHost(*nodes);
  }
  int32_t port = kDefaultMasterPort;
  if (std::optional<int32_t> job = reader.integer("SLURM_JOB_ID", 0, INT32_MAX))
    port += *job % 1000;
  readMaster(reader, info, port, false, "");
  return info;
}

} // namespace

Environment processEnvironment() {
  return [](const char *name) -> std::optional<std::string> {
    const char *value = std::getenv(name);
    if (!value)
      return std::nullopt;
    return std::string(value);
  };
}

std::string firstSlurmHost(const std::string &hostList) {
  // "a[07-09,12],b" -> the first entry "a[07-09,12]" -> prefix "a" + "07".
  std::string first;
  int depth = 0;
  for (char c : hostList) {
    if (c == ',' && depth == 0)
      break;
    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    first += c;
  }
  size_t open = first.find('[');
  if (open == std::string::npos) {
    if (first.empty())
      fail("SLURM_JOB_NODELIST='" + hostList + "' names no host");
    return first;
  }
  size_t end = first.find_first_of(",-]", open + 1);
  if (first.back() != ']' || end == std::string::npos || end == open + 1)
    fail("SLURM_JOB_NODELIST='" + hostList + "' is not a Slurm host list");
  return first.substr(0, open) + first.substr(open + 1, end - open - 1);
}

LaunchInfo discoverLaunch(const Environment &environment) {
  Reader reader(environment);
  if (reader.has("RANK") || reader.has("WORLD_SIZE"))
    return readTorchrun(reader);
  if (reader.has("OMPI_COMM_WORLD_RANK") || reader.has("OMPI_COMM_WORLD_SIZE"))
    return readOpenMpi(reader);
  if (reader.has("SLURM_PROCID"))
    return readSlurm(reader);
  LaunchInfo single;
  readMaster(reader, single, kDefaultMasterPort, false, "");
  return single;
}

} // namespace tessera::comm
