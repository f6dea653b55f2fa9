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
// Then one AdamW step as the mesh program runs it: @optimizer_step,
// annotated from the layouts tess-partition-spmd recorded on the step's
// parameters and gradients and partitioned by the same pass, so each rank
// updates the block of every parameter its gradient leaves it (a ZeRO
// optimizer shard, a TP slice, or the whole tensor) with moments of that
// block, and all-gathers what the step reads whole. Every rank's gradient
// norm is the global one (squares summed over the ranks that hold distinct
// blocks), within 1e-5 relative of the fixture's; the updated parameters,
// gathered to their full shape, match the fixture (FixtureChecks.h's
// checkUpdatedParameters) and, within 1e-7, the whole @optimizer_step run
// on the gathered gradients.
//
// Meshes 2 and 4 (data parallel), 2x2 (data x tensor parallel), 1x4 and 2
// (tensor parallel). The fixtures have a batch of 2; data parallelism over 4
// ranks runs the two rows twice (batch 4), which leaves the mean loss and
// every gradient unchanged.
//
// Searched plans: tess-search-sharding on the forward function before the
// step is built, on the h200 cluster, uncalibrated (tesserac's --partition
// calibrates compute times by the cost model's step estimate; the choice
// may differ, the bridge is the same), carried into the step by its ops and
// written as layouts by annotateFromSearchedPlan: as found (on these tiny
// steps mostly
// replicated), with Megatron pins (--shard ...=tp-column/tp-row), under a
// tight memory limit (ZeRO stages that differ by parameter) and with a
// forced ZeRO stage.
//
//===----------------------------------------------------------------------===//

#include "FixtureChecks.h"
#include "FixtureSupport.h"

#include "Tess/IR/TessOps.h"
#include "tessera/Execution/Interpreter.h"
#include "tessera/CostModel/Cluster.h"
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

/// tess-search-sharding's options for `test` (calibrated by the step built
/// with the case's loss).
SearchShardingOptions searchOptions(const PartitionCase &test) {
  SearchShardingOptions options;
  options.cluster = "h200";
  options.mesh = test.mesh;
  options.loss = test.loss;
  if (test.memoryLimitBytes)
    options.memoryLimit = static_cast<int64_t>(*test.memoryLimitBytes);
  options.zero = test.zeroStage.value_or(-1);
  options.pins.assign(test.pins.begin(), test.pins.end());
  return options;
}

