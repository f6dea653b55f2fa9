//===- HostStagedGather.cpp - all_gather of host tensors over any comm ----===//
//
// A mesh run gathers whole tensors for the files it writes (checkpoints,
// --dump-params, --dump-grads) from blocks the driver holds in host memory.
// A host comm takes them as they are; a device comm (NCCL) works in device
// memory, so the blocks travel through two buffers of the comm's memory on
// `stream`, and the call waits for the result. Rare and whole-tensor sized,
// so the buffers are made and freed per call.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/gradient_reducer.h"

#include "CommBase.h"
#include "TensorBlocks.h"

namespace tessera::comm {
namespace {

/// A buffer of the comm's memory, freed with the call.
class CommBuffer {
public:
  CommBuffer(StreamOps &ops, size_t bytes)
      : ops(ops), memory(ops.allocate(bytes > 0 ? bytes : 1)) {}
  ~CommBuffer() { ops.release(memory); }
  CommBuffer(const CommBuffer &) = delete;
  CommBuffer &operator=(const CommBuffer &) = delete;
  void *get() const { return memory; }

private:
  StreamOps &ops;
  void *memory;
};

void check(int status, const char *what) {
  if (status != 0)
    throw CommError(std::string(what) + ": " + tessera_comm_last_error());
}

} // namespace

void allGatherHostTensors(tessera_comm *comm, const tessera_tensor &x,
                          tessera_tensor &y, int32_t axis, void *stream) {
  if (!comm)
    throw CommError("gathering host tensors: no communicator");
  StreamOps &ops = comm->streamOps();
  if (&ops == &hostStreamOps()) {
    check(tessera_comm_all_gather(comm, &x, &y, axis, stream), "all_gather");
    return;
  }
  const size_t blockBytes = tensorBytes(x), wholeBytes = tensorBytes(y);
  CommBuffer block(ops, blockBytes), whole(ops, wholeBytes);
  ops.copyToComm(block.get(), x.data, blockBytes, stream);
  tessera_tensor staged = x, gathered = y;
  staged.data = block.get();
  gathered.data = whole.get();
  check(tessera_comm_all_gather(comm, &staged, &gathered, axis, stream),
        "all_gather");
  ops.copyToHost(y.data, whole.get(), wholeBytes, stream);
}

} // namespace tessera::comm
