//===- CudaStreamOps.cpp - StreamOps on CUDA streams ----------------------===//

#include "CudaStreamOps.h"

#include "CudaCheck.h"

namespace tessera::comm {
namespace {

cudaStream_t asStream(void *stream) {
  return static_cast<cudaStream_t>(stream);
}
cudaEvent_t asEvent(void *event) { return static_cast<cudaEvent_t>(event); }

class CudaOps : public StreamOps {
public:
  void *createEvent() override {
    cudaEvent_t event = nullptr;
    TESSERA_CUDA_CHECK(
        cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return event;
  }
  void destroyEvent(void *event) override {
    if (event)
      cudaEventDestroy(asEvent(event));
  }
  void recordEvent(void *event, void *stream) override {
    TESSERA_CUDA_CHECK(cudaEventRecord(asEvent(event), asStream(stream)));
  }
  void waitEvent(void *stream, void *event) override {
    TESSERA_CUDA_CHECK(
        cudaStreamWaitEvent(asStream(stream), asEvent(event), 0));
  }
  void *allocate(size_t bytes) override {
    void *memory = nullptr;
    TESSERA_CUDA_CHECK(cudaMalloc(&memory, bytes));
    return memory;
  }
  void release(void *memory) override {
    if (memory)
      cudaFree(memory);
  }
  void copyToComm(void *destination, const void *source, size_t bytes,
                  void *stream) override {
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(
        destination, source, bytes, cudaMemcpyHostToDevice, asStream(stream)));
  }
  void copyToHost(void *destination, const void *source, size_t bytes,
                  void *stream) override {
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(
        destination, source, bytes, cudaMemcpyDeviceToHost, asStream(stream)));
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(asStream(stream)));
  }
};

} // namespace

StreamOps &cudaStreamOps() {
  static CudaOps operations;
  return operations;
}

} // namespace tessera::comm
