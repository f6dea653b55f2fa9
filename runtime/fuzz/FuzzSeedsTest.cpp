//===- FuzzSeedsTest.cpp - The fuzz targets over their seeds and finds ----===//
//
// Runs each reader's fuzz target, in the ordinary build and without
// libFuzzer, over the files under TESSERA_FUZZ_DIR:
// - seeds/<target>/: valid files, each of which must be accepted (a seed the
//   reader refuses after a format change would quietly start every fuzzing
//   run from a rejected input; regenerate them with make-seeds.py);
// - regressions/<target>/: inputs that once crashed or broke a promise of a
//   reader (named after the bug), which must now only be accepted or refused.
// A crash, an abort from the target's checks or an exception other than
// TrainError fails the test, naming the file.
//
//===----------------------------------------------------------------------===//

#include "FuzzTarget.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <vector>

namespace {

using Reader = bool (*)(const uint8_t *, size_t);

/// The regular files in `directory`, sorted; none when it does not exist.
std::vector<std::string> listFiles(const std::string &directory) {
  std::vector<std::string> paths;
  DIR *listing = ::opendir(directory.c_str());
  if (!listing)
    return paths;
  while (dirent *entry = ::readdir(listing))
    if (entry->d_name[0] != '.')
      paths.push_back(directory + "/" + entry->d_name);
  ::closedir(listing);
  std::sort(paths.begin(), paths.end());
  return paths;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

bool runReader(Reader reader, const std::string &bytes) {
  return reader(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
}

void checkTarget(const std::string &target, Reader reader) {
  const std::string root = TESSERA_FUZZ_DIR;
  std::vector<std::string> seeds = listFiles(root + "/seeds/" + target);
  EXPECT_FALSE(seeds.empty()) << "no seeds in " << root << "/seeds/" << target;
  for (const std::string &seed : seeds)
    EXPECT_TRUE(runReader(reader, readFile(seed)))
        << seed << " is refused; a seed must be a valid file";
  for (const std::string &regression :
       listFiles(root + "/regressions/" + target)) {
    SCOPED_TRACE(regression);
    runReader(reader, readFile(regression));
  }
}

// Tests that the safetensors seeds are read and the old finds stay fixed.
TEST(FuzzSeeds, Safetensors) {
  checkTarget("safetensors", tessera::fuzz::readSafetensorsInput);
}

// Tests that the checkpoint seeds load and the old finds stay fixed.
TEST(FuzzSeeds, Checkpoint) {
  checkTarget("checkpoint", tessera::fuzz::readCheckpointInput);
}

// Tests that the .npy seeds are read and the old finds stay fixed.
TEST(FuzzSeeds, Npy) { checkTarget("npy", tessera::fuzz::readNpyInput); }

// Tests that the token-shard seeds are read and the old finds stay fixed.
TEST(FuzzSeeds, TokenShard) {
  checkTarget("token-shard", tessera::fuzz::readTokenShardInput);
}

} // namespace
