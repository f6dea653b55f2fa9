//===- LocalSpawn.cpp - --nproc: N ranks of this executable on this node --===//
//
// The launcher forks N children and execs the executable in each with the
// torchrun variables set (RANK = LOCAL_RANK = i, WORLD_SIZE =
// LOCAL_WORLD_SIZE = N, MASTER_ADDR = 127.0.0.1, MASTER_PORT), so a child
// finds its place exactly as under torchrun and picks GPU i.
//
// Then it supervises, in one loop around sigtimedwait: SIGINT, SIGTERM and
// SIGHUP are forwarded to every child (Ctrl-C stops the whole run); a child
// that exits non-zero or dies of a signal is reported by rank and the
// others get SIGTERM, then SIGKILL after a grace period, so a failed rank
// never leaves the rest hanging in a collective. Children also get
// PR_SET_PDEATHSIG, so a launcher killed with SIGKILL takes them along.
// The loop also polls waitpid every 100 ms, because in a multithreaded
// launcher SIGCHLD may go to another thread.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/launch.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace tessera::comm {
namespace {

using Clock = std::chrono::steady_clock;

int pickFreePort() {
  int probe = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0)
    throw CommError("--nproc: cannot create a socket to pick MASTER_PORT: " +
                    std::string(std::strerror(errno)));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  int port = 0;
  if (::bind(probe, reinterpret_cast<sockaddr *>(&address), sizeof(address)) ==
          0 &&
      ::getsockname(probe, reinterpret_cast<sockaddr *>(&address), &length) ==
          0)
    port = ntohs(address.sin_port);
  ::close(probe);
  if (port == 0)
    throw CommError("--nproc: cannot find a free port for MASTER_PORT; set "
                    "MASTER_PORT");
  return port;
}

/// This process's environment with the launch variables replaced.
std::vector<std::string> childEnvironment(int32_t rank, int32_t nproc,
                                          int32_t port,
                                          const SpawnOptions &options) {
  std::vector<std::string> overrides = {"RANK=" + std::to_string(rank),
                                        "LOCAL_RANK=" + std::to_string(rank),
                                        "WORLD_SIZE=" + std::to_string(nproc),
                                        "LOCAL_WORLD_SIZE=" +
                                            std::to_string(nproc),
                                        "MASTER_ADDR=127.0.0.1",
                                        "MASTER_PORT=" + std::to_string(port)};
  overrides.insert(overrides.end(), options.extraEnvironment.begin(),
                   options.extraEnvironment.end());
  std::vector<std::string> result;
  for (char **entry = environ; entry && *entry; ++entry) {
    std::string variable = *entry;
    std::string name = variable.substr(0, variable.find('='));
    bool replaced = false;
    for (const std::string &override : overrides)
      replaced |= override.compare(0, name.size() + 1, name + "=") == 0;
    if (!replaced)
      result.push_back(variable);
  }
  result.insert(result.end(), overrides.begin(), overrides.end());
  return result;
}

std::vector<char *> pointers(std::vector<std::string> &strings) {
  std::vector<char *> list;
  for (std::string &text : strings)
    list.push_back(text.data());
  list.push_back(nullptr);
  return list;
}

