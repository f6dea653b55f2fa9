//===- TrainError.h - How the training driver reports failures --*- C++ -*-===//
//
// Everything the driver can trip over is the user's doing (a missing data
// file, a checkpoint from another model, a bad flag) and deserves one clear
// sentence and a non-zero exit, never an abort. Deep inside the data loader or
// the safetensors parser the natural thing is to throw; tessera_train_main
// catches TrainError at the top, prints "train: error: <message>" and returns
// the exit code carried here (2 for command-line mistakes, 1 for the rest).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_TRAINERROR_H
#define TESSERA_RUNTIME_TRAIN_TRAINERROR_H

#include <stdexcept>
#include <string>

namespace tessera::train {

/// Exit code of a command-line mistake (like getopt-based tools).
inline constexpr int kUsageExitCode = 2;
/// Exit code of every other failure (data, weights, checkpoints, kernels).
inline constexpr int kFailureExitCode = 1;

/// A failure the user can act on; what() is the sentence to print.
class TrainError : public std::runtime_error {
public:
  explicit TrainError(const std::string &message,
                      int exitCode = kFailureExitCode)
      : std::runtime_error(message), exitCode(exitCode) {}

  int getExitCode() const { return exitCode; }

private:
  int exitCode;
};

/// Throws TrainError(message) with the generic failure exit code.
[[noreturn]] inline void fail(const std::string &message) {
  throw TrainError(message);
}

/// "path: strerror(errno)" for a failed system call on `path`.
std::string describeSystemError(const std::string &path);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_TRAINERROR_H
