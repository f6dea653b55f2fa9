//===- DataLoader.h - Training batches from token files ---------*- C++ -*-===//
//
// Reads llm.c token shards (.bin) or .npy sample arrays and hands out
// micro-batches in a deterministic, seeded order; see DataLoader.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_DATALOADER_H
#define TESSERA_RUNTIME_TRAIN_DATALOADER_H

#include "RegularFile.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera::train {

/// What the compiled program expects of a micro-batch.
struct DataLayout {
  int64_t batch = 1;
  int64_t sequence = 1;
  int64_t vocabulary = 1;
  /// MLM programs read (ids, labels) pairs; causal LMs shift the tokens.
  bool maskedLanguageModel = false;
  /// MLM labels equal to this are skipped by the loss (and not range-checked).
  int64_t ignoreIndex = -100;
};

class DataLoader {
public:
  /// Opens every file matching `pattern` and validates its header. Throws
  /// TrainError naming the file on a missing file, bad magic or version, a
  /// truncated file, a wrong row length or unsupported dtype, or data too
  /// small for one micro-batch.
  DataLoader(const std::string &pattern, const DataLayout &layout,
             uint64_t seed, bool shuffle);
  ~DataLoader();
  DataLoader(const DataLoader &) = delete;
  DataLoader &operator=(const DataLoader &) = delete;

  /// Fills tokens and targets ([batch, sequence] each, row-major) with the
  /// next micro-batch. Throws TrainError naming the file, the position and
  /// the id when a token is outside the vocabulary.
  ///
  /// Data parallelism: with `ranks` R > 1 the next GLOBAL micro-batch is R
  /// micro-batches in a row (R x batch rows), this call fills rank `rank`'s
  /// (the rank-th of them) and the position moves past all R, so every rank
  /// stays at the same (global) position. Rank r's micro-batch k of a step
  /// is therefore the (k * R + r)-th micro-batch of that step in a 1-rank
  /// run with R times the micro-batches (--grad-accum R K).
  void nextBatch(int64_t *tokens, int64_t *targets, int32_t rank = 0,
                 int32_t ranks = 1);

  /// Samples consumed so far by all ranks together (a checkpoint stores it;
  /// seek restores it).
  int64_t getPosition() const { return position; }
  void seek(int64_t newPosition) { position = newPosition; }

  /// Samples in one pass over the data; a sample is one micro-batch chunk of
  /// a token shard or one row of a .npy file.
  int64_t getSampleCount() const { return sampleCount; }
  const std::vector<std::string> &getFiles() const { return paths; }

private:
  struct DataFile;

  DataLayout layout;
  uint64_t seed;
  bool shuffle;
  std::vector<std::string> paths;
  std::vector<DataFile> files;
  int64_t sampleCount = 0;
  int64_t samplesPerBatch = 1;
  int64_t position = 0;

  // The order of the current epoch, computed when an epoch starts.
  int64_t orderEpoch = -1;
  std::vector<int64_t> order;

  // The file read last, kept open because consecutive samples often share it.
  int openFileIndex = -1;
  std::optional<RegularFile> openFile;

  int64_t sampleAt(int64_t globalPosition);
  void readSample(int64_t sample, int64_t *tokens, int64_t *targets);
  void readBytes(size_t fileIndex, int64_t offset, void *buffer, int64_t size);
};

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_DATALOADER_H
