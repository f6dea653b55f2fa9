//===- Rendezvous.cpp - Ranks meeting over TCP on MASTER_ADDR:MASTER_PORT -===//
//
// A star: rank 0 listens, every other rank connects to it and says who it
// is ("TSRV", rank, world size); every exchange goes through rank 0. That is
// N-1 sockets and a few hundred bytes per run (the NCCL unique id, a
// barrier), so simplicity beats a tree. Every blocking step (accept,
// connect, read) waits in poll() with the rendezvous deadline, and the
// errors say which rank, host and port, and which variable set them.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/launch.h"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <utility>

namespace tessera::comm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kMagic = 0x56525354; // "TSRV"

[[noreturn]] void fail(const std::string &message) { throw CommError(message); }

std::string systemError(int error) { return std::strerror(error); }

Clock::time_point deadlineAfter(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

/// Milliseconds left until `deadline` (0 when past), for poll().
int millisecondsLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - Clock::now())
                  .count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

/// Waits until `socket` is readable (or writable); false on the deadline.
bool waitReady(int socket, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd entry{socket, events, 0};
    int ready = ::poll(&entry, 1, millisecondsLeft(deadline));
    if (ready > 0)
      return true;
    if (ready == 0)
      return false;
    if (errno != EINTR)
      fail("rendezvous: poll failed: " + systemError(errno));
  }
}

void sendAll(int socket, const void *data, size_t bytes,
             const std::string &peer) {
  const auto *cursor = static_cast<const char *>(data);
  while (bytes > 0) {
    ssize_t sent = ::send(socket, cursor, bytes, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR)
      continue;
    if (sent <= 0)
      fail("rendezvous: the connection to " + peer +
           " broke (did it fail?): " + systemError(errno));
    cursor += sent;
    bytes -= static_cast<size_t>(sent);
  }
}

void receiveAll(int socket, void *data, size_t bytes, const std::string &peer,
                Clock::time_point deadline, double timeoutSeconds) {
  auto *cursor = static_cast<char *>(data);
  while (bytes > 0) {
    if (!waitReady(socket, POLLIN, deadline))
      fail("rendezvous: no message from " + peer + " within " +
           std::to_string(static_cast<int>(timeoutSeconds)) +
           " s (is it stuck or dead?)");
    ssize_t got = ::recv(socket, cursor, bytes, 0);
    if (got < 0 && errno == EINTR)
      continue;
    if (got == 0)
      fail("rendezvous: " + peer + " closed its connection (did it fail?)");
    if (got < 0)
      fail("rendezvous: reading from " + peer +
           " failed: " + systemError(errno));
    cursor += got;
    bytes -= static_cast<size_t>(got);
  }
}

void sendFrame(int socket, const std::string &bytes, const std::string &peer) {
  uint64_t length = bytes.size();
  sendAll(socket, &length, sizeof(length), peer);
  sendAll(socket, bytes.data(), bytes.size(), peer);
}

std::string receiveFrame(int socket, const std::string &peer,
                         double timeoutSeconds) {
  Clock::time_point deadline = deadlineAfter(timeoutSeconds);
  uint64_t length = 0;
  receiveAll(socket, &length, sizeof(length), peer, deadline, timeoutSeconds);
  if (length > (1u << 30))
    fail("rendezvous: " + peer + " sent a malformed message");
  std::string bytes(length, '\0');
  receiveAll(socket, bytes.data(), bytes.size(), peer, deadline,
             timeoutSeconds);
  return bytes;
}

void tuneSocket(int socket) {
  int one = 1;
  ::setsockopt(socket, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string endpoint(const LaunchInfo &info) {
  return info.masterAddress + ":" + std::to_string(info.masterPort) +
         " (MASTER_ADDR:MASTER_PORT)";
}

struct Hello {
  uint32_t magic;
  int32_t rank;
  int32_t worldSize;
};

} // namespace

Rendezvous::Rendezvous(const LaunchInfo &launch, double timeout)
    : info(launch), timeoutSeconds(timeout) {
  if (info.worldSize <= 1)
    return;
  // A failed constructor runs no destructor: close what is open here, or a
  // leaked listener would keep answering on MASTER_PORT.
  try {
    if (info.rank == 0)
      acceptRanks();
    else
      connectToRankZero();
  } catch (...) {
    closeSockets();
    throw;
  }
}

void Rendezvous::acceptRanks() {
  Clock::time_point deadline = deadlineAfter(timeoutSeconds);
  std::string prefix = "rank " + std::to_string(info.rank) + ": rendezvous ";
  listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0)
    fail(prefix + "cannot create a socket: " + systemError(errno));
  int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<uint16_t>(info.masterPort));
  if (::bind(listener, reinterpret_cast<sockaddr *>(&address),
             sizeof(address)) != 0) {
    int error = errno;
    ::close(listener);
    listener = -1;
    fail(prefix + "cannot listen on port " + std::to_string(info.masterPort) +
         " (MASTER_PORT): " + systemError(error) +
         (error == EADDRINUSE ? "; another run may be using it, pick "
                                "another MASTER_PORT"
                              : ""));
  }
  ::listen(listener, info.worldSize);
  sockets.assign(static_cast<size_t>(info.worldSize), -1);
  for (int32_t connected = 1; connected < info.worldSize;) {
    if (!waitReady(listener, POLLIN, deadline)) {
      std::string missing;
      for (int32_t r = 1; r < info.worldSize; ++r)
        if (sockets[static_cast<size_t>(r)] < 0)
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      fail(prefix + "timed out after " +
           std::to_string(static_cast<int>(timeoutSeconds)) + " s on port " +
           std::to_string(info.masterPort) + " waiting for rank(s) " + missing +
           " to connect (did they start, with the same MASTER_ADDR and "
           "MASTER_PORT?)");
    }
    int peer = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (peer < 0)
      continue;
    tuneSocket(peer);
    Hello hello{};
    receiveAll(peer, &hello, sizeof(hello), "a connecting rank", deadline,
               timeoutSeconds);
    if (hello.magic != kMagic) {
      ::close(peer); // not one of ours (a port scanner, another program)
      continue;
    }
    if (hello.worldSize != info.worldSize || hello.rank < 1 ||
        hello.rank >= info.worldSize ||
        sockets[static_cast<size_t>(hello.rank)] >= 0) {
      ::close(peer);
      fail(prefix + "on port " + std::to_string(info.masterPort) +
           ": a peer says it is rank " + std::to_string(hello.rank) + " of " +
           std::to_string(hello.worldSize) +
           ", which does not fit this world of " +
           std::to_string(info.worldSize) +
           " (two runs on one MASTER_PORT, or inconsistent rank variables)");
    }
    sockets[static_cast<size_t>(hello.rank)] = peer;
    ++connected;
  }
}

