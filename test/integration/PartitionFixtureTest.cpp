//===- PartitionFixtureTest.cpp - partitioned steps against PyTorch ------===//
//
// tess-annotate-sharding + tess-partition-spmd on the fp32 training step of
// gpt2-tiny and bert-tiny, run as N ranks on N threads of this process
// (the interpreter's collectives call the in-process backend of comm.h),
// must give PyTorch's first step: the loss within 1e-5 relative on every
// rank, and every gradient, gathered to its full shape from the ranks'
// blocks, with PyTorch's norm within 1e-5 relative (1e-8 absolute for the
// gradients that are zero in exact arithmetic) and within 1e-5 of the
// single-device step element by element (relative to the gradient's
// largest element).
//
// Meshes 2 and 4 (data parallel), 2x2 (data x tensor parallel), 1x4 and 2
// (tensor parallel). The fixtures have a batch of 2; data parallelism over 4
// ranks runs the two rows twice (batch 4), which leaves the mean loss and
// every gradient unchanged.
//
// Searched plans: the whole-mesh search (MeshSharding.h) on the forward
// function, on the h200 cluster, uncalibrated (tesserac's --partition
// calibrates compute times by the cost model's step estimate; the choice
// may differ, the bridge is the same), written into the step by
// annotateFromSearchPlan: as found (on these tiny steps mostly
// replicated), with Megatron pins (--shard ...=tp-column/tp-row), under a
// tight memory limit (ZeRO stages that differ by parameter) and with a
// forced ZeRO stage.
//
//===----------------------------------------------------------------------===//

#include "FixtureSupport.h"

#include "Tess/IR/TessOps.h"
#include "tessera/Execution/Interpreter.h"
#include "tessera/CostModel/Cluster.h"
#include "tessera/Sharding/MeshSharding.h"
#include "tessera/Sharding/PlanAnnotation.h"
#include "tessera/Transforms/Passes.h"
#include "tessera/runtime/thread_comm.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

using namespace tessera;
using execution::HostTensorBuffer;
using sharding::kUnsplit;
using sharding::TensorLayout;

