//===- OptimizerOffload.h - What --offload moves to the host ---*- C++ -*-===//
//
// ZeRO-Offload's split of a run's state, for one GPU: the fp32 master
// weights and both AdamW moments (12 of the 16 bytes a parameter holds in
// a mixed-precision run, more than the compute copies and gradients) live
// in pinned host memory, and AdamW runs on the host's cores. The GPU keeps
// only what the step reads and writes: the compute copies (program.h's
// parameter_step_dtypes), an f32 mirror of the parameters the step reads
// as masters (an untied embedding table; every parameter of an fp32
// program), the gradients, the f32 accumulators when micro-batches are
// accumulated (they stay on the GPU: the backward adds into them), the
// buffers and the program's arena.
//
// A step moves the gradients device -> host and the updated copies (and
// mirrors) host -> device, range by range of the flat layout so that the
// host's AdamW of one range overlaps the copies of the others (the
// transfers and the pool live in CudaOffloadedOptimizer.h). This file is
// the CUDA-free part: which runs can offload, where each range's bytes go,
// and how many bytes live where.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_OPTIMIZEROFFLOAD_H
#define TESSERA_RUNTIME_TRAIN_OPTIMIZEROFFLOAD_H

#include "Flags.h"
#include "ParameterLayout.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::train {

/// Throws TrainError naming --offload when options.offloadOptimizer asks
/// for what the driver cannot offload: a host program (its state is in
/// host memory already), several ranks (data parallelism, ZeRO), a
/// pipelined or mesh-partitioned program. `dataParallelRanks`: the ranks
/// launched, or run as threads (--thread-ranks).
void requireOffloadSupported(const tessera_program &program,
                             const TrainOptions &options,
                             int64_t dataParallelRanks);

/// One contiguous copy of `count` elements between a host and a device
/// buffer (element offsets, each buffer's own).
struct OffloadSegment {
  int64_t hostOffset = 0;
  int64_t deviceOffset = 0;
  int64_t count = 0;
};

/// A run of consecutive chunks moved and updated together.
struct OffloadRange {
  int32_t firstChunk = 0, endChunk = 0;
  /// The gradients device -> host: one span of the flat layout (its offsets
  /// the layout's; on the host it lands at the start of a staging slot).
  OffloadSegment gradients;
  /// The compute copies host -> device: one span of the copies' buffer
  /// (its offsets that buffer's; on the host it is written at the start of
  /// a staging slot); count 0 when the range has none.
  OffloadSegment copies;
  /// The host masters -> the device's f32 mirror, per parameter read as
  /// its master.
  std::vector<OffloadSegment> mirrors;
};

/// Ranges in flight at once: range r's gradients and copies are staged in
/// pinned slot r % kOffloadStagingSlots, so the host holds a few ranges'
/// staging, not a whole gradient and a whole set of copies (16 GiB more
/// for an 8B model: the difference between fitting a 128 GiB host or not).
inline constexpr int32_t kOffloadStagingSlots = 4;

struct OffloadPlan {
  std::vector<OffloadRange> ranges;
  /// The largest range's gradient and copy spans: a staging slot's size.
  int64_t largestGradientSpan = 0, largestCopySpan = 0;
  /// Per parameter its first element in the f32 mirror, or -1 (the step
  /// reads its compute copy).
  std::vector<int64_t> mirrorOffsets;
  /// Elements of the mirror: the mirrored parameters only, each slice
  /// starting at a multiple of ParameterLayout::kSliceAlignment.
  int64_t mirrorElements = 0;
};

/// Cuts `chunks` (the whole table, in layout order, copy_offset placed:
/// TrainingBackend::placeComputeCopies) into ranges of about
/// `rangeElements` elements (whole chunks, at least one).
OffloadPlan planOffload(const ParameterLayout &layout,
                        const std::vector<tessera_tensor_chunk> &chunks,
                        int64_t rangeElements);

/// Bytes an offloaded run holds, where.
struct OffloadFootprint {
  /// Pinned host memory: the fp32 masters, both moments, and the staging
  /// slots of the gradients (their dtype) and the compute copies.
  int64_t hostMasters = 0, hostMoments = 0, hostStaging = 0;
  /// Device memory the driver allocates for the state (the program's arena,
  /// the buffers and the micro-batch come on top).
  int64_t deviceCopies = 0, deviceMirror = 0, deviceGradients = 0,
          deviceAccumulators = 0;

  int64_t host() const { return hostMasters + hostMoments + hostStaging; }
  int64_t device() const {
    return deviceCopies + deviceMirror + deviceGradients + deviceAccumulators;
  }
};

/// `computeDtype`'s gradients; `copyElements`: the copies' elements;
/// `plan`: the mirror and the staging slots' sizes; `accumulating`: f32
/// accumulators on the device, whose dtype the gradient staging then takes.
OffloadFootprint offloadFootprint(const ParameterLayout &layout,
                                  int32_t computeDtype, int64_t copyElements,
                                  const OffloadPlan &plan, bool accumulating);

/// The start-of-run line saying what lives where.
std::string describeOffload(const OffloadFootprint &footprint);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_OPTIMIZEROFFLOAD_H
