//===- Errors.h - How the CPU kernels report failures -----------*- C++ -*-===//
//
// The kernels sit behind a C ABI, so nothing may escape them but a return
// code. Inside, a failed check throws KernelError with a sentence for the
// user (which id, at which position, which range); runKernel, wrapped around
// every exported function, turns it into `return 1` and keeps the sentence,
// prefixed with the kernel's name, for tessera_cpu_last_error(). Exceptions
// keep the checks one line each instead of threading error codes through
// every helper; they are thrown only on the failure path.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CPU_ERRORS_H
#define TESSERA_RUNTIME_CPU_ERRORS_H

#include <new>
#include <stdexcept>
#include <string>

namespace tessera::cpu {

/// A failure the caller can act on; what() is the user-facing message.
class KernelError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Throws KernelError(message).
[[noreturn]] void fail(const std::string &message);

/// Records `message` as this thread's tessera_cpu_last_error().
void setLastError(const std::string &message);

/// A nested kernel call's status: its failure becomes the caller's, with the
/// nested kernel's message (`lastError()`, tessera_cpu_last_error or
/// tessera_cuda_last_error, read only then).
template <typename LastError>
void requireSuccess(int status, LastError &&lastError) {
  if (status != 0)
    fail(lastError());
}

/// Runs `body`; returns 0 when it completes, else 1 with the error recorded as
/// "<kernelName>: <message>".
template <typename Body> int runKernel(const char *kernelName, Body &&body) {
  try {
    body();
    return 0;
  } catch (const KernelError &error) {
    setLastError(std::string(kernelName) + ": " + error.what());
  } catch (const std::bad_alloc &) {
    setLastError(std::string(kernelName) + ": out of memory for scratch space");
  } catch (const std::exception &error) {
    setLastError(std::string(kernelName) + ": internal error: " + error.what());
  }
  return 1;
}

} // namespace tessera::cpu

#endif // TESSERA_RUNTIME_CPU_ERRORS_H
