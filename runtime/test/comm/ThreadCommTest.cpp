//===- ThreadCommTest.cpp - The in-process backend of comm.h --------------===//
//
// Every collective against a plain computation of what it must produce, on
// 1-D and 2x2 meshes; bit-identical results on every rank; and the failure
// paths: mismatched calls reported on every rank, a failing rank, a rank
// that never comes, a rank that finished early. None of them may hang.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/thread_comm.h"

#include "CommTestUtil.h"
#include "DataTypes.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

using namespace tessera::comm;
using tessera::comm::test::view;

namespace {

/// Runs body on every rank; fails the test with the error if any rank fails.
void runAll(ThreadWorld &world,
            const std::function<void(const RankComms &)> &body) {
  runThreadRanks(world, [&](const RankComms &comms) {
    body(comms);
    return 0;
  });
}

#define COMM_OK(call) ASSERT_EQ((call), 0) << tessera_comm_last_error()

/// Rank-dependent values that do not add exactly in f32 in every order.
float valueOf(int32_t rank, int64_t i) {
  return 0.1f * static_cast<float>(rank + 1) + 1e-3f * static_cast<float>(i) +
         (rank % 2 ? 1e6f : 0.0f);
}

} // namespace

// Tests that all_reduce sums in rank order, so that every rank gets the
// same bits as a serial left-to-right sum.
TEST(ThreadCommTest, AllReduceSumIsRankOrderedAndIdentical) {
  ThreadWorld world({4});
  std::vector<std::vector<float>> results(4);
  runAll(world, [&](const RankComms &comms) {
    std::vector<float> data(33);
    for (int64_t i = 0; i < 33; ++i)
      data[static_cast<size_t>(i)] = valueOf(comms.rank, i);
    tessera_tensor x = view(data.data(), TESSERA_F32, {3, 11});
    COMM_OK(
        tessera_comm_all_reduce(comms.world, &x, TESSERA_REDUCE_SUM, nullptr));
    results[static_cast<size_t>(comms.rank)] = data;
  });
  for (int64_t i = 0; i < 33; ++i) {
    float expected = valueOf(0, i);
    for (int32_t r = 1; r < 4; ++r)
      expected += valueOf(r, i);
    for (int32_t r = 0; r < 4; ++r)
      EXPECT_EQ(
          std::memcmp(&results[static_cast<size_t>(r)][static_cast<size_t>(i)],
                      &expected, sizeof(float)),
          0)
          << "rank " << r << " element " << i;
  }
}

// Tests that bf16 sums accumulate in f32 and round once: 256 + 1 + 1 + 1 is
// 259 rounded to bf16, where bf16 accumulation would round every partial
// sum back to 256.
TEST(ThreadCommTest, AllReduceBf16AccumulatesInF32) {
  using namespace tessera::cpu;
  ThreadWorld world({4});
  runAll(world, [&](const RankComms &comms) {
    uint16_t value = floatToBf16(comms.rank == 0 ? 256.0f : 1.0f);
    tessera_tensor x = view(&value, TESSERA_BF16, {1});
    COMM_OK(
        tessera_comm_all_reduce(comms.world, &x, TESSERA_REDUCE_SUM, nullptr));
    EXPECT_EQ(value, floatToBf16(259.0f));
    EXPECT_NE(bf16ToFloat(value), 256.0f);
  });
}

TEST(ThreadCommTest, AllReduceMaxAndIntegers) {
  ThreadWorld world({3});
  runAll(world, [&](const RankComms &comms) {
    float flag = comms.rank == 1 ? 1.0f : 0.0f;
    tessera_tensor x = view(&flag, TESSERA_F32, {});
    COMM_OK(
        tessera_comm_all_reduce(comms.world, &x, TESSERA_REDUCE_MAX, nullptr));
    EXPECT_EQ(flag, 1.0f);
    int64_t count = comms.rank + 10;
    tessera_tensor c = view(&count, TESSERA_I64, {1});
    COMM_OK(
        tessera_comm_all_reduce(comms.world, &c, TESSERA_REDUCE_SUM, nullptr));
    EXPECT_EQ(count, 33);
  });
}

// Tests all_gather along an inner axis: rank r's [2, 2] block lands in
// columns [2r, 2r + 2) of every row.
TEST(ThreadCommTest, AllGatherAlongInnerAxis) {
  ThreadWorld world({3});
  runAll(world, [&](const RankComms &comms) {
    float x[4];
    for (int i = 0; i < 4; ++i)
      x[i] = static_cast<float>(comms.rank * 100 + i);
    float y[12];
    tessera_tensor in = view(x, TESSERA_F32, {2, 2});
    tessera_tensor out = view(y, TESSERA_F32, {2, 6});
    COMM_OK(tessera_comm_all_gather(comms.world, &in, &out, 1, nullptr));
    for (int row = 0; row < 2; ++row)
      for (int column = 0; column < 6; ++column)
        EXPECT_EQ(
            y[row * 6 + column],
            static_cast<float>((column / 2) * 100 + row * 2 + column % 2));
  });
}

