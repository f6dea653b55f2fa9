//===- OutputPaths.cpp - Checking where a run will write ------------------===//
//
// See OutputPaths.h. Whether a directory takes new files is answered by
// trying: a uniquely named file is created in it and removed at once.
// access(2) cannot answer it: it says yes to root whatever the mode bits
// (CI runs as root), and yes on a file system that refuses every new file
// without being mounted read-only (sysfs, procfs, a full quota, an ACL or
// an LSM policy it does not evaluate); the probe asks the file system
// itself, with the ids and the path the writes will use.
//
//===----------------------------------------------------------------------===//

#include "OutputPaths.h"

#include "TrainError.h"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace tessera::train {
std::string parentDirectory(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

int createUniqueFile(const std::string &prefix, std::string &created) {
  std::vector<char> name(prefix.begin(), prefix.end());
  for (char c : std::string("XXXXXX"))
    name.push_back(c);
  name.push_back('\0');
  int descriptor = ::mkstemp(name.data());
  if (descriptor >= 0)
    created = name.data();
  return descriptor;
}

void requireWritableDirectory(const std::string &flag,
                              const std::string &directory) {
  struct stat info;
  if (::stat(directory.c_str(), &info) != 0)
    fail(flag + ": " + describeSystemError(directory));
  if (!S_ISDIR(info.st_mode))
    fail(flag + ": " + directory + " is not a directory");
  std::string probe;
  int descriptor =
      createUniqueFile(directory + "/.tessera-write-probe.", probe);
  if (descriptor < 0)
    fail(flag + ": cannot create files in " +
         describeSystemError(directory));
  ::close(descriptor);
  ::unlink(probe.c_str());
}

void requireWritableFile(const std::string &flag, const std::string &path) {
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode))
    fail(flag + ": " + path + " is a directory; a file name is needed");
  requireWritableDirectory(flag, parentDirectory(path));
}

} // namespace tessera::train
