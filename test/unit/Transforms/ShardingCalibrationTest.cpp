//===- ShardingCalibrationTest.cpp - the search calibrated by the module --===//
//
// tess-search-sharding scales its per-op model to the step the compile
// builds for one device from @forward (calibrateSharding): measured there,
// the replicated plan must predict exactly the compiled step's peak (the
// training state priced per element, the rest activations and fixed bytes)
// and time, recomputing what the module's #tess.plan says and running an
// offloaded optimizer on the cluster's host; a calibration given as text is
// taken as it is. On a two-layer GPT-2 written in tess IR.
//
//===----------------------------------------------------------------------===//

#include "../CostModel/GptTrainingProgram.h"

#include "Tess/IR/TessOps.h"
#include "tessera/CostModel/Cluster.h"
#include "tessera/Sharding/PlanAnnotation.h"
#include "tessera/Transforms/CompiledStepMemory.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace tessera;
using pipeline::RematMode;

namespace {

class ShardingCalibration : public ::testing::Test {
protected:
  void SetUp() override {
    context.loadDialect<tess::TessDialect, mlir::func::FuncDialect>();
    cost::test_programs::GptShape shape;
    shape.layers = 2;
    shape.width = 64;
    shape.heads = 4;
    shape.vocabulary = 256;
    shape.batch = 2;
    shape.sequence = 32;
    module = mlir::parseSourceString<mlir::ModuleOp>(
        cost::test_programs::gptForwardText(shape), &context);
    ASSERT_TRUE(module);
  }

  /// The module's #tess.plan with `remat` and `offload`, as tess-fit-memory
  /// writes it.
  void writePlan(llvm::StringRef remat, llvm::StringRef offload) {
    (*module)->setAttr(sharding::kPlanAttrName,
                       tess::PlanAttr::get(&context, tess::MeshAttr(), 0, remat,
                                           1, "", 1, {}, offload));
  }

  /// The module as text.
  std::string text() {
    std::string printed;
    llvm::raw_string_ostream os(printed);
    module->print(os);
    return printed;
  }

  /// The compiled step's peak minus what the calibration says of it: the
  /// parameters' state per element (fp32: master, gradient, AdamW's two
  /// moments), the activations and the fixed bytes.
  double unexplainedBytes(const tessera::ShardingCalibration &calibration,
                          RematMode remat) {
    mlir::FailureOr<StepMemory> memory =
        compiledStepMemory(*module, remat, CompiledStepOptions());
    EXPECT_TRUE(mlir::succeeded(memory));
    if (mlir::failed(memory))
      return -1;
    double state = 16.0 * memory->state.trainableElements;
    return static_cast<double>(memory->totalBytes()) - state -
           calibration.activationPeakBytes - calibration.fixedMemoryBytes;
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

TEST_F(ShardingCalibration, ReplicatedPlanPredictsTheCompiledStep) {
  std::string before = text();
  mlir::FailureOr<tessera::ShardingCalibration> calibration =
      calibrateSharding(*module, SearchShardingOptions());
  ASSERT_TRUE(mlir::succeeded(calibration));
  // Measured on a copy: the forward is left as the search plans it.
  EXPECT_EQ(text(), before);
  ASSERT_TRUE(calibration->estimate.has_value());
  const cost::TrainingStepEstimate &estimate = *calibration->estimate;
  EXPECT_EQ(estimate.remat, "none");
  EXPECT_FALSE(estimate.offloadOptimizer);
  EXPECT_EQ(unexplainedBytes(*calibration, RematMode::None), 0);
  EXPECT_GT(calibration->activationPeakBytes, 0);
  // The time: the training compute and AdamW's per element.
  double optimizer =
      estimate.secondsByKind[static_cast<size_t>(cost::OpKind::Optimizer)];
  EXPECT_GT(optimizer, 0);
  EXPECT_DOUBLE_EQ(calibration->trainingComputeSeconds,
                   estimate.computeSeconds() - optimizer);
  EXPECT_GT(calibration->optimizerSecondsPerElement, 0);
}

TEST_F(ShardingCalibration, RecomputesWhatThePlanSays) {
  mlir::FailureOr<tessera::ShardingCalibration> resident =
      calibrateSharding(*module, SearchShardingOptions());
  writePlan("full", "");
  mlir::FailureOr<tessera::ShardingCalibration> recomputed =
      calibrateSharding(*module, SearchShardingOptions());
  ASSERT_TRUE(mlir::succeeded(resident));
  ASSERT_TRUE(mlir::succeeded(recomputed));
  EXPECT_EQ(recomputed->estimate->remat, "full");
  EXPECT_EQ(unexplainedBytes(*recomputed, RematMode::Full), 0);
  // Full recomputation keeps fewer activations.
  EXPECT_LT(recomputed->activationPeakBytes, resident->activationPeakBytes);
}

TEST_F(ShardingCalibration, OffloadedOptimizerRunsOnTheHost) {
  writePlan("none", "optimizer");
  mlir::FailureOr<tessera::ShardingCalibration> calibration =
      calibrateSharding(*module, SearchShardingOptions());
  ASSERT_TRUE(mlir::succeeded(calibration));
  EXPECT_TRUE(calibration->estimate->offloadOptimizer);
  llvm::Expected<cost::Cluster> h200 = cost::loadCluster("h200");
  ASSERT_TRUE(static_cast<bool>(h200)) << llvm::toString(h200.takeError());
  ASSERT_TRUE(h200->host.has_value());
  EXPECT_DOUBLE_EQ(calibration->optimizerSecondsPerElement,
                   1 / h200->host->adamwElementsPerSecond);
}

TEST_F(ShardingCalibration, GivenNumbersAreTakenAsTheyAre) {
  SearchShardingOptions options;
  options.calibration = "compute=10,optimizer=1e-9,activations=1000,fixed=24";
  mlir::FailureOr<tessera::ShardingCalibration> calibration =
      calibrateSharding(*module, options);
  ASSERT_TRUE(mlir::succeeded(calibration));
  EXPECT_EQ(calibration->trainingComputeSeconds, 10);
  EXPECT_EQ(calibration->optimizerSecondsPerElement, 1e-9);
  EXPECT_EQ(calibration->activationPeakBytes, 1000);
  EXPECT_EQ(calibration->fixedMemoryBytes, 24);
  // No step was measured, so there is no estimate of it.
  EXPECT_FALSE(calibration->estimate.has_value());
}

} // namespace