// Tests the in-place form the ZeRO all-gather uses: x is this rank's block
// of y itself.
TEST(ThreadCommTest, AllGatherInPlace) {
  ThreadWorld world({4});
  runAll(world, [&](const RankComms &comms) {
    std::vector<float> y(8, -1.0f);
    y[static_cast<size_t>(comms.rank) * 2] = static_cast<float>(comms.rank);
    y[static_cast<size_t>(comms.rank) * 2 + 1] =
        static_cast<float>(comms.rank) + 0.5f;
    tessera_tensor in = view(y.data() + comms.rank * 2, TESSERA_F32, {2});
    tessera_tensor out = view(y.data(), TESSERA_F32, {8});
    COMM_OK(tessera_comm_all_gather(comms.world, &in, &out, 0, nullptr));
    for (int i = 0; i < 8; ++i)
      EXPECT_EQ(y[static_cast<size_t>(i)],
                static_cast<float>(i / 2) + (i % 2) * 0.5f);
  });
}

TEST(ThreadCommTest, ReduceScatterAlongInnerAxis) {
  ThreadWorld world({2});
  runAll(world, [&](const RankComms &comms) {
    // x[i][j] = 10 * rank + 4 * i + j, shape [2, 4]; rank r keeps columns
    // [2r, 2r + 2) of the sum over ranks.
    float x[8], y[4];
    for (int i = 0; i < 8; ++i)
      x[i] = static_cast<float>(10 * comms.rank + i);
    tessera_tensor in = view(x, TESSERA_F32, {2, 4});
    tessera_tensor out = view(y, TESSERA_F32, {2, 2});
    COMM_OK(tessera_comm_reduce_scatter(comms.world, &in, &out, 1, nullptr));
    for (int row = 0; row < 2; ++row)
      for (int column = 0; column < 2; ++column)
        EXPECT_EQ(
            y[row * 2 + column],
            static_cast<float>(10 + 2 * (4 * row + 2 * comms.rank + column)));
  });
}

// Tests all_to_all as Megatron's sequence/head reshuffle uses it: split the
// heads (axis 1), gather the sequence (axis 0).
TEST(ThreadCommTest, AllToAll) {
  ThreadWorld world({2});
  runAll(world, [&](const RankComms &comms) {
    // x: [seq 2, heads 4] on each rank, value = 100 * rank + 10 * s + h.
    float x[8], y[8];
    for (int s = 0; s < 2; ++s)
      for (int h = 0; h < 4; ++h)
        x[s * 4 + h] = static_cast<float>(100 * comms.rank + 10 * s + h);
    tessera_tensor in = view(x, TESSERA_F32, {2, 4});
    tessera_tensor out = view(y, TESSERA_F32, {4, 2});
    COMM_OK(tessera_comm_all_to_all(comms.world, &in, &out, 1, 0, nullptr));
    // y: [seq 4 (rank-major), heads 2 (this rank's)].
    for (int s = 0; s < 4; ++s)
      for (int h = 0; h < 2; ++h)
        EXPECT_EQ(y[s * 2 + h],
                  static_cast<float>(100 * (s / 2) + 10 * (s % 2) +
                                     2 * comms.rank + h));
  });
}

TEST(ThreadCommTest, SendRecvInOrder) {
  ThreadWorld world({3});
  runAll(world, [&](const RankComms &comms) {
    int32_t next = (comms.rank + 1) % 3, previous = (comms.rank + 2) % 3;
    for (int round = 0; round < 3; ++round) {
      double out = comms.rank * 10 + round, in = -1;
      tessera_tensor x = view(&out, TESSERA_F64, {1});
      tessera_tensor y = view(&in, TESSERA_F64, {1});
      COMM_OK(tessera_comm_send(comms.world, &x, next, nullptr));
      COMM_OK(tessera_comm_recv(comms.world, &y, previous, nullptr));
      EXPECT_EQ(in, previous * 10 + round);
    }
  });
}

// Tests that a 2x2 mesh gives each rank the right row and column groups.
TEST(ThreadCommTest, MeshAxisComms) {
  ThreadWorld world({2, 2});
  runAll(world, [&](const RankComms &comms) {
    ASSERT_EQ(comms.axes.size(), 2u);
    for (size_t axis = 0; axis < 2; ++axis) {
      EXPECT_EQ(tessera_comm_size(comms.axes[axis]), 2);
      EXPECT_EQ(tessera_comm_rank(comms.axes[axis]), comms.coordinates[axis]);
      float value = static_cast<float>(comms.rank);
      tessera_tensor x = view(&value, TESSERA_F32, {1});
      COMM_OK(tessera_comm_all_reduce(comms.axes[axis], &x, TESSERA_REDUCE_SUM,
                                      nullptr));
      std::vector<int32_t> group = meshAxisGroup({2, 2}, comms.rank, axis);
      EXPECT_EQ(value, static_cast<float>(group[0] + group[1]));
    }
  });
}

