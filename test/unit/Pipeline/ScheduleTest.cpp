//===- ScheduleTest.cpp - bubble, in-flight activations, pipelined time ---===//

#include "tessera/Pipeline/Schedule.h"

#include <gtest/gtest.h>

using namespace tessera::pipeline;

namespace {

Schedule interleaved(int64_t chunks) {
  return {ScheduleKind::Interleaved, chunks};
}

// Tests the bubble fractions of Narayanan et al.: (p - 1) / m for 1F1B and
// GPipe, (p - 1) / (v m) interleaved.
TEST(Schedule, BubbleFractions) {
  EXPECT_DOUBLE_EQ(bubbleFraction({ScheduleKind::OneForwardOneBackward, 1}, 8,
                                  32),
                   7.0 / 32);
  EXPECT_DOUBLE_EQ(bubbleFraction({ScheduleKind::GPipe, 1}, 4, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bubbleFraction(interleaved(4), 8, 32), 7.0 / 128);
  EXPECT_DOUBLE_EQ(bubbleFraction({ScheduleKind::OneForwardOneBackward, 1}, 1,
                                  5),
                   0.0);
}

// Tests that with equal stages the pipelined time is the ideal m t plus the
// bubble of the formula, and that the slowest stage paces the steady state.
TEST(Schedule, PipelinedTime) {
  Schedule oneF{ScheduleKind::OneForwardOneBackward, 1};
  std::vector<double> equal(8, 2.0);
  EXPECT_DOUBLE_EQ(pipelinedSeconds(oneF, equal, 32),
                   32 * 2.0 * (1 + bubbleFraction(oneF, 8, 32)));
  EXPECT_DOUBLE_EQ(pipelinedSeconds(interleaved(2), equal, 32),
                   32 * 2.0 * (1 + bubbleFraction(interleaved(2), 8, 32)));
  // Stages 1, 3, 2: fill and drain 6, then 3 per further micro-batch.
  EXPECT_DOUBLE_EQ(pipelinedSeconds(oneF, {1.0, 3.0, 2.0}, 4), 6 + 3 * 3);
  EXPECT_DOUBLE_EQ(pipelinedSeconds({ScheduleKind::GPipe, 1}, {1.0, 3.0, 2.0},
                                    4),
                   6 + 3 * 3);
}

// Tests the activations in flight: GPipe keeps all m; 1F1B stage i of p keeps
// p - i (fewer when m is smaller); interleaved, 1/v of a stage a chunk, the
// driver's stashes: one the device's layer-only chunks share, as deep as
// Megatron's peak of chunk forwards (2 (p - i - 1) + (v - 1) p + 1), and
// the embedding's and the head's chunk each its own.
TEST(Schedule, InFlightMicroBatches) {
  Schedule gpipe{ScheduleKind::GPipe, 1};
  Schedule oneF{ScheduleKind::OneForwardOneBackward, 1};
  EXPECT_DOUBLE_EQ(inFlightMicroBatches(gpipe, 4, 0, 16), 16);
  EXPECT_DOUBLE_EQ(inFlightMicroBatches(gpipe, 4, 3, 16), 16);
  EXPECT_DOUBLE_EQ(inFlightMicroBatches(oneF, 4, 0, 16), 4);
  EXPECT_DOUBLE_EQ(inFlightMicroBatches(oneF, 4, 3, 16), 1);
  EXPECT_DOUBLE_EQ(inFlightMicroBatches(oneF, 4, 0, 2), 2);
  // p = 4, v = 2, first stage: the embedding's chunk 0 alone peaks at 8,
  // its layer chunk 4 at 4 (Megatron's peak together is 11).
  EXPECT_DOUBLE_EQ(inFlightMicroBatches(interleaved(2), 4, 0, 16), 12.0 / 2);
  // An embedding saving only its output saves what chunk 4 does: one
  // stash, Megatron's 11.
  EXPECT_DOUBLE_EQ(inFlightMicroBatches(interleaved(2), 4, 0, 16,
                                        /*embeddingSavesOwn=*/false),
                   11.0 / 2);
  // Middle stages: their two layer chunks share one stash, Megatron's
  // 2 (4 - 1 - 1) + 4 + 1 = 9 and 7 (each chunk's own peaks add to 12 and
  // 10: a chunk fills while the other drains).
  EXPECT_DOUBLE_EQ(inFlightMicroBatches(interleaved(2), 4, 1, 16), 9.0 / 2);
  EXPECT_DOUBLE_EQ(inFlightMicroBatches(interleaved(2), 4, 2, 16), 7.0 / 2);
  std::vector<ScheduledTask> middle = deviceTaskOrder(interleaved(2), 4, 1, 16);
  EXPECT_EQ(stashSlots(middle, {1}) + stashSlots(middle, {5}), 12);
  // Last stage: its layer chunk 3 and the head's chunk 7, 5 and 1.
  EXPECT_DOUBLE_EQ(inFlightMicroBatches(interleaved(2), 4, 3, 16), 6.0 / 2);
}

// The pools priced at what their chunks keep: the last of p = 4 stages,
// v = 2, keeps 10 bytes per micro-batch, 2 of them the head's. Its layer
// chunk 3 keeps 4 in each of 5 slots, the head's chunk 7 4 + 2 in its 1:
// 26 bytes, 2.6 micro-batches of the stage's 10 (the equal-chunk average,
// 3, would say 30).
TEST(Schedule, StashDepthsWeighPoolsByWhatTheyKeep) {
  StashDepths last = stashDepths(interleaved(2), 4, 3, 16);
  EXPECT_EQ(last.chunks, 2);
  EXPECT_EQ(last.layers, 5);
  EXPECT_EQ(last.head, 1);
  EXPECT_EQ(last.embedding, 0);
  EXPECT_DOUBLE_EQ(last.inFlight(10, 0, 2), 26.0 / 10);
  EXPECT_DOUBLE_EQ(last.inFlight(10), 3.0);
  // An embedding that keeps nothing of its own shares the layers' pool:
  // one pool, 11 slots of half the stage each.
  StashDepths first = stashDepths(interleaved(2), 4, 0, 16,
                                  /*embeddingSavesOwn=*/false);
  EXPECT_EQ(first.layers, 11);
  EXPECT_EQ(first.embedding, 0);
  EXPECT_DOUBLE_EQ(first.inFlight(10, 0, 0), 5.5);
  // One chunk a device: one pool, the edge units in it.
  StashDepths oneF =
      stashDepths({ScheduleKind::OneForwardOneBackward, 1}, 4, 3, 16);
  EXPECT_EQ(oneF.layers, 1);
  EXPECT_DOUBLE_EQ(oneF.inFlight(10, 0, 2), 1.0);
}

TEST(Schedule, Parse) {
  auto parsed = parseSchedule("interleaved:4");
  ASSERT_TRUE(static_cast<bool>(parsed));
  EXPECT_EQ(parsed->kind, ScheduleKind::Interleaved);
  EXPECT_EQ(parsed->virtualStages, 4);
  EXPECT_EQ(parsed->name(), "interleaved:4");
  auto plain = parseSchedule("interleaved");
  ASSERT_TRUE(static_cast<bool>(plain));
  EXPECT_EQ(plain->virtualStages, 2);
  for (const char *bad : {"interleaved:1", "interleaved:x", "zb", ""}) {
    auto error = parseSchedule(bad);
    EXPECT_FALSE(static_cast<bool>(error)) << bad;
    llvm::consumeError(error.takeError());
  }
}

} // namespace
