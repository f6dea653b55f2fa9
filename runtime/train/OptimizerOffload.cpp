//===- OptimizerOffload.cpp - Which runs offload, and where bytes go ------===//

#include "OptimizerOffload.h"

#include "TrainError.h"
#include "TrainingState.h"

#include <algorithm>
#include <cstdio>

namespace tessera::train {
namespace {

std::string gibibytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

[[noreturn]] void refuse(const std::string &why) {
  throw TrainError("--offload optimizer: " + why, kUsageExitCode);
}

} // namespace

void requireOffloadSupported(const tessera_program &program,
                             const TrainOptions &options,
                             int64_t dataParallelRanks) {
  if (!options.offloadOptimizer)
    return;
  if (program.device != TESSERA_DEVICE_CUDA)
    refuse("this is a host (CPU) program, whose optimizer state is in host "
           "memory already; offloading moves a GPU program's (compile with "
           "--target cuda)");
  if (program.pipeline)
    refuse("this program is pipelined over stages, which the offloaded "
           "optimizer does not support (each stage already holds only its "
           "own chunks' state); leave --offload out");
  if (program.mesh_axis_count > 0)
    refuse("this program is partitioned for a mesh, which the offloaded "
           "optimizer does not support; leave --offload out");
  if (dataParallelRanks > 1)
    refuse(std::to_string(dataParallelRanks) +
           " data-parallel ranks (launched, or --thread-ranks); the offloaded "
           "optimizer runs one rank (data parallelism and ZeRO keep the "
           "state on the GPUs); start one rank, or leave --offload out");
  if (options.zeroStage > 0)
    refuse("--zero " + std::to_string(options.zeroStage) +
           " shards the optimizer state over data-parallel ranks, and an "
           "offloaded run has one; leave one of them out");
}

OffloadPlan planOffload(const ParameterLayout &layout,
                        const std::vector<tessera_tensor_chunk> &chunks,
                        int64_t rangeElements) {
  OffloadPlan plan;
  plan.mirrorOffsets.assign(static_cast<size_t>(layout.size()), -1);
  for (const tessera_tensor_chunk &chunk : chunks) {
    int64_t &offset = plan.mirrorOffsets[static_cast<size_t>(chunk.tensor)];
    if (chunk.copy_offset >= 0 || offset >= 0)
      continue;
    offset = plan.mirrorElements;
    plan.mirrorElements += ParameterLayout::aligned(layout.count(chunk.tensor));
  }
  const int32_t count = static_cast<int32_t>(chunks.size());
  for (int32_t first = 0; first < count;) {
    OffloadRange range;
    range.firstChunk = first;
    int64_t elements = 0;
    int32_t end = first;
    while (end < count &&
           (end == first || elements + chunks[static_cast<size_t>(end)].count <=
                                rangeElements)) {
      elements += chunks[static_cast<size_t>(end)].count;
      ++end;
    }
    range.endChunk = end;
    const tessera_tensor_chunk &head = chunks[static_cast<size_t>(first)];
    const tessera_tensor_chunk &tail = chunks[static_cast<size_t>(end - 1)];
    range.gradients = {head.offset, head.offset,
                       tail.offset + tail.count - head.offset};
    int64_t copyBegin = -1, copyEnd = -1;
    for (int32_t c = first; c < end; ++c) {
      const tessera_tensor_chunk &chunk = chunks[static_cast<size_t>(c)];
      if (chunk.copy_offset >= 0) {
        if (copyBegin < 0)
          copyBegin = chunk.copy_offset;
        copyEnd = chunk.copy_offset + chunk.count;
        continue;
      }
      // Consecutive chunks of one mirrored parameter make one copy.
      const int64_t device =
          plan.mirrorOffsets[static_cast<size_t>(chunk.tensor)] +
          (chunk.offset - layout.offset(chunk.tensor));
      if (!range.mirrors.empty()) {
        OffloadSegment &last = range.mirrors.back();
        if (last.hostOffset + last.count == chunk.offset &&
            last.deviceOffset + last.count == device) {
          last.count += chunk.count;
          continue;
        }
      }
      range.mirrors.push_back({chunk.offset, device, chunk.count});
    }
    if (copyBegin >= 0)
      range.copies = {copyBegin, copyBegin, copyEnd - copyBegin};
    plan.largestGradientSpan =
        std::max(plan.largestGradientSpan, range.gradients.count);
    plan.largestCopySpan = std::max(plan.largestCopySpan, range.copies.count);
    plan.ranges.push_back(std::move(range));
    first = end;
  }
  return plan;
}

OffloadFootprint offloadFootprint(const ParameterLayout &layout,
                                  int32_t computeDtype, int64_t copyElements,
                                  const OffloadPlan &plan, bool accumulating) {
  OffloadFootprint footprint;
  const int64_t f32 = layout.totalBytes(TESSERA_F32);
  footprint.hostMasters = f32;
  footprint.hostMoments = 2 * f32;
  footprint.hostStaging =
      kOffloadStagingSlots *
      (plan.largestGradientSpan *
           dtypeSize(accumulating ? TESSERA_F32 : computeDtype) +
       plan.largestCopySpan * dtypeSize(computeDtype));
  footprint.deviceCopies = copyElements * dtypeSize(computeDtype);
  footprint.deviceMirror = plan.mirrorElements * dtypeSize(TESSERA_F32);
  footprint.deviceGradients = layout.totalBytes(computeDtype);
  footprint.deviceAccumulators = accumulating ? f32 : 0;
  return footprint;
}

std::string describeOffload(const OffloadFootprint &footprint) {
  return "offload optimizer: host " + gibibytes(footprint.host()) +
         " (pinned: fp32 master weights " + gibibytes(footprint.hostMasters) +
         ", AdamW moments " + gibibytes(footprint.hostMoments) +
         ", gradient and weight staging " + gibibytes(footprint.hostStaging) +
         "); GPU state " + gibibytes(footprint.device()) + " (compute copies " +
         gibibytes(footprint.deviceCopies) + ", f32 weights read as masters " +
         gibibytes(footprint.deviceMirror) + ", gradients " +
         gibibytes(footprint.deviceGradients) + ", accumulators " +
         gibibytes(footprint.deviceAccumulators) +
         "; the arena, buffers and workspaces come on top)";
}

} // namespace tessera::train
