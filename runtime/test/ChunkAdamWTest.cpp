//===- ChunkAdamWTest.cpp - The offloaded optimizer's host AdamW ----------===//
//
// tessera_cpu_chunk_adamw over a flat layout as the driver lays it out
// (three parameters at 128-element aligned offsets, one of them two chunks
// long, zero gaps between the slices, weight decay off for one), against
// tessera_cpu_adamw run per parameter: the masters and moments bit for bit,
// the compute copies bit for bit what tessera_cpu_cast makes of the
// updated masters, the gaps untouched. The table cut in two and run from
// two threads gives the same bits (the driver's pool does that).
//
//===----------------------------------------------------------------------===//

#include "DataTypes.h"
#include "FlatChunkLayout.h"

#include "tessera/runtime/cpu_kernels.h"
#include "tessera/runtime/host_optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <vector>

namespace {

constexpr double kLr = 1e-3, kBeta1 = 0.9, kBeta2 = 0.95, kEps = 1e-8,
                 kDecay = 0.1, kGradScale = 0.5;

/// FlatChunkLayout's three parameters; 0 and 2 are read as copies (packed:
/// 0 at 0, 2 at 1024).
struct FlatLayout : tessera::test::FlatChunkLayout {
  FlatLayout() : FlatChunkLayout({0, -1, 1024}) {}
  int64_t copyTotal = 1152;
};

/// Random values in the slices, zeros in the gaps.
std::vector<float> flatValues(const FlatLayout &layout, uint32_t seed,
                              float low, float high) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> draw(low, high);
  std::vector<float> values(static_cast<size_t>(layout.total), 0.0f);
  for (size_t t = 0; t < layout.counts.size(); ++t)
    for (int64_t e = 0; e < layout.counts[t]; ++e)
      values[static_cast<size_t>(layout.offsets[t] + e)] = draw(random);
  return values;
}

/// `values` stored as `dtype` (f32, bf16, f16), rounded as tessera_cpu_cast.
std::vector<unsigned char> stored(const std::vector<float> &values,
                                  int32_t dtype) {
  std::vector<unsigned char> bytes(values.size() *
                                   tessera::cpu::dtypeSize(dtype));
  for (size_t i = 0; i < values.size(); ++i)
    tessera::cpu::storeFloat(bytes.data(), dtype, static_cast<int64_t>(i),
                             values[i]);
  return bytes;
}

tessera_tensor view(void *base, int32_t dtype, int64_t offset, int64_t count) {
  tessera_tensor tensor{};
  tensor.data = static_cast<unsigned char *>(base) +
                offset * static_cast<int64_t>(tessera::cpu::dtypeSize(dtype));
  tensor.dtype = dtype;
  tensor.rank = 1;
  tensor.shape[0] = count;
  return tensor;
}

/// The state of one run: masters, moments, the gradient in its dtype.
struct State {
  std::vector<float> params, m, v;
  std::vector<unsigned char> grad;
  int32_t gradDtype;

  State(const FlatLayout &layout, int32_t gradDtype, uint32_t seed)
      : params(flatValues(layout, seed, -1.0f, 1.0f)),
        m(flatValues(layout, seed + 1, -0.1f, 0.1f)),
        v(flatValues(layout, seed + 2, 0.0f, 0.01f)),
        grad(stored(flatValues(layout, seed + 3, -1.0f, 1.0f), gradDtype)),
        gradDtype(gradDtype) {}
};

/// tessera_cpu_adamw per parameter: the reference.
void referenceStep(const FlatLayout &layout, State &state, int64_t step) {
  for (size_t t = 0; t < layout.counts.size(); ++t) {
    const int64_t at = layout.offsets[t], n = layout.counts[t];
    tessera_tensor p = view(state.params.data(), TESSERA_F32, at, n);
    tessera_tensor g = view(state.grad.data(), state.gradDtype, at, n);
    tessera_tensor m = view(state.m.data(), TESSERA_F32, at, n);
    tessera_tensor v = view(state.v.data(), TESSERA_F32, at, n);
    ASSERT_EQ(tessera_cpu_adamw(&p, &g, &m, &v, step, kLr, kBeta1, kBeta2, kEps,
                                layout.decays[t] ? kDecay : 0.0, kGradScale),
              0)
        << tessera_cpu_last_error();
  }
}

/// The copies tessera_cpu_cast makes of `params`, over a sentinel.
std::vector<unsigned char> castCopies(const FlatLayout &layout,
                                      std::vector<float> &params,
                                      int32_t copyDtype) {
  std::vector<unsigned char> copies =
      stored(std::vector<float>(static_cast<size_t>(layout.copyTotal), 7.0f),
             copyDtype);
  for (size_t t = 0; t < layout.counts.size(); ++t) {
    if (layout.copyOffsets[t] < 0)
      continue;
    tessera_tensor from =
        view(params.data(), TESSERA_F32, layout.offsets[t], layout.counts[t]);
    tessera_tensor to =
        view(copies.data(), copyDtype, layout.copyOffsets[t], layout.counts[t]);
    EXPECT_EQ(tessera_cpu_cast(&from, &to), 0) << tessera_cpu_last_error();
  }
  return copies;
}

