//===- FuzzDataBatches.cpp - The data loader run the way a step runs it ---===//
//
// See readDataBatches in FuzzTarget.h. Shared by the .npy and token-shard
// targets, which differ only in the file's extension (the loader picks the
// format by it) and in the layouts they try.
//
//===----------------------------------------------------------------------===//

#include "FuzzTarget.h"

#include "DataLoader.h"
#include "TrainError.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace tessera::fuzz {
namespace {

void checkIds(const std::vector<int64_t> &ids, const train::DataLayout &layout,
              bool labels) {
  for (int64_t id : ids) {
    if (labels && layout.maskedLanguageModel && id == layout.ignoreIndex)
      continue;
    if (id < 0 || id >= layout.vocabulary) {
      std::fprintf(stderr,
                   "the data loader returned %s %lld, outside the vocabulary "
                   "of %lld\n",
                   labels ? "target" : "token id", static_cast<long long>(id),
                   static_cast<long long>(layout.vocabulary));
      std::abort();
    }
  }
}

} // namespace

bool readDataBatches(const std::string &path, const train::DataLayout &layout) {
  try {
    train::DataLoader loader(path, layout, /*seed=*/1234, /*shuffle=*/true);
    auto count = static_cast<size_t>(layout.batch * layout.sequence);
    std::vector<int64_t> tokens(count), targets(count);
    // Enough batches to pass the end of a small file's first epoch.
    for (int step = 0; step < 3; ++step) {
      loader.nextBatch(tokens.data(), targets.data());
      checkIds(tokens, layout, false);
      checkIds(targets, layout, true);
    }
    loader.nextBatch(tokens.data(), targets.data(), /*rank=*/1, /*ranks=*/2);
    checkIds(tokens, layout, false);
    checkIds(targets, layout, true);
    return true;
  } catch (const train::TrainError &) {
    return false;
  }
}

} // namespace tessera::fuzz
