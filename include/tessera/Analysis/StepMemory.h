//===- StepMemory.h - device memory of a compiled training step -*- C++ -*-===//
//
// The one memory model of the compiler: what one device holds while the
// compiled training executable runs, derived from the program itself rather
// than from a formula. `tesserac --summary`, `--explain` (its prediction and
// its fit decision) and the lowering's arena all read it:
// - the step arena: every intermediate of @forward_backward at the offset the
//   liveness-based arena planner gives it (planFunctionArena), so it is
//   exactly what the executable allocates;
// - the driver's training state (trainingStateBytes below, the one place
//   that says what the driver keeps per parameter);
// - on the GPU, the scratch of products that runtime/cuda/Matmul.cu pads
//   (a vocabulary like GPT-2's 50257 makes the LM head's rows misaligned; the
//   runtime copies such operands into one zero-padded buffer per stream).
// Not included: the CUDA context and cuBLASLt's workspace, which the
// measured peak (the driver's "peak mem") does include.
//
// The program analysed must be the one the lowering gets (after
// tess-lowering-preparation: the loss head in blocks, the fused ops, the
// weights read as compute copies), or the arena is another program's.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_ANALYSIS_STEPMEMORY_H
#define TESSERA_ANALYSIS_STEPMEMORY_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace tessera {

/// What the training driver (runtime/train: ParameterLayout's flat buffers,
/// TrainingBackend) keeps for the whole run beside the step's arena. The
/// per-element rules live here and nowhere else; the planners that price a
/// parameter before any step exists (the pipeline's stages, the sharding
/// search) take their bytes from these constants.
struct TrainingStateBytes {
  /// fp32 master weights, and AdamW's two fp32 moments, per element.
  static constexpr int64_t kMasterBytesPerElement = 4;
  static constexpr int64_t kOptimizerBytesPerElement = 8;
  /// The fp32 gradient accumulators of a step of several micro-batches.
  static constexpr int64_t kAccumulatorBytesPerElement = 4;
  /// The elements of the driver's default gradient bucket (--bucket-mb 25
  /// of f32 elements, runtime/train/Flags.h): what a ZeRO-2 ring holds at
  /// least when the pending gradients are larger.
  static constexpr int64_t kDefaultBucketElements = (int64_t(25) << 20) / 4;

  /// A mesh plan's ZeRO-2 gradient ring (runtime/comm's GradientRing), in
  /// gradient elements: the place the step writes whole gradients into,
  /// for a run of `runElements` of them at most a default bucket, and one
  /// rank's reduced block of that place over a group of `group` ranks.
  /// The same for a gradient the driver reduce-scatters (a partial sum)
  /// and one it slices (returned whole, tess.zero_axes): both are written
  /// whole into their bucket's place and leave it for the rank's shard.
  struct ZeroTwoRing {
    int64_t placeElements = 0;
    int64_t blockElements = 0;
  };
  static constexpr ZeroTwoRing zeroTwoRing(int64_t runElements, int64_t group) {
    const int64_t place = runElements < kDefaultBucketElements
                              ? runElements
                              : kDefaultBucketElements;
    return {place, place / (group > 0 ? group : 1)};
  }

  /// The driver's ParameterLayout (runtime/train/ParameterLayout.h) starts
  /// every parameter's slice at a multiple of 128 elements: a slice holds
  /// its elements rounded up to that.
  static constexpr int64_t kSliceElements = 128;
  static constexpr int64_t sliceElements(int64_t elements) {
    return (elements + kSliceElements - 1) / kSliceElements * kSliceElements;
  }

