//===- CompiledPipelineMemoryTest.cpp - one device of a compiled pipeline -===//
//
// tessera/Pipeline/CompiledPipelineMemory.h on a tied two-layer GPT cut into
// two stages as the compile cuts it (tess-split-pipeline-stages, then the
// lowering's preparation): each term against what the driver allocates for
// it, read back from the same functions (their arenas by the lowering's
// planner, their saved results) and the schedule's task order.
//
//===----------------------------------------------------------------------===//

#include "../CostModel/GptTrainingProgram.h"

#include "tessera/Analysis/ArenaPlanning.h"
#include "tessera/Pipeline/CompiledPipelineMemory.h"
#include "tessera/Transforms/Passes.h"

#include "Tess/IR/TessOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringMap.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace tessera;
using namespace tessera::pipeline;
using tessera::cost::test_programs::GptShape;

namespace {

GptShape twoLayers() {
  GptShape shape;
  shape.layers = 2;
  shape.width = 64;
  shape.heads = 4;
  shape.vocabulary = 512;
  shape.batch = 2;
  shape.sequence = 16;
  return shape;
}

/// The tied GPT's step cut into two stages and prepared, with a pipelined
/// #tess.plan of `schedule` over `microBatches` (and `mesh`, `zero`).
mlir::OwningOpRef<mlir::ModuleOp>
splitProgram(mlir::MLIRContext &context, llvm::StringRef schedule,
             int64_t microBatches, tess::MeshAttr mesh = {}, int64_t zero = 0) {
  mlir::OwningOpRef<mlir::ModuleOp> module =
      cost::test_programs::buildGptTrainingProgram(context, twoLayers(), "fp32");
  if (!module)
    return {};
  mlir::PassManager passes(&context);
  SplitPipelineStagesOptions split;
  split.stages = 2;
  passes.addPass(createSplitPipelineStages(split));
  buildLoweringPreparationPipeline(passes, LoweringPreparationOptions());
  if (mlir::failed(passes.run(*module)))
    return {};
  (*module)->setAttr("tess.plan",
                     tess::PlanAttr::get(&context, mesh, zero, "none",
                                         /*stages=*/2, schedule, microBatches,
                                         {}, /*offload=*/""));
  return module;
}

mlir::func::FuncOp function(mlir::ModuleOp module, int64_t chunk,
                            llvm::StringRef kind) {
  return module.lookupSymbol<mlir::func::FuncOp>(
      ("stage" + llvm::Twine(chunk) + "_" + kind).str());
}

int64_t bytesOf(mlir::Type type) {
  auto shaped = mlir::cast<mlir::ShapedType>(type);
  return shaped.getNumElements() * *elementBytes(shaped.getElementType());
}

/// The bytes of `f`'s results that carry `role`.
int64_t resultBytes(mlir::func::FuncOp f, llvm::StringRef role) {
  int64_t total = 0;
  for (unsigned i = 0; i < f.getNumResults(); ++i)
    if (f.getResultAttr(i, role))
      total += bytesOf(f.getResultTypes()[i]);
  return total;
}

std::vector<PipelineDeviceMemory> estimate(mlir::ModuleOp module) {
  mlir::FailureOr<std::vector<PipelineDeviceMemory>> devices =
      estimatePipelineMemory(module);
  EXPECT_TRUE(mlir::succeeded(devices));
  return mlir::succeeded(devices) ? *devices
                                  : std::vector<PipelineDeviceMemory>();
}

// Tests the stash against the schedules' in-flight counts (GPipe keeps every
// micro-batch's saved values, 1F1B stages - device), each device's arena as
// the largest of its three functions' (one arena they share, as the
// lowering allocates it), and the total as the sum of its terms.
TEST(CompiledPipelineMemory, StashFollowsTheScheduleAndOneArenaADevice) {
  mlir::MLIRContext context;
  context.loadDialect<tess::TessDialect, mlir::func::FuncDialect>();
  auto gpipe = splitProgram(context, "gpipe", 4);
  auto oneFOneB = splitProgram(context, "1f1b", 4);
  ASSERT_TRUE(gpipe && oneFOneB);
  std::vector<PipelineDeviceMemory> all = estimate(*gpipe);
  std::vector<PipelineDeviceMemory> interleaved = estimate(*oneFOneB);
  ASSERT_EQ(all.size(), 2u);
  ASSERT_EQ(interleaved.size(), 2u);
  for (int64_t d = 0; d < 2; ++d) {
    int64_t saved = resultBytes(function(*gpipe, d, "forward"), "tess.saved");
    EXPECT_GT(saved, 0);
    EXPECT_EQ(all[d].savedSlots, 4);
    EXPECT_EQ(all[d].savedBytes, 4 * saved);
    EXPECT_EQ(interleaved[d].savedSlots, 2 - d);
    EXPECT_EQ(interleaved[d].savedBytes, (2 - d) * saved);

    int64_t largest = 0, sum = 0;
    for (llvm::StringRef kind : {"prepare", "forward", "backward"}) {
      int64_t bytes =
          planFunctionArena(function(*gpipe, d, kind))->layout.totalBytes;
      largest = std::max(largest, bytes);
      sum += bytes;
    }
    EXPECT_EQ(all[d].arenaBytes, largest);
    EXPECT_LT(all[d].arenaBytes, sum);
    EXPECT_EQ(all[d].residentBytes,
              resultBytes(function(*gpipe, d, "prepare"), "tess.resident"));
    const PipelineDeviceMemory &m = all[d];
    EXPECT_EQ(m.totalBytes(), m.arenaBytes + m.residentBytes +
                                  m.messageBytes + m.savedBytes +
                                  m.inputBytes + m.partBytes +
                                  m.gemmScratchBytes + m.state.total());
  }
  // Every rank keeps the step's micro-batches of tokens and targets (the
  // first chunk's and the last's inputs) and a working pair.
  int64_t inputs = 0;
  for (int64_t d = 0; d < 2; ++d) {
    mlir::func::FuncOp forward = function(*gpipe, d, "forward");
    for (unsigned i = 0; i < forward.getNumArguments(); ++i)
      if (forward.getArgAttr(i, "tess.input"))
        inputs += bytesOf(forward.getArgumentTypes()[i]);
  }
  EXPECT_GT(inputs, 0);
  for (const PipelineDeviceMemory &device : all)
    EXPECT_EQ(device.inputBytes, (4 + 1) * inputs);
  // One slot of each message kind received (both schedules send in the
  // order the peer consumes), beside one set of each sent.
  int64_t activations =
      resultBytes(function(*gpipe, 0, "forward"), "tess.activation");
  int64_t gradients = resultBytes(function(*gpipe, 1, "backward"),
                                  "tess.activation_gradient");
  EXPECT_GT(activations, 0);
  EXPECT_EQ(all[0].messageBytes, activations + gradients);
  EXPECT_EQ(all[1].messageBytes, gradients + activations);
}

// Tests the training state: each device holds the parameters its chunks
// read or return, in ParameterLayout's 128-element slices; the tied table
// on both ends, its owner (the first stage) keeping room for the other's
// part; fp32 accumulators with several micro-batches; under ZeRO-1 over a
// stage mesh's dp the masters and moments of what the device updates
// halved, beside a whole f32 mirror of what it holds.
TEST(CompiledPipelineMemory, HeldStateAndZeroOne) {
  mlir::MLIRContext context;
  context.loadDialect<tess::TessDialect, mlir::func::FuncDialect>();
  GptShape shape = twoLayers();
  auto plain = splitProgram(context, "1f1b", 2);
  ASSERT_TRUE(plain);
  std::vector<PipelineDeviceMemory> devices = estimate(*plain);
  ASSERT_EQ(devices.size(), 2u);
  int64_t table = shape.vocabulary * shape.width;
  // Every parameter is held, the table twice; slices pad each up.
  int64_t held = devices[0].state.trainableElements +
                 devices[1].state.trainableElements;
  EXPECT_GE(held, shape.parameters() + table);
  EXPECT_EQ(devices[0].partBytes, 4 * table);
  EXPECT_EQ(devices[1].partBytes, 0);
  for (const PipelineDeviceMemory &device : devices) {
    int64_t elements = device.state.trainableElements;
    EXPECT_EQ(elements % 128, 0);
    EXPECT_EQ(device.state.masterWeights, 4 * elements);
    EXPECT_EQ(device.state.optimizerState, 8 * elements);
    EXPECT_EQ(device.state.gradients, 4 * elements);
    EXPECT_EQ(device.state.accumulators, 4 * elements);
    EXPECT_EQ(device.state.computeCopies, 0);
  }

  mlir::StringAttr dp = mlir::StringAttr::get(&context, "dp");
  int64_t two = 2;
  tess::MeshAttr mesh = tess::MeshAttr::get(
      &context, llvm::ArrayRef<mlir::StringAttr>(dp),
      llvm::ArrayRef<int64_t>(two));
  auto sharded = splitProgram(context, "1f1b", 1, mesh, /*zero=*/1);
  ASSERT_TRUE(sharded);
  std::vector<PipelineDeviceMemory> zero = estimate(*sharded);
  ASSERT_EQ(zero.size(), 2u);
  // What each device updates: the parameters whose gradient its chunk
  // returns first (the tied table the first stage's), in slices.
  llvm::StringMap<int64_t> ownerOf;
  int64_t ownedSlices[2] = {0, 0};
  auto step = sharded->lookupSymbol<mlir::func::FuncOp>("forward_backward");
  for (int64_t d = 0; d < 2; ++d) {
    mlir::func::FuncOp backward = function(*sharded, d, "backward");
    for (unsigned i = 0; i < backward.getNumResults(); ++i)
      if (auto name = backward.getResultAttrOfType<mlir::StringAttr>(
              i, "tess.gradient"))
        if (ownerOf.try_emplace(name.getValue(), d).second)
          for (unsigned a = 0; a < step.getNumArguments(); ++a)
            if (step.getArgAttr(a, "tess.parameter") == name)
              ownedSlices[d] +=
                  (bytesOf(step.getArgumentTypes()[a]) / 4 + 127) / 128 * 128;
  }
  EXPECT_EQ(ownerOf.lookup("lm_head.weight"), 0);
  for (const PipelineDeviceMemory &device : zero) {
    int64_t elements = device.state.trainableElements;
    // The last stage holds the tied table for its head but does not update
    // it: its shard is of the rest.
    int64_t owned = ownedSlices[device.device];
    EXPECT_LE(owned, device.device == 0 ? elements : elements - table);
    EXPECT_EQ(device.state.masterWeights, 4 * ((owned + 1) / 2));
    EXPECT_EQ(device.state.optimizerState, 8 * ((owned + 1) / 2));
    EXPECT_EQ(device.state.computeCopies, 4 * elements);
    // One micro-batch, but the driver sums ZeRO-1's gradients in f32.
    EXPECT_EQ(device.state.accumulators, 4 * elements);
  }
}

// Tests that a module not cut into stages is refused with a diagnostic.
TEST(CompiledPipelineMemory, RefusesAStepNotCutIntoStages) {
  mlir::MLIRContext context;
  auto module =
      cost::test_programs::buildGptTrainingProgram(context, twoLayers(), "fp32");
  ASSERT_TRUE(module);
  std::string message;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    message = d.str();
    return mlir::success();
  });
  EXPECT_TRUE(mlir::failed(estimatePipelineMemory(*module)));
  EXPECT_NE(message.find("expected a module cut into stages"),
            std::string::npos);
}

} // namespace
