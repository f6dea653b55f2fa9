//===- CandidateTiming.h - The fastest of a kernel's candidates -*- C++ -*-===//
//
// cuBLASLt's algorithms for a GEMM shape (--gemm-autotune) and cuDNN's
// attention configurations (--attention-autotune) are chosen the same way:
// each candidate is timed on the call's own operands, on its stream, on the
// shape's first eager call, and the fastest is kept for every later call.
// What the libraries' heuristics rank first is not always what runs fastest
// on the machine at hand, and only a launch on that machine can tell.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CUDA_CANDIDATETIMING_H
#define TESSERA_RUNTIME_CUDA_CANDIDATETIMING_H

#include "HostSupport.h"

#include <cuda_runtime.h>

#include <cstddef>
#include <optional>

namespace tessera::cuda {

/// What timing a shape's candidates found.
struct TimedCandidates {
  /// The fastest candidate that ran, valid when `timed` > 0; ties keep the
  /// library's order.
  size_t fastest = 0;
  float fastestMilliseconds = 0.0f;
  /// Candidate 0's time (the heuristic's first choice), -1 when it did not
  /// run.
  float firstMilliseconds = -1.0f;
  /// How many candidates ran.
  size_t timed = 0;
};

/// Times candidates 0 .. count-1 on `stream`: `launch(i)` launches candidate
/// i and returns whether the library accepted it. Each candidate gets one
/// warm-up call, then kTrials calls between two events; one that is refused
/// at any call is skipped. Inside a stream capture nothing is timed (events
/// cannot be waited on there) and the result is empty: the caller keeps its
/// default and times at its next eager call.
template <typename Launch>
std::optional<TimedCandidates> timeCandidates(size_t count,
                                              const Launch &launch,
                                              cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cudaCheck(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone)
    return std::nullopt;
  constexpr int kTrials = 3;
  struct Events {
    cudaEvent_t start = nullptr, stop = nullptr;
    Events() {
      cudaCheck(cudaEventCreate(&start));
      cudaCheck(cudaEventCreate(&stop));
    }
    ~Events() {
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
    }
  } events;
  TimedCandidates result;
  for (size_t i = 0; i < count; ++i) {
    if (!launch(i))
      continue;
    cudaCheck(cudaEventRecord(events.start, stream));
    bool ran = true;
    for (int t = 0; t < kTrials && ran; ++t)
      ran = launch(i);
    cudaCheck(cudaEventRecord(events.stop, stream));
    cudaCheck(cudaEventSynchronize(events.stop));
    if (!ran)
      continue;
    float milliseconds = 0.0f;
    cudaCheck(cudaEventElapsedTime(&milliseconds, events.start, events.stop));
    milliseconds /= kTrials;
    if (i == 0)
      result.firstMilliseconds = milliseconds;
    if (result.timed++ == 0 || milliseconds < result.fastestMilliseconds) {
      result.fastest = i;
      result.fastestMilliseconds = milliseconds;
    }
  }
  return result;
}

} // namespace tessera::cuda

#endif // TESSERA_RUNTIME_CUDA_CANDIDATETIMING_H
