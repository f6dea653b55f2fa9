//===- CudaOffloadedOptimizer.cpp - Pinned state, ranged transfers --------===//

#include "CudaOffloadedOptimizer.h"

#include "TrainingState.h"

#include "tessera/runtime/cpu_kernels.h"
#include "tessera/runtime/host_optimizer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
  hostFirst = HostBuffer(f32Bytes);
  hostSecond = HostBuffer(f32Bytes);
  // The moments are page-locked as the masters are: only the host's AdamW
  // reads them, but in pageable memory it ran 2.3x slower on the GPU
  // machine (GPT-2 124M: 1.62 against 3.80 Gelem/s on 16 threads, one H100
  // host, the twentieth session; Llama 3 8B: 1.38 against 4.01), while on a
  // 2-core VM both ran alike; locked pages are never unmapped or migrated
  // by the kernel's NUMA balancing, the likeliest difference. They are
  // pinned at the first update (pinMoments), not here: pinning commits
  // their pages, and until the load is done the host still holds the
  // state's own copy (Llama 3 8B: 122 of 125 GiB pinned here, 92 pinned
  // later). TESSERA_OFFLOAD_PINNED_MOMENTS=0 leaves them pageable, for the
  // A/B.
  const char *pinned = std::getenv("TESSERA_OFFLOAD_PINNED_MOMENTS");
  momentsToPin = !pinned || std::strcmp(pinned, "0") != 0;
  if (!momentsToPin)
    std::fprintf(stderr, "tessera: TESSERA_OFFLOAD_PINNED_MOMENTS=0: the "
                         "AdamW moments are pageable host memory\n");
  hostGradients = PinnedBuffer(kOffloadStagingSlots * plan.largestGradientSpan *
                               dtypeSize(gradientDtype));
  hostCopies = PinnedBuffer(kOffloadStagingSlots * plan.largestCopySpan *
                            dtypeSize(computeDtype));
  deviceMirror = DeviceBuffer(plan.mirrorElements * dtypeSize(TESSERA_F32),
                              "the f32 weights the step reads as masters");
  for (size_t r = 0; r < plan.ranges.size(); ++r) {
    cudaEvent_t event = nullptr;
    checkCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
              "creating the offloaded optimizer's events");
    downloaded.push_back(event);
  }
  checkCuda(cudaEventCreate(&burstStart),
            "creating the offloaded optimizer's events");
  checkCuda(cudaEventCreate(&burstEnd),
            "creating the offloaded optimizer's events");
}

CudaOffloadedOptimizer::~CudaOffloadedOptimizer() {
  // Unpinned before their HostBuffers free them.
  if (pinnedMoments)
    for (void *moments : {hostFirst.get(), hostSecond.get()})
      cudaHostUnregister(moments);
  for (cudaEvent_t event : downloaded)
    cudaEventDestroy(event);
  for (cudaEvent_t event : {burstStart, burstEnd})
    if (event)
      cudaEventDestroy(event);
}

int64_t CudaOffloadedOptimizer::uploadBytes() const {
  int64_t bytes = 0;
  for (const OffloadRange &range : plan.ranges) {
    bytes += range.copies.count * dtypeSize(computeDtype);
    for (const OffloadSegment &mirror : range.mirrors)
      bytes += mirror.count * dtypeSize(TESSERA_F32);
  }
  return bytes;
}

std::string CudaOffloadedOptimizer::measurements() const {
  if (updates == 0)
    return "";
  int64_t elements = 0, downloadBytes = 0;
  for (const tessera_tensor_chunk &chunk : chunks)
    elements += chunk.count;
  for (size_t r = 0;
       r < std::min<size_t>(plan.ranges.size(), kOffloadStagingSlots); ++r)
    downloadBytes += plan.ranges[r].gradients.count * dtypeSize(gradientDtype);
  const double seconds = adamwSeconds / static_cast<double>(updates);
  char text[320];
  std::snprintf(
      text, sizeof(text),
      "offload optimizer, %lld updates: host AdamW %.2f ms a step (%.2f "
      "Gelem/s on %d threads); gradients device -> host %.1f GB/s; weights "
      "host -> device %.1f GB/s (at load)",
      static_cast<long long>(updates), 1e3 * seconds,
      static_cast<double>(elements) / seconds / 1e9, pool.size(),
      downloadMilliseconds > 0
          ? static_cast<double>(downloadBytes) * static_cast<double>(updates) /
                (downloadMilliseconds * 1e6)
          : 0.0,
      uploadGigabytesPerSecond);
  return text;
}