// Tests that a shape mismatch is reported, the same way, on every rank.
TEST(ThreadCommTest, MismatchIsReportedOnEveryRank) {
  ThreadWorld world({2}, 5);
  std::mutex mutex;
  std::vector<std::string> messages(2);
  runAll(world, [&](const RankComms &comms) {
    float data[3] = {1, 2, 3};
    tessera_tensor x = view(data, TESSERA_F32, {comms.rank == 0 ? 2 : 3});
    EXPECT_NE(
        tessera_comm_all_reduce(comms.world, &x, TESSERA_REDUCE_SUM, nullptr),
        0);
    std::lock_guard<std::mutex> guard(mutex);
    messages[static_cast<size_t>(comms.rank)] = tessera_comm_last_error();
  });
  for (const std::string &message : messages)
    EXPECT_NE(message.find("rank 0 calls all_reduce(f32[2], sum); rank 1 calls "
                           "all_reduce(f32[3], sum)"),
              std::string::npos)
        << message;
}

// Tests that a rank that throws ends the others' wait at once with its
// message, and runThreadRanks reports it.
TEST(ThreadCommTest, FailingRankStopsTheOthers) {
  ThreadWorld world({3}, 60);
  auto begin = std::chrono::steady_clock::now();
  std::string peerError;
  try {
    runThreadRanks(world, [&](const RankComms &comms) {
      if (comms.rank == 2)
        throw std::runtime_error("out of data");
      float value = 1;
      tessera_tensor x = view(&value, TESSERA_F32, {1});
      if (tessera_comm_all_reduce(comms.world, &x, TESSERA_REDUCE_SUM,
                                  nullptr) != 0) {
        if (comms.rank == 0)
          peerError = tessera_comm_last_error();
        return 1;
      }
      return 0;
    });
    FAIL() << "runThreadRanks did not report the failure";
  } catch (const CommError &error) {
    EXPECT_STREQ(error.what(), "rank 2 failed: out of data");
  }
  EXPECT_NE(
      peerError.find("all_reduce on world stopped: rank 2 failed: out of data"),
      std::string::npos)
      << peerError;
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(10));
}

namespace {

/// Rank 0 all-reduces while rank 1 runs `elsewhere` instead; returns rank
/// 0's error message (runThreadRanks must report a failure).
std::string allReduceWithoutRankOne(ThreadWorld &world,
                                    const std::function<void()> &elsewhere) {
  std::string message;
  EXPECT_THROW(
      runThreadRanks(world,
                     [&](const RankComms &comms) {
                       if (comms.rank == 1) {
                         elsewhere();
                         return 0;
                       }
                       float value = 1;
                       tessera_tensor x = view(&value, TESSERA_F32, {1});
                       int status = tessera_comm_all_reduce(
                           comms.world, &x, TESSERA_REDUCE_SUM, nullptr);
                       message = tessera_comm_last_error();
                       return status;
                     }),
      CommError);
  return message;
}

} // namespace

// Tests that a rank that never arrives (stuck elsewhere, but alive) times
// the others out with the missing rank named.
TEST(ThreadCommTest, TimeoutNamesTheMissingRank) {
  ThreadWorld world({2}, 0.2);
  std::string message = allReduceWithoutRankOne(world, [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
  });
  EXPECT_NE(message.find("timed out after 0.2 s waiting for rank 1"),
            std::string::npos)
      << message;
}

// Tests that a rank that finished without the collective fails its peers at
// once rather than at the timeout.
TEST(ThreadCommTest, FinishedRankIsNoticed) {
  ThreadWorld world({2}, 60);
  auto begin = std::chrono::steady_clock::now();
  std::string message = allReduceWithoutRankOne(world, [] {});
  EXPECT_NE(message.find("rank 1 finished without joining it"),
            std::string::npos)
      << message;
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(10));
}

// Tests the checks one rank makes alone: a result of the wrong shape, a bad
// peer.
TEST(ThreadCommTest, LocalChecks) {
  ThreadWorld world({2});
  runAll(world, [&](const RankComms &comms) {
    float x[4] = {}, y[4] = {};
    tessera_tensor in = view(x, TESSERA_F32, {4});
    tessera_tensor wrong = view(y, TESSERA_F32, {4});
    EXPECT_NE(tessera_comm_all_gather(comms.world, &in, &wrong, 0, nullptr), 0);
    EXPECT_NE(
        std::string(tessera_comm_last_error())
            .find("the result is f32[4] but f32[4] over 2 ranks gives f32[8]"),
        std::string::npos)
        << tessera_comm_last_error();
    EXPECT_NE(tessera_comm_send(comms.world, &in, comms.rank, nullptr), 0);
    EXPECT_NE(
        std::string(tessera_comm_last_error()).find("is not another rank"),
        std::string::npos);
  });
}
