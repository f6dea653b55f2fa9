//===- ParameterLayoutTest.cpp - Flat buffers and their chunks ------------===//

#include "ParameterLayout.h"

#include <gtest/gtest.h>

using namespace tessera::train;

namespace {

const tessera_tensor_info kParameters[] = {
    {"a", TESSERA_F32, 2, {3, 5}},      // 15 elements
    {"b", TESSERA_F32, 1, {128}},       // exactly one alignment unit
    {"c", TESSERA_F32, 2, {300, 500}},  // 150000: three chunks of 2^16
    {"d", TESSERA_F32, 0, {0}},         // a scalar
};

tessera_program programOf(int32_t count) {
  tessera_program program{};
  program.parameter_count = count;
  program.parameters = kParameters;
  return program;
}

TEST(ParameterLayout, SlicesAreAlignedAndInParameterOrder) {
  ParameterLayout layout(programOf(4));
  ASSERT_EQ(layout.size(), 4);
  EXPECT_EQ(layout.offset(0), 0);
  EXPECT_EQ(layout.count(0), 15);
  EXPECT_EQ(layout.offset(1), 128);
  EXPECT_EQ(layout.offset(2), 256);
  EXPECT_EQ(layout.count(2), 150000);
  EXPECT_EQ(layout.offset(3), 256 + 150016);
  EXPECT_EQ(layout.count(3), 1);
  EXPECT_EQ(layout.totalElements(), 256 + 150016 + 128);
  for (int32_t i = 0; i < layout.size(); ++i) {
    // 256-byte aligned in every dtype the driver stores.
    EXPECT_EQ(layout.offset(i) * 2 % 256, 0);
    EXPECT_EQ(layout.offset(i) * 4 % 256, 0);
    if (i + 1 < layout.size()) {
      EXPECT_LE(layout.offset(i) + layout.count(i), layout.offset(i + 1));
    }
  }
  EXPECT_EQ(layout.totalBytes(TESSERA_F32), layout.totalElements() * 4);
  EXPECT_EQ(layout.totalBytes(TESSERA_BF16), layout.totalElements() * 2);
}

TEST(ParameterLayout, ChunksCoverEverySliceOnceWithItsDecayFlag) {
  ParameterLayout layout(programOf(4));
  std::vector<tessera_tensor_chunk> chunks =
      layout.chunks({true, false, true, false});
  ASSERT_EQ(chunks.size(), 6u); // 1 + 1 + 3 + 1
  int64_t covered[4] = {0, 0, 0, 0};
  for (size_t c = 0; c < chunks.size(); ++c) {
    const tessera_tensor_chunk &chunk = chunks[c];
    ASSERT_GE(chunk.tensor, 0);
    ASSERT_LT(chunk.tensor, 4);
    EXPECT_LE(chunk.count, ParameterLayout::kChunkElements);
    EXPECT_GT(chunk.count, 0);
    EXPECT_EQ(chunk.offset, layout.offset(chunk.tensor) + covered[chunk.tensor])
        << "chunk " << c;
    covered[chunk.tensor] += chunk.count;
    EXPECT_EQ(chunk.weight_decay, chunk.tensor % 2 == 0 ? 1 : 0);
    if (c > 0) {
      EXPECT_GE(chunk.tensor, chunks[c - 1].tensor);
    }
  }
  for (int32_t i = 0; i < 4; ++i)
    EXPECT_EQ(covered[i], layout.count(i));
  EXPECT_EQ(chunks[2].count, 65536);
  EXPECT_EQ(chunks[4].count, 150000 - 2 * 65536);
}

// Tests that a ZeRO-1 shard packs its pieces' state one after another, each
// at a multiple of the slice alignment, that the chunks cut from the shard
// carry those places as state_offset (and a whole layout's chunks their own
// offset), and that withoutShard gives the whole state back.
TEST(ParameterLayout, AShardPacksItsPiecesState) {
  ParameterLayout layout(programOf(4));
  for (const tessera_tensor_chunk &chunk : layout.chunks({true, true, true, true}))
    EXPECT_EQ(chunk.state_offset, chunk.offset);
  ParameterLayout sharded = layout;
  const std::vector<ParameterLayout::Span> spans = {
      {0, layout.offset(2)}, {layout.offset(2), layout.totalElements() -
                                                    layout.offset(2)}};
  sharded.holdShard({{0, layout.offset(0) + 5, 10, -1},
                     {2, layout.offset(2) + 100, 70000, -1},
                     {3, layout.offset(3), 1, -1}},
                    spans);
  ASSERT_TRUE(sharded.sharded());
  ASSERT_EQ(sharded.shard().size(), 3u);
  EXPECT_EQ(sharded.shard()[0].stateOffset, 0);
  EXPECT_EQ(sharded.shard()[1].stateOffset, 128);
  EXPECT_EQ(sharded.shard()[2].stateOffset, 128 + 70016);
  EXPECT_EQ(sharded.stateElements(), 128 + 70016 + 128);
  // The other kinds keep the whole placement.
  EXPECT_EQ(sharded.totalElements(), layout.totalElements());
  std::vector<tessera_tensor_chunk> chunks = ParameterLayout::chunksOf(
      sharded.shard(), {true, true, true, true});
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[1].offset, layout.offset(2) + 100);
  EXPECT_EQ(chunks[1].state_offset, 128);
  EXPECT_EQ(chunks[2].offset, layout.offset(2) + 100 + 65536);
  EXPECT_EQ(chunks[2].state_offset, 128 + 65536);
  EXPECT_EQ(chunks[3].state_offset, 128 + 70016);
  ParameterLayout whole = sharded.withoutShard();
  EXPECT_FALSE(whole.sharded());
  EXPECT_EQ(whole.stateElements(), layout.totalElements());
  EXPECT_THROW(sharded.holdShard({{1, layout.offset(1) + 100, 29, -1}}, spans),
               std::exception);
}

// Tests the spans a shard is gathered by: spanOf names the span holding a
// parameter's slice (-1 for one in none), and holdShard refuses spans out
// of order or past the buffers, and a piece in no span unless every rank
// holds it whole.
TEST(ParameterLayout, AShardsPiecesLieInItsGatheredSpans) {
  ParameterLayout layout(programOf(4));
  ParameterLayout sharded = layout;
  const int64_t second = layout.offset(1);
  sharded.holdShard({{0, 0, 10, -1},
                     {1, second, layout.count(1), -1, /*replicated=*/true}},
                    {{0, second}, {layout.offset(2), layout.totalElements() -
                                                        layout.offset(2)}});
  EXPECT_EQ(sharded.spanOf(0), 0);
  EXPECT_EQ(sharded.spanOf(1), -1);
  EXPECT_EQ(sharded.spanOf(2), 1);
  EXPECT_EQ(sharded.spanOf(3), 1);
  EXPECT_EQ(sharded.gatheredSpans().size(), 2u);
  EXPECT_TRUE(sharded.withoutShard().gatheredSpans().empty());
  ParameterLayout other = layout;
  EXPECT_THROW(other.holdShard({{1, second, 5, -1}}, {{0, second}}),
               std::exception);
  EXPECT_THROW(other.holdShard({}, {{second, 1}, {0, 1}}), std::exception);
  EXPECT_THROW(other.holdShard({}, {{0, layout.totalElements() + 1}}),
               std::exception);
}

TEST(ParameterLayout, NoParametersIsAnEmptyLayout) {
  ParameterLayout layout(programOf(0));
  EXPECT_EQ(layout.size(), 0);
  EXPECT_EQ(layout.totalElements(), 0);
  EXPECT_TRUE(layout.chunks({}).empty());
}

} // namespace