void expectBitEqual(const std::vector<float> &actual,
                    const std::vector<float> &expected, const char *what) {
  ASSERT_EQ(actual.size(), expected.size());
  EXPECT_EQ(std::memcmp(actual.data(), expected.data(),
                        actual.size() * sizeof(float)),
            0)
      << what << " differs from tessera_cpu_adamw's";
}

int runChunkAdamW(State &state, std::vector<unsigned char> *copies,
                  int32_t copyDtype, const tessera_tensor_chunk *chunks,
                  int32_t count, int64_t step, int32_t *nonfinite,
                  double lr = kLr) {
  return tessera_cpu_chunk_adamw(
      state.params.data(), state.grad.data(), state.gradDtype, state.m.data(),
      state.v.data(), copies ? copies->data() : nullptr, copyDtype, chunks,
      count, step, lr, kBeta1, kBeta2, kEps, kDecay, kGradScale, nonfinite);
}

TEST(ChunkAdamW, MatchesTheCpuStepPerParameterBitForBit) {
  FlatLayout layout;
  const std::vector<tessera_tensor_chunk> chunks = layout.chunks();
  ASSERT_EQ(chunks.size(), 4u);
  for (int32_t gradDtype : {TESSERA_F32, TESSERA_BF16, TESSERA_F16}) {
    for (int32_t copyDtype : {TESSERA_BF16, TESSERA_F16}) {
      SCOPED_TRACE("grad " + std::string(tessera::cpu::dtypeName(gradDtype)) +
                   ", copies " + tessera::cpu::dtypeName(copyDtype));
      State expected(layout, gradDtype, 11), actual(layout, gradDtype, 11);
      std::vector<unsigned char> copies = castCopies(
          layout, expected.params, copyDtype); // the sentinel and old copies
      for (int64_t step = 1; step <= 3; ++step) {
        referenceStep(layout, expected, step);
        int32_t nonfinite = 5;
        ASSERT_EQ(runChunkAdamW(actual, &copies, copyDtype, chunks.data(),
                                static_cast<int32_t>(chunks.size()), step,
                                &nonfinite),
                  0)
            << tessera_cpu_last_error();
        EXPECT_EQ(nonfinite, -1);
      }
      expectBitEqual(actual.params, expected.params, "the masters");
      expectBitEqual(actual.m, expected.m, "m");
      expectBitEqual(actual.v, expected.v, "v");
      // The gaps stay zero: nothing writes them.
      EXPECT_EQ(actual.params[1000], 0.0f);
      EXPECT_EQ(actual.m[71039], 0.0f);
      EXPECT_EQ(copies, castCopies(layout, expected.params, copyDtype))
          << "the copies are not tessera_cpu_cast of the updated masters";
      std::vector<unsigned char> rounded = stored(
          std::vector<float>(static_cast<size_t>(layout.copyTotal), 7.0f),
          copyDtype);
      ASSERT_EQ(tessera_cpu_round_chunk_copies(
                    actual.params.data(), rounded.data(), copyDtype,
                    chunks.data(), static_cast<int32_t>(chunks.size())),
                0)
          << tessera_cpu_last_error();
      EXPECT_EQ(rounded, copies) << "the masters rounded alone differ";
    }
  }
}

// The driver's pool runs disjoint sub-tables on its threads: the bits do
// not depend on how the table is cut.
TEST(ChunkAdamW, SubTablesOnThreadsGiveTheSameBits) {
  FlatLayout layout;
  const std::vector<tessera_tensor_chunk> chunks = layout.chunks();
  State whole(layout, TESSERA_BF16, 21), split(layout, TESSERA_BF16, 21);
  std::vector<unsigned char> wholeCopies(
      static_cast<size_t>(layout.copyTotal) * 2, 0),
      splitCopies = wholeCopies;
  ASSERT_EQ(runChunkAdamW(whole, &wholeCopies, TESSERA_BF16, chunks.data(), 4,
                          1, nullptr),
            0);
  int statuses[2] = {1, 1};
  std::thread first([&] {
    statuses[0] = runChunkAdamW(split, &splitCopies, TESSERA_BF16,
                                chunks.data(), 2, 1, nullptr);
  });
  std::thread second([&] {
    statuses[1] = runChunkAdamW(split, &splitCopies, TESSERA_BF16,
                                chunks.data() + 2, 2, 1, nullptr);
  });
  first.join();
  second.join();
  EXPECT_EQ(statuses[0], 0);
  EXPECT_EQ(statuses[1], 0);
  expectBitEqual(split.params, whole.params, "the split update's masters");
  expectBitEqual(split.v, whole.v, "the split update's v");
  EXPECT_EQ(splitCopies, wholeCopies);
}

