//===- DataLoaderTest.cpp - Token shards and .npy samples -----------------===//

#include "DataLoader.h"
#include "TrainError.h"
#include "TrainTestSupport.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <set>

using namespace tessera::train;
using namespace tessera_train_test;

namespace {

DataLayout causal(int64_t batch, int64_t sequence, int64_t vocabulary) {
  DataLayout layout;
  layout.batch = batch;
  layout.sequence = sequence;
  layout.vocabulary = vocabulary;
  return layout;
}

struct Batch {
  std::vector<int64_t> tokens;
  std::vector<int64_t> targets;
};

Batch next(DataLoader &loader, const DataLayout &layout) {
  Batch batch;
  batch.tokens.resize(static_cast<size_t>(layout.batch * layout.sequence));
  batch.targets.resize(batch.tokens.size());
  loader.nextBatch(batch.tokens.data(), batch.targets.data());
  return batch;
}

std::vector<uint16_t> iota(int count, int modulo = 65536) {
  std::vector<uint16_t> tokens(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i)
    tokens[static_cast<size_t>(i)] = static_cast<uint16_t>(i % modulo);
  return tokens;
}

/// The message of the TrainError thrown by `body`, or "".
template <typename Body> std::string errorOf(Body body) {
  try {
    body();
  } catch (const TrainError &error) {
    return error.what();
  }
  return "";
}

// Tests llm.c's cutting of a shard: chunk c holds tokens [c*B*T, c*B*T + B*T]
// (B*T + 1 of them), inputs are the first B*T and targets the last B*T;
// the tail too short for a chunk is skipped and the next shard follows.
TEST(DataLoader, ShardChunksInOrder) {
  TemporaryDirectory temporary;
  std::string directory = temporary.getPath();
  // 2 x 3 = 6 tokens a chunk: shard 0 (20 tokens) holds (20-1)/6 = 3 chunks,
  // shard 1 (8 tokens) one.
  writeShard(directory + "/train_000.bin", iota(20));
  std::vector<uint16_t> second = iota(8);
  for (uint16_t &token : second)
    token = static_cast<uint16_t>(token + 100);
  writeShard(directory + "/train_001.bin", second);
  DataLayout layout = causal(2, 3, 1000);
  DataLoader loader(directory + "/train_*.bin", layout, 7, false);
  EXPECT_EQ(loader.getSampleCount(), 4);
  EXPECT_EQ(loader.getFiles().size(), 2u);

  Batch first = next(loader, layout);
  EXPECT_EQ(first.tokens, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(first.targets, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(next(loader, layout).tokens,
            (std::vector<int64_t>{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(next(loader, layout).targets,
            (std::vector<int64_t>{13, 14, 15, 16, 17, 18}));
  Batch fourth = next(loader, layout);
  EXPECT_EQ(fourth.tokens,
            (std::vector<int64_t>{100, 101, 102, 103, 104, 105}));
  EXPECT_EQ(fourth.targets.back(), 106);
  // The second epoch starts over.
  EXPECT_EQ(next(loader, layout).tokens, first.tokens);
  EXPECT_EQ(loader.getPosition(), 5);
}

// Tests that the shuffled order is a permutation per epoch, the same for the
// same seed, different for another seed and for another epoch, and that
// seek() reproduces the stream from any position.
TEST(DataLoader, ShuffleIsDeterministic) {
  TemporaryDirectory temporary;
  std::string directory = temporary.getPath();
  writeShard(directory + "/a.bin", iota(20 * 4 + 1));
  DataLayout layout = causal(1, 4, 1000); // 20 chunks
  auto firstTokens = [&](uint64_t seed, int count, int64_t start) {
    DataLoader loader(directory + "/a.bin", layout, seed, true);
    loader.seek(start);
    std::vector<int64_t> firsts;
    for (int i = 0; i < count; ++i)
      firsts.push_back(next(loader, layout).tokens[0]);
    return firsts;
  };
  std::vector<int64_t> run = firstTokens(11, 40, 0);
  EXPECT_EQ(run, firstTokens(11, 40, 0));
  EXPECT_NE(run, firstTokens(12, 40, 0));
  std::vector<int64_t> epoch0(run.begin(), run.begin() + 20);
  std::vector<int64_t> epoch1(run.begin() + 20, run.end());
  EXPECT_NE(epoch0, epoch1);
  std::sort(epoch0.begin(), epoch0.end());
  std::sort(epoch1.begin(), epoch1.end());
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(epoch0[static_cast<size_t>(i)], 4 * i);
    EXPECT_EQ(epoch1[static_cast<size_t>(i)], 4 * i);
  }
  std::vector<int64_t> resumed = firstTokens(11, 23, 17);
  EXPECT_EQ(resumed, std::vector<int64_t>(run.begin() + 17, run.end()));
}

// Tests .npy rows of int32 and int64: inputs row[:T], targets row[1:], B rows
// a batch, batches continuing across the epoch boundary.
TEST(DataLoader, NpyRows) {
  TemporaryDirectory temporary;
  std::string directory = temporary.getPath();
  std::vector<int64_t> values;
  for (int row = 0; row < 3; ++row)
    for (int column = 0; column < 4; ++column)
      values.push_back(10 * row + column);
  for (const char *descr : {"<i4", "<i8"}) {
    std::string path = directory + "/rows" + descr + ".npy";
    writeNpy(path, descr, {3, 4}, values);
    DataLayout layout = causal(2, 3, 100);
    DataLoader loader(path, layout, 0, false);
    EXPECT_EQ(loader.getSampleCount(), 3);
    Batch first = next(loader, layout);
    EXPECT_EQ(first.tokens, (std::vector<int64_t>{0, 1, 2, 10, 11, 12}));
    EXPECT_EQ(first.targets, (std::vector<int64_t>{1, 2, 3, 11, 12, 13}));
    Batch second = next(loader, layout); // row 2, then row 0 of epoch 2
    EXPECT_EQ(second.tokens, (std::vector<int64_t>{20, 21, 22, 0, 1, 2}));
  }
}

// Tests that with .npy data the rows read do not depend on the batch size:
// two micro-batches of B rows equal one of 2B (what makes --grad-accum exact).
TEST(DataLoader, NpyOrderIndependentOfBatch) {
  TemporaryDirectory temporary;
  std::string directory = temporary.getPath();
  std::vector<int64_t> values;
  for (int i = 0; i < 10 * 3; ++i)
    values.push_back(i % 97);
  writeNpy(directory + "/d.npy", "<i8", {10, 3}, values);
  DataLayout big = causal(4, 2, 100), small = causal(2, 2, 100);
  DataLoader one(directory + "/d.npy", big, 5, true);
  DataLoader two(directory + "/d.npy", small, 5, true);
  for (int step = 0; step < 4; ++step) {
    Batch whole = next(one, big);
    Batch a = next(two, small), b = next(two, small);
    a.tokens.insert(a.tokens.end(), b.tokens.begin(), b.tokens.end());
    a.targets.insert(a.targets.end(), b.targets.begin(), b.targets.end());
    EXPECT_EQ(whole.tokens, a.tokens);
    EXPECT_EQ(whole.targets, a.targets);
  }
}

// Tests MLM samples: [N, 2, T] with ids in [n, 0] and labels (or -100) in
// [n, 1].
TEST(DataLoader, MaskedLanguageModelRows) {
  TemporaryDirectory temporary;
  std::string directory = temporary.getPath();
  writeNpy(directory + "/mlm.npy", "<i8", {2, 2, 3},
           {5, 6, 7, -100, 9, -100, /* row 1 */ 1, 2, 3, 4, -100, -100});
  DataLayout layout = causal(2, 3, 10);
  layout.maskedLanguageModel = true;
  DataLoader loader(directory + "/mlm.npy", layout, 0, false);
  Batch batch = next(loader, layout);
  EXPECT_EQ(batch.tokens, (std::vector<int64_t>{5, 6, 7, 1, 2, 3}));
  EXPECT_EQ(batch.targets,
            (std::vector<int64_t>{-100, 9, -100, 4, -100, -100}));
}

// Tests each error with the file, position, id and vocabulary it concerns.
TEST(DataLoader, Errors) {
  TemporaryDirectory temporary;
  std::string d = temporary.getPath();
  DataLayout layout = causal(1, 4, 50);
  auto openError = [&](const std::string &pattern, DataLayout which) {
    return errorOf([&] { DataLoader loader(pattern, which, 0, false); });
  };
  auto expectError = [](const std::string &message, const std::string &part) {
    EXPECT_NE(message.find(part), std::string::npos)
        << "got '" << message << "', expected '" << part << "'";
  };

  expectError(openError(d + "/missing.bin", layout),
              "--data: " + d + "/missing.bin: no such file");
  expectError(openError(d + "/none_*.bin", layout), "no file matches");
  // A FIFO is refused at once (a plain open would wait for a writer).
  ASSERT_EQ(::mkfifo((d + "/pipe.bin").c_str(), 0600), 0);
  expectError(openError(d + "/pipe.bin", layout),
              "pipe.bin: a FIFO (named pipe), not a regular file");
  expectError(openError("/dev/zero", layout),
              "/dev/zero: a character device, not a regular file");

  writeShard(d + "/magic.bin", iota(10), 12345);
  expectError(openError(d + "/magic.bin", layout),
              "magic.bin: bad magic 12345 (an llm.c token shard starts with "
              "20240520)");
  writeShard(d + "/version.bin", iota(10), 20240520, 2);
  expectError(openError(d + "/version.bin", layout),
              "unsupported token shard version 2");
  writeShard(d + "/short.bin", iota(10), 20240520, 1, 50);
  expectError(openError(d + "/short.bin", layout),
              "short.bin: truncated token shard: the header announces 50 "
              "tokens (1124 bytes) but the file has 1044 bytes");
  writeBytes(d + "/tiny.bin", "abc");
  expectError(openError(d + "/tiny.bin", layout),
              "tiny.bin: truncated token shard: 3 bytes");
  writeShard(d + "/few.bin", iota(4));
  expectError(openError(d + "/few.bin", layout),
              "holds a micro-batch of 5 tokens");

  writeShard(d + "/vocab.bin", iota(13)); // 3 chunks; the last reaches 10
  expectError(errorOf([&] {
                DataLoader loader(d + "/vocab.bin", causal(1, 4, 10), 0, false);
                for (int i = 0; i < 3; ++i)
                  next(loader, causal(1, 4, 10));
              }),
              "vocab.bin: token id 10 at token position 10 is outside the "
              "vocabulary of 10 ids");

  writeNpy(d + "/row.npy", "<i4", {2, 4}, std::vector<int64_t>(8, 1));
  expectError(openError(d + "/row.npy", layout),
              "row.npy: array of shape [2, 4] has the wrong row length: this "
              "program reads [N, 5]");
  writeNpy(d + "/float.npy", "<f4", {2, 5}, std::vector<int64_t>(10, 1));
  expectError(openError(d + "/float.npy", layout),
              "float.npy: .npy dtype '<f4' is not little-endian int32 or "
              "int64");
  writeNpy(d + "/cut.npy", "<i8", {3, 5}, std::vector<int64_t>(10, 1));
  expectError(openError(d + "/cut.npy", layout), "cut.npy: truncated .npy");
  writeBytes(d + "/bad.npy", "NUMPY....");
  expectError(openError(d + "/bad.npy", layout), "bad.npy: not a .npy file");
  writeNpy(d + "/one.npy", "<i8", {1, 5}, std::vector<int64_t>(5, 1));
  expectError(openError(d + "/one.npy", causal(2, 4, 50)),
              "holds 1 rows, fewer than one micro-batch of 2");

  writeNpy(d + "/ids.npy", "<i8", {2, 5}, {1, 2, 3, 4, 5, 6, 7, -8, 9, 10});
  expectError(errorOf([&] {
                DataLoader loader(d + "/ids.npy", layout, 0, false);
                next(loader, layout);
                next(loader, layout);
              }),
              "ids.npy: token id -8 at row 1, column 2 is outside the "
              "vocabulary of 50 ids");

  DataLayout mlm = causal(1, 2, 50);
  mlm.maskedLanguageModel = true;
  writeNpy(d + "/labels.npy", "<i8", {1, 2, 2}, {1, 2, -100, 77});
  expectError(errorOf([&] {
                DataLoader loader(d + "/labels.npy", mlm, 0, false);
                next(loader, mlm);
              }),
              "labels.npy: label 77 at row 0, column 1 is outside the "
              "vocabulary of 50 ids (and is not the ignore index -100)");
  expectError(openError(d + "/vocab.bin", mlm),
              "MLM programs read .npy files of shape [N, 2, 2]");
  expectError(openError(d + "/ids.npy", mlm),
              "[N, 2, 2] (input ids and labels");

  writeShard(d + "/mixed_a.bin", iota(10));
  writeNpy(d + "/mixed_b.npy", "<i8", {1, 5}, std::vector<int64_t>(5, 1));
  expectError(openError(d + "/mixed_*", layout),
              "mixes .npy files and token shards");
}

} // namespace
