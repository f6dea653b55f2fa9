//===- FuzzScratch.cpp - The scratch files the fuzz targets read ----------===//
//
// See FuzzTarget.h. One directory per process, so that libFuzzer's -jobs and
// -fork workers, and ctest running beside a fuzzer, never read each other's
// inputs.
//
//===----------------------------------------------------------------------===//

#include "FuzzTarget.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace tessera::fuzz {
namespace {

[[noreturn]] void abortWith(const std::string &what) {
  std::fprintf(stderr, "fuzz scratch: %s: %s\n", what.c_str(),
               std::strerror(errno));
  std::abort();
}

/// Where the process's directory goes: $TESSERA_FUZZ_SCRATCH (scripts/fuzz.sh
/// sets it), else /dev/shm, else $TMPDIR or /tmp. Memory matters: on a disk
/// file system rewriting the file costs milliseconds (the truncation waits
/// on the journal), which made fuzzing ten times slower.
std::string temporaryRoot() {
  if (const char *root = std::getenv("TESSERA_FUZZ_SCRATCH"); root && *root)
    return root;
  struct stat info;
  if (::stat("/dev/shm", &info) == 0 && S_ISDIR(info.st_mode) &&
      ::access("/dev/shm", W_OK) == 0)
    return "/dev/shm";
  if (const char *root = std::getenv("TMPDIR"); root && *root)
    return root;
  return "/tmp";
}

/// The process's scratch directory, created on first use; its files and
/// itself are removed when the process exits normally (libFuzzer's
/// -runs/-max_total_time end does).
class ScratchDirectory {
public:
  const std::string &getPath() {
    if (path.empty()) {
      std::string pattern = temporaryRoot() + "/tessera-fuzz-XXXXXX";
      std::vector<char> name(pattern.begin(), pattern.end());
      name.push_back('\0');
      if (!::mkdtemp(name.data()))
        abortWith("cannot create a directory like " + pattern);
      path = name.data();
    }
    return path;
  }

  void remember(const std::string &file) { files.insert(file); }

  ~ScratchDirectory() {
    for (const std::string &file : files)
      ::unlink(file.c_str());
    if (!path.empty())
      ::rmdir(path.c_str());
  }

private:
  std::string path;
  std::set<std::string> files;
};

ScratchDirectory &scratch() {
  static ScratchDirectory directory;
  return directory;
}

} // namespace

std::string writeScratchFile(const std::string &name, const uint8_t *data,
                             size_t size) {
  std::string path = scratch().getPath() + "/" + name;
  scratch().remember(path);
  int descriptor =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (descriptor < 0)
    abortWith("cannot create " + path);
  size_t done = 0;
  while (done < size) {
    ssize_t count = ::write(descriptor, data + done, size - done);
    if (count < 0 && errno == EINTR)
      continue;
    if (count <= 0)
      abortWith("cannot write " + path);
    done += static_cast<size_t>(count);
  }
  if (::close(descriptor) != 0)
    abortWith("cannot close " + path);
  return path;
}

} // namespace tessera::fuzz
