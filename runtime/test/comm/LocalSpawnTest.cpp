//===- LocalSpawnTest.cpp - --nproc: spawning and supervising ranks -------===//

#include "tessera/runtime/launch.h"

#include "CommTestUtil.h"

#include <gtest/gtest.h>

#include <chrono>

using namespace tessera::comm;
using tessera::comm::test::captureStderr;

namespace {

const std::string kRank = TESSERA_COMM_TEST_RANK;

} // namespace

TEST(LocalSpawnTest, AllRanksSucceed) {
  SpawnOptions options;
  options.executable = kRank;
  EXPECT_EQ(spawnLocalRanks(3, {kRank, "ok"}, options), 0);
}

// Tests that ranks meet through the variables the launcher sets.
TEST(LocalSpawnTest, RanksMeetThroughTheRendezvous) {
  SpawnOptions options;
  options.executable = kRank;
  EXPECT_EQ(spawnLocalRanks(3, {kRank, "rendezvous"}, options), 0);
}

// Tests that a failing rank is named and the others, which would sleep for
// a minute, are stopped at once.
TEST(LocalSpawnTest, FailingRankStopsTheOthers) {
  SpawnOptions options;
  options.executable = kRank;
  auto begin = std::chrono::steady_clock::now();
  int code = 0;
  std::string log = captureStderr([&] {
    code = spawnLocalRanks(3, {kRank, "fail", "1", "7"}, options);
  });
  EXPECT_EQ(code, 7);
  EXPECT_NE(log.find("rank 1 (pid "), std::string::npos) << log;
  EXPECT_NE(log.find(") exited with code 7; stopping the other ranks"),
            std::string::npos)
      << log;
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(20));
}

TEST(LocalSpawnTest, MissingExecutable) {
  SpawnOptions options;
  options.executable = "/nonexistent/tessera";
  int code = 0;
  std::string log = captureStderr([&] {
    code = spawnLocalRanks(2, {"train", "ok"}, options);
  });
  EXPECT_EQ(code, 127);
  EXPECT_NE(log.find("cannot run /nonexistent/tessera as rank"),
            std::string::npos)
      << log;
}

// Tests --nproc end to end: the executable launches itself twice without
// --nproc, and the two ranks meet.
TEST(LocalSpawnTest, NprocFlag) {
  std::string command = kRank + " launch --nproc 2 --comm-timeout 20";
  EXPECT_EQ(std::system(command.c_str()), 0);
}