void Rendezvous::connectToRankZero() {
  Clock::time_point deadline = deadlineAfter(timeoutSeconds);
  std::string prefix = "rank " + std::to_string(info.rank) + ": rendezvous ";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *addresses = nullptr;
  std::string port = std::to_string(info.masterPort);
  int resolved = ::getaddrinfo(info.masterAddress.c_str(), port.c_str(), &hints,
                               &addresses);
  if (resolved != 0)
    fail(prefix + "cannot resolve MASTER_ADDR='" + info.masterAddress +
         "': " + ::gai_strerror(resolved));
  std::string lastProblem = "no address";
  int socket = -1;
  while (socket < 0) {
    for (addrinfo *a = addresses; a && socket < 0; a = a->ai_next) {
      int candidate =
          ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (candidate < 0)
        continue;
      int flags = ::fcntl(candidate, F_GETFL, 0);
      ::fcntl(candidate, F_SETFL, flags | O_NONBLOCK);
      int status = ::connect(candidate, a->ai_addr, a->ai_addrlen);
      int error = status == 0 ? 0 : errno;
      if (error == EINPROGRESS) {
        Clock::time_point attempt =
            std::min(deadline, Clock::now() + std::chrono::seconds(5));
        if (waitReady(candidate, POLLOUT, attempt)) {
          socklen_t length = sizeof(error);
          ::getsockopt(candidate, SOL_SOCKET, SO_ERROR, &error, &length);
        } else {
          error = ETIMEDOUT;
        }
      }
      if (error == 0) {
        ::fcntl(candidate, F_SETFL, flags);
        socket = candidate;
      } else {
        lastProblem = systemError(error);
        ::close(candidate);
      }
    }
    if (socket >= 0)
      break;
    if (Clock::now() >= deadline) {
      ::freeaddrinfo(addresses);
      fail(prefix + "could not connect to rank 0 at " + endpoint(info) +
           " within " + std::to_string(static_cast<int>(timeoutSeconds)) +
           " s: " + lastProblem + " (did rank 0 start?)");
    }
    // Rank 0 may simply not be listening yet.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::freeaddrinfo(addresses);
  tuneSocket(socket);
  sockets.assign(1, socket);
  Hello hello{kMagic, info.rank, info.worldSize};
  sendAll(socket, &hello, sizeof(hello), "rank 0 at " + endpoint(info));
}

Rendezvous::~Rendezvous() { closeSockets(); }

void Rendezvous::closeSockets() {
  for (int &socket : sockets)
    if (socket >= 0)
      ::close(std::exchange(socket, -1));
  if (listener >= 0)
    ::close(std::exchange(listener, -1));
}

std::string Rendezvous::broadcast(const std::string &bytes) {
  if (info.worldSize <= 1)
    return bytes;
  if (info.rank == 0) {
    for (int32_t r = 1; r < info.worldSize; ++r)
      sendFrame(sockets[static_cast<size_t>(r)], bytes,
                "rank " + std::to_string(r));
    return bytes;
  }
  return receiveFrame(sockets[0], "rank 0", timeoutSeconds);
}

std::vector<std::string> Rendezvous::allGather(const std::string &bytes) {
  std::vector<std::string> all(static_cast<size_t>(info.worldSize));
  if (info.worldSize <= 1) {
    all[0] = bytes;
    return all;
  }
  if (info.rank == 0) {
    all[0] = bytes;
    std::string packed = bytes;
    for (int32_t r = 1; r < info.worldSize; ++r)
      all[static_cast<size_t>(r)] =
          receiveFrame(sockets[static_cast<size_t>(r)],
                       "rank " + std::to_string(r), timeoutSeconds);
    for (int32_t r = 1; r < info.worldSize; ++r)
      for (const std::string &part : all)
        sendFrame(sockets[static_cast<size_t>(r)], part,
                  "rank " + std::to_string(r));
    return all;
  }
  sendFrame(sockets[0], bytes, "rank 0");
  for (std::string &part : all)
    part = receiveFrame(sockets[0], "rank 0", timeoutSeconds);
  return all;
}

void Rendezvous::barrier() { allGather(std::string()); }

} // namespace tessera::comm