/// The searched plan the ops of `step` carry, written as its layouts.
/// Returns the deviations' count, or -1 after a failed assertion.
int annotateSearched(const PartitionCase &test, mlir::func::FuncOp step) {
  auto report = sharding::annotateFromSearchedPlan(step);
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

/// `function`'s layout of argument / result `index` as recorded by the
/// annotation (replicated without one).
llvm::Expected<TensorLayout> recordedLayout(mlir::func::FuncOp function,
                                            unsigned index, bool result,
                                            const cost::DeviceMesh &mesh) {
  if (result)
    return sharding::readResultLayout(function, index, mesh);
  return sharding::readLayout(function.getArgument(index), mesh);
}

/// Partitions @optimizer_step the way the mesh program updates its
/// parameters, from what the partitioned @forward_backward records: each
/// parameter's block as the step reads it (its argument's tess.layout) and
/// its gradient's block as the step returns it (the result's tess.layout:
/// ZeRO's optimizer shard, a TP slice, or whole). AdamW runs on the
/// gradient's block with moments in that layout, starting from the
/// parameter sliced to it, and the updated parameter returns in the
/// layout the step reads it in (tess-partition-spmd inserts the
/// all-gathers).
llvm::Error partitionOptimizerStep(mlir::ModuleOp module,
                                   const cost::DeviceMesh &mesh) {
  auto step = module.lookupSymbol<mlir::func::FuncOp>("forward_backward");
  auto optimizer = module.lookupSymbol<mlir::func::FuncOp>("optimizer_step");
  if (!step || !optimizer)
    return llvm::createStringError("no @forward_backward / @optimizer_step");
  // A gradient the step leaves pending over mesh axes (a mesh plan's
  // ZeRO-1/2 parameter's) reaches AdamW summed over them
  // (completePendingGradients).
  std::map<std::string, TensorLayout> parameterLayouts, gradientLayouts;
  for (unsigned i = 0; i < step.getNumArguments(); ++i)
    if (auto name =
            step.getArgAttrOfType<mlir::StringAttr>(i, "tess.parameter")) {
      auto layout = recordedLayout(step, i, /*result=*/false, mesh);
      if (!layout)
        return layout.takeError();
      parameterLayouts[name.str()] = *layout;
    }
  for (unsigned i = 0; i < step.getNumResults(); ++i)
    if (auto name =
            step.getResultAttrOfType<mlir::StringAttr>(i, "tess.gradient")) {
      auto layout = recordedLayout(step, i, /*result=*/true, mesh);
      if (!layout)
        return layout.takeError();
      layout->partialAxes.clear();
      gradientLayouts[name.str()] = *layout;
    }
  auto lookup = [](const std::map<std::string, TensorLayout> &layouts,
                   mlir::StringAttr name) -> llvm::Expected<TensorLayout> {
    auto found = name ? layouts.find(name.str()) : layouts.end();
    if (found == layouts.end())
      return llvm::createStringError(
          "@optimizer_step updates " + (name ? name.str() : "?") +
          ", which the step does not read or differentiate");
    return found->second;
  };
  llvm::DenseMap<mlir::Value, TensorLayout> layouts;
  for (mlir::BlockArgument argument : optimizer.getArguments()) {
    unsigned i = argument.getArgNumber();
    auto role = [&](llvm::StringRef kind) {
      return optimizer.getArgAttrOfType<mlir::StringAttr>(i, kind);
    };
    if (auto name = role("tess.parameter")) {
      auto layout = lookup(parameterLayouts, name);
      if (!layout)
        return layout.takeError();
      layouts[argument] = *layout;
    }
    for (const char *kind :
         {"tess.gradient", "tess.first_moment", "tess.second_moment"})
      if (auto name = role(kind)) {
        auto layout = lookup(gradientLayouts, name);
        if (!layout)
          return layout.takeError();
        layouts[argument] = *layout;
      }
  }
  std::string failure;
  optimizer.walk([&](tess::AdamWOp update) -> mlir::WalkResult {
    auto argument = llvm::dyn_cast<mlir::BlockArgument>(update.getParam());
    auto layout = lookup(
        gradientLayouts,
        argument ? optimizer.getArgAttrOfType<mlir::StringAttr>(
                       argument.getArgNumber(), "tess.parameter")
                 : mlir::StringAttr());
    if (!layout) {
      failure = llvm::toString(layout.takeError());
      return mlir::WalkResult::interrupt();
    }
    for (mlir::Value result : update->getResults())
      layouts[result] = *layout;
    return mlir::WalkResult::advance();
  });
  if (!failure.empty())
    return llvm::createStringError(failure);
  std::vector<TensorLayout> resultLayouts;
  for (unsigned i = 0; i < optimizer.getNumResults(); ++i) {
    auto role = [&](llvm::StringRef kind) {
      return optimizer.getResultAttrOfType<mlir::StringAttr>(i, kind);
    };
    llvm::Expected<TensorLayout> layout =
        role("tess.parameter")
            ? lookup(parameterLayouts, role("tess.parameter"))
            : lookup(gradientLayouts, role("tess.first_moment")
                                          ? role("tess.first_moment")
                                          : role("tess.second_moment"));
    if (!layout)
      return layout.takeError();
    resultLayouts.push_back(*layout);
  }
  if (llvm::Error annotated = sharding::annotateShardingPlan(
          optimizer, mesh, layouts, resultLayouts))
    return annotated;
  mlir::PassManager partition(module.getContext());
  if (mlir::failed(mlir::parsePassPipeline(
          "tess-partition-spmd{function=optimizer_step}", partition)) ||
      mlir::failed(partition.run(module)))
    return llvm::createStringError("tess-partition-spmd failed on "
                                   "@optimizer_step");
  return llvm::Error::success();
}

/// The recorded layout of each gradient result of `step`, by result index.
llvm::Expected<std::vector<std::pair<unsigned, TensorLayout>>>
resultGradientLayouts(mlir::func::FuncOp step, const cost::DeviceMesh &mesh) {
  std::vector<std::pair<unsigned, TensorLayout>> gradients;
  for (unsigned i = 0; i < step.getNumResults(); ++i) {
    if (!step.getResultAttr(i, "tess.gradient"))
      continue;
    auto layout = sharding::readResultLayout(step, i, mesh);
    if (!layout)
      return layout.takeError();
    gradients.emplace_back(i, std::move(*layout));
  }
  return gradients;
}

/// Sums each gradient of `results` that the step leaves pending over mesh
/// axes (a mesh plan's ZeRO-1/2 parameter's) over them, in place, as the
/// driver does before its norm and AdamW (runtime/train/MeshZero.h; it
/// reduce-scatters into shards, the same sums). Collective.
llvm::Error completePendingGradients(mlir::func::FuncOp step,
                                     std::vector<HostTensorBuffer> &results,
                                     const comm::RankComms &comms,
                                     const cost::DeviceMesh &mesh) {
  auto gradients = resultGradientLayouts(step, mesh);
  if (!gradients)
    return gradients.takeError();
  for (const auto &[index, layout] : *gradients)
    for (unsigned axis : layout.partialAxes) {
      tessera_tensor descriptor = results[index].descriptor();
      if (tessera_comm_all_reduce(comms.axes[axis], &descriptor,
                                  TESSERA_REDUCE_SUM, nullptr) != 0)
        return llvm::createStringError(
            std::string("pending gradient all-reduce: ") +
            tessera_comm_last_error());
    }
  return llvm::Error::success();
}

/// The global gradient norm as every rank computes it from the blocks the
/// step returns it: each block's sum of squares, summed over the mesh axes
/// that split it (a replica along the others holds the same block), then
/// over the parameters. The same on every rank, so clipping by it agrees.
llvm::Expected<double>
agreedGradientNorm(mlir::func::FuncOp step,
                   const std::vector<HostTensorBuffer> &results,
                   const comm::RankComms &comms, const cost::DeviceMesh &mesh) {
  // Per set of splitting axes, the squares of this rank's blocks.
  std::map<std::vector<unsigned>, double> squares;
  auto gradients = resultGradientLayouts(step, mesh);
  if (!gradients)
    return gradients.takeError();
  for (const auto &[index, layout] : *gradients) {
    std::vector<unsigned> axes;
    for (int axis : layout.dimAxes)
      if (axis != kUnsplit)
        axes.push_back(axis);
    llvm::sort(axes);
    double norm = fixtures::norm(results[index]);
    squares[axes] += norm * norm;
  }
  double total = 0;
  for (const auto &[axes, sum] : squares) {
    HostTensorBuffer value = HostTensorBuffer::zeros(TESSERA_F64, {});
    *static_cast<double *>(value.data()) = sum;
    for (unsigned axis : axes) {
      tessera_tensor descriptor = value.descriptor();
      if (tessera_comm_all_reduce(comms.axes[axis], &descriptor,
                                  TESSERA_REDUCE_SUM, nullptr) != 0)
        return llvm::createStringError(
            std::string("gradient norm all-reduce: ") +
            tessera_comm_last_error());
    }
    total += value.getDouble(0);
  }
  return std::sqrt(total);
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

  // The search plans the forward function, whose ops the training step
  // copies with their plan.
  registerTesseraPasses();
  mlir::PassManager build(&context);
  if (test.searched)
    build.addPass(createSearchSharding(searchOptions(test)));
  ASSERT_TRUE(mlir::succeeded(mlir::parsePassPipeline(
      fixtures::trainingPipeline(fixture, test.loss), build)));
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
  auto reference =
      single.run(step, fixtures::bindArguments(step, weights, {}, inputs));
  ASSERT_TRUE(static_cast<bool>(reference))
      << llvm::toString(reference.takeError());
  // The whole AdamW step, kept from partitioning: the reference for the
  // sharded one.
  mlir::OwningOpRef<mlir::ModuleOp> whole = module->clone();
  auto wholeOptimizer = whole->lookupSymbol<mlir::func::FuncOp>("optimizer_step");
  ASSERT_TRUE(wholeOptimizer);
  std::map<std::string, HostTensorBuffer> optimizerInputs =
      fixtures::firstStepInputs(fixture);

  mlir::PassManager partition(&context);
  int deviations = 0;
  if (test.searched) {
    deviations = annotateSearched(test, step);
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
  if (llvm::Error error = partitionOptimizerStep(*module, mesh))
    FAIL() << llvm::toString(std::move(error));
  auto optimizer = module->lookupSymbol<mlir::func::FuncOp>("optimizer_step");
  auto layoutOf = [&](tess::LayoutAttr attribute, unsigned rank) {
    if (!attribute)
      return TensorLayout::replicated(rank);
    auto layout = sharding::tensorLayout(attribute, mesh);
    EXPECT_TRUE(static_cast<bool>(layout));
    return layout ? *layout : TensorLayout::replicated(rank);
  };

  std::vector<HostTensorBuffer> arguments =
      fixtures::bindArguments(step, weights, {}, inputs);
  comm::MeshShape shape(meshAttr.getSizes().begin(),
                        meshAttr.getSizes().end());
  comm::ThreadWorld world(shape, /*timeoutSeconds=*/60);
  std::vector<std::vector<HostTensorBuffer>> results(world.size()),
      updates(world.size());
  std::vector<double> gradientNorms(world.size());
  std::vector<std::vector<int32_t>> coordinates(world.size());
  std::vector<std::string> errors(world.size());
  std::vector<std::string> axisNames;
  for (mlir::StringAttr name : meshAttr.getNames())
    axisNames.push_back(name.str());
  // The parameters stored piece by piece (tess.pieces), by name.
  std::map<std::string, std::vector<int64_t>> parameterPieces;
  for (unsigned i = 0; i < step.getNumArguments(); ++i)
    if (auto name = step.getArgAttrOfType<mlir::StringAttr>(i, "tess.parameter"))
      parameterPieces[name.str()] = fixtures::piecesOf(step, i, false);
  comm::runThreadRanks(world, [&](const comm::RankComms &comms) {
    coordinates[comms.rank] = comms.coordinates;
    std::vector<HostTensorBuffer> local;
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      local.push_back(fixtures::localBlock(
          arguments[i],
          layoutOf(step.getArgAttrOfType<tess::LayoutAttr>(i, "tess.layout"),
                   arguments[i].shape().size()),
          comms.coordinates, mesh, fixtures::piecesOf(step, i, false)));
    execution::Interpreter interpreter;
    interpreter.setMeshRank({axisNames, comms.axes, comms.coordinates});
    auto out = interpreter.run(step, std::move(local));
    if (!out) {
      errors[comms.rank] = llvm::toString(out.takeError());
      return 1;
    }
    if (llvm::Error error = completePendingGradients(step, *out, comms, mesh)) {
      errors[comms.rank] = llvm::toString(std::move(error));
      return 1;
    }
    auto norm = agreedGradientNorm(step, *out, comms, mesh);
    if (!norm) {
      errors[comms.rank] = llvm::toString(norm.takeError());
      return 1;
    }
    gradientNorms[comms.rank] = *norm;
    // The optimizer on this rank's blocks: the parameters as the step
    // read them, the gradients as it returned them.
    std::map<std::string, HostTensorBuffer> parameters;
    for (unsigned i = 0; i < optimizer.getNumArguments(); ++i)
      if (auto name = optimizer.getArgAttrOfType<mlir::StringAttr>(
              i, "tess.parameter"))
        parameters[name.str()] = fixtures::localBlock(
            weights.at(name.str()),
            layoutOf(optimizer.getArgAttrOfType<tess::LayoutAttr>(
                         i, "tess.layout"),
                     weights.at(name.str()).shape().size()),
            comms.coordinates, mesh, parameterPieces[name.str()]);
    auto updated = interpreter.run(
        optimizer,
        fixtures::bindArguments(
            optimizer, parameters,
            fixtures::resultsNamed(step, *out, "tess.gradient"),
            optimizerInputs));
    if (!updated) {
      errors[comms.rank] = llvm::toString(updated.takeError());
      return 1;
    }
    results[comms.rank] = std::move(*out);
    updates[comms.rank] = std::move(*updated);
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
        step.getResultAttrOfType<tess::LayoutAttr>(i, "tess.layout"),
        type.getRank());
    // Pending gradients were completed on every rank.
    layout.partialAxes.clear();
    HostTensorBuffer full = fixtures::assemble(blocks, coordinates, layout, mesh,
                                               fixtures::piecesOf(step, i, true));
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

  // Every rank clips by the same global norm, the fixture's.
  double expectedNorm = fixtures::globalGradientNorm(fixture);
  for (size_t rank = 0; rank < gradientNorms.size(); ++rank)
    EXPECT_NEAR(gradientNorms[rank], expectedNorm, 1e-5 * expectedNorm)
        << "global gradient norm on rank " << rank;

  // The updated parameters, gathered from the ranks' blocks, against the
  // whole AdamW step on the gathered gradients: the same arithmetic per
  // element, so only a wrong block (a shard updated with another's
  // gradient or moments, a missed gather) differs. (Against the update of
  // the single-device gradients, elements whose gradient is near AdamW's
  // epsilon would amplify the gradients' rounding differences 1e5 times.)
  auto wholeUpdate = single.run(
      wholeOptimizer, fixtures::bindArguments(wholeOptimizer, weights,
                                              gradients, optimizerInputs));
  ASSERT_TRUE(static_cast<bool>(wholeUpdate))
      << llvm::toString(wholeUpdate.takeError());
  std::map<std::string, HostTensorBuffer> wholeParameters =
      fixtures::resultsNamed(wholeOptimizer, *wholeUpdate, "tess.parameter");
  std::map<std::string, HostTensorBuffer> updated;
  double updateError = 0;
  for (unsigned i = 0; i < optimizer.getNumResults(); ++i) {
    auto name =
        optimizer.getResultAttrOfType<mlir::StringAttr>(i, "tess.parameter");
    if (!name)
      continue;
    std::vector<HostTensorBuffer> blocks;
    for (auto &rank : updates)
      blocks.push_back(rank[i]);
    auto type =
        llvm::cast<mlir::RankedTensorType>(optimizer.getResultTypes()[i]);
    TensorLayout layout = layoutOf(
        optimizer.getResultAttrOfType<tess::LayoutAttr>(i, "tess.layout"),
        type.getRank());
    HostTensorBuffer full = fixtures::assemble(blocks, coordinates, layout, mesh,
                                               parameterPieces[name.str()]);
    const HostTensorBuffer &reference = wholeParameters[name.str()];
    ASSERT_EQ(full.numElements(), reference.numElements()) << name.str();
    double difference = 0;
    for (int64_t e = 0; e < full.numElements(); ++e)
      difference = std::max(
          difference, std::abs(full.getDouble(e) - reference.getDouble(e)));
    EXPECT_LE(difference, 1e-7)
        << name.str() << " after the sharded AdamW step, against the whole "
        << "step on the same gradients";
    updateError = std::max(updateError, difference);
    updated[name.str()] = std::move(full);
  }
  double fixtureError =
      fixtures::checkUpdatedParameters(fixture, updated, describe(test));

  auto countCollectives = [](mlir::func::FuncOp function) {
    int count = 0;
    function.walk([&](mlir::Operation *op) {
      count += mlir::isa<tess::AllReduceOp, tess::AllGatherOp,
                         tess::ReduceScatterOp, tess::AllToAllOp>(op);
    });
    return count;
  };
  int collectives = countCollectives(step),
      optimizerCollectives = countCollectives(optimizer);
  std::printf("[partition] %-44s loss rel err %.2e, grad-norm rel err %.2e, "
              "grad vs 1 device %.2e, AdamW vs PyTorch %.2e / sharded vs "
              "whole %.2e (%d + %d collectives, %d deviations)\n",
              describe(test).c_str(), lossError, normError, elementError,
              fixtureError, updateError, collectives, optimizerCollectives,
              deviations);
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