void *CudaOffloadedOptimizer::mirrorOf(int32_t index) const {
  const int64_t offset = plan.mirrorOffsets[static_cast<size_t>(index)];
  return offset < 0 ? nullptr : at(deviceMirror.get(), offset, TESSERA_F32);
}

unsigned char *CudaOffloadedOptimizer::gradientSlot(size_t range) {
  return at(hostGradients.get(),
            static_cast<int64_t>(range % kOffloadStagingSlots) *
                plan.largestGradientSpan,
            gradientDtype);
}

unsigned char *CudaOffloadedOptimizer::copySlot(size_t range) {
  return at(hostCopies.get(),
            static_cast<int64_t>(range % kOffloadStagingSlots) *
                plan.largestCopySpan,
            computeDtype);
}

CudaOffloadedOptimizer::ChunkView CudaOffloadedOptimizer::viewOf(size_t range,
                                                                 int32_t c) {
  const OffloadRange &span = plan.ranges[range];
  ChunkView view;
  view.chunk = chunks[static_cast<size_t>(c)];
  const int64_t offset = view.chunk.offset;
  const int64_t state = view.chunk.state_offset;
  view.masters = masters() + state;
  view.first = firstMoments() + state;
  view.second = secondMoments() + state;
  view.gradient = at(gradientSlot(range), offset - span.gradients.hostOffset,
                     gradientDtype);
  view.copy =
      view.chunk.copy_offset >= 0
          ? at(copySlot(range), view.chunk.copy_offset - span.copies.hostOffset,
               computeDtype)
          : nullptr;
  view.chunk.offset = 0;
  view.chunk.state_offset = 0;
  if (view.chunk.copy_offset >= 0)
    view.chunk.copy_offset = 0;
  return view;
}