std::string describeStatus(int status) {
  if (WIFSIGNALED(status)) {
    int signal = WTERMSIG(status);
    return "was killed by signal " + std::to_string(signal) + " (" +
           strsignal(signal) + ")";
  }
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

int exitCodeOf(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

} // namespace

int spawnLocalRanks(int32_t nproc, const std::vector<std::string> &arguments,
                    const SpawnOptions &options) {
  if (nproc < 1)
    throw CommError("--nproc: " + std::to_string(nproc) +
                    " is not a positive number of ranks");
  if (arguments.empty())
    throw CommError("--nproc: no command line to run");
  std::string launcher = arguments[0].substr(arguments[0].rfind('/') + 1);
  std::string executable =
      options.executable.empty() ? "/proc/self/exe" : options.executable;
  int32_t port = options.masterPort ? options.masterPort : pickFreePort();

  sigset_t handled, previous;
  sigemptyset(&handled);
  for (int signal : {SIGCHLD, SIGINT, SIGTERM, SIGHUP})
    sigaddset(&handled, signal);
  pthread_sigmask(SIG_BLOCK, &handled, &previous);

  // Everything exec needs is built before fork: the child may only call
  // async-signal-safe functions.
  std::vector<std::string> argumentCopy = arguments;
  std::vector<char *> argv = pointers(argumentCopy);
  std::vector<pid_t> children(static_cast<size_t>(nproc), -1);
  std::vector<bool> running(static_cast<size_t>(nproc), false);
  pid_t launcherPid = ::getpid();
  for (int32_t rank = 0; rank < nproc; ++rank) {
    std::vector<std::string> environment =
        childEnvironment(rank, nproc, port, options);
    std::vector<char *> envp = pointers(environment);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcherPid)
        ::_exit(1); // the launcher died before prctl
      ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
      ::execve(executable.c_str(), argv.data(), envp.data());
      std::fprintf(stderr, "%s: cannot run %s as rank %d: %s\n",
                   launcher.c_str(), executable.c_str(), rank,
                   std::strerror(errno));
      ::_exit(127);
    }
    if (pid < 0) {
      int error = errno;
      for (pid_t child : children)
        if (child > 0)
          ::kill(child, SIGKILL);
      for (pid_t child : children)
        if (child > 0)
          ::waitpid(child, nullptr, 0);
      pthread_sigmask(SIG_SETMASK, &previous, nullptr);
      throw CommError("--nproc: cannot start rank " + std::to_string(rank) +
                      ": " + std::strerror(error));
    }
    children[static_cast<size_t>(rank)] = pid;
    running[static_cast<size_t>(rank)] = true;
  }

  int32_t live = nproc;
  int exitCode = 0;
  bool failed = false;
  int interruptSignal = 0;
  bool killDeadlineSet = false;
  Clock::time_point killDeadline;
  auto signalAll = [&](int signal) {
    for (int32_t r = 0; r < nproc; ++r)
      if (running[static_cast<size_t>(r)])
        ::kill(children[static_cast<size_t>(r)], signal);
  };
  while (live > 0) {
    timespec slice{0, 100 * 1000 * 1000};
    int signal = ::sigtimedwait(&handled, nullptr, &slice);
    if (signal == SIGINT || signal == SIGTERM || signal == SIGHUP) {
      interruptSignal = signal;
      signalAll(signal);
    }
    for (int32_t r = 0; r < nproc; ++r) {
      if (!running[static_cast<size_t>(r)])
        continue;
      int status = 0;
      pid_t pid = children[static_cast<size_t>(r)];
      if (::waitpid(pid, &status, WNOHANG) != pid)
        continue;
      running[static_cast<size_t>(r)] = false;
      --live;
      bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (clean || failed)
        continue;
      failed = true;
      exitCode = exitCodeOf(status);
      if (exitCode == 0)
        exitCode = 1;
      std::fprintf(stderr, "%s: rank %d (pid %d) %s%s\n", launcher.c_str(), r,
                   static_cast<int>(pid), describeStatus(status).c_str(),
                   options.stopOthersOnFailure && live > 0
                       ? "; stopping the other ranks"
                       : "");
      if (options.stopOthersOnFailure && live > 0) {
        signalAll(SIGTERM);
        killDeadlineSet = true;
        killDeadline =
            Clock::now() +
            std::chrono::duration_cast<Clock::duration>(
                std::chrono::duration<double>(options.terminateGraceSeconds));
      }
    }
    if (killDeadlineSet && live > 0 && Clock::now() >= killDeadline) {
      signalAll(SIGKILL);
      killDeadlineSet = false;
    }
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (failed)
    return exitCode;
  return interruptSignal ? 128 + interruptSignal : 0;
}

} // namespace tessera::comm
