//===- CommTestUtil.h - What the comm tests share ---------------*- C++ -*-===//

#ifndef TESSERA_RUNTIME_TEST_COMM_COMMTESTUTIL_H
#define TESSERA_RUNTIME_TEST_COMM_COMMTESTUTIL_H

#include "tessera/runtime/cpu_kernels.h"

#include <cstdio>
#include <cstdlib>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace tessera::comm::test {

/// A descriptor of `data` with `shape`.
inline tessera_tensor view(void *data, int32_t dtype,
                           std::vector<int64_t> shape) {
  tessera_tensor tensor{};
  tensor.data = data;
  tensor.dtype = dtype;
  tensor.rank = static_cast<int32_t>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
    tensor.shape[d] = shape[d];
  return tensor;
}

/// A localhost port nobody listens on right now.
inline int32_t freePort() {
  int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ::bind(probe, reinterpret_cast<sockaddr *>(&address), sizeof(address));
  ::getsockname(probe, reinterpret_cast<sockaddr *>(&address), &length);
  ::close(probe);
  return ntohs(address.sin_port);
}

/// Runs `body` with stderr (this process's and its children's) going to a
/// file; returns what was written.
template <typename Body> std::string captureStderr(Body &&body) {
  std::fflush(stderr);
  char path[] = "/tmp/tessera-comm-test-XXXXXX";
  int file = ::mkstemp(path);
  int saved = ::dup(2);
  ::dup2(file, 2);
  body();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::string text;
  char buffer[4096];
  ::lseek(file, 0, SEEK_SET);
  for (ssize_t got; (got = ::read(file, buffer, sizeof(buffer))) > 0;)
    text.append(buffer, static_cast<size_t>(got));
  ::close(file);
  ::unlink(path);
  return text;
}

} // namespace tessera::comm::test

#endif // TESSERA_RUNTIME_TEST_COMM_COMMTESTUTIL_H