void CudaOffloadedOptimizer::uploadRange(size_t r) {
  const OffloadRange &range = plan.ranges[r];
  if (range.copies.count > 0)
    checkCuda(
        cudaMemcpyAsync(
            at(deviceCopies, range.copies.deviceOffset, computeDtype),
            copySlot(r),
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
  // Once, at load: each range is rounded, uploaded and waited for (its
  // slot is then free), and only its upload is timed.
  checkCuda(cudaStreamSynchronize(stream), "waiting for the GPU");
  double milliseconds = 0;
  for (size_t r = 0; r < plan.ranges.size(); ++r) {
    const OffloadRange &range = plan.ranges[r];
    for (int32_t c = range.firstChunk; c < range.endChunk; ++c) {
      ChunkView view = viewOf(r, c);
      if (view.copy &&
          tessera_cpu_round_chunk_copies(view.masters, view.copy, computeDtype,
                                         &view.chunk, 1) != 0)
        fail(std::string("rounding the compute copies: ") +
             tessera_cpu_last_error());
    }
    checkCuda(cudaEventRecord(burstStart, stream), "timing the upload");
    uploadRange(r);
    checkCuda(cudaEventRecord(burstEnd, stream), "timing the upload");
    checkCuda(cudaEventSynchronize(burstEnd), "uploading the weights");
    float rangeMilliseconds = 0;
    checkCuda(cudaEventElapsedTime(&rangeMilliseconds, burstStart, burstEnd),
              "timing the upload");
    milliseconds += rangeMilliseconds;
  }
  if (milliseconds > 0)
    uploadGigabytesPerSecond =
        static_cast<double>(uploadBytes()) / (milliseconds * 1e6);
}

void CudaOffloadedOptimizer::downloadRange(size_t r,
                                           const void *deviceGradients) {
  const OffloadSegment &span = plan.ranges[r].gradients;
  checkCuda(cudaMemcpyAsync(
                gradientSlot(r),
                at(const_cast<void *>(deviceGradients), span.deviceOffset,
                   gradientDtype),
                static_cast<size_t>(span.count * dtypeSize(gradientDtype)),
                cudaMemcpyDeviceToHost, stream),
            "downloading the gradients");
  checkCuda(cudaEventRecord(downloaded[r], stream),
            "marking the gradients' download");
}

void CudaOffloadedOptimizer::startGradientDownload(
    const void *deviceGradients) {
  if (downloading)
    return;
  // Timed: the first slots' burst, which nothing interleaves.
  checkCuda(cudaEventRecord(burstStart, stream), "timing the download");
  for (size_t r = 0;
       r < std::min<size_t>(plan.ranges.size(), kOffloadStagingSlots); ++r)
    downloadRange(r, deviceGradients);
  checkCuda(cudaEventRecord(burstEnd, stream), "timing the download");
  downloading = true;
}

void CudaOffloadedOptimizer::pinMoments() {
  if (!momentsToPin || pinnedMoments)
    return;
  const auto bytes = static_cast<size_t>(layout.totalBytes(TESSERA_F32));
  for (void *moments : {hostFirst.get(), hostSecond.get()})
    checkCuda(cudaHostRegister(moments, bytes, cudaHostRegisterDefault),
              "pinning the AdamW moments");
  pinnedMoments = true;
}

void CudaOffloadedOptimizer::update(const AdamWUpdate &update,
                                    const void *deviceGradients) {
  pinMoments();
  startGradientDownload(deviceGradients);
  std::atomic<int32_t> firstBad{static_cast<int32_t>(chunks.size())};
  std::mutex errorMutex;
  std::string error;
  for (size_t r = 0; r < plan.ranges.size(); ++r) {
    const OffloadRange &range = plan.ranges[r];
    checkCuda(cudaEventSynchronize(downloaded[r]),
              "waiting for the gradients' download");
    const auto begin = std::chrono::steady_clock::now();
    pool.run(range.endChunk - range.firstChunk, [&](int64_t item) {
      const int32_t c = range.firstChunk + static_cast<int32_t>(item);
      ChunkView view = viewOf(r, c);
      int32_t nonfinite = -1;
      if (tessera_cpu_chunk_adamw(
              view.masters, view.gradient, gradientDtype, view.first,
              view.second, deviceCopies ? view.copy : nullptr, computeDtype,
              &view.chunk, 1, update.step, update.learningRate, update.beta1,
              update.beta2, update.epsilon, update.weightDecay,
              update.gradientScale, &nonfinite) != 0) {
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
    adamwSeconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
            .count();
    if (!error.empty())
      fail("AdamW on the host: " + error);
    uploadRange(r);
    // Range r's gradient slot is read: the next range it stages may come.
    if (r + kOffloadStagingSlots < plan.ranges.size())
      downloadRange(r + kOffloadStagingSlots, deviceGradients);
  }
  // burstEnd follows the first slots' downloads: waited for explicitly (a
  // query of an unfinished event would leave cudaErrorNotReady behind for
  // the next kernel check to report).
  checkCuda(cudaEventSynchronize(burstEnd), "timing the download");
  float milliseconds = 0;
  checkCuda(cudaEventElapsedTime(&milliseconds, burstStart, burstEnd),
            "timing the download");
  downloadMilliseconds += milliseconds;
  ++updates;
  const int32_t bad = firstBad.load();
  nonFiniteTensor = bad < static_cast<int32_t>(chunks.size())
                        ? chunks[static_cast<size_t>(bad)].tensor
                        : -1;
}

} // namespace tessera::train
