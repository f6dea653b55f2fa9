//===- TrainError.cpp - Messages for failed system calls -----------------===//
//
// Kept out of the header so that <cstring>/<cerrno> stay out of every file
// that merely throws.
//
//===----------------------------------------------------------------------===//

#include "TrainError.h"

#include <cerrno>
#include <cstring>

namespace tessera::train {

std::string describeSystemError(const std::string &path) {
  return path + ": " + std::strerror(errno);
}

} // namespace tessera::train
