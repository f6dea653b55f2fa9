//===- OptimizerOffloadTest.cpp - --offload optimizer's plan, CPU side ----===//
//
// Which runs may offload (each refusal names the flag and says why), how
// the chunk table is cut into the ranges the transfers pipeline over, where
// the mirrored masters go, the bytes printed at start, and the host thread
// pool the host AdamW runs on. The transfers and the run itself are GPU
// tests (runtime/test/cuda/OffloadedOptimizerCudaTest.cpp,
// scripts/gpu-offload-check.sh).
//
//===----------------------------------------------------------------------===//

#include "OptimizerOffload.h"
#include "HostThreadPool.h"
#include "OffloadTestLayout.h"
#include "TrainError.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

using namespace tessera::train;

namespace {

std::string refusal(const tessera_program &program, const TrainOptions &options,
                    int64_t ranks) {
  try {
    requireOffloadSupported(program, options, ranks);
  } catch (const TrainError &error) {
    EXPECT_EQ(error.getExitCode(), kUsageExitCode);
    return error.what();
  }
  return "";
}

TEST(OptimizerOffload, RefusesWhatItCannotOffloadNamingTheFlag) {
  TrainOptions options;
  tessera_program program = offload_test::program();
  EXPECT_EQ(refusal(program, options, 4), ""); // not asked for
  options.offloadOptimizer = true;
  EXPECT_EQ(refusal(program, options, 1), "");

  tessera_program host = program;
  host.device = TESSERA_DEVICE_HOST;
  EXPECT_NE(refusal(host, options, 1)
                .find("--offload optimizer: this is a host (CPU) program"),
            std::string::npos);
  EXPECT_NE(refusal(program, options, 2)
                .find("--offload optimizer: 2 data-parallel ranks (launched, "
                      "or --thread-ranks)"),
            std::string::npos);
  tessera_pipeline pipeline{};
  tessera_program pipelined = program;
  pipelined.pipeline = &pipeline;
  EXPECT_NE(refusal(pipelined, options, 1)
                .find("--offload optimizer: this program is pipelined"),
            std::string::npos);
  tessera_program mesh = program;
  mesh.mesh_axis_count = 1;
  EXPECT_NE(refusal(mesh, options, 1)
                .find("--offload optimizer: this program is partitioned"),
            std::string::npos);
  options.zeroStage = 1;
  EXPECT_NE(
      refusal(program, options, 1).find("--offload optimizer: --zero 1 shards"),
      std::string::npos);
}

TEST(OptimizerOffload, RangesCoverEveryChunkOnceWithTheirTransfers) {
  tessera_program program = offload_test::program();
  ParameterLayout layout(program);
  const std::vector<tessera_tensor_chunk> chunks =
      offload_test::placedChunks(layout);
  ASSERT_EQ(chunks.size(), 6u); // 2 + 1 + 3
  // Ranges of at most 100000 elements: [wte 0, wte 1], [h.0.w, h.1.w 0],
  // [h.1.w 1, h.1.w 2].
  OffloadPlan plan = planOffload(layout, chunks, 100000);
  EXPECT_EQ(plan.mirrorOffsets, (std::vector<int64_t>{0, -1, -1}));
  EXPECT_EQ(plan.mirrorElements, 100096); // 100000 aligned to 128
  ASSERT_EQ(plan.ranges.size(), 3u);
  const OffloadRange &first = plan.ranges[0];
  EXPECT_EQ(first.firstChunk, 0);
  EXPECT_EQ(first.endChunk, 2);
  EXPECT_EQ(first.gradients.hostOffset, 0);
  EXPECT_EQ(first.gradients.count, 100000);
  EXPECT_EQ(first.copies.count, 0);
  // wte's two chunks are one copy into the mirror.
  ASSERT_EQ(first.mirrors.size(), 1u);
  EXPECT_EQ(first.mirrors[0].hostOffset, 0);
  EXPECT_EQ(first.mirrors[0].deviceOffset, 0);
  EXPECT_EQ(first.mirrors[0].count, 100000);
  const OffloadRange &second = plan.ranges[1];
  EXPECT_EQ(second.firstChunk, 2);
  EXPECT_EQ(second.endChunk, 4);
  EXPECT_EQ(second.gradients.hostOffset, layout.offset(1));
  EXPECT_EQ(second.gradients.count,
            layout.offset(2) + 65536 - layout.offset(1));
  EXPECT_TRUE(second.mirrors.empty());
  EXPECT_EQ(second.copies.hostOffset, 0);
  EXPECT_EQ(second.copies.count, 384 + 65536);
  const OffloadRange &third = plan.ranges[2];
  EXPECT_EQ(third.endChunk, 6);
  EXPECT_EQ(third.copies.hostOffset, 384 + 65536);
  EXPECT_EQ(third.copies.count, 140000 - 65536);
  EXPECT_EQ(third.gradients.hostOffset + third.gradients.count,
            layout.offset(2) + 140000);

  // A range takes whole chunks, at least one, however small it is asked.
  EXPECT_EQ(planOffload(layout, chunks, 1).ranges.size(), 6u);
  EXPECT_EQ(planOffload(layout, chunks, int64_t(1) << 30).ranges.size(), 1u);
}

TEST(OptimizerOffload, FootprintSaysWhatLivesWhere) {
  tessera_program program = offload_test::program();
  ParameterLayout layout(program);
  const int64_t f32 = layout.totalBytes(TESSERA_F32);
  // The ranges of the test above: the largest gradient span is the first
  // range's (wte), the largest copy span the third's (h.1.w's last two
  // chunks).
  const OffloadPlan plan =
      planOffload(layout, offload_test::placedChunks(layout), 100000);
  EXPECT_EQ(plan.largestGradientSpan, 100000);
  EXPECT_EQ(plan.largestCopySpan, 140000 - 65536);
  OffloadFootprint resident = offloadFootprint(
      layout, TESSERA_BF16, offload_test::kCopyElements, plan, false);
  EXPECT_EQ(resident.hostMasters, f32);
  EXPECT_EQ(resident.hostMoments, 2 * f32);
  // A few slots of staging, not a whole gradient and a whole set of copies.
  EXPECT_EQ(resident.hostStaging,
            kOffloadStagingSlots *
                (plan.largestGradientSpan * 2 + plan.largestCopySpan * 2));
  EXPECT_EQ(resident.deviceCopies, offload_test::kCopyElements * 2);
  EXPECT_EQ(resident.deviceMirror, 100096 * 4);
  EXPECT_EQ(resident.deviceGradients, layout.totalBytes(TESSERA_BF16));
  EXPECT_EQ(resident.deviceAccumulators, 0);
  // Accumulating: f32 sums on the GPU, and f32 gradients staged.
  OffloadFootprint accumulating = offloadFootprint(
      layout, TESSERA_BF16, offload_test::kCopyElements, plan, true);
  EXPECT_EQ(accumulating.deviceAccumulators, f32);
  EXPECT_EQ(accumulating.hostStaging,
            kOffloadStagingSlots *
                (plan.largestGradientSpan * 4 + plan.largestCopySpan * 2));
  const std::string line = describeOffload(resident);
  EXPECT_EQ(line.rfind("offload optimizer: host ", 0), 0u) << line;
  EXPECT_NE(line.find("(pinned: fp32 master weights"), std::string::npos);
  EXPECT_NE(line.find(", AdamW moments "), std::string::npos);
  EXPECT_NE(line.find("; GPU state "), std::string::npos);
}

TEST(HostThreadPool, RunsEveryItemOnceLoopAfterLoop) {
  HostThreadPool pool(4);
  EXPECT_EQ(pool.size(), 4);
  for (int64_t items : {0, 1, 7, 1000}) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(items));
    pool.run(items, [&](int64_t i) { ++seen[static_cast<size_t>(i)]; });
    for (int64_t i = 0; i < items; ++i)
      EXPECT_EQ(seen[static_cast<size_t>(i)].load(), 1) << i;
  }
  HostThreadPool alone(1);
  int64_t sum = 0;
  alone.run(10, [&](int64_t i) { sum += i; });
  EXPECT_EQ(sum, 45);
}

} // namespace
