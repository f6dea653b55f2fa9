//===- LaunchEnvironmentTest.cpp - torchrun, OpenMPI and Slurm variables --===//

#include "tessera/runtime/launch.h"

#include <gtest/gtest.h>

#include <map>

using namespace tessera::comm;

namespace {

Environment environmentOf(std::map<std::string, std::string> variables) {
  return [variables](const char *name) -> std::optional<std::string> {
    auto found = variables.find(name);
    if (found == variables.end())
      return std::nullopt;
    return found->second;
  };
}

std::string errorOf(std::map<std::string, std::string> variables) {
  try {
    discoverLaunch(environmentOf(std::move(variables)));
  } catch (const CommError &error) {
    return error.what();
  }
  return "no error";
}

} // namespace

TEST(LaunchEnvironmentTest, SingleProcess) {
  LaunchInfo info = discoverLaunch(environmentOf({}));
  EXPECT_EQ(info.source, "single");
  EXPECT_EQ(info.worldSize, 1);
  EXPECT_EQ(info.rank, 0);
}

TEST(LaunchEnvironmentTest, Torchrun) {
  LaunchInfo info = discoverLaunch(environmentOf({{"RANK", "5"},
                                                  {"WORLD_SIZE", "8"},
                                                  {"LOCAL_RANK", "1"},
                                                  {"LOCAL_WORLD_SIZE", "4"},
                                                  {"MASTER_ADDR", "node7"},
                                                  {"MASTER_PORT", "1234"}}));
  EXPECT_EQ(info.source, "torchrun");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.worldSize, 8);
  EXPECT_EQ(info.localRank, 1);
  EXPECT_EQ(info.localWorldSize, 4);
  EXPECT_EQ(info.masterAddress, "node7");
  EXPECT_EQ(info.masterPort, 1234);
}

TEST(LaunchEnvironmentTest, OpenMpiOnOneNodeDefaultsToLoopback) {
  LaunchInfo info =
      discoverLaunch(environmentOf({{"OMPI_COMM_WORLD_RANK", "1"},
                                    {"OMPI_COMM_WORLD_SIZE", "2"},
                                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
  EXPECT_EQ(info.source, "OpenMPI");
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.localRank, 1);
  EXPECT_EQ(info.masterAddress, "127.0.0.1");
  EXPECT_EQ(info.masterPort, 29500);
  EXPECT_NE(errorOf({{"OMPI_COMM_WORLD_RANK", "1"},
                     {"OMPI_COMM_WORLD_SIZE", "4"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}})
                .find("MASTER_ADDR is not set (the ranks span several nodes"),
            std::string::npos);
}

TEST(LaunchEnvironmentTest, SlurmUsesTheFirstNode) {
  LaunchInfo info = discoverLaunch(
      environmentOf({{"SLURM_PROCID", "3"},
                     {"SLURM_NTASKS", "4"},
                     {"SLURM_LOCALID", "1"},
                     {"SLURM_JOB_NODELIST", "gpu[07-08,12],login1"},
                     {"SLURM_JOB_ID", "4242"}}));
  EXPECT_EQ(info.source, "Slurm");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.localRank, 1);
  EXPECT_EQ(info.masterAddress, "gpu07");
  EXPECT_EQ(info.masterPort, 29500 + 242);
  EXPECT_EQ(firstSlurmHost("nodeA"), "nodeA");
  EXPECT_EQ(firstSlurmHost("n[3,5]"), "n3");
  EXPECT_THROW(firstSlurmHost("n[3"), CommError);
}

// Tests that malformed or contradicting variables are errors naming them.
TEST(LaunchEnvironmentTest, Errors) {
  EXPECT_EQ(errorOf({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}),
            "RANK=2 is not below WORLD_SIZE=2");
  EXPECT_EQ(errorOf({{"RANK", "x1"}, {"WORLD_SIZE", "2"}}),
            "RANK='x1' is not an integer");
  EXPECT_EQ(
      errorOf({{"RANK", "0"}}),
      "WORLD_SIZE is not set (RANK is set, so the run is torchrun-style)");
  EXPECT_EQ(errorOf({{"RANK", "0"}, {"WORLD_SIZE", "2"}}),
            "MASTER_ADDR is not set (torchrun-style runs of more than one rank "
            "meet there)");
  EXPECT_EQ(errorOf({{"RANK", "0"},
                     {"WORLD_SIZE", "2"},
                     {"MASTER_ADDR", "h"},
                     {"MASTER_PORT", "70000"}}),
            "MASTER_PORT=70000 is out of range [1, 65535]");
  EXPECT_EQ(errorOf({{"RANK", "0"},
                     {"WORLD_SIZE", "2"},
                     {"MASTER_ADDR", "h"},
                     {"LOCAL_RANK", "2"},
                     {"LOCAL_WORLD_SIZE", "2"}}),
            "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2");
  EXPECT_EQ(errorOf({{"SLURM_PROCID", "0"},
                     {"SLURM_NTASKS", "2"},
                     {"SLURM_LOCALID", "0"}}),
            "neither MASTER_ADDR nor SLURM_JOB_NODELIST is set (the ranks need "
            "rank 0's host)");
}

// Tests that the driver's first call takes its flags out of argv.
TEST(LaunchEnvironmentTest, CommandLineFlags) {
  const char *argv[] = {"train",   "--data", "x.bin",   "--comm-timeout=12",
                        "--nproc", "1",      "--steps", "3"};
  Launch launch = launchFromCommandLine(8, argv, environmentOf({}));
  EXPECT_FALSE(launch.launcherExitCode);
  EXPECT_EQ(launch.commTimeoutSeconds, 12);
  EXPECT_EQ(
      launch.remainingArguments,
      (std::vector<std::string>{"train", "--data", "x.bin", "--steps", "3"}));
  const char *bad[] = {"train", "--nproc", "two"};
  EXPECT_THROW(launchFromCommandLine(3, bad, environmentOf({})), CommError);
  const char *nested[] = {"train", "--nproc", "2"};
  EXPECT_THROW(
      launchFromCommandLine(
          3, nested, environmentOf({{"RANK", "0"}, {"WORLD_SIZE", "2"}})),
      CommError);
}
