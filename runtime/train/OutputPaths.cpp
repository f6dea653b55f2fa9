//===- OutputPaths.cpp - Checking where a run will write ------------------===//
//
// See OutputPaths.h. access(2) answers for this process's real ids, which
// is what the driver writes with; a read-only mount answers EROFS.
//
//===----------------------------------------------------------------------===//

#include "OutputPaths.h"

#include "TrainError.h"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace tessera::train {
std::string parentDirectory(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

void requireWritableDirectory(const std::string &flag,
                              const std::string &directory) {
  struct stat info;
  if (::stat(directory.c_str(), &info) != 0)
    fail(flag + ": " + describeSystemError(directory));
  if (!S_ISDIR(info.st_mode))
    fail(flag + ": " + directory + " is not a directory");
  if (::access(directory.c_str(), W_OK | X_OK) != 0)
    fail(flag + ": cannot write into " + describeSystemError(directory));
}

void requireWritableFile(const std::string &flag, const std::string &path) {
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode))
    fail(flag + ": " + path + " is a directory; a file name is needed");
  requireWritableDirectory(flag, parentDirectory(path));
}

} // namespace tessera::train
