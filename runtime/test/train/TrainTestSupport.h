//===- TrainTestSupport.h - Files and folders for the driver's tests ------===//
//
// Every test works in its own fresh temporary directory and writes the data
// files it reads (llm.c token shards, .npy arrays) with the helpers below, so
// the tests need no fixtures and show the exact bytes they feed the driver.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TEST_TRAIN_TRAINTESTSUPPORT_H
#define TESSERA_RUNTIME_TEST_TRAIN_TRAINTESTSUPPORT_H

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ParameterLayout.h"
#include "TrainingState.h"

namespace tessera_train_test {

/// A state of `program` with distinct, known values: parameter i's element
/// e is scale * (e + 1 + 10 i), its moments scale / 10 * e and
/// scale / 100 * (e + i).
inline tessera::train::TrainingState knownState(const tessera_program &program,
                                                float scale) {
  tessera::train::TrainingState state;
  tessera::train::allocateState(program, state);
  for (size_t i = 0; i < state.parameters.size(); ++i)
    for (size_t e = 0; e < state.parameters[i].size(); ++e) {
      state.parameters[i][e] = scale * static_cast<float>(e + 1 + 10 * i);
      state.firstMoments[i][e] = scale / 10 * static_cast<float>(e);
      state.secondMoments[i][e] = scale / 100 * static_cast<float>(e + i);
    }
  return state;
}

/// One gathered span (a gradient bucket) per parameter of `layout`, as a
/// ZeRO plan's buckets are when each holds one kind of read
/// (ParameterLayout::holdShard).
inline std::vector<tessera::train::ParameterLayout::Span>
spanPerParameter(const tessera::train::ParameterLayout &layout) {
  std::vector<tessera::train::ParameterLayout::Span> spans;
  for (int32_t p = 0; p < layout.size(); ++p)
    spans.push_back({layout.offset(p), tessera::train::ParameterLayout::aligned(
                                           layout.count(p))});
  return spans;
}

/// A new empty directory under the test temp dir, removed with everything in
/// it when the object goes out of scope.
class TemporaryDirectory {
public:
  TemporaryDirectory() {
    std::string pattern = ::testing::TempDir() + "tessera_train_XXXXXX";
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    if (!::mkdtemp(name.data()))
      ADD_FAILURE() << "mkdtemp failed for " << pattern;
    path = name.data();
  }
  ~TemporaryDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  TemporaryDirectory(const TemporaryDirectory &) = delete;
  TemporaryDirectory &operator=(const TemporaryDirectory &) = delete;

  const std::string &getPath() const { return path; }

private:
  std::string path;
};

inline void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

inline bool fileExists(const std::string &path) {
  std::ifstream in(path);
  return in.good();
}

/// An llm.c token shard; the header fields can be overridden to build
/// broken files.
inline void writeShard(const std::string &path,
                       const std::vector<uint16_t> &tokens,
                       int32_t magic = 20240520, int32_t version = 1,
                       int64_t announcedTokens = -1) {
  int32_t header[256] = {};
  header[0] = magic;
  header[1] = version;
  header[2] = static_cast<int32_t>(announcedTokens >= 0 ? announcedTokens
                                                        : tokens.size());
  std::string bytes(reinterpret_cast<const char *>(header), sizeof(header));
  bytes.append(reinterpret_cast<const char *>(tokens.data()),
               tokens.size() * sizeof(uint16_t));
  writeBytes(path, bytes);
}

/// A C-ordered .npy array (format 1.0) of `descr` ('<i4', '<i8', '<f4').
inline void writeNpy(const std::string &path, const std::string &descr,
                     const std::vector<int64_t> &shape,
                     const std::vector<int64_t> &values) {
  std::string shapeText = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    shapeText += std::to_string(shape[i]) +
                 (shape.size() == 1 || i + 1 < shape.size() ? ", " : "");
  shapeText += ")";
  std::string header = "{'descr': '" + descr +
                       "', 'fortran_order': False, 'shape': " + shapeText +
                       ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += static_cast<char>(1);
  bytes += static_cast<char>(0);
  bytes += static_cast<char>(header.size() & 0xFF);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  for (int64_t value : values) {
    if (descr == "<i4") {
      auto narrow = static_cast<int32_t>(value);
      bytes.append(reinterpret_cast<const char *>(&narrow), 4);
    } else if (descr == "<f4") {
      auto real = static_cast<float>(value);
      bytes.append(reinterpret_cast<const char *>(&real), 4);
    } else {
      bytes.append(reinterpret_cast<const char *>(&value), 8);
    }
  }
  writeBytes(path, bytes);
}

/// argv for tessera_train_main / parseFlags from a list of words.
class Arguments {
public:
  explicit Arguments(std::vector<std::string> words) : words(std::move(words)) {
    this->words.insert(this->words.begin(), "train");
    for (std::string &word : this->words)
      pointers.push_back(word.data());
    pointers.push_back(nullptr);
  }
  int argc() const { return static_cast<int>(words.size()); }
  char **argv() { return pointers.data(); }

private:
  std::vector<std::string> words;
  std::vector<char *> pointers;
};

} // namespace tessera_train_test

#endif // TESSERA_RUNTIME_TEST_TRAIN_TRAINTESTSUPPORT_H
