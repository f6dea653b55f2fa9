//===- DeviceStagedComm.cpp - An in-process comm over device memory -------===//
//
// device_staged_comm.h. Each collective: wait for the caller's stream (the
// operand's producers), download the operand, run the wrapped in-process
// collective on host copies, upload the result and wait for the upload, so
// the host copies can go. The wrapped comm's own checks (the peers' shapes
// and dtypes) still apply; comm.h's ABI checked the local ones already.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/device_staged_comm.h"

#include "CommBase.h"
#include "CudaCheck.h"
#include "CudaStreamOps.h"
#include "TensorBlocks.h"

#include <vector>

namespace tessera::comm {
namespace {

cudaStream_t asStream(void *stream) {
  return static_cast<cudaStream_t>(stream);
}

/// A host copy of a device tensor (or room for one).
class HostCopy {
public:
  explicit HostCopy(const tessera_tensor &device)
      : bytes(tensorBytes(device)), tensor(device) {
    tensor.data = bytes.data();
  }
  void download(const tessera_tensor &device, void *stream) {
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(bytes.data(), device.data, bytes.size(),
                                       cudaMemcpyDeviceToHost,
                                       asStream(stream)));
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(asStream(stream)));
  }
  void upload(tessera_tensor &device, void *stream) const {
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(device.data, bytes.data(), bytes.size(),
                                       cudaMemcpyHostToDevice,
                                       asStream(stream)));
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(asStream(stream)));
  }

  std::vector<unsigned char> bytes;
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
    HostCopy value(x);
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
    HostCopy value(x);
    value.download(x, stream);
    host.send(value.tensor, peer, nullptr);
  }
  void recv(tessera_tensor &y, int32_t peer, void *stream) override {
    HostCopy value(y);
    host.recv(value.tensor, peer, nullptr);
    value.upload(y, stream);
  }

private:
  tessera_comm &host;

  /// `collective(host x, host y)` between a download of x and an upload
  /// of y.
  template <typename Collective>
  static void exchange(const tessera_tensor &x, tessera_tensor &y,
                       void *stream, Collective collective) {
    HostCopy in(x), out(y);
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
