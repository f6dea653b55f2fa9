//===- Errors.cpp - The last error message of each thread -----------------===//
//
// One message per thread, so that ranks run as threads (the multi-rank CPU
// test bed) never read each other's errors. A successful call leaves the
// previous message in place: callers read it only after a nonzero return.
//
//===----------------------------------------------------------------------===//

#include "Errors.h"

#include "tessera/runtime/cpu_kernels.h"

namespace tessera::cpu {

namespace {
thread_local std::string lastErrorMessage;
} // namespace

void fail(const std::string &message) { throw KernelError(message); }

void setLastError(const std::string &message) { lastErrorMessage = message; }

} // namespace tessera::cpu

extern "C" const char *tessera_cpu_last_error(void) {
  return tessera::cpu::lastErrorMessage.c_str();
}
