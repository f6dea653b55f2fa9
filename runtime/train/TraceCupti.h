//===- TraceCupti.h - GPU activity for --trace, through CUPTI ---*- C++ -*-===//
//
// The kernels (NCCL's included: collectives run as kernels), memory copies
// and memsets the GPU executed, with device timestamps, from CUPTI's
// Activity API. CUPTI is loaded at run time (dlopen), never linked: an
// executable runs on a machine without it, and only --trace then says GPU
// activity is missing and why.
//
// Timestamps: CUPTI stamps records with its own clock (cuptiGetTimestamp,
// nanoseconds); start() reads it between two readings of the host's
// steady_clock and keeps the difference, which maps every record onto the
// host clock of the trace (TraceEvent.h). Both clocks run at the same rate,
// so one offset per traced window is enough.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_TRACECUPTI_H
#define TESSERA_RUNTIME_TRAIN_TRACECUPTI_H

#include "TraceJson.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera::train {

class GpuActivityCollector {
public:
  virtual ~GpuActivityCollector() = default;
  /// Starts recording kernels, copies and memsets (again after a stop()).
  /// Returns "" or why CUPTI refused (the trace goes on without them).
  virtual std::string start() = 0;
  /// Stops recording and flushes CUPTI's buffers: every activity of work
  /// that completed before the call is collected when it returns.
  virtual void stop() = 0;
  /// Moves the collected activities into `document`, one track per CUDA
  /// stream, named.
  virtual void collect(TraceDocument &document) = 0;
  /// Records CUPTI could not store (its buffers were full).
  virtual uint64_t droppedRecords() const = 0;
  /// "CUPTI 130001 (libcupti.so.13)": for the trace's otherData.
  virtual std::string describe() const = 0;
};

/// Where CUPTI is looked for, in order: $TESSERA_CUPTI_LIBRARY if set, the
/// sonames libcupti.so.13 and libcupti.so (the loader's search path), then
/// the CUDA toolkit's directories.
std::vector<std::string> defaultCuptiLibraries();

/// Loads the first of `libraries` that opens and is a CUPTI of the major
/// version this runtime was built against, and registers with it. Returns
/// nullptr and the reason in `whyNot` when none does, when this build had
/// no CUPTI headers, when CUPTI refuses (e.g. another profiler holds it) or
/// when another collector is open in this process (CUPTI has one client).
std::unique_ptr<GpuActivityCollector>
openCuptiCollector(const std::vector<std::string> &libraries,
                   std::string &whyNot);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_TRACECUPTI_H
