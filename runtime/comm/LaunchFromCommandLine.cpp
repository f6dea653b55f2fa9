//===- LaunchFromCommandLine.cpp - The driver's first call ----------------===//
//
// Takes the two launch flags out of argv before the driver parses the rest:
// --nproc N (this process becomes the launcher of N local ranks) and
// --comm-timeout S (the longest a collective or the rendezvous may wait).
// Both accept `--flag value` and `--flag=value`, like the driver's flags.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/launch.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace tessera::comm {
namespace {

[[noreturn]] void usageError(const std::string &message) {
  throw CommError(message + " (run with --help for the flags)");
}

/// If argv[index] is `flag` or `flag=...`, stores its value and advances
/// index past it.
bool takeFlag(const std::vector<std::string> &arguments, size_t &index,
              const std::string &flag, std::string &value) {
  const std::string &argument = arguments[index];
  if (argument == flag) {
    if (index + 1 >= arguments.size())
      usageError(flag + ": missing value");
    value = arguments[index + 1];
    index += 2;
    return true;
  }
  if (argument.compare(0, flag.size() + 1, flag + "=") == 0) {
    value = argument.substr(flag.size() + 1);
    index += 1;
    return true;
  }
  return false;
}

} // namespace

Launch launchFromCommandLine(int argc, const char *const *argv,
                             const Environment &environment) {
  std::vector<std::string> arguments(argv, argv + argc);
  Launch launch;
  std::optional<int32_t> nproc;
  for (size_t index = 0; index < arguments.size();) {
    std::string value;
    if (index > 0 && takeFlag(arguments, index, "--nproc", value)) {
      char *end = nullptr;
      errno = 0;
      long number = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || errno == ERANGE || number < 1 ||
          number > 4096)
        usageError("--nproc: '" + value +
                   "' is not a number of ranks in [1, 4096]");
      nproc = static_cast<int32_t>(number);
    } else if (index > 0 &&
               takeFlag(arguments, index, "--comm-timeout", value)) {
      char *end = nullptr;
      double seconds = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !std::isfinite(seconds) ||
          seconds <= 0)
        usageError("--comm-timeout: '" + value +
                   "' is not a positive number of seconds");
      launch.commTimeoutSeconds = seconds;
    } else {
      launch.remainingArguments.push_back(arguments[index++]);
    }
  }
  if (nproc && *nproc > 1) {
    for (const char *variable : {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK"})
      if (environment(variable))
        usageError(std::string("--nproc: this process is already rank of a "
                               "launched run (") +
                   variable + " is set); use either --nproc or the launcher");
    // The children get --comm-timeout back: only --nproc is the launcher's.
    std::vector<std::string> childArguments = launch.remainingArguments;
    childArguments.push_back("--comm-timeout=" +
                             std::to_string(launch.commTimeoutSeconds));
    SpawnOptions options;
    if (std::optional<std::string> port = environment("MASTER_PORT")) {
      Environment portOnly = [&](const char *name) {
        return std::string(name) == "MASTER_PORT"
                   ? port
                   : std::optional<std::string>();
      };
      options.masterPort = discoverLaunch(portOnly).masterPort;
    }
    launch.launcherExitCode = spawnLocalRanks(*nproc, childArguments, options);
    return launch;
  }
  launch.info = discoverLaunch(environment);
  return launch;
}

} // namespace tessera::comm