namespace {

struct PartitionCase {
  std::string model, file, loss;
  int64_t sequence;
  bool shiftTargets;
  /// tess-annotate-sharding's options.
  std::string mesh, axes, strategy;
  /// How often the fixture's two rows are repeated in the batch.
  int64_t batchRepeat = 1;
  /// The searched plan instead of tess-annotate-sharding (`strategy` names
  /// the case), with these --shard pins, memory limit and ZeRO stage.
  bool searched = false;
  std::vector<std::string> pins;
  std::optional<double> memoryLimitBytes;
  std::optional<int> zeroStage;
};

std::string describe(const PartitionCase &test) {
  return test.model + " mesh " + test.mesh + " " +
         (test.searched ? "searched " : "") + test.strategy;
}

/// The search's plan of `forward` on `meshSpec`, written into `step`.
/// Returns the deviations' count, or -1 after a failed assertion.
int annotateSearched(const PartitionCase &test, mlir::func::FuncOp forward,
                     mlir::func::FuncOp step) {
  auto cluster = cost::loadCluster("h200");
  EXPECT_TRUE(static_cast<bool>(cluster)) << llvm::toString(cluster.takeError());
  auto mesh = cost::parseMesh(test.mesh);
  EXPECT_TRUE(static_cast<bool>(mesh)) << llvm::toString(mesh.takeError());
  if (!cluster || !mesh)
    return -1;
  if (llvm::Error error = cost::placeOnCluster(*mesh, *cluster)) {
    ADD_FAILURE() << llvm::toString(std::move(error));
    return -1;
  }
  sharding::MeshSearchOptions options;
  options.computeWeightBytes = 0; // fp32: the master is the compute weight
  options.gradientBytes = 4;
  options.memoryLimitBytes = test.memoryLimitBytes;
  options.zeroStage = test.zeroStage;
  for (const std::string &text : test.pins) {
    auto pin = sharding::parseShardPin(text, *mesh);
    EXPECT_TRUE(static_cast<bool>(pin)) << llvm::toString(pin.takeError());
    if (!pin)
      return -1;
    options.pins.push_back(std::move(*pin));
  }
  auto plan =
      sharding::searchTrainingSharding(forward, *mesh, *cluster, options);
  EXPECT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  if (!plan)
    return -1;
  auto report = sharding::annotateFromSearchPlan(step, *plan);
  EXPECT_TRUE(static_cast<bool>(report)) << llvm::toString(report.takeError());
  if (!report)
    return -1;
  for (const std::string &line : report->deviations)
    std::printf("[partition]   %s: %s\n", describe(test).c_str(),
                line.c_str());
  return report->deviations.size();
}

void PrintTo(const PartitionCase &test, std::ostream *os) {
  *os << describe(test);
}

/// The fixture's ids [2, sequence] from `firstColumn`, rows repeated.
HostTensorBuffer tokens(const llvm::json::Object &fixture, int64_t firstColumn,
                        int64_t sequence, int64_t repeat) {
  HostTensorBuffer rows =
      fixtures::fixtureTokens(fixture, firstColumn, sequence);
  std::vector<int64_t> values;
  for (int64_t copy = 0; copy < repeat; ++copy)
    for (int64_t i = 0; i < rows.numElements(); ++i)
      values.push_back(rows.getInt(i));
  return HostTensorBuffer::fromInts({2 * repeat, sequence}, values);
}

std::string nameOf(mlir::DictionaryAttr attributes, llvm::StringRef kind) {
  if (attributes)
    if (auto name = attributes.getAs<mlir::StringAttr>(kind))
      return name.str();
  return "";
}

/// The step's arguments, full size, by their tess.* attributes.
std::vector<HostTensorBuffer>
globalArguments(mlir::func::FuncOp function,
                const std::map<std::string, HostTensorBuffer> &weights,
                const std::map<std::string, HostTensorBuffer> &inputs) {
  std::vector<HostTensorBuffer> arguments;
  for (unsigned i = 0; i < function.getNumArguments(); ++i) {
    mlir::DictionaryAttr attributes = function.getArgAttrDict(i);
    std::string name = nameOf(attributes, "tess.parameter");
    if (name.empty())
      name = nameOf(attributes, "tess.buffer");
    const auto &source = name.empty() ? inputs : weights;
    if (name.empty())
      name = nameOf(attributes, "tess.input");
    auto it = source.find(name);
    EXPECT_NE(it, source.end()) << "no value for argument " << name;
    arguments.push_back(it == source.end() ? HostTensorBuffer() : it->second);
  }
  return arguments;
}

/// The block of `tensor` (laid out as `layout`) that the rank at
/// `coordinates` holds.
HostTensorBuffer localBlock(HostTensorBuffer tensor, const TensorLayout &layout,
                            const std::vector<int32_t> &coordinates,
                            const cost::DeviceMesh &mesh) {
  std::vector<int64_t> shape(tensor.shape().begin(), tensor.shape().end());
  std::vector<int64_t> starts(shape.size(), 0), strides(shape.size(), 1);
  for (auto [dim, axis] : llvm::enumerate(layout.dimAxes)) {
    if (axis == kUnsplit)
      continue;
    shape[dim] /= mesh.axes[axis].size;
    starts[dim] = coordinates[axis] * shape[dim];
  }
  HostTensorBuffer block = HostTensorBuffer::zeros(tensor.dtype(), shape);
  tessera_tensor out = block.descriptor();
  EXPECT_EQ(tessera_cpu_slice(tensor.constDescriptor(), &out, starts.data(),
                              strides.data()),
            0);
  return block;
}

/// The full tensor from every rank's block of it: blocks of split dims put
/// in place, partial sums added, replicas counted once.
HostTensorBuffer assemble(std::vector<HostTensorBuffer> &blocks,
                          const std::vector<std::vector<int32_t>> &coordinates,
                          const TensorLayout &layout,
                          const cost::DeviceMesh &mesh) {
  std::vector<int64_t> shape(blocks[0].shape().begin(),
                             blocks[0].shape().end());
  for (auto [dim, axis] : llvm::enumerate(layout.dimAxes))
    if (axis != kUnsplit)
      shape[dim] *= mesh.axes[axis].size;
  HostTensorBuffer sum = HostTensorBuffer::zeros(TESSERA_F32, shape);
  std::vector<float> total(sum.numElements(), 0.0f);
  for (size_t rank = 0; rank < blocks.size(); ++rank) {
    bool counted = true;
    for (unsigned axis = 0; axis < mesh.axes.size(); ++axis)
      if (layout.dimSplitOver(axis) == kUnsplit &&
          !layout.isPartialOver(axis) && coordinates[rank][axis] != 0)
        counted = false;
    if (!counted)
      continue;
    std::vector<int64_t> starts(shape.size(), 0), strides(shape.size(), 1);
    for (auto [dim, axis] : llvm::enumerate(layout.dimAxes))
      if (axis != kUnsplit)
        starts[dim] = coordinates[rank][axis] * blocks[rank].shape()[dim];
    HostTensorBuffer placed = HostTensorBuffer::zeros(TESSERA_F32, shape);
    tessera_tensor out = placed.descriptor();
    EXPECT_EQ(tessera_cpu_slice_grad(blocks[rank].constDescriptor(), &out,
                                     starts.data(), strides.data()),
              0);
    for (int64_t i = 0; i < placed.numElements(); ++i)
      total[i] += placed.getDouble(i);
  }
  return HostTensorBuffer::fromFloats(shape, total);
}

void runPartitioned(const PartitionCase &test) {
  SCOPED_TRACE(describe(test));
  llvm::json::Object fixture = fixtures::loadFixture(test.model);
  mlir::MLIRContext context;
  int64_t batch = 2 * test.batchRepeat;
  auto module = fixtures::importWithWeights(
      context, test.file, {{"batch", batch}, {"seq", test.sequence}});
  ASSERT_TRUE(module);
  std::map<std::string, HostTensorBuffer> weights;
  module->walk([&](tess::ParameterOp parameter) {
    weights[parameter.getName().str()] =
        std::move(*HostTensorBuffer::fromAttribute(*parameter.getValue()));
  });

  // The search plans the forward function, which the training step copies.
  mlir::OwningOpRef<mlir::ModuleOp> planned = module->clone();

  registerTesseraPasses();
  mlir::PassManager build(&context);
  ASSERT_TRUE(mlir::succeeded(mlir::parsePassPipeline(
      "tess-build-training{loss=" + test.loss + " precision=fp32}", build)));
  build.addPass(mlir::createCanonicalizerPass());
  build.addPass(mlir::createCSEPass());
  ASSERT_TRUE(mlir::succeeded(build.run(*module)));

  std::map<std::string, HostTensorBuffer> inputs;
  inputs["input_ids"] = tokens(fixture, 0, test.sequence, test.batchRepeat);
  inputs["targets"] = tokens(fixture, test.shiftTargets ? 1 : 0,
                             test.sequence, test.batchRepeat);
  inputs["loss_scale"] = HostTensorBuffer::fromFloats({}, {1.0f});

  // The single-device step, the reference for the gradients' elements.
  auto step = module->lookupSymbol<mlir::func::FuncOp>("forward_backward");
  ASSERT_TRUE(step);
  execution::Interpreter single;
  auto reference = single.run(step, globalArguments(step, weights, inputs));
  ASSERT_TRUE(static_cast<bool>(reference))
      << llvm::toString(reference.takeError());

  mlir::PassManager partition(&context);
  int deviations = 0;
  if (test.searched) {
    deviations = annotateSearched(
        test, planned->lookupSymbol<mlir::func::FuncOp>("forward"), step);
    ASSERT_GE(deviations, 0);
    ASSERT_TRUE(mlir::succeeded(
        mlir::parsePassPipeline("tess-partition-spmd", partition)));
  } else {
    std::string annotate = "tess-annotate-sharding{mesh=" + test.mesh +
                           " strategy=" + test.strategy;
    if (!test.axes.empty())
      annotate += " axes=" + test.axes;
    ASSERT_TRUE(mlir::succeeded(mlir::parsePassPipeline(
        annotate + "},tess-partition-spmd", partition)));
  }
  ASSERT_TRUE(mlir::succeeded(partition.run(*module)));
  step = module->lookupSymbol<mlir::func::FuncOp>("forward_backward");
  auto meshAttr = (*module)->getAttrOfType<tess::MeshAttr>("tess.mesh");
  ASSERT_TRUE(meshAttr);
  cost::DeviceMesh mesh = sharding::deviceMesh(meshAttr);
  auto layoutOf = [&](mlir::StringAttr text, unsigned rank) {
    if (!text)
      return TensorLayout::replicated(rank);
    auto layout = sharding::parseTensorLayout(text.getValue(), mesh);
    EXPECT_TRUE(static_cast<bool>(layout));
    return layout ? *layout : TensorLayout::replicated(rank);
  };

  std::vector<HostTensorBuffer> arguments =
      globalArguments(step, weights, inputs);
  comm::MeshShape shape(meshAttr.getSizes().begin(),
                        meshAttr.getSizes().end());
  comm::ThreadWorld world(shape, /*timeoutSeconds=*/60);
  std::vector<std::vector<HostTensorBuffer>> results(world.size());
  std::vector<std::vector<int32_t>> coordinates(world.size());
  std::vector<std::string> errors(world.size());
  std::vector<std::string> axisNames;
  for (mlir::StringAttr name : meshAttr.getNames())
    axisNames.push_back(name.str());
  comm::runThreadRanks(world, [&](const comm::RankComms &comms) {
    coordinates[comms.rank] = comms.coordinates;
    std::vector<HostTensorBuffer> local;
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      local.push_back(localBlock(
          arguments[i],
          layoutOf(step.getArgAttrOfType<mlir::StringAttr>(i, "tess.layout"),
                   arguments[i].shape().size()),
          comms.coordinates, mesh));
    execution::Interpreter interpreter;
    interpreter.setMeshRank({axisNames, comms.axes, comms.coordinates});
    auto out = interpreter.run(step, std::move(local));
    if (!out) {
      errors[comms.rank] = llvm::toString(out.takeError());
      return 1;
    }
    results[comms.rank] = std::move(*out);
    return 0;
  });
  for (const std::string &error : errors)
    ASSERT_TRUE(error.empty()) << error;

  double expectedLoss = *fixture.getNumber("loss");
  double lossError = 0, normError = 0, elementError = 0;
  for (const auto &rank : results) {
    double loss = rank[0].getDouble(0);
    lossError = std::max(lossError,
                         std::abs(loss - expectedLoss) / std::abs(expectedLoss));
    EXPECT_NEAR(loss, expectedLoss, 1e-5 * std::abs(expectedLoss));
  }
  std::map<std::string, HostTensorBuffer> gradients;
  for (unsigned i = 1; i < step.getNumResults(); ++i) {
    std::vector<HostTensorBuffer> blocks;
    for (auto &rank : results)
      blocks.push_back(rank[i]);
    auto type = llvm::cast<mlir::RankedTensorType>(step.getResultTypes()[i]);
    TensorLayout layout = layoutOf(
        step.getResultAttrOfType<mlir::StringAttr>(i, "tess.layout"),
        type.getRank());
    HostTensorBuffer full = assemble(blocks, coordinates, layout, mesh);
    const HostTensorBuffer &single = (*reference)[i];
    ASSERT_EQ(full.numElements(), single.numElements());
    double largest = 0, difference = 0;
    for (int64_t e = 0; e < full.numElements(); ++e) {
      largest = std::max(largest, std::abs(single.getDouble(e)));
      difference =
          std::max(difference, std::abs(full.getDouble(e) - single.getDouble(e)));
    }
    std::string name =
        nameOf(step.getResultAttrDict(i), "tess.gradient");
    // Gradients that are zero in exact arithmetic (BERT's key bias) are
    // rounding noise: compare those absolutely.
    EXPECT_LE(difference, std::max(1e-5 * largest, 1e-8))
        << "gradient of " << name;
    if (largest > 1e-6)
      elementError = std::max(elementError, difference / largest);
    gradients[name] = std::move(full);
  }
  const llvm::json::Object *parameters = fixture.getObject("params");
  ASSERT_TRUE(parameters);
  for (const auto &[pytorchName, entry] : *parameters) {
    const llvm::json::Object *info = entry.getAsObject();
    auto gradient = gradients.find(fixtures::initializerOf(pytorchName, *info));
    ASSERT_NE(gradient, gradients.end()) << pytorchName.str();
    double expected = *info->getNumber("grad_norm");
    double actual = fixtures::norm(gradient->second);
    if (expected > 1e-6)
      normError = std::max(normError, std::abs(actual - expected) / expected);
    EXPECT_NEAR(actual, expected, std::max(1e-5 * expected, 1e-8))
        << "gradient norm of " << pytorchName.str();
  }
  int collectives = 0;
  step.walk([&](mlir::Operation *op) {
    collectives += mlir::isa<tess::AllReduceOp, tess::AllGatherOp,
                             tess::ReduceScatterOp, tess::AllToAllOp>(op);
  });
  std::printf("[partition] %-44s loss rel err %.2e, grad-norm rel err %.2e, "
              "grad vs 1 device %.2e (%d collectives, %d deviations)\n",
              describe(test).c_str(), lossError, normError, elementError,
              collectives, deviations);
}

const PartitionCase gpt2{"gpt2-tiny", "gpt2-tiny.raw.dyn.onnx", "causal-lm",
                         31, true, "", "", ""};
const PartitionCase bert{"bert-tiny", "bert-tiny.raw.dyn.onnx", "mlm", 32,
                         false, "", "", ""};

PartitionCase on(PartitionCase test, std::string mesh, std::string axes,
                 std::string strategy, int64_t repeat = 1) {
  test.mesh = std::move(mesh);
  test.axes = std::move(axes);
  test.strategy = std::move(strategy);
  test.batchRepeat = repeat;
  return test;
}

class PartitionFixtureTest : public testing::TestWithParam<PartitionCase> {};

TEST_P(PartitionFixtureTest, FirstStepMatchesPyTorch) {
  runPartitioned(GetParam());
}

PartitionCase searched(PartitionCase test, std::string mesh, std::string name,
                       int64_t repeat = 1, std::vector<std::string> pins = {},
                       std::optional<double> memoryLimitBytes = std::nullopt,
                       std::optional<int> zeroStage = std::nullopt) {
  test = on(std::move(test), std::move(mesh), "", std::move(name), repeat);
  test.searched = true;
  test.pins = std::move(pins);
  test.memoryLimitBytes = memoryLimitBytes;
  test.zeroStage = zeroStage;
  return test;
}

/// Megatron's layout pinned on each model's parameter names.
const std::vector<std::string> gpt2Megatron = {
    "c_attn=tp-column", "attn\\.c_proj\\.weight=tp-row", "c_fc=tp-column",
    "mlp\\.c_proj\\.weight=tp-row"};
const std::vector<std::string> bertMegatron = {
    "self\\.(query|key|value)=tp-column",
    "attention\\.output\\.dense\\.weight=tp-row",
    "intermediate\\.dense=tp-column",
    "layer\\.[0-9]+\\.output\\.dense\\.weight=tp-row"};

std::vector<PartitionCase> cases() {
  std::vector<PartitionCase> all;
  for (const PartitionCase &model : {gpt2, bert}) {
    all.push_back(on(model, "2", "", "dp"));
    all.push_back(on(model, "4", "", "dp", /*repeat=*/2));
    all.push_back(on(model, "2", "tp", "tp"));
    all.push_back(on(model, "1x4", "", "tp"));
    all.push_back(on(model, "2x2", "", "dp-tp"));
  }
  for (const PartitionCase &model : {gpt2, bert}) {
    const auto &megatron = model.model == gpt2.model ? gpt2Megatron : bertMegatron;
    for (const char *mesh : {"2", "2x2", "1x4"})
      all.push_back(searched(model, mesh, "plan"));
    all.push_back(searched(model, "4", "plan", /*repeat=*/2));
    all.push_back(searched(model, "1x4", "megatron", 1, megatron));
    all.push_back(searched(model, "2x2", "megatron", 1, megatron));
    all.push_back(searched(model, "2", "tight-memory", 1, {}, 2.5 * 1048576));
    all.push_back(searched(model, "4", "tight-memory", 2, {}, 1.6 * 1048576));
    for (int stage : {1, 2, 3})
      all.push_back(searched(model, "2", "zero" + std::to_string(stage), 1, {},
                             std::nullopt, stage));
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, PartitionFixtureTest, testing::ValuesIn(cases()),
    fixtures::DescribedTestName());

} // namespace
