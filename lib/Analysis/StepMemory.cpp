//===- StepMemory.cpp - device memory of a compiled training step ---------===//
//
// The arena comes from the same planner the lowering uses, so the estimate
// and the executable cannot drift apart; the driver's state mirrors
// runtime/train's CudaBackend (one flat buffer per kind, parameters in
// program order; the 256-byte slice alignment adds at most 256 bytes a
// parameter, ignored here).
//
//===----------------------------------------------------------------------===//

#include "tessera/Analysis/StepMemory.h"

#include "tessera/Analysis/ArenaPlanning.h"

#include "Tess/IR/TessOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;

namespace tessera {

namespace {

int64_t elementsOf(Type type) {
  auto shaped = cast<ShapedType>(type);
  return shaped.getNumElements();
}

/// runtime/cuda/Matmul.cu's rule for one product: an unbatched GEMM of at
/// least 2^24 multiply-adds with an operand whose extents are not multiples of
/// 8 elements or whose rows are not a multiple of 16 bytes runs on extents
/// rounded up to 8, every such operand copied into zero-padded scratch (256-
/// byte aligned pieces). Returns the scratch bytes the product needs, 0 when
/// it runs in place.
int64_t paddedGemmScratch(ArrayRef<ShapedType> operands, int64_t work) {
  constexpr int64_t kPaddingMinimumWork = int64_t(1) << 24;
  if (work < kPaddingMinimumWork)
    return 0;
  auto roundUp = [](int64_t value, int64_t multiple) {
    return (value + multiple - 1) / multiple * multiple;
  };
  bool misaligned = false;
  int64_t total = 0;
  for (ShapedType type : operands) {
    FailureOr<int64_t> size = elementBytes(type.getElementType());
    if (failed(size) || type.getRank() < 1)
      return 0;
    int64_t columns = type.getShape().back();
    int64_t rows = type.getNumElements() / std::max<int64_t>(columns, 1);
    bool aligned = rows % 8 == 0 && columns % 8 == 0 &&
                   (columns * *size) % 16 == 0;
    misaligned |= (columns * *size) % 16 != 0;
    if (!aligned)
      total += roundUp(roundUp(rows, 8) * roundUp(columns, 8) * *size, 256);
  }
  return misaligned ? total : 0;
}

} // namespace

int64_t paddedGemmScratchBytes(func::FuncOp function) {
  int64_t largest = 0;
  function.walk([&](Operation *op) {
    SmallVector<ShapedType, 3> operands;
    int64_t inner = 0;
    // A dense layer, fused with its epilogue (tess-fuse-epilogues) or not.
    auto dense = [&](Value input, Value weight, Value result) {
      auto inputType = cast<ShapedType>(input.getType());
      inner = inputType.getShape().back();
      operands = {inputType, cast<ShapedType>(weight.getType()),
                  cast<ShapedType>(result.getType())};
    };
    // A matrix product; batched ones never take the padded path.
    auto product = [&](Value lhsValue, bool transposeLhs, Value rhs,
                       Value resultValue) {
      auto lhs = cast<ShapedType>(lhsValue.getType());
      auto result = cast<ShapedType>(resultValue.getType());
      if (result.getRank() != 2 || lhs.getRank() != 2)
        return;
      inner = transposeLhs ? lhs.getShape()[0] : lhs.getShape()[1];
      operands = {lhs, cast<ShapedType>(rhs.getType()), result};
    };
    llvm::TypeSwitch<Operation *>(op)
        .Case<tess::LinearOp, tess::LinearAddOp, tess::LinearGeluOp,
              tess::LinearGeluGradOp>([&](auto linear) {
          dense(linear.getInput(), linear.getWeight(), linear.getResult());
        })
        .Case<tess::MatmulOp, tess::MatmulAddOp, tess::MatmulBiasGradOp>(
            [&](auto matmul) {
              product(matmul.getLhs(), matmul.getTransposeLhs(),
                      matmul.getRhs(), matmul.getResult());
            })
        // The GEMM of its rows (tess-expand-weight-grads).
        .Case([&](tess::LinearWeightGradOp gradient) {
          auto input = cast<ShapedType>(gradient.getInput().getType());
          inner = input.getNumElements() / input.getShape().back();
          operands = {input, cast<ShapedType>(gradient.getDy().getType()),
                      cast<ShapedType>(gradient.getResult().getType())};
        });
    if (operands.empty())
      return;
    int64_t work = operands.back().getNumElements() * inner;
    largest = std::max(largest, paddedGemmScratch(operands, work));
  });
  return largest;
}

namespace {

/// The op where the arena's blocks, live over [first, last], add up to the
/// most bytes, and the bytes of the blocks alive across the first loss (or
/// the first read of the loss scale) that the forward made (not casts of
/// parameters, which are weights).
void analyzeLiveness(func::FuncOp function, const FunctionArenaPlan &plan,
                     StepMemory &memory) {
  SmallVector<Operation *> ops;
  for (Operation &op : function.getBody().front())
    ops.push_back(&op);
  std::vector<int64_t> change(ops.size() + 1, 0);
  for (const ArenaRequest &request : plan.buffers) {
    change[request.first] += request.bytes;
    change[request.last + 1] -= request.bytes;
  }
  int64_t live = 0, peak = -1;
  for (auto [position, op] : llvm::enumerate(ops)) {
    live += change[position];
    if (live > peak) {
      peak = live;
      memory.peakOpName = op->getName().getStringRef().str();
    }
  }

  // The loss op; a vocabulary-parallel loss (tess-partition-spmd's, of
  // tess ops) has none, and its backward starts at the loss scale.
  BlockArgument lossScale = lossScaleArgument(function);
  auto readsLossScale = [&](Operation *op) {
    return lossScale && llvm::is_contained(op->getOperands(), lossScale);
  };
  auto loss = llvm::find_if(ops, [](Operation *op) {
    return isa<tess::CrossEntropyOp, tess::CrossEntropyWithGradOp>(op);
  });
  if (loss == ops.end())
    loss = llvm::find_if(ops, readsLossScale);
  if (loss == ops.end())
    return;
  int64_t boundary = loss - ops.begin();
  for (auto [request, value] : llvm::zip(plan.buffers, plan.bufferValues)) {
    auto cast = value.getDefiningOp<tess::CastOp>();
    auto argument =
        cast ? dyn_cast<BlockArgument>(cast.getInput()) : BlockArgument();
    if (argument &&
        function.getArgAttr(argument.getArgNumber(), "tess.parameter"))
      continue;
    if (request.first < boundary && request.last > boundary)
      memory.savedForBackwardBytes += request.bytes;
  }
}

} // namespace

FailureOr<TrainingStateBytes> trainingStateBytes(func::FuncOp forwardBackward,
                                                 int64_t microBatches) {
  TrainingStateBytes state;
  auto storedBytes = [&](Type type, StringRef what,
                         unsigned index) -> FailureOr<int64_t> {
    auto shaped = cast<ShapedType>(type);
    FailureOr<int64_t> bytes = elementBytes(shaped.getElementType());
    if (failed(bytes))
      return forwardBackward.emitError()
             << what << " " << index
             << " has an element type the runtime cannot store";
    return shaped.getNumElements() * *bytes;
  };
  for (unsigned i = 0, e = forwardBackward.getNumArguments(); i < e; ++i) {
    Type type = forwardBackward.getArgument(i).getType();
    if (!isa<RankedTensorType>(type))
      continue;
    if (forwardBackward.getArgAttr(i, "tess.parameter")) {
      FailureOr<int64_t> bytes = storedBytes(type, "parameter", i);
      if (failed(bytes))
        return failure();
      state.trainableElements += elementsOf(type);
      // The step reads either the master itself or the copy the driver
      // keeps beside it.
      if (!cast<ShapedType>(type).getElementType().isF32())
        state.computeCopies += *bytes;
      else
        state.masterReadWeights += *bytes;
    } else if (forwardBackward.getArgAttr(i, "tess.buffer")) {
      FailureOr<int64_t> bytes = storedBytes(type, "buffer", i);
      if (failed(bytes))
        return failure();
      state.buffers += *bytes;
    }
  }
  // A mesh program's gradient pending over mesh axes (not a pipeline's,
  // whose driver sums them whole): the driver shards that parameter's
  // masters and moments over the axes' group (runtime/train/MeshZero.h),
  // and keeps a whole f32 mirror for the step when it reads f32. When any
  // pending gradient is ZeRO-2's (tess.zero_stage), the driver keeps the
  // ZeRO-2 gradients as its shard too, the step writing them whole into a
  // ring of bucket places that each bucket leaves once reduce-scattered;
  // the ZeRO-1 ones stay whole, as without a ring.
  auto module = forwardBackward->getParentOfType<ModuleOp>();
  tess::MeshAttr mesh = module ? tess::MeshAttr::lookup(module) : nullptr;
  bool meshZero = mesh && module && !module->hasAttr("tess.pipeline");
  llvm::StringMap<int64_t> stateShards;
  struct PendingGradient {
    int64_t bytes, elements, group;
    bool zeroTwo;
  };
  SmallVector<PendingGradient> pending;
  bool shardsGradients = false;
  // The driver's buckets never hold a complete gradient nor mix ZeRO
  // stages, nor whole gradients with partial sums, so each run of ZeRO-2 gradients between others (in the
  // program's order) is bucketed apart; the largest run, or default
  // bucket, is the ring's place when the step writes the buckets one after
  // another.
  int64_t run = 0, largestRun = 0;
  bool runWhole = false;
  for (unsigned i = 0, e = forwardBackward.getNumResults(); i < e; ++i) {
    Attribute gradient = forwardBackward.getResultAttr(i, "tess.gradient");
    if (!gradient)
      continue;
    Type type = forwardBackward.getResultTypes()[i];
    FailureOr<int64_t> bytes = storedBytes(type, "gradient", i);
    if (failed(bytes))
      return failure();
    auto name = dyn_cast<StringAttr>(gradient);
    auto layout = forwardBackward.getResultAttrOfType<tess::LayoutAttr>(
        i, "tess.layout");
    // A ZeRO-1/2 gradient returned whole on its ZeRO axes (tess.zero_axes)
    // is the driver's as a partial sum is, in buckets of its own.
    auto wholeOn =
        forwardBackward.getResultAttrOfType<ArrayAttr>(i, "tess.zero_axes");
    SmallVector<StringAttr> zeroAxes;
    if (layout)
      llvm::append_range(zeroAxes, layout.getPartial());
    if (wholeOn)
      for (Attribute axis : wholeOn)
        if (auto axisName = dyn_cast<StringAttr>(axis))
          zeroAxes.push_back(axisName);
    if (!meshZero || !name || !layout || zeroAxes.empty()) {
      state.gradients += *bytes;
      run = 0;
      continue;
    }
    int64_t group = 1;
    for (StringAttr axis : zeroAxes)
      group *= mesh.axisSize(axis.getValue()).value_or(1);
    stateShards[name.getValue()] = group;
    auto stage = forwardBackward.getResultAttrOfType<IntegerAttr>(
        i, "tess.zero_stage");
    const bool zeroTwo = stage && stage.getInt() == 2;
    pending.push_back({*bytes, elementsOf(type), group, zeroTwo});
    shardsGradients |= zeroTwo;
    const bool whole = wholeOn != nullptr;
    run = zeroTwo && whole == runWhole ? run + elementsOf(type)
          : zeroTwo                    ? elementsOf(type)
                                       : 0;
    runWhole = whole;
    largestRun = std::max(largestRun, run);
  }
  // What the driver keeps of the pending gradients: whole (ZeRO-1), or
  // the rank's shard, kept in f32 when it sums several micro-batches
  // (counted as accumulators below), beside the ring (ZeRO-2).
  int64_t pendingBytes = 0, pendingElements = 0, shardElements = 0;
  const PendingGradient *firstSharded = nullptr;
  for (const PendingGradient &gradient : pending) {
    if (!shardsGradients || !gradient.zeroTwo) {
      state.gradients += gradient.bytes;
      continue;
    }
    firstSharded = firstSharded ? firstSharded : &gradient;
    pendingBytes += gradient.bytes;
    pendingElements += gradient.elements;
    shardElements += gradient.elements / gradient.group;
    if (microBatches == 1)
      state.gradients += gradient.bytes / gradient.group;
  }
  if (shardsGradients && pendingElements > 0) {
    // The ring: the largest run of pending gradients, at most a default
    // bucket (more when the step writes buckets whose places then overlap
    // in time: a tied embedding's gradient, written last), the reduced
    // block of one rank and, summing 16-bit gradients over micro-batches,
    // a bucket widened to f32.
    const int64_t elementBytes = pendingBytes / pendingElements;
    const TrainingStateBytes::ZeroTwoRing ring =
        TrainingStateBytes::zeroTwoRing(largestRun, firstSharded->group);
    const int64_t ringElements = ring.placeElements;
    const int64_t blockElements = ring.blockElements;
    state.gradientRing = ringElements * elementBytes;
    if (microBatches == 1) {
      state.gradientRing += blockElements * elementBytes;
    } else {
      state.gradientRing +=
          blockElements * TrainingStateBytes::kAccumulatorBytesPerElement;
      if (elementBytes != TrainingStateBytes::kAccumulatorBytesPerElement)
        state.gradientRing +=
            ringElements * TrainingStateBytes::kAccumulatorBytesPerElement;
    }
  }
  int64_t stateElements = 0;
  for (unsigned i = 0, e = forwardBackward.getNumArguments(); i < e; ++i) {
    Attribute parameter = forwardBackward.getArgAttr(i, "tess.parameter");
    Type type = forwardBackward.getArgument(i).getType();
    if (!parameter || !isa<RankedTensorType>(type))
      continue;
    auto name = dyn_cast<StringAttr>(parameter);
    auto shards = name ? stateShards.find(name.getValue()) : stateShards.end();
    if (shards == stateShards.end()) {
      stateElements += elementsOf(type);
      continue;
    }
    stateElements += elementsOf(type) / shards->second;
    if (cast<ShapedType>(type).getElementType().isF32())
      state.computeCopies +=
          TrainingStateBytes::kMasterBytesPerElement * elementsOf(type);
  }
  int64_t elements = state.trainableElements;
  state.masterWeights =
      TrainingStateBytes::kMasterBytesPerElement * stateElements;
  state.optimizerState =
      TrainingStateBytes::kOptimizerBytesPerElement * stateElements;
  // The driver sums micro-batches in fp32 accumulators; with one micro-batch
  // it reads the step's gradients directly (widening bf16/fp16 to f32 is
  // exact), so no accumulator exists.
  // Under a mesh plan's ZeRO-2 the ZeRO-2 gradients' f32 sums are the
  // rank's shards of them.
  if (microBatches > 1)
    state.accumulators =
        TrainingStateBytes::kAccumulatorBytesPerElement *
        (shardsGradients ? elements - pendingElements + shardElements
                         : elements);
  return state;
}

BlockArgument lossScaleArgument(func::FuncOp forwardBackward) {
  for (BlockArgument argument : forwardBackward.getArguments())
    if (auto role = forwardBackward.getArgAttrOfType<StringAttr>(
            argument.getArgNumber(), "tess.input");
        role && role.getValue() == "loss_scale")
      return argument;
  return {};
}

FailureOr<StepMemory> estimateStepMemory(func::FuncOp forwardBackward,
                                         int64_t microBatches) {
  FailureOr<FunctionArenaPlan> plan = planFunctionArena(forwardBackward);
  if (failed(plan))
    return failure();
  FailureOr<TrainingStateBytes> state =
      trainingStateBytes(forwardBackward, microBatches);
  if (failed(state))
    return failure();
  StepMemory memory;
  memory.state = *state;
  memory.arenaBytes = plan->layout.totalBytes;
  memory.gemmScratchBytes = paddedGemmScratchBytes(forwardBackward);
  analyzeLiveness(forwardBackward, *plan, memory);
  return memory;
}

void printStepMemory(const StepMemory &memory, llvm::raw_ostream &os,
                     StringRef device) {
  auto line = [&](StringRef what, int64_t bytes) {
    os << llvm::formatv("  {0,-38} {1,15} bytes  ({2:F3} GiB)\n", what, bytes,
                        double(bytes) / double(int64_t(1) << 30));
  };
  os << "\nDevice memory of the compiled training step (" << device
     << ", arena planned from liveness):\n";
  const TrainingStateBytes &state = memory.state;
  line("step arena (activations, temporaries)", memory.arenaBytes);
  line("fp32 master weights", state.masterWeights);
  if (state.computeCopies)
    line("compute copies of the weights", state.computeCopies);
  line("AdamW moments (fp32 m, v)", state.optimizerState);
  line("gradients (compute precision)", state.gradients);
  if (state.accumulators)
    line("fp32 gradient accumulators", state.accumulators);
  if (state.gradientRing)
    line("ZeRO-2 gradient ring (estimated)", state.gradientRing);
  if (state.buffers)
    line("buffers", state.buffers);
  if (memory.gemmScratchBytes)
    line("padded-GEMM scratch (CUDA)", memory.gemmScratchBytes);
  os << llvm::formatv("Peak device memory per GPU (predicted): {0:F3} GiB "
                      "(plus the CUDA context and cuBLASLt's workspace)\n",
                      double(memory.totalBytes()) /
                          double(int64_t(1) << 30));
  os << llvm::formatv("With --offload optimizer: {0:F3} GiB per GPU (fp32 "
                      "master weights and AdamW moments, {1:F3} GiB, in "
                      "host memory)\n",
                      double(memory.offloadedTotalBytes()) /
                          double(int64_t(1) << 30),
                      double(state.offloadedToHost()) /
                          double(int64_t(1) << 30));
}

} // namespace tessera
