//===- TraceFile.cpp - Naming and writing a rank's trace file -------------===//
//
// A trace is a diagnostic, not state: unlike a checkpoint (Safetensors.cpp)
// it is not fsynced, since a trace lost to a power cut is simply taken
// again. The rename alone gives readers all or nothing.
//
//===----------------------------------------------------------------------===//

#include "TraceFile.h"

#include "TrainError.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace tessera::train {
namespace {

const char kRankPlaceholder[] = "%r";
const char kJsonExtension[] = ".json";

std::string temporaryPathOf(const std::string &path) {
  return path + ".tmp." + std::to_string(::getpid());
}

[[noreturn]] void writeError(const std::string &path, const char *step,
                             int savedErrno) {
  fail("--trace: cannot write " + path + ": " + step + " failed: " +
       std::strerror(savedErrno));
}

} // namespace

std::string traceFileForRank(const std::string &pattern, int32_t rank,
                             int32_t worldSize) {
  const std::string rankText = std::to_string(rank);
  if (pattern.find(kRankPlaceholder) != std::string::npos) {
    std::string name;
    for (size_t at = 0; at < pattern.size();) {
      if (pattern.compare(at, 2, kRankPlaceholder) == 0) {
        name += rankText;
        at += 2;
      } else {
        name += pattern[at++];
      }
    }
    return name;
  }
  if (worldSize <= 1)
    return pattern;
  const std::string extension = kJsonExtension;
  const std::string suffix = ".rank" + rankText;
  if (pattern.size() > extension.size() &&
      pattern.compare(pattern.size() - extension.size(), extension.size(),
                      extension) == 0)
    return pattern.substr(0, pattern.size() - extension.size()) + suffix +
           extension;
  return pattern + suffix;
}

void writeTraceFile(const std::string &path, const std::string &contents) {
  const std::string temporary = temporaryPathOf(path);
  std::FILE *file = std::fopen(temporary.c_str(), "wb");
  if (!file)
    writeError(path, "creating the temporary file", errno);
  bool written =
      std::fwrite(contents.data(), 1, contents.size(), file) == contents.size();
  int savedErrno = errno;
  if (std::fclose(file) != 0 && written) {
    written = false;
    savedErrno = errno;
  }
  if (!written) {
    std::remove(temporary.c_str());
    writeError(path, "writing", savedErrno);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    savedErrno = errno;
    std::remove(temporary.c_str());
    writeError(path, "renaming the temporary file", savedErrno);
  }
}

void checkTraceFileWritable(const std::string &path) {
  const std::string temporary = temporaryPathOf(path);
  std::FILE *file = std::fopen(temporary.c_str(), "wb");
  if (!file)
    writeError(path, "creating the temporary file", errno);
  std::fclose(file);
  std::remove(temporary.c_str());
}

} // namespace tessera::train
