//===- TestRankMain.cpp - A rank for the launch tests ---------------------===//
//
// Usage: tessera_comm_test_rank SCENARIO [ARGS]
//   ok                 exit 0
//   fail RANK CODE     rank RANK exits with CODE at once, the others sleep
//                      60 s (the launcher must stop them)
//   rendezvous         meet the other ranks (launch.h), all-gather the ranks
//                      and check them; print "rank R of W ok"
//   launch [--nproc N] launchFromCommandLine on the whole command line (the
//                      launcher re-runs "launch" without --nproc), then as
//                      rendezvous
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/launch.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

using namespace tessera::comm;

static int rendezvousScenario(const LaunchInfo &info, double timeout) {
  Rendezvous rendezvous(info, timeout);
  std::vector<std::string> ranks =
      rendezvous.allGather(std::to_string(info.rank));
  for (int32_t r = 0; r < info.worldSize; ++r)
    if (ranks[static_cast<size_t>(r)] != std::to_string(r)) {
      std::fprintf(stderr, "rank %d: got '%s' from rank %d\n", info.rank,
                   ranks[static_cast<size_t>(r)].c_str(), r);
      return 1;
    }
  std::string token = rendezvous.broadcast(info.rank == 0 ? "token" : "");
  rendezvous.barrier();
  if (token != "token")
    return 1;
  std::printf("rank %d of %d ok\n", info.rank, info.worldSize);
  return 0;
}

int main(int argc, char **argv) {
  std::string scenario = argc > 1 ? argv[1] : "";
  try {
    if (scenario == "ok")
      return 0;
    if (scenario == "fail" && argc == 4) {
      LaunchInfo info = discoverLaunch(processEnvironment());
      if (info.rank == std::atoi(argv[2]))
        return std::atoi(argv[3]);
      std::this_thread::sleep_for(std::chrono::seconds(60));
      return 0;
    }
    if (scenario == "rendezvous")
      return rendezvousScenario(discoverLaunch(processEnvironment()), 20);
    if (scenario == "launch") {
      Launch launch = launchFromCommandLine(argc, argv, processEnvironment());
      if (launch.launcherExitCode)
        return *launch.launcherExitCode;
      return rendezvousScenario(launch.info, launch.commTimeoutSeconds);
    }
  } catch (const CommError &error) {
    std::fprintf(stderr, "tessera_comm_test_rank: error: %s\n", error.what());
    return 1;
  }
  std::fprintf(stderr, "tessera_comm_test_rank: unknown scenario '%s'\n",
               scenario.c_str());
  return 2;
}
