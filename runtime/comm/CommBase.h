//===- CommBase.h - What every comm backend implements ----------*- C++ -*-===//
//
// tessera_comm, opaque in comm.h, is the base class of the backends (the
// in-process ThreadComm, the NCCL NcclComm). The C ABI (CommAbi.cpp) checks
// what one rank can check alone (well-formed tensors, shapes consistent with
// the group size) before it calls the backend, so the backends see only
// calls that make sense locally; what needs the other ranks (their shapes
// and dtypes match) is the backend's to check.
//
// StreamOps is the little a stream-agnostic caller (the GradientReducer)
// needs from the comm's memory and streams: events, a small scratch buffer,
// copies. The host version does nothing or memcpy; the CUDA one calls the
// CUDA runtime.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_COMM_COMMBASE_H
#define TESSERA_RUNTIME_COMM_COMMBASE_H

#include "tessera/runtime/comm.h"
#include "tessera/runtime/comm_error.h"

#include <cstddef>
#include <string>

namespace tessera::comm {

class StreamOps {
public:
  virtual ~StreamOps() = default;
  /// An event (NULL on the host).
  virtual void *createEvent() = 0;
  virtual void destroyEvent(void *event) = 0;
  virtual void recordEvent(void *event, void *stream) = 0;
  /// Later work on `stream` waits for `event`.
  virtual void waitEvent(void *stream, void *event) = 0;
  virtual void *allocate(size_t bytes) = 0;
  virtual void release(void *memory) = 0;
  virtual void copyToComm(void *destination, const void *source, size_t bytes,
                          void *stream) = 0;
  /// Copies to host memory and waits for the copy.
  virtual void copyToHost(void *destination, const void *source, size_t bytes,
                          void *stream) = 0;
};

/// The StreamOps of host memory: events are no-ops, copies are memcpy.
StreamOps &hostStreamOps();

} // namespace tessera::comm

struct tessera_comm {
  virtual ~tessera_comm() = default;
  virtual int32_t size() const = 0;
  virtual int32_t rank() const = 0;
  /// "world" or "axis 1 (group 0)": for messages.
  virtual const std::string &name() const = 0;
  virtual tessera::comm::StreamOps &streamOps() = 0;

  virtual void allReduce(tessera_tensor &x, tessera_reduce_op op,
                         void *stream) = 0;
  virtual void allGather(const tessera_tensor &x, tessera_tensor &y,
                         int32_t axis, void *stream) = 0;
  virtual void reduceScatter(const tessera_tensor &x, tessera_tensor &y,
                             int32_t axis, void *stream) = 0;
  virtual void allToAll(const tessera_tensor &x, tessera_tensor &y,
                        int32_t splitAxis, int32_t concatAxis,
                        void *stream) = 0;
  virtual void send(const tessera_tensor &x, int32_t peer, void *stream) = 0;
  virtual void recv(tessera_tensor &y, int32_t peer, void *stream) = 0;
  /// comm.h's group_start/group_end. Only NCCL needs them: a comm whose
  /// sends are buffered (the in-process ones, the device-staged ones over
  /// them) cannot deadlock on the order of a send and a receive.
  virtual void groupStart() {}
  virtual void groupEnd() {}
};

#endif // TESSERA_RUNTIME_COMM_COMMBASE_H
