//===- CompilePhasesTest.cpp - the compile's named phases ----------------===//
//
// The phases' order and names (what --compile-to accepts and tessera-opt
// registers), and that each phase is built from its own options: a phase
// with nothing to do adds no pass, and the options reach the passes.
// test/Driver/compile-to.test checks that tesserac and tessera-opt run the
// same phases on a model.
//
//===----------------------------------------------------------------------===//

#include "tessera/Driver/CompilePhases.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <set>

using namespace tessera;

namespace {

/// The textual pipeline `phase` adds for `options` to a pass manager on any
/// op (as tesserac's), as tessera-opt --pass-pipeline would take it.
std::string pipelineText(CompilePhase phase,
                         const CompilePhaseOptions &options) {
  mlir::MLIRContext context;
  mlir::PassManager passes(&context);
  buildCompilePhase(passes, phase, options);
  std::string text;
  llvm::raw_string_ostream os(text);
  passes.printAsTextualPipeline(os);
  return os.str();
}

TEST(CompilePhases, ListedInCompileOrderWithDistinctNames) {
  std::vector<std::string> names;
  std::set<std::string> distinct;
  for (const CompilePhaseInfo &info : compilePhases()) {
    // The list's order is the enum's, so that index == phase.
    EXPECT_EQ(static_cast<size_t>(info.phase), names.size());
    names.push_back(info.name.str());
    distinct.insert(info.name.str());
    EXPECT_EQ(parseCompilePhase(info.name), info.phase);
    EXPECT_EQ(compilePhaseName(info.phase), info.name);
    EXPECT_FALSE(info.summary.empty());
  }
  EXPECT_EQ(distinct.size(), names.size());
  EXPECT_EQ(names.front(), "import");
  EXPECT_EQ(names.back(), "emitc");
  EXPECT_EQ(compilePhaseNames(), "import, fusion, search, training, plan, "
                                 "remat, shard, partition, stages, "
                                 "preparation, emitc");
  EXPECT_FALSE(parseCompilePhase("bogus"));
  EXPECT_FALSE(parseCompilePhase(""));
}

TEST(CompilePhases, APhaseWithNothingToDoAddsNoPass) {
  CompilePhaseOptions options;
  EXPECT_EQ(pipelineText(CompilePhase::Import, options), "any()");
  EXPECT_EQ(pipelineText(CompilePhase::Search, options), "any()");
  EXPECT_EQ(pipelineText(CompilePhase::Shard, options), "any()");
  EXPECT_EQ(pipelineText(CompilePhase::Partition, options),
            "any()");
  EXPECT_EQ(pipelineText(CompilePhase::Stages, options), "any()");
}

TEST(CompilePhases, OptionsReachThePasses) {
  CompilePhaseOptions options;
  options.precision = "bf16";
  std::string training = pipelineText(CompilePhase::Training, options);
  EXPECT_NE(training.find("tess-pack-qkv-projections"), std::string::npos);
  EXPECT_NE(training.find("precision=bf16"), std::string::npos);
  options.packQkv = false;
  EXPECT_EQ(pipelineText(CompilePhase::Training, options)
                .find("tess-pack-qkv-projections"),
            std::string::npos);
  // Gate/up packing: off unless asked for (not yet timed on a GPU).
  EXPECT_EQ(training.find("tess-pack-gate-up-projections"), std::string::npos);
  options.packGateUp = true;
  EXPECT_NE(pipelineText(CompilePhase::Training, options)
                .find("tess-pack-gate-up-projections"),
            std::string::npos);

  options.search = true;
  options.mesh = "2x2";
  options.cluster = "h200-multinode";
  options.zero = 1;
  options.shard = {"c_fc=tp-column"};
  options.calibration = "compute=0.5";
  options.rematPin = "selective";
  options.offloadPin = "none";
  options.memoryLimit = 1048576;
  std::string search = pipelineText(CompilePhase::Search, options);
  // The memory fit first (the search is calibrated by the step recomputing
  // what it decided), with the pins and the step's options.
  size_t fit = search.find("tess-fit-memory{");
  size_t sharding = search.find("tess-search-sharding{");
  ASSERT_NE(fit, std::string::npos);
  ASSERT_NE(sharding, std::string::npos);
  EXPECT_LT(fit, sharding);
  std::string fitOptions = search.substr(fit, sharding - fit);
  for (const char *option :
       {"remat=selective", "offload=none", "memory-limit=1048576",
        "mesh=2x2", "cluster=h200-multinode", "precision=bf16",
        "loss=causal-lm", "vocabulary-multiple=64",
        "logits-block-bytes=1073741824"})
    EXPECT_NE(fitOptions.find(option), std::string::npos) << option;
  std::string searchOptions = search.substr(sharding);
  for (const char *option : {"mesh=2x2", "cluster=h200-multinode", "zero=1",
                             "shard={c_fc=tp-column}", "calibration=compute=0.5",
                             "precision=bf16", "memory-limit=1048576"})
    EXPECT_NE(searchOptions.find(option), std::string::npos) << option;
  options.rematPin = "";
  options.offloadPin = "";
  options.memoryLimit = 0;
  // --devices N: both passes take the count (the fit measures nothing on
  // several devices; the search chooses the mesh).
  options.mesh = "";
  options.devices = 4;
  search = pipelineText(CompilePhase::Search, options);
  sharding = search.find("tess-search-sharding{");
  ASSERT_NE(sharding, std::string::npos);
  EXPECT_NE(search.substr(0, sharding).find("devices=4"), std::string::npos);
  EXPECT_NE(search.substr(sharding).find("devices=4"), std::string::npos);
  // --devices N: the search phase is tess-search-plan alone, which runs
  // both searches; every pin is its option, a pipeline's shape among them.
  options.searchPlan = true;
  options.rematPin = "full";
  options.memoryLimit = 1 << 20;
  options.pipelineStages = 2;
  options.pipelineMicroBatches = 4;
  options.pipelineSchedule = "gpipe";
  search = pipelineText(CompilePhase::Search, options);
  EXPECT_EQ(search.find("tess-search-sharding"), std::string::npos);
  EXPECT_EQ(search.find("tess-fit-memory"), std::string::npos);
  for (const char *option :
       {"tess-search-plan{", "devices=4", "cluster=h200-multinode",
        "zero=1", "remat=full", "precision=bf16", "memory-limit=1048576",
        "stages=2", "micro-batches=4", "schedule=gpipe"})
    EXPECT_NE(search.find(option), std::string::npos) << option;
  options.searchPlan = false;
  options.rematPin = "";
  options.memoryLimit = 0;
  options.pipelineStages = 0;
  options.pipelineMicroBatches = 0;
  options.pipelineSchedule = "";
  options.devices = 0;
  options.mesh = "2x2";

  // --pipeline (and --explain --pipeline): the search phase is
  // tess-search-pipeline alone, the pipeline pins its options, --explain
  // --plan's stage boundaries among them.
  options.searchPipeline = true;
  options.pipelineStages = 2;
  options.pipelineStageUnits = {1, 3};
  options.pipelineSchedule = "gpipe";
  search = pipelineText(CompilePhase::Search, options);
  EXPECT_EQ(search.find("tess-search-sharding"), std::string::npos);
  for (const char *option :
       {"tess-search-pipeline{", "stages=2", "stage-units={1,3}",
        "schedule=gpipe", "cluster=h200-multinode", "zero=1"})
    EXPECT_NE(search.find(option), std::string::npos) << option;
  options.searchPipeline = false;

  options.plan = "#tess.plan<remat = \"full\">";
  EXPECT_NE(pipelineText(CompilePhase::Plan, options).find("tess-write-plan"),
            std::string::npos);

  options.searchedLayouts = true;
  options.planRemarks = false;
  EXPECT_NE(pipelineText(CompilePhase::Shard, options)
                .find("tess-annotate-from-plan{remarks=false}"),
            std::string::npos);
  options.searchedLayouts = false;

  options.mesh = "2x2";
  options.strategy = "dp-tp";
  std::string shard = pipelineText(CompilePhase::Shard, options);
  EXPECT_NE(shard.find("tess-annotate-sharding"), std::string::npos);
  EXPECT_NE(shard.find("strategy=dp-tp"), std::string::npos);
  options.partition = true;
  EXPECT_NE(pipelineText(CompilePhase::Partition, options)
                .find("tess-partition-spmd"),
            std::string::npos);

  options.stages = 1;
  EXPECT_NE(pipelineText(CompilePhase::Stages, options)
                .find("tess-split-pipeline-stages"),
            std::string::npos);
  options.stages = 4;
  options.virtualStages = 2;
  std::string stages = pipelineText(CompilePhase::Stages, options);
  EXPECT_NE(stages.find("stages=4"), std::string::npos);
  EXPECT_NE(stages.find("virtual=2"), std::string::npos);

  options.logitsBlockBytes = 65536;
  EXPECT_NE(pipelineText(CompilePhase::Preparation, options)
                .find("max-block-bytes=65536"),
            std::string::npos);

  options.target = "cuda";
  options.microBatches = 3;
  std::string emitc = pipelineText(CompilePhase::EmitC, options);
  EXPECT_NE(emitc.find("target=cuda"), std::string::npos);
  EXPECT_NE(emitc.find("micro-batches=3"), std::string::npos);
}

TEST(CompilePhases, RegisteredForTesseraOptButTheImport) {
  registerCompilePhasePipelines();
  for (const CompilePhaseInfo &info : compilePhases()) {
    const mlir::PassPipelineInfo *pipeline =
        mlir::PassPipelineInfo::lookup(("tess-phase-" + info.name).str());
    if (info.phase == CompilePhase::Import)
      EXPECT_EQ(pipeline, nullptr);
    else
      EXPECT_NE(pipeline, nullptr) << info.name.str();
  }
}

} // namespace
