//===- RegularFile.cpp - Opening the driver's input files safely ----------===//
//
// See RegularFile.h.
//
//===----------------------------------------------------------------------===//

#include "RegularFile.h"

#include "TrainError.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tessera::train {
namespace {

const char *kindOf(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO (named pipe)";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

} // namespace

RegularFile::RegularFile(const std::string &path) {
  fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    fail(describeSystemError(path));
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    int saved = errno;
    ::close(fd);
    errno = saved;
    fail(describeSystemError(path));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    fd = -1;
    fail(path + ": " + kindOf(info.st_mode) + ", not a regular file");
  }
  // Reads of a regular file never block anyway; clearing the flag keeps
  // the descriptor ordinary for whoever reads it.
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0)
    (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  bytes = static_cast<int64_t>(info.st_size);
}

RegularFile::~RegularFile() {
  if (fd >= 0)
    ::close(fd);
}

RegularFile::RegularFile(RegularFile &&other) noexcept
    : fd(other.fd), bytes(other.bytes) {
  other.fd = -1;
}

RegularFile &RegularFile::operator=(RegularFile &&other) noexcept {
  if (this != &other) {
    if (fd >= 0)
      ::close(fd);
    fd = other.fd;
    bytes = other.bytes;
    other.fd = -1;
  }
  return *this;
}

std::string readRegularFile(const std::string &path, int64_t limit,
                            const std::string &what) {
  RegularFile file(path);
  if (file.size() > limit)
    fail(path + ": " + std::to_string(file.size()) + " bytes, more than the " +
         std::to_string(limit) + " " + what + " may have");
  std::string contents(static_cast<size_t>(file.size()), '\0');
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t count =
        ::read(file.descriptor(), &contents[done], contents.size() - done);
    if (count < 0 && errno == EINTR)
      continue;
    if (count < 0)
      fail(describeSystemError(path));
    if (count == 0)
      fail(path + ": ended after " + std::to_string(done) + " of its " +
           std::to_string(contents.size()) +
           " bytes (was it changed while being read?)");
    done += static_cast<size_t>(count);
  }
  return contents;
}

} // namespace tessera::train
