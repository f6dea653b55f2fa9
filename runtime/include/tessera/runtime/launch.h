//===- launch.h - Finding this rank's place in a multi-process run -*- C++ -*-//
//
// A multi-GPU run is one process per GPU. The processes learn who they are
// from whoever started them:
//
//   torchrun (and --nproc)  RANK, WORLD_SIZE, LOCAL_RANK [, LOCAL_WORLD_SIZE],
//                           MASTER_ADDR, MASTER_PORT
//   mpirun (OpenMPI)        OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
//                           OMPI_COMM_WORLD_LOCAL_RANK, _LOCAL_SIZE;
//                           MASTER_ADDR defaults to 127.0.0.1 when every rank
//                           is on one node (LOCAL_SIZE == SIZE), else it is
//                           required; MASTER_PORT defaults to 29500
//   srun (Slurm)            SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; the
//                           master is MASTER_ADDR or else the first host of
//                           SLURM_JOB_NODELIST (SLURM_NODELIST); MASTER_PORT
//                           defaults to 29500 + SLURM_JOB_ID % 1000, so two
//                           jobs sharing a node do not collide
//
// checked in that order (the first whose rank variable is set wins; none
// means a single process). The ranks then meet on MASTER_ADDR:MASTER_PORT:
// rank 0 listens there, the others connect (with retries, for a rank 0 that
// starts late), and the Rendezvous carries the NCCL unique id and small
// messages (a barrier). No MPI library is involved.
//
// `--nproc N` makes the executable a launcher instead: it starts N copies of
// itself on this node with the torchrun variables set, forwards SIGINT,
// SIGTERM and SIGHUP to them, and when one fails (non-zero exit or a signal)
// stops the others and exits non-zero naming that rank.
//
// Every problem (a malformed or contradicting variable, a port in use, a
// peer that never connects) throws CommError naming the variable, host or
// port.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_LAUNCH_H
#define TESSERA_RUNTIME_LAUNCH_H

#include "tessera/runtime/comm_error.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera::comm {

struct LaunchInfo {
  int32_t rank = 0;
  int32_t worldSize = 1;
  int32_t localRank = 0;
  int32_t localWorldSize = 1;
  std::string masterAddress = "127.0.0.1";
  int32_t masterPort = 29500;
  /// "single", "torchrun", "OpenMPI" or "Slurm": where the values came from.
  std::string source = "single";
};

/// Reads a variable; nullopt when it is not set.
using Environment = std::function<std::optional<std::string>(const char *)>;
/// The process environment (getenv).
Environment processEnvironment();

/// Reads this rank's place from `environment` (see the table above).
LaunchInfo discoverLaunch(const Environment &environment);

/// The first host of a Slurm host list: "gpu[07-09,12],login1" -> "gpu07".
std::string firstSlurmHost(const std::string &hostList);

/// A TCP meeting point of all ranks on masterAddress:masterPort. Rank 0
/// listens and accepts one connection per other rank; every exchange goes
/// through rank 0. Every wait is bounded by the timeout.
class Rendezvous {
public:
  /// Connects the ranks of `info`; returns once all are connected.
  Rendezvous(const LaunchInfo &info, double timeoutSeconds);
  ~Rendezvous();
  Rendezvous(const Rendezvous &) = delete;
  Rendezvous &operator=(const Rendezvous &) = delete;

  /// Rank 0's `bytes` on every rank (the others' argument is ignored).
  std::string broadcast(const std::string &bytes);
  /// Every rank's `bytes`, indexed by rank.
  std::vector<std::string> allGather(const std::string &bytes);
  /// Returns once every rank has called it.
  void barrier();

  int32_t rank() const { return info.rank; }
  int32_t size() const { return info.worldSize; }

private:
  LaunchInfo info;
  double timeoutSeconds;
  int listener = -1;
  /// Rank 0: the socket of rank r at index r (index 0 unused); other ranks:
  /// one socket, to rank 0, at index 0.
  std::vector<int> sockets;

  void acceptRanks();
  void connectToRankZero();
  void closeSockets();
};

/// What the launcher does with its children.
struct SpawnOptions {
  /// The executable to start (default: this one, /proc/self/exe).
  std::string executable;
  /// MASTER_PORT for the children; 0 picks a free port.
  int32_t masterPort = 0;
  /// After a failure, how long the others get after SIGTERM before SIGKILL.
  double terminateGraceSeconds = 10;
  /// Stop the other ranks when one fails (the launcher's job; tests of a
  /// rank's own fault handling turn it off).
  bool stopOthersOnFailure = true;
  /// Extra variables for every child (NAME=value).
  std::vector<std::string> extraEnvironment;
};

/// Starts `nproc` ranks running `arguments` (argv[0] included) and waits for
/// them. Returns 0 when all exit 0; otherwise prints
/// "<launcher>: rank R (pid P) exited with code C|was killed by signal S;
/// stopping the other ranks" to stderr and returns non-zero (the failing
/// rank's code, or 128 + signal).
int spawnLocalRanks(int32_t nproc, const std::vector<std::string> &arguments,
                    const SpawnOptions &options = {});

/// What the driver does first thing: take --nproc N and --comm-timeout S out
/// of argv. With --nproc N (N >= 1) this process is a launcher: it runs N
/// ranks of the same command line (without --nproc) and `launcherExitCode`
/// says how to exit. Otherwise it is a rank, `info` says which.
struct Launch {
  std::optional<int> launcherExitCode;
  LaunchInfo info;
  double commTimeoutSeconds = 300;
  /// argv without the flags above, for the driver's own parser.
  std::vector<std::string> remainingArguments;
};
Launch launchFromCommandLine(int argc, const char *const *argv,
                             const Environment &environment);

} // namespace tessera::comm

#endif // TESSERA_RUNTIME_LAUNCH_H