// An update that overflows f32 (lr 3e38) names the first chunk it left
// non-finite; NaN copies stay NaN (quiet), as tessera_cpu_cast keeps them.
TEST(ChunkAdamW, NamesTheFirstNonFiniteChunk) {
  FlatLayout layout;
  const std::vector<tessera_tensor_chunk> chunks = layout.chunks();
  State state(layout, TESSERA_F32, 31);
  int32_t nonfinite = -7;
  ASSERT_EQ(runChunkAdamW(state, nullptr, TESSERA_BF16, chunks.data() + 1, 3, 1,
                          &nonfinite, 3e38),
            0);
  EXPECT_EQ(nonfinite, 0); // the table's first chunk (parameter 1's first)
  std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN(), 1.0f};
  std::vector<unsigned char> copy(4, 0);
  tessera_tensor_chunk one{};
  one.count = 2;
  ASSERT_EQ(tessera_cpu_round_chunk_copies(nan.data(), copy.data(),
                                           TESSERA_BF16, &one, 1),
            0);
  EXPECT_TRUE(std::isnan(tessera::cpu::bf16ToFloat(
      static_cast<uint16_t>(copy[0] | copy[1] << 8))));
}

// Tests that chunks whose state_offset places their masters and moments in
// a compact buffer (a ZeRO-1 rank's shard: here parameter 1's second chunk
// and parameter 2) update them bit for bit as the whole buffers' run does,
// reading the gradient at their offset in the whole flat buffer.
TEST(ChunkAdamW, ReadsACompactShardsStateAtItsStateOffset) {
  FlatLayout layout;
  std::vector<tessera_tensor_chunk> whole = layout.chunks();
  State reference(layout, TESSERA_BF16, 51);
  State shard = reference;
  std::vector<tessera_tensor_chunk> table = {whole[2], whole[3]};
  int64_t next = 0;
  for (tessera_tensor_chunk &chunk : table) {
    chunk.state_offset = next;
    chunk.copy_offset = -1;
    next += (chunk.count + 127) / 128 * 128;
  }
  auto pack = [&](const std::vector<float> &flat) {
    std::vector<float> compact(static_cast<size_t>(next), 0.0f);
    for (const tessera_tensor_chunk &chunk : table)
      std::copy_n(flat.begin() + chunk.offset, chunk.count,
                  compact.begin() + chunk.state_offset);
    return compact;
  };
  shard.params = pack(reference.params);
  shard.m = pack(reference.m);
  shard.v = pack(reference.v);
  for (tessera_tensor_chunk &chunk : whole)
    chunk.copy_offset = -1;
  for (int64_t step = 1; step <= 2; ++step) {
    ASSERT_EQ(runChunkAdamW(reference, nullptr, TESSERA_BF16, whole.data(), 4,
                            step, nullptr),
              0)
        << tessera_cpu_last_error();
    ASSERT_EQ(runChunkAdamW(shard, nullptr, TESSERA_BF16, table.data(), 2,
                            step, nullptr),
              0)
        << tessera_cpu_last_error();
  }
  expectBitEqual(shard.params, pack(reference.params), "a shard's master");
  expectBitEqual(shard.m, pack(reference.m), "a shard's first moment");
  expectBitEqual(shard.v, pack(reference.v), "a shard's second moment");
}

TEST(ChunkAdamW, RejectsBadArguments) {
  FlatLayout layout;
  const std::vector<tessera_tensor_chunk> chunks = layout.chunks();
  State state(layout, TESSERA_F32, 41);
  state.gradDtype = TESSERA_I32;
  EXPECT_NE(
      runChunkAdamW(state, nullptr, TESSERA_BF16, chunks.data(), 4, 1, nullptr),
      0);
  EXPECT_NE(std::string(tessera_cpu_last_error())
                .find("the gradient's dtype must be f32, bf16 or f16"),
            std::string::npos)
      << tessera_cpu_last_error();
  state.gradDtype = TESSERA_F32;
  EXPECT_NE(
      runChunkAdamW(state, nullptr, TESSERA_BF16, chunks.data(), 4, 0, nullptr),
      0);
  std::vector<unsigned char> copies(16);
  EXPECT_NE(
      runChunkAdamW(state, &copies, TESSERA_F32, chunks.data(), 4, 1, nullptr),
      0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("bf16 or f16"),
            std::string::npos);
}

} // namespace
