//===- DeviceStagedComm.cpp - An in-process comm over device memory -------===//
//
// device_staged_comm.h. Each collective: wait for the caller's stream (the
// operand's producers), download the operand, run the wrapped in-process
// collective on host copies, upload the result and wait for the upload, so
// the host copies can be reused. The wrapped comm's own checks (the peers'
// shapes and dtypes) still apply; comm.h's ABI checked the local ones
// already. The host copies live in pinned buffers each comm keeps and grows
// (a comm is one rank's, called from one thread): a pipeline's stages send
// a [vocabulary, hidden] gradient part every step, which pageable memory
// allocated and zeroed per call staged at under 1 GB/s.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/device_staged_comm.h"

#include "CommBase.h"
#include "CudaCheck.h"
#include "CudaStreamOps.h"
#include "TensorBlocks.h"

namespace tessera::comm {
namespace {

cudaStream_t asStream(void *stream) {
  return static_cast<cudaStream_t>(stream);
}

/// Pinned host memory that grows to the largest tensor staged through it.
class PinnedBuffer {
public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer &) = delete;
  PinnedBuffer &operator=(const PinnedBuffer &) = delete;
  ~PinnedBuffer() {
    if (data)
      cudaFreeHost(data);
  }
  void *reserve(size_t bytes) {
    if (bytes > capacity) {
      if (data)
        TESSERA_CUDA_CHECK(cudaFreeHost(data));
      data = nullptr;
      capacity = 0;
      TESSERA_CUDA_CHECK(cudaMallocHost(&data, bytes));
      capacity = bytes;
    }
    return data;
  }

private:
  void *data = nullptr;
  size_t capacity = 0;
};

/// A host copy of a device tensor (or room for one), in `buffer`.
class HostCopy {
public:
  HostCopy(const tessera_tensor &device, PinnedBuffer &buffer)
      : bytes(tensorBytes(device)), tensor(device) {
    tensor.data = buffer.reserve(bytes);
  }
  void download(const tessera_tensor &device, void *stream) {
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(tensor.data, device.data, bytes,
                                       cudaMemcpyDeviceToHost,
                                       asStream(stream)));
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(asStream(stream)));
  }
  void upload(tessera_tensor &device, void *stream) const {
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(device.data, tensor.data, bytes,
                                       cudaMemcpyHostToDevice,
                                       asStream(stream)));
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(asStream(stream)));
  }

  size_t bytes;
  tessera_tensor tensor;
};

class DeviceStagedComm final : public tessera_comm {
public:
  explicit DeviceStagedComm(tessera_comm &host) : host(host) {}

  int32_t size() const override { return host.size(); }
  int32_t rank() const override { return host.rank(); }
  const std::string &name() const override { return host.name(); }
  StreamOps &streamOps() override { return cudaStreamOps(); }

  void allReduce(tessera_tensor &x, tessera_reduce_op op,
                 void *stream) override {
    HostCopy value(x, staging[0]);
    value.download(x, stream);
    host.allReduce(value.tensor, op, nullptr);
    value.upload(x, stream);
  }
  void allGather(const tessera_tensor &x, tessera_tensor &y, int32_t axis,
                 void *stream) override {
    exchange(x, y, stream, [&](tessera_tensor &in, tessera_tensor &out) {
      host.allGather(in, out, axis, nullptr);
    });
  }
  void reduceScatter(const tessera_tensor &x, tessera_tensor &y, int32_t axis,
                     void *stream) override {
    exchange(x, y, stream, [&](tessera_tensor &in, tessera_tensor &out) {
      host.reduceScatter(in, out, axis, nullptr);
    });
  }
  void allToAll(const tessera_tensor &x, tessera_tensor &y, int32_t splitAxis,
                int32_t concatAxis, void *stream) override {
    exchange(x, y, stream, [&](tessera_tensor &in, tessera_tensor &out) {
      host.allToAll(in, out, splitAxis, concatAxis, nullptr);
    });
  }
  void send(const tessera_tensor &x, int32_t peer, void *stream) override {
    // The wrapped send copies the message: the buffer is free on return.
    HostCopy value(x, staging[0]);
    value.download(x, stream);
    host.send(value.tensor, peer, nullptr);
  }
  void recv(tessera_tensor &y, int32_t peer, void *stream) override {
    HostCopy value(y, staging[0]);
    host.recv(value.tensor, peer, nullptr);
    value.upload(y, stream);
  }

private:
  tessera_comm &host;
  /// An operand's host copy, and a result's.
  PinnedBuffer staging[2];

  /// `collective(host x, host y)` between a download of x and an upload
  /// of y.
  template <typename Collective>
  void exchange(const tessera_tensor &x, tessera_tensor &y, void *stream,
                Collective collective) {
    HostCopy in(x, staging[0]), out(y, staging[1]);
    in.download(x, stream);
    collective(in.tensor, out.tensor);
    out.upload(y, stream);
  }
};

} // namespace

DeviceStagedComms::DeviceStagedComms(const RankComms &hostComms) {
  auto wrap = [&](tessera_comm *comm) -> tessera_comm * {
    if (!comm)
      return nullptr;
    owned.push_back(std::make_unique<DeviceStagedComm>(*comm));
    return owned.back().get();
  };
  staged.rank = hostComms.rank;
  staged.coordinates = hostComms.coordinates;
  staged.world = wrap(hostComms.world);
  for (tessera_comm *axis : hostComms.axes)
    staged.axes.push_back(wrap(axis));
}

DeviceStagedComms::~DeviceStagedComms() = default;

} // namespace tessera::comm
