//===- NcclComm.cpp - comm.h's collectives on NCCL ------------------------===//
//
// NCCL moves contiguous buffers; comm.h moves blocks along any axis. When
// the axis has leading dims (outer > 1), a block is a strided 2-D region,
// so it is packed into (or unpacked from) device scratch with one
// cudaMemcpy2DAsync per rank block, on the same stream, before (after) the
// NCCL call. all_to_all is grouped ncclSend/ncclRecv, one pair per peer;
// groupStart/groupEnd (comm.h's group calls) let the pipeline driver group
// its own sends and receives the same way.
// Every call is followed by watchdog.track(), so a collective that never
// completes is noticed.
//
//===----------------------------------------------------------------------===//

#include "NcclComm.h"

#include "CudaCheck.h"
#include "CudaStreamOps.h"
#include "TensorBlocks.h"

namespace tessera::comm {
namespace {

cudaStream_t asStream(void *stream) {
  return static_cast<cudaStream_t>(stream);
}

ncclDataType_t ncclType(int32_t dtype) {
  switch (dtype) {
  case TESSERA_F32:
    return ncclFloat32;
  case TESSERA_BF16:
    return ncclBfloat16;
  case TESSERA_F16:
    return ncclFloat16;
  case TESSERA_F64:
    return ncclFloat64;
  case TESSERA_I64:
    return ncclInt64;
  case TESSERA_I32:
    return ncclInt32;
  case TESSERA_I8:
    return ncclInt8;
  case TESSERA_BOOL:
    return ncclUint8;
  default:
    throw CommError(std::string("NCCL cannot move ") +
                    describeTensor(tessera_tensor{nullptr, dtype, 0, {}}) +
                    " elements (no such NCCL type)");
  }
}

void *offsetBy(void *data, size_t bytes) {
  return static_cast<unsigned char *>(data) + bytes;
}
const void *offsetBy(const void *data, size_t bytes) {
  return static_cast<const unsigned char *>(data) + bytes;
}

/// Copies every block of `strided` (geometry `geometry`) to or from
/// consecutive places in `packed`.
void copyBlocks(const BlockGeometry &geometry, int64_t blocks, void *strided,
                void *packed, bool pack, cudaStream_t stream) {
  size_t runBytes =
      static_cast<size_t>(geometry.blockRun) * geometry.elementBytes;
  size_t pitch = static_cast<size_t>(geometry.rowPitch) * geometry.elementBytes;
  size_t blockBytes = runBytes * static_cast<size_t>(geometry.outer);
  for (int64_t block = 0; block < blocks; ++block) {
    void *region = offsetBy(strided, geometry.runOffsetBytes(block, 0));
    void *piece = offsetBy(packed, static_cast<size_t>(block) * blockBytes);
    if (pack)
      TESSERA_CUDA_CHECK(cudaMemcpy2DAsync(piece, runBytes, region, pitch,
                                           runBytes,
                                           static_cast<size_t>(geometry.outer),
                                           cudaMemcpyDeviceToDevice, stream));
    else
      TESSERA_CUDA_CHECK(cudaMemcpy2DAsync(region, pitch, piece, runBytes,
                                           runBytes,
                                           static_cast<size_t>(geometry.outer),
                                           cudaMemcpyDeviceToDevice, stream));
  }
}

std::string describe(const char *collective, const tessera_tensor &x,
                     const std::string &group) {
  return std::string(collective) + " of " + describeTensor(x) + " on " + group;
}

} // namespace

NcclComm::NcclComm(ncclComm_t handle, std::string name, NcclWatchdog &watchdog)
    : comm(handle), groupName(std::move(name)), watchdog(watchdog) {
  int count = 0, rank = 0;
  watchdog.check(ncclCommCount(comm, &count), comm, "ncclCommCount");
  watchdog.check(ncclCommUserRank(comm, &rank), comm, "ncclCommUserRank");
  groupSize = count;
  groupRank = rank;
}

NcclComm::~NcclComm() {
  for (Scratch &buffer : scratch)
    if (buffer.data)
      cudaFree(buffer.data);
}

StreamOps &NcclComm::streamOps() { return cudaStreamOps(); }

void *NcclComm::scratchBuffer(int slot, size_t bytes, cudaStream_t stream) {
  Scratch &buffer = scratch[slot];
  if (buffer.bytes < bytes) {
    // Growing happens in the first steps only; waiting for the device
    // keeps earlier collectives from reading a freed buffer.
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(stream));
    TESSERA_CUDA_CHECK(cudaDeviceSynchronize());
    if (buffer.data)
      TESSERA_CUDA_CHECK(cudaFree(buffer.data));
    buffer.data = nullptr;
    buffer.bytes = 0;
    TESSERA_CUDA_CHECK(cudaMalloc(&buffer.data, bytes));
    buffer.bytes = bytes;
  }
  return buffer.data;
}

void NcclComm::enqueued(ncclResult_t result, cudaStream_t stream,
                        const std::string &what) {
  watchdog.check(result, comm, what);
  watchdog.track(stream, what);
}

void NcclComm::allReduce(tessera_tensor &x, tessera_reduce_op op,
                         void *stream) {
  cudaStream_t cudaStream = asStream(stream);
  enqueued(ncclAllReduce(x.data, x.data, static_cast<size_t>(tensorElements(x)),
                         ncclType(x.dtype),
                         op == TESSERA_REDUCE_MAX ? ncclMax : ncclSum, comm,
                         cudaStream),
           cudaStream, describe("all_reduce", x, groupName));
}

