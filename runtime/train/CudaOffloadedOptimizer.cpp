//===- CudaOffloadedOptimizer.cpp - Pinned state, ranged transfers --------===//

#include "CudaOffloadedOptimizer.h"

#include "TrainingState.h"

#include "tessera/runtime/cpu_kernels.h"
#include "tessera/runtime/host_optimizer.h"

#include <atomic>
#include <mutex>
#include <string>
#include <utility>

namespace tessera::train {
namespace {

unsigned char *at(void *base, int64_t element, int32_t dtype) {
  return static_cast<unsigned char *>(base) + element * dtypeSize(dtype);
}

} // namespace

CudaOffloadedOptimizer::CudaOffloadedOptimizer(
    const ParameterLayout &layout, std::vector<tessera_tensor_chunk> table,
    int32_t computeDtype, void *deviceCopies, int64_t copyElements,
    int32_t gradientDtype, cudaStream_t stream, int64_t rangeElements)
    : layout(layout), chunks(std::move(table)),
      plan(planOffload(layout, chunks, rangeElements)),
      computeDtype(computeDtype), gradientDtype(gradientDtype),
      deviceCopies(copyElements > 0 ? deviceCopies : nullptr), stream(stream) {
  const int64_t f32Bytes = layout.totalBytes(TESSERA_F32);
  hostMasters = PinnedBuffer(f32Bytes);
  hostFirst = PinnedBuffer(f32Bytes);
  hostSecond = PinnedBuffer(f32Bytes);
  hostGradients = PinnedBuffer(layout.totalBytes(gradientDtype));
  hostCopies = PinnedBuffer(copyElements * dtypeSize(computeDtype));
  deviceMirror = DeviceBuffer(plan.mirrorElements * dtypeSize(TESSERA_F32),
                              "the f32 weights the step reads as masters");
  for (size_t r = 0; r < plan.ranges.size(); ++r) {
    cudaEvent_t event = nullptr;
    checkCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
              "creating the offloaded optimizer's events");
    downloaded.push_back(event);
  }
}

CudaOffloadedOptimizer::~CudaOffloadedOptimizer() {
  for (cudaEvent_t event : downloaded)
    cudaEventDestroy(event);
}

void *CudaOffloadedOptimizer::mirrorOf(int32_t index) const {
  const int64_t offset = plan.mirrorOffsets[static_cast<size_t>(index)];
  return offset < 0 ? nullptr : at(deviceMirror.get(), offset, TESSERA_F32);
}

void CudaOffloadedOptimizer::uploadRange(const OffloadRange &range) {
  if (range.copies.count > 0)
    checkCuda(
        cudaMemcpyAsync(
            at(deviceCopies, range.copies.deviceOffset, computeDtype),
            at(hostCopies.get(), range.copies.hostOffset, computeDtype),
            static_cast<size_t>(range.copies.count * dtypeSize(computeDtype)),
            cudaMemcpyHostToDevice, stream),
        "uploading the updated compute copies");
  for (const OffloadSegment &mirror : range.mirrors)
    checkCuda(cudaMemcpyAsync(
                  at(deviceMirror.get(), mirror.deviceOffset, TESSERA_F32),
                  at(hostMasters.get(), mirror.hostOffset, TESSERA_F32),
                  static_cast<size_t>(mirror.count * dtypeSize(TESSERA_F32)),
                  cudaMemcpyHostToDevice, stream),
              "uploading the updated weights read as masters");
}

void CudaOffloadedOptimizer::uploadWeights() {
  // The stream may still be reading the staging (an upload in flight).
  checkCuda(cudaStreamSynchronize(stream), "waiting for the GPU");
  if (deviceCopies &&
      tessera_cpu_round_chunk_copies(masters(), hostCopies.get(), computeDtype,
                                     chunks.data(),
                                     static_cast<int32_t>(chunks.size())) != 0)
    fail(std::string("rounding the compute copies: ") +
         tessera_cpu_last_error());
  for (const OffloadRange &range : plan.ranges)
    uploadRange(range);
}

void CudaOffloadedOptimizer::startGradientDownload(
    const void *deviceGradients) {
  if (downloading)
    return;
  for (size_t r = 0; r < plan.ranges.size(); ++r) {
    const OffloadSegment &span = plan.ranges[r].gradients;
    checkCuda(cudaMemcpyAsync(
                  at(hostGradients.get(), span.hostOffset, gradientDtype),
                  at(const_cast<void *>(deviceGradients), span.deviceOffset,
                     gradientDtype),
                  static_cast<size_t>(span.count * dtypeSize(gradientDtype)),
                  cudaMemcpyDeviceToHost, stream),
              "downloading the gradients");
    checkCuda(cudaEventRecord(downloaded[r], stream),
              "marking the gradients' download");
  }
  downloading = true;
}

void CudaOffloadedOptimizer::update(const AdamWUpdate &update,
                                    const void *deviceGradients) {
  startGradientDownload(deviceGradients);
  std::atomic<int32_t> firstBad{static_cast<int32_t>(chunks.size())};
  std::mutex errorMutex;
  std::string error;
  void *copies = deviceCopies ? hostCopies.get() : nullptr;
  for (size_t r = 0; r < plan.ranges.size(); ++r) {
    const OffloadRange &range = plan.ranges[r];
    checkCuda(cudaEventSynchronize(downloaded[r]),
              "waiting for the gradients' download");
    pool.run(range.endChunk - range.firstChunk, [&](int64_t item) {
      const int32_t c = range.firstChunk + static_cast<int32_t>(item);
      int32_t nonfinite = -1;
      if (tessera_cpu_chunk_adamw(
              masters(), hostGradients.get(), gradientDtype, firstMoments(),
              secondMoments(), copies, computeDtype, &chunks[c], 1, update.step,
              update.learningRate, update.beta1, update.beta2, update.epsilon,
              update.weightDecay, update.gradientScale, &nonfinite) != 0) {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (error.empty())
          error = tessera_cpu_last_error();
        return;
      }
      if (nonfinite < 0)
        return;
      int32_t seen = firstBad.load();
      while (c < seen && !firstBad.compare_exchange_weak(seen, c)) {
      }
    });
    if (!error.empty())
      fail("AdamW on the host: " + error);
    uploadRange(range);
  }
  const int32_t bad = firstBad.load();
  nonFiniteTensor = bad < static_cast<int32_t>(chunks.size())
                        ? chunks[static_cast<size_t>(bad)].tensor
                        : -1;
}

} // namespace tessera::train