  int64_t trainableElements = 0;
  int64_t masterWeights = 0;
  /// The compute-precision copies of the parameters the step reads as such
  /// (arguments marked tess.parameter whose type is not f32): the driver
  /// keeps them and the optimizer rewrites them. A step that casts its
  /// masters instead has its casts in the arena.
  int64_t computeCopies = 0;
  int64_t optimizerState = 0;
  /// The results marked tess.gradient, in the type the step writes them;
  /// under a mesh plan's ZeRO-2 the ZeRO-2 ones as the rank's shards
  /// (with several micro-batches their f32 sums, in `accumulators`), the
  /// ZeRO-1 ones whole.
  int64_t gradients = 0;
  int64_t accumulators = 0;
  /// A mesh plan's ZeRO-2: the driver's transient room for the whole
  /// ZeRO-2 gradients the step writes (runtime/train/MeshZero.h) and one
  /// rank's reduced block. An estimate: the largest run of ZeRO-2
  /// gradients between others, at most a default bucket, which is
  /// the run's ring when the step writes its buckets one after another (the
  /// run's ring is larger when buckets are busy at once: a tied embedding's
  /// gradient, written last).
  int64_t gradientRing = 0;
  /// The non-trained initializers (tess.buffer) the step reads.
  int64_t buffers = 0;
  /// The f32 parameters the step reads as their masters (an untied
  /// embedding table that only a lookup reads; every parameter of an fp32
  /// step): offloaded, the GPU keeps an f32 mirror of these alone.
  int64_t masterReadWeights = 0;

  int64_t total() const {
    return masterWeights + computeCopies + optimizerState + gradients +
           accumulators + gradientRing + buffers;
  }
  /// The executable's `--offload optimizer` (runtime/train/
  /// OptimizerOffload.h): the fp32 masters and AdamW's moments move to
  /// pinned host memory; the GPU keeps the compute copies, the mirror of
  /// the weights read as masters, the gradients, the accumulators (the
  /// backward adds into them) and the buffers.
  int64_t offloadedToHost() const { return masterWeights + optimizerState; }
  int64_t offloadedTotal() const {
    return computeCopies + masterReadWeights + gradients + accumulators +
           gradientRing + buffers;
  }
};

/// The state of `forwardBackward` (after tess-build-training) trained with
/// `microBatches` micro-batches per step. Fails with a diagnostic on a
/// parameter, buffer or gradient whose element type the runtime cannot store.
mlir::FailureOr<TrainingStateBytes>
trainingStateBytes(mlir::func::FuncOp forwardBackward, int64_t microBatches);

struct StepMemory {
  TrainingStateBytes state;
  int64_t arenaBytes = 0;
  int64_t gemmScratchBytes = 0;
  /// The op at the arena's peak of live bytes (its name), and the bytes of
  /// forward values alive across the loss that are not parameter casts:
  /// what the forward keeps for the backward (Korthikanti et al.'s count).
  std::string peakOpName;
  int64_t savedForBackwardBytes = 0;

  int64_t totalBytes() const {
    return arenaBytes + state.total() + gemmScratchBytes;
  }
  /// The same with `--offload optimizer` (TrainingStateBytes::
  /// offloadedTotal): the default prediction stays totalBytes.
  int64_t offloadedTotalBytes() const {
    return arenaBytes + state.offloadedTotal() + gemmScratchBytes;
  }
};

/// The largest padded-GEMM scratch of any product of `function`: the
/// runtime keeps one such buffer per stream and grows it to the largest
/// request (0: every product runs in place).
int64_t paddedGemmScratchBytes(mlir::func::FuncOp function);

/// The step's loss scale (its `tess.input = "loss_scale"` argument), where
/// its backward begins, or null.
mlir::BlockArgument lossScaleArgument(mlir::func::FuncOp forwardBackward);

/// The memory of `forwardBackward` as the lowering will compile it (see the
/// file comment) trained with `microBatches` micro-batches per step. Fails
/// with a diagnostic when the arena cannot be planned (a dynamic shape).
mlir::FailureOr<StepMemory> estimateStepMemory(mlir::func::FuncOp forwardBackward,
                                               int64_t microBatches);

/// The report block of `tesserac --summary --loss ... --precision ...`; its
/// line "Peak device memory per GPU (predicted): N GiB" is what
/// bench/gpt2/report.py sets beside the measured peak, and the last one
/// what the GPU would hold with `--offload optimizer`. `device` says whose
/// memory it is (a planned step's: "one rank of mesh dp=2,tp=2").
void printStepMemory(const StepMemory &memory, llvm::raw_ostream &os,
                     llvm::StringRef device = "one device");

} // namespace tessera

#endif // TESSERA_ANALYSIS_STEPMEMORY_H