void NcclComm::allGather(const tessera_tensor &x, tessera_tensor &y,
                         int32_t axis, void *stream) {
  cudaStream_t cudaStream = asStream(stream);
  BlockGeometry geometry = blockGeometry(y, axis, groupSize);
  void *gathered = geometry.outer == 1
                       ? y.data
                       : scratchBuffer(0, tensorBytes(y), cudaStream);
  enqueued(ncclAllGather(x.data, gathered,
                         static_cast<size_t>(tensorElements(x)),
                         ncclType(x.dtype), comm, cudaStream),
           cudaStream, describe("all_gather", x, groupName));
  if (gathered != y.data)
    copyBlocks(geometry, groupSize, y.data, gathered, false, cudaStream);
}

void NcclComm::reduceScatter(const tessera_tensor &x, tessera_tensor &y,
                             int32_t axis, void *stream) {
  cudaStream_t cudaStream = asStream(stream);
  BlockGeometry geometry = blockGeometry(x, axis, groupSize);
  const void *packed = x.data;
  if (geometry.outer != 1) {
    void *buffer = scratchBuffer(0, tensorBytes(x), cudaStream);
    copyBlocks(geometry, groupSize, x.data, buffer, true, cudaStream);
    packed = buffer;
  }
  enqueued(ncclReduceScatter(packed, y.data,
                             static_cast<size_t>(tensorElements(y)),
                             ncclType(x.dtype), ncclSum, comm, cudaStream),
           cudaStream, describe("reduce_scatter", x, groupName));
}

void NcclComm::allToAll(const tessera_tensor &x, tessera_tensor &y,
                        int32_t splitAxis, int32_t concatAxis, void *stream) {
  cudaStream_t cudaStream = asStream(stream);
  BlockGeometry sent = blockGeometry(x, splitAxis, groupSize);
  BlockGeometry received = blockGeometry(y, concatAxis, groupSize);
  const void *sendBuffer = x.data;
  if (sent.outer != 1) {
    void *buffer = scratchBuffer(0, tensorBytes(x), cudaStream);
    copyBlocks(sent, groupSize, x.data, buffer, true, cudaStream);
    sendBuffer = buffer;
  }
  void *receiveBuffer = received.outer == 1
                            ? y.data
                            : scratchBuffer(1, tensorBytes(y), cudaStream);
  auto count = static_cast<size_t>(sent.blockElements());
  size_t blockBytes = count * sent.elementBytes;
  ncclDataType_t type = ncclType(x.dtype);
  std::string what = describe("all_to_all", x, groupName);
  watchdog.check(ncclGroupStart(), comm, what);
  for (int32_t peer = 0; peer < groupSize; ++peer) {
    auto at = static_cast<size_t>(peer) * blockBytes;
    watchdog.check(
        ncclSend(offsetBy(sendBuffer, at), count, type, peer, comm, cudaStream),
        comm, what);
    watchdog.check(ncclRecv(offsetBy(receiveBuffer, at), count, type, peer,
                            comm, cudaStream),
                   comm, what);
  }
  enqueued(ncclGroupEnd(), cudaStream, what);
  if (receiveBuffer != y.data)
    copyBlocks(received, groupSize, y.data, receiveBuffer, false, cudaStream);
}

void NcclComm::pointToPoint(ncclResult_t result, cudaStream_t stream,
                            const std::string &what) {
  if (!grouped) {
    enqueued(result, stream, what);
    return;
  }
  watchdog.check(result, comm, what);
  groupStream = stream;
  groupCalls += groupCalls.empty() ? what : ", " + what;
}

void NcclComm::send(const tessera_tensor &x, int32_t peer, void *stream) {
  cudaStream_t cudaStream = asStream(stream);
  pointToPoint(ncclSend(x.data, static_cast<size_t>(tensorElements(x)),
                        ncclType(x.dtype), peer, comm, cudaStream),
               cudaStream,
               describe("send", x, groupName) + " to rank " +
                   std::to_string(peer));
}

void NcclComm::recv(tessera_tensor &y, int32_t peer, void *stream) {
  cudaStream_t cudaStream = asStream(stream);
  pointToPoint(ncclRecv(y.data, static_cast<size_t>(tensorElements(y)),
                        ncclType(y.dtype), peer, comm, cudaStream),
               cudaStream,
               describe("recv", y, groupName) + " from rank " +
                   std::to_string(peer));
}

void NcclComm::groupStart() {
  if (grouped)
    throw CommError("group_start on " + groupName +
                    " inside an open group (groups do not nest)");
  watchdog.check(ncclGroupStart(), comm, "group_start on " + groupName);
  grouped = true;
  groupStream = nullptr;
  groupCalls.clear();
}

void NcclComm::groupEnd() {
  if (!grouped)
    throw CommError("group_end on " + groupName + " without group_start");
  grouped = false;
  std::string what = "group of " + (groupCalls.empty() ? "no calls" : groupCalls);
  // An empty group enqueues nothing: there is no stream to watch.
  if (groupStream)
    enqueued(ncclGroupEnd(), groupStream, what);
  else
    watchdog.check(ncclGroupEnd(), comm, what);
}

} // namespace tessera::comm
