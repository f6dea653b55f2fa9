//===- RendezvousTest.cpp - Ranks meeting over TCP on localhost -----------===//

#include "tessera/runtime/launch.h"

#include "CommTestUtil.h"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace tessera::comm;
using tessera::comm::test::freePort;

namespace {

LaunchInfo rankInfo(int32_t rank, int32_t size, int32_t port) {
  LaunchInfo info;
  info.rank = rank;
  info.worldSize = size;
  info.localRank = rank;
  info.localWorldSize = size;
  info.masterAddress = "localhost";
  info.masterPort = port;
  info.source = "torchrun";
  return info;
}

} // namespace

// Tests broadcast, all-gather and barrier between 4 thread ranks, with rank
// 0 starting last (the others must retry their connection).
TEST(RendezvousTest, ExchangesBetweenThreads) {
  int32_t port = freePort();
  std::vector<std::vector<std::string>> gathered(4);
  std::vector<std::string> broadcasts(4);
  std::vector<std::thread> threads;
  for (int32_t rank = 3; rank >= 0; --rank) {
    threads.emplace_back([&, rank] {
      if (rank == 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      Rendezvous rendezvous(rankInfo(rank, 4, port), 20);
      broadcasts[static_cast<size_t>(rank)] =
          rendezvous.broadcast(rank == 0 ? std::string("id\0id", 5) : "");
      gathered[static_cast<size_t>(rank)] =
          rendezvous.allGather(std::string(static_cast<size_t>(rank), 'x'));
      rendezvous.barrier();
    });
  }
  for (std::thread &thread : threads)
    thread.join();
  for (int32_t rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(broadcasts[static_cast<size_t>(rank)], std::string("id\0id", 5));
    ASSERT_EQ(gathered[static_cast<size_t>(rank)].size(), 4u);
    for (int32_t r = 0; r < 4; ++r)
      EXPECT_EQ(gathered[static_cast<size_t>(rank)][static_cast<size_t>(r)],
                std::string(static_cast<size_t>(r), 'x'));
  }
}

TEST(RendezvousTest, PortInUseIsNamed) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(
      ::bind(listener, reinterpret_cast<sockaddr *>(&address), sizeof(address)),
      0);
  ::listen(listener, 1);
  socklen_t length = sizeof(address);
  ::getsockname(listener, reinterpret_cast<sockaddr *>(&address), &length);
  int32_t port = ntohs(address.sin_port);
  try {
    Rendezvous rendezvous(rankInfo(0, 2, port), 1);
    FAIL() << "bound a port in use";
  } catch (const CommError &error) {
    EXPECT_NE(std::string(error.what())
                  .find("cannot listen on port " + std::to_string(port) +
                        " (MASTER_PORT): Address already in use"),
              std::string::npos)
        << error.what();
  }
  ::close(listener);
}

TEST(RendezvousTest, TimeoutsNameWhoIsMissing) {
  int32_t port = freePort();
  try {
    Rendezvous rendezvous(rankInfo(0, 3, port), 0.3);
    FAIL() << "no timeout";
  } catch (const CommError &error) {
    EXPECT_NE(
        std::string(error.what()).find("waiting for rank(s) 1, 2 to connect"),
        std::string::npos)
        << error.what();
  }
  try {
    Rendezvous rendezvous(rankInfo(1, 2, port), 0.3);
    FAIL() << "no timeout";
  } catch (const CommError &error) {
    EXPECT_NE(std::string(error.what())
                  .find("could not connect to rank 0 at localhost:" +
                        std::to_string(port) + " (MASTER_ADDR:MASTER_PORT)"),
              std::string::npos)
        << error.what();
  }
  LaunchInfo unknownHost = rankInfo(1, 2, port);
  unknownHost.masterAddress = "no-such-host.invalid";
  EXPECT_THROW(Rendezvous(unknownHost, 0.3), CommError);
}

// Tests that a peer that dies after connecting is reported, not waited for.
TEST(RendezvousTest, PeerThatClosesIsReported) {
  int32_t port = freePort();
  std::thread peer([&] { Rendezvous rendezvous(rankInfo(1, 2, port), 20); });
  Rendezvous rendezvous(rankInfo(0, 2, port), 20);
  peer.join();
  try {
    rendezvous.barrier();
    FAIL() << "no error";
  } catch (const CommError &error) {
    EXPECT_NE(std::string(error.what()).find("rank 1 closed its connection"),
              std::string::npos)
        << error.what();
  }
}
