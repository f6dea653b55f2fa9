//===- CudaOffloadedOptimizer.h - AdamW on the host, GPU run ----*- C++ -*-===//
//
// The state and the transfers of `--offload optimizer` (OptimizerOffload.h
// says what lives where). A step, on the backend's one stream:
//
//   backward (the graph or eager kernels) writes the gradients;
//   sums of squares per chunk -> host (the norm, as without offload);
//   the first kOffloadStagingSlots ranges' gradients device -> their
//     pinned staging slots, an event after each;
//   [host] per range r: wait for its event, AdamW over its chunks on the
//     pool's threads (tessera_cpu_chunk_adamw: masters, moments, and the
//     rounded copies into r's copy slot), then enqueue r's copies (and
//     mirrored masters) host -> device, then range r + slots' gradients
//     into the slot r just freed;
//   the next step's forward is enqueued behind those uploads on the same
//   stream, so it reads the updated weights without a host wait.
//
// So the host's AdamW of range r overlaps the downloads of the next ranges
// and the uploads of the previous ones. A slot is never overwritten while a
// copy reads it: the host refills range r's slots only after waiting for
// range r + slots' download, which the one stream runs after r's upload;
// a download into r's slot is enqueued only after the host has read it.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_CUDAOFFLOADEDOPTIMIZER_H
#define TESSERA_RUNTIME_TRAIN_CUDAOFFLOADEDOPTIMIZER_H

#include "CudaBuffers.h"
#include "HostThreadPool.h"
#include "OptimizerOffload.h"
#include "TrainingBackend.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

namespace tessera::train {

class CudaOffloadedOptimizer {
public:
  /// 32 MiB of f32 masters a range: enough that its copies run at PCIe
  /// speed, few enough elements that a GPT-2 124M step has 16 ranges for
  /// the host to overlap with the transfers.
  static constexpr int64_t kDefaultRangeElements = int64_t(1) << 23;

  /// `chunks`: the whole table, copy_offset placed; `deviceCopies`: the
  /// backend's compute copies (`copyElements` of `computeDtype`);
  /// `gradientDtype`: the optimizer gradients' dtype (f32 when
  /// accumulating); `rangeElements`: about how many elements a range of
  /// the pipelined transfers holds. Allocates the pinned host state and the
  /// device mirror.
  CudaOffloadedOptimizer(const ParameterLayout &layout,
                         std::vector<tessera_tensor_chunk> chunks,
                         int32_t computeDtype, void *deviceCopies,
                         int64_t copyElements, int32_t gradientDtype,
                         cudaStream_t stream,
                         int64_t rangeElements = kDefaultRangeElements);
  ~CudaOffloadedOptimizer();
  CudaOffloadedOptimizer(const CudaOffloadedOptimizer &) = delete;
  CudaOffloadedOptimizer &operator=(const CudaOffloadedOptimizer &) = delete;

  /// The host state (layout order, f32): what loadState fills and
  /// storeState reads.
  float *masters() { return static_cast<float *>(hostMasters.get()); }
  float *firstMoments() { return static_cast<float *>(hostFirst.get()); }
  float *secondMoments() { return static_cast<float *>(hostSecond.get()); }
  /// Where the step reads parameter `index` when it reads its master.
  void *mirrorOf(int32_t index) const;
  const OffloadPlan &getPlan() const { return plan; }

  /// Rounds every copy from the host masters and uploads the copies and
  /// the mirror (start, --resume), on the stream.
  void uploadWeights();
  /// Enqueues the gradients' download (`deviceGradients`: the optimizer
  /// gradients, flat) of the first ranges, one a slot, after the backward
  /// (update enqueues the others as slots free); a second call before
  /// endStep does nothing.
  void startGradientDownload(const void *deviceGradients);
  /// The step is over (updated or skipped): the next one downloads anew.
  void endStep() { downloading = false; }
  /// AdamW over every chunk on the host (the download started if it was
  /// not), each range's uploads enqueued as soon as it is updated.
  void update(const AdamWUpdate &update, const void *deviceGradients);
  /// The first parameter the last update left non-finite, or -1.
  int32_t nonFiniteParameter() const { return nonFiniteTensor; }
  int32_t threads() const { return pool.size(); }
  /// What the run measured, for the end-of-run line and the cluster file's
  /// host and PCIe numbers: the host AdamW's time a step and rate, the
  /// gradients' download rate (timed by events around the burst), and the
  /// weights' upload rate at load (one burst, not overlapped). Empty before
  /// the first update.
  std::string measurements() const;

private:
  /// Pins the moments at the first update, once the load has freed the
  /// host's copy of the state.
  void pinMoments();
  void uploadRange(size_t range);
  void downloadRange(size_t range, const void *deviceGradients);
  /// Range `range`'s staging slots.
  unsigned char *gradientSlot(size_t range);
  unsigned char *copySlot(size_t range);
  /// `chunk` re-based for tessera_cpu_chunk_adamw and
  /// tessera_cpu_round_chunk_copies, which index every buffer by the
  /// chunk's offsets: the pointers of its slice of the masters, moments,
  /// gradient slot and copy slot, its offsets 0.
  struct ChunkView {
    tessera_tensor_chunk chunk;
    float *masters, *first, *second;
    unsigned char *gradient, *copy;
  };
  ChunkView viewOf(size_t range, int32_t chunk);
  /// Bytes a step uploads: the copies and the mirrored masters.
  int64_t uploadBytes() const;

  const ParameterLayout &layout;
  std::vector<tessera_tensor_chunk> chunks;
  OffloadPlan plan;
  int32_t computeDtype, gradientDtype;
  void *deviceCopies;
  cudaStream_t stream;
  /// The masters are pinned (the f32-read weights upload from them); the
  /// moments, only the host's AdamW's, are allocated pageable (HostBuffer)
  /// and pinned in place (cudaHostRegister) at the first update unless
  /// TESSERA_OFFLOAD_PINNED_MOMENTS=0.
  PinnedBuffer hostMasters, hostGradients, hostCopies;
  HostBuffer hostFirst, hostSecond;
  /// hostFirst/hostSecond are to be page-locked (the default), and are.
  bool momentsToPin = false, pinnedMoments = false;
  DeviceBuffer deviceMirror;
  /// One per range: its gradients have landed on the host.
  std::vector<cudaEvent_t> downloaded;
  bool downloading = false;
  /// Timing events around the download's burst and the load's upload.
  cudaEvent_t burstStart = nullptr, burstEnd = nullptr;
  int64_t updates = 0;
  double adamwSeconds = 0, downloadMilliseconds = 0,
         uploadGigabytesPerSecond = 0;
  int32_t nonFiniteTensor = -1;
  HostThreadPool pool;
};

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_CUDAOFFLOADEDOPTIMIZER_H
