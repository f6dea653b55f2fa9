//===- DataParallelTest.cpp - The driver's data parallelism on the host ---===//
//
// What can be checked without GPUs: each rank's slice of the data (the
// ranks together read what one rank with --grad-accum N*K, or with .npy data
// batch N*B, reads), the reducer's view of the flat buffers, and the
// reduction and agreement of DataParallelGradients over thread ranks
// (thread_comm.h) with a host backend whose gradients are known numbers.
//
//===----------------------------------------------------------------------===//

#include "DataParallel.h"
#include "DataLoader.h"
#include "Flags.h"
#include "HostBackend.h"
#include "Trace.h"
#include "TrainError.h"
#include "TrainMain.h"
#include "TrainTestSupport.h"

#include "tessera/runtime/thread_comm.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>

using namespace tessera::train;
using namespace tessera_train_test;

namespace {

struct Batch {
  std::vector<int64_t> tokens;
  std::vector<int64_t> targets;
};

DataLayout causal(int64_t batch, int64_t sequence) {
  DataLayout layout;
  layout.batch = batch;
  layout.sequence = sequence;
  layout.vocabulary = 1000;
  return layout;
}

Batch next(DataLoader &loader, const DataLayout &layout, int32_t rank = 0,
           int32_t ranks = 1) {
  Batch batch;
  batch.tokens.resize(static_cast<size_t>(layout.batch * layout.sequence));
  batch.targets.resize(batch.tokens.size());
  loader.nextBatch(batch.tokens.data(), batch.targets.data(), rank, ranks);
  return batch;
}

// Tests that with token shards 2 ranks x K = 2 micro-batches read, in micro-
// batch k on rank r, the (2k + r)-th micro-batch of one rank with
// --grad-accum 4, shuffled and across the epoch boundary, and that every
// rank's position is the global one (what a checkpoint stores).
TEST(DataParallelData, ShardRanksSplitGradientAccumulation) {
  TemporaryDirectory temporary;
  std::vector<uint16_t> tokens(7 * 6 + 1);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<uint16_t>(i);
  writeShard(temporary.getPath() + "/d.bin", tokens); // 7 chunks of 2 x 3
  DataLayout layout = causal(2, 3);
  std::string pattern = temporary.getPath() + "/d.bin";
  DataLoader one(pattern, layout, 3, true);
  DataLoader rank0(pattern, layout, 3, true), rank1(pattern, layout, 3, true);
  for (int step = 0; step < 5; ++step)
    for (int micro = 0; micro < 2; ++micro) {
      Batch first = next(one, layout), second = next(one, layout);
      Batch a = next(rank0, layout, 0, 2), b = next(rank1, layout, 1, 2);
      EXPECT_EQ(a.tokens, first.tokens);
      EXPECT_EQ(a.targets, first.targets);
      EXPECT_EQ(b.tokens, second.tokens);
      EXPECT_EQ(b.targets, second.targets);
      EXPECT_EQ(rank0.getPosition(), one.getPosition());
      EXPECT_EQ(rank1.getPosition(), one.getPosition());
    }
  // A resumed rank continues from the global position.
  DataLoader resumed(pattern, layout, 3, true);
  resumed.seek(rank1.getPosition());
  next(one, layout);
  EXPECT_EQ(next(resumed, layout, 1, 2).tokens, next(one, layout).tokens);
}

// Tests that with .npy rows the ranks' B rows, side by side, are the rows of
// one rank's batch of 2B.
TEST(DataParallelData, NpyRanksSplitTheGlobalBatch) {
  TemporaryDirectory temporary;
  std::vector<int64_t> values;
  for (int i = 0; i < 9 * 4; ++i)
    values.push_back(i % 91);
  writeNpy(temporary.getPath() + "/d.npy", "<i8", {9, 4}, values);
  std::string pattern = temporary.getPath() + "/d.npy";
  DataLayout global = causal(4, 3), perRank = causal(2, 3);
  DataLoader one(pattern, global, 8, true);
  DataLoader rank0(pattern, perRank, 8, true), rank1(pattern, perRank, 8, true);
  for (int step = 0; step < 6; ++step) {
    Batch whole = next(one, global);
    Batch a = next(rank0, perRank, 0, 2), b = next(rank1, perRank, 1, 2);
    a.tokens.insert(a.tokens.end(), b.tokens.begin(), b.tokens.end());
    a.targets.insert(a.targets.end(), b.targets.begin(), b.targets.end());
    EXPECT_EQ(a.tokens, whole.tokens);
    EXPECT_EQ(a.targets, whole.targets);
    EXPECT_EQ(rank0.getPosition(), one.getPosition());
  }
}

const tessera_tensor_info kParameters[] = {
    {"embedding", TESSERA_F32, 2, {40, 30}},
    {"norm.weight", TESSERA_F32, 1, {7}},
    {"head", TESSERA_F32, 2, {30, 33}},
};

/// What the last step of this thread read as its parameters, widened to
/// f32.
thread_local std::vector<std::vector<float>> parametersRead;

/// Gradient element e of every parameter: (e + 1) * (token[0] + 1) * scale
/// (rounded to the gradient's dtype), and the step reports each gradient
/// ready, last first, as a backward pass does. The loss is token[0].
int knownProgram(const tessera_step_context *context,
                 const tessera_tensor *parameters,
                 const tessera_tensor * /*buffers*/,
                 const tessera_tensor *tokens,
                 const tessera_tensor * /*targets*/, float lossScale,
                 uint64_t /*seed*/, float *loss, tessera_tensor *gradients) {
  const float first =
      static_cast<float>(static_cast<const int64_t *>(tokens->data)[0]);
  parametersRead.clear();
  for (int i = 0; i < 3; ++i) {
    parametersRead.emplace_back(
        static_cast<size_t>(elementCount(kParameters[i])));
    tessera_tensor widened = parameters[i];
    widened.data = parametersRead.back().data();
    widened.dtype = TESSERA_F32;
    if (tessera_cpu_cast(&parameters[i], &widened) != 0)
      return 1;
  }
  for (int i = 2; i >= 0; --i) {
    tessera_tensor &gradient = gradients[i];
    std::vector<float> values(
        static_cast<size_t>(elementCount(kParameters[i])));
    for (size_t e = 0; e < values.size(); ++e)
      values[e] = static_cast<float>(e + 1) * (first + 1) * lossScale;
    tessera_tensor exact = gradient;
    exact.data = values.data();
    exact.dtype = TESSERA_F32;
    if (tessera_cpu_cast(&exact, &gradient) != 0)
      return 1;
    if (context->gradient_ready)
      context->gradient_ready(context->gradient_ready_user, i);
  }
  *loss = first;
  return 0;
}

tessera_program knownProgramOf() {
  tessera_program program{};
  program.model_name = "known.onnx";
  program.precision = TESSERA_PRECISION_FP32;
  program.batch = 1;
  program.sequence = 2;
  program.vocabulary = 8;
  program.parameter_count = 3;
  program.parameters = kParameters;
  program.forward_backward = knownProgram;
  program.device = TESSERA_DEVICE_HOST;
  return program;
}

TEST(DataParallel, GradientLayoutIsTheParameterLayout) {
  tessera_program program = knownProgramOf();
  ParameterLayout layout(program);
  tessera::comm::GradientLayout gradients = gradientLayoutOf(layout, 1000);
  ASSERT_EQ(gradients.parameters().size(), 3u);
  for (int32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(gradients.parameters()[static_cast<size_t>(i)].offset,
              layout.offset(i));
    EXPECT_EQ(gradients.parameters()[static_cast<size_t>(i)].elements,
              layout.count(i));
  }
  EXPECT_LE(gradients.totalElements(), layout.totalElements());
  // Buckets cover every parameter once, the last parameters first.
  EXPECT_EQ(gradients.buckets().front().lastParameter, 2);
  EXPECT_EQ(gradients.buckets().back().firstParameter, 0);
}

/// What one rank with the whole summed gradient would make of `state`:
/// AdamW over gradient values (e + 1) * factor.
TrainingState referenceUpdate(const tessera_program &program,
                              const TrainingState &state, double factor,
                              const AdamWUpdate &update) {
  TrainOptions options;
  std::unique_ptr<TrainingBackend> reference =
      makeHostBackend(program, options);
  reference->loadState(state);
  const ParameterLayout &layout = reference->getLayout();
  auto *flat = static_cast<float *>(reference->computeGradients().data);
  for (int32_t i = 0; i < layout.size(); ++i)
    for (int64_t e = 0; e < layout.count(i); ++e)
      flat[layout.offset(i) + e] =
          static_cast<float>(static_cast<double>(e + 1) * factor);
  reference->applyAdamW(update);
  TrainingState result = state;
  reference->storeState(result);
  return result;
}

// Tests that 2 and 4 thread ranks, with 1 and with 3 micro-batches, with
// and without ZeRO-1, end a step holding the sum of every rank's gradients
// (overlapped through gradient_ready, or after the last micro-batch), agree
// on the norm and the scalars, and after AdamW hold the weights and moments
// one rank with the summed gradient computes, bit for bit: the next step
// reads them on every rank (ZeRO-1: the f32 mirrors gathered from the
// shards), and rank 0 stores them whole (ZeRO-1: gathered from shards that
// are all each rank holds of the masters and moments, about 1/N of them:
// a checkpoint written under ZeRO-1 is a one-rank run's state, and each
// rank loads its shard of the one-rank state it starts from).
TEST(DataParallel, ThreadRanksReduceTheStepsGradients) {
  tessera_program program = knownProgramOf();
  ParameterLayout unsharded(program);
  for (int32_t ranks : {2, 4})
  for (bool sharded : {false, true})
    for (int64_t microBatches : {1, 3}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks, " +
                   (sharded ? "ZeRO-1, " : "") + "micro-batches " +
                   std::to_string(microBatches));
      TrainOptions options;
      options.gradientAccumulation = microBatches;
      // A tiny bucket: several buckets, launched mid-backward.
      options.bucketMegabytes = 0;
      DataParallelPlan plan =
          planDataParallel(program, options, ranks, sharded);
      EXPECT_GT(plan.gradients.buckets().size(), 1u);
      // Sum over ranks and micro-batches of (global + 1), times 2.
      double factor = 0, expectedLoss = 0, expectedSquares = 0;
      for (int64_t g = 0; g < ranks * microBatches; ++g) {
        factor += static_cast<double>(g + 1) * 2;
        expectedLoss += static_cast<double>(g);
      }
      std::vector<double> expectedPerParameter;
      for (int32_t i = 0; i < unsharded.size(); ++i) {
        double squares = 0;
        for (int64_t e = 0; e < unsharded.count(i); ++e)
          squares += (static_cast<double>(e + 1) * factor) *
                     (static_cast<double>(e + 1) * factor);
        expectedPerParameter.push_back(squares);
        expectedSquares += squares;
      }
      TrainingState initial;
      allocateState(program, initial);
      for (std::vector<float> &tensor : initial.parameters)
        for (size_t e = 0; e < tensor.size(); ++e)
          tensor[e] = 0.01f * static_cast<float>(e);
      AdamWUpdate update;
      update.learningRate = 0.1;
      update.weightDecay = 0.01;
      update.gradientScale = 1.0 / factor;
      TrainingState expected =
          referenceUpdate(program, initial, factor, update);

      std::vector<ResidentState> resident(static_cast<size_t>(ranks));
      tessera::comm::ThreadWorld world({ranks}, 30);
      tessera::comm::runThreadRanks(
          world, [&](const tessera::comm::RankComms &comms) {
            const ParameterLayout placed = plan.rankLayout(comms.rank);
            std::unique_ptr<TrainingBackend> backend =
                makeHostBackend(program, options, &placed);
            resident[static_cast<size_t>(comms.rank)] =
                backend->residentState();
            backend->loadState(initial);
            ThreadRankWorld rankWorld(comms.world);
            Trace trace;
            DataParallelGradients reducer(rankWorld, *backend, plan, trace);
            double lossSum = 0;
            for (int64_t micro = 0; micro < microBatches; ++micro) {
              // Rank r's micro-batch k is global micro-batch Nk + r.
              backend->tokens()[0] = ranks * micro + comms.rank;
              lossSum += backend->runMicroBatch(micro, 2.0f, 0);
            }
            reducer.finishStep();
            if (reducer.gradientSumOfSquares() != expectedSquares)
              throw std::runtime_error("the norm is not the global one");
            // Each parameter's sum (--grad-norms-every), agreed over the
            // shards when sharded: exact for these integer-valued squares.
            if (reducer.parameterSumsOfSquares() != expectedPerParameter)
              throw std::runtime_error("a parameter's sum is not global");
            reducer.gatherGradients();
            for (const std::vector<float> &gradient :
                 backend->copyOptimizerGradients())
              for (size_t e = 0; e < gradient.size(); ++e)
                if (gradient[e] != static_cast<float>((e + 1) * factor))
                  throw std::runtime_error("a gradient is not the sum");
            if (reducer.sum(lossSum) != expectedLoss)
              throw std::runtime_error("the loss sum differs");
            if (reducer.max(comms.rank == 1 ? 1.0 : 0.0) != 1.0)
              throw std::runtime_error("the flag's max differs");
            backend->applyAdamW(update);
            reducer.afterOptimizer();
            backend->runMicroBatch(0, 1.0f, 0);
            if (parametersRead != expected.parameters)
              throw std::runtime_error("the next step reads other weights");
            reducer.gatherOptimizerState();
            // A sharded state is whole on rank 0 alone (its checkpoint).
            if (sharded && comms.rank != 0)
              return 0;
            TrainingState after = initial;
            backend->storeState(after);
            if (after.parameters != expected.parameters ||
                after.firstMoments != expected.firstMoments ||
                after.secondMoments != expected.secondMoments)
              throw std::runtime_error("the update differs from one rank's");
            return 0;
          });
      // ZeRO-1: masters and moments are the rank's shard, 1/N of the
      // whole within the padding (each piece's state rounded up to 128
      // elements, each bucket to N * 64); the rest stays whole.
      const int64_t wholeState = unsharded.totalElements() * 4;
      int64_t held = 0;
      for (const ResidentState &rank : resident) {
        EXPECT_EQ(rank.moments, 2 * rank.masters);
        EXPECT_EQ(rank.gradients, plan.parameters.totalBytes(TESSERA_F32));
        if (!sharded) {
          EXPECT_EQ(rank.masters, plan.parameters.totalBytes(TESSERA_F32));
          EXPECT_EQ(rank.stepCopies, 0);
          continue;
        }
        const int64_t padding = static_cast<int64_t>(
            plan.gradients.buckets().size() + 3) * 128 * 4;
        EXPECT_LE(rank.masters, wholeState / ranks + padding);
        // The f32 mirrors of the parameters the step reads.
        EXPECT_EQ(rank.stepCopies, plan.parameters.totalBytes(TESSERA_F32));
        held += rank.masters;
      }
      if (sharded) {
        EXPECT_GE(held, static_cast<int64_t>(sizeof(float)) *
                            (40 * 30 + 7 + 30 * 33));
      }
    }
}

/// What rank 0 of a data-parallel step of `program` on `ranks` thread
/// ranks ends with: the parameters its next step reads, and the whole state
/// it stores (a checkpoint's).
struct RankZeroView {
  std::vector<std::vector<float>> read;
  TrainingState stored;
};

RankZeroView runDataParallelStep(const tessera_program &program,
                                 const TrainOptions &options, int32_t ranks,
                                 bool sharded, const TrainingState &initial,
                                 const AdamWUpdate &update) {
  DataParallelPlan plan = planDataParallel(program, options, ranks, sharded);
  RankZeroView view;
  tessera::comm::ThreadWorld world({ranks}, 30);
  tessera::comm::runThreadRanks(
      world, [&](const tessera::comm::RankComms &comms) {
        const ParameterLayout placed = plan.rankLayout(comms.rank);
        std::unique_ptr<TrainingBackend> backend =
            makeHostBackend(program, options, &placed);
        backend->loadState(initial);
        ThreadRankWorld rankWorld(comms.world);
        Trace trace;
        DataParallelGradients reducer(rankWorld, *backend, plan, trace);
        for (int64_t micro = 0; micro < options.gradientAccumulation;
             ++micro) {
          backend->tokens()[0] = ranks * micro + comms.rank;
          backend->runMicroBatch(micro, 1.0f, 0);
        }
        reducer.finishStep();
        reducer.gradientSumOfSquares();
        backend->applyAdamW(update);
        reducer.afterOptimizer();
        backend->runMicroBatch(0, 1.0f, 0);
        reducer.gatherOptimizerState();
        if (comms.rank != 0)
          return 0;
        view.read = parametersRead;
        view.stored = initial;
        backend->storeState(view.stored);
        return 0;
      });
  return view;
}

// Tests that under ZeRO-1 a bf16 program whose step reads two compute
// copies and one parameter as f32 (a mirror) reads, after the all-gather
// of both, what the whole-state data-parallel step reads, bit for bit, and
// that rank 0's gathered checkpoint state is the whole-state run's: on 4
// thread ranks, with the gradients reduced in bf16 during the backward pass
// and in f32 after 3 micro-batches, in a bucket per parameter and in
// buckets as large as the whole model (which the plan cuts where the kind
// of read changes).
TEST(DataParallel, ZeroOneGathersTheCopiesAndMirrorsTheStepReads) {
  tessera_program program = knownProgramOf();
  program.precision = TESSERA_PRECISION_BF16;
  const int32_t stepDtypes[] = {TESSERA_BF16, TESSERA_F32, TESSERA_BF16};
  program.parameter_step_dtypes = stepDtypes;
  TrainingState initial;
  allocateState(program, initial);
  for (std::vector<float> &tensor : initial.parameters)
    for (size_t e = 0; e < tensor.size(); ++e)
      tensor[e] = 0.01f * static_cast<float>(e) + 1.0f / 1024.0f;
  AdamWUpdate update;
  update.learningRate = 0.1;
  update.weightDecay = 0.01;
  update.gradientScale = 1e-3;
  for (int64_t microBatches : {1, 3})
  for (double bucketMegabytes : {0.0, 64.0}) {
    SCOPED_TRACE("micro-batches " + std::to_string(microBatches) +
                 ", buckets of " + std::to_string(bucketMegabytes) + " MB");
    TrainOptions options;
    options.gradientAccumulation = microBatches;
    options.bucketMegabytes = bucketMegabytes;
    RankZeroView whole =
        runDataParallelStep(program, options, 4, false, initial, update);
    RankZeroView sharded =
        runDataParallelStep(program, options, 4, true, initial, update);
    EXPECT_EQ(sharded.read, whole.read);
    EXPECT_EQ(sharded.stored.parameters, whole.stored.parameters);
    EXPECT_EQ(sharded.stored.firstMoments, whole.stored.firstMoments);
    EXPECT_EQ(sharded.stored.secondMoments, whole.stored.secondMoments);
    // The step moved the weights: the mirror read is the updated master.
    EXPECT_NE(sharded.read[1], initial.parameters[1]);
  }
}

// Tests that a ZeRO plan's buckets never hold a parameter the step reads as
// its compute copy beside one it reads in f32, however large the buckets,
// so that a rank keeps copies for the copied parameters' buckets alone and
// f32 mirrors for the others' (TrainingBackend), where one bucket of the
// three parameters would have made both buffers whole.
TEST(DataParallel, ZeroBucketsHoldOneKindOfRead) {
  tessera_program program = knownProgramOf();
  program.precision = TESSERA_PRECISION_BF16;
  const int32_t stepDtypes[] = {TESSERA_BF16, TESSERA_F32, TESSERA_BF16};
  program.parameter_step_dtypes = stepDtypes;
  const int32_t writes[] = {2, 1, 0}; // the backward's order, for ZeRO-2
  program.gradient_write_positions = writes;
  TrainOptions options;
  options.bucketMegabytes = 64;
  for (int32_t zero : {1, 2}) {
    SCOPED_TRACE("ZeRO-" + std::to_string(zero));
    DataParallelPlan plan = planDataParallel(program, options, 2, zero);
    ASSERT_EQ(plan.gradients.buckets().size(), 3u);
    for (const tessera::comm::GradientBucket &bucket :
         plan.gradients.buckets())
      EXPECT_EQ(bucket.firstParameter, bucket.lastParameter);
    ParameterLayout layout = plan.rankLayout(0);
    std::unique_ptr<TrainingBackend> backend =
        makeHostBackend(program, options, &layout);
    auto bucketOf = [&](int32_t p) {
      return layout.gatheredSpans()[static_cast<size_t>(layout.spanOf(p))]
          .elements;
    };
    EXPECT_EQ(backend->residentState().stepCopies,
              (bucketOf(0) + bucketOf(2)) * 2 + bucketOf(1) * 4);
  }
}

// Tests that a CPU executable started as rank 1 of 2 (torchrun's variables)
// says it runs one rank only, with the rank in front, and exits 1.
TEST(DataParallelLaunch, ACpuProgramRefusesSeveralRanks) {
  const char *variables[][2] = {{"RANK", "1"},
                                {"WORLD_SIZE", "2"},
                                {"LOCAL_RANK", "1"},
                                {"MASTER_ADDR", "127.0.0.1"},
                                {"MASTER_PORT", "29999"}};
  for (auto &variable : variables)
    setenv(variable[0], variable[1], 1);
  tessera_program program = knownProgramOf();
  Arguments arguments({"--steps", "1"});
  ::testing::internal::CaptureStderr();
  int code = runTrainMain(arguments.argc(), arguments.argv(), &program,
                          makeHostBackend);
  std::string error = ::testing::internal::GetCapturedStderr();
  for (auto &variable : variables)
    unsetenv(variable[0]);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(error.rfind("rank 1: train: error: ", 0), 0u) << error;
  EXPECT_NE(error.find("compile with --target cuda"), std::string::npos)
      << error;
}

TEST(DataParallelFlags, BucketAndZero) {
  Arguments arguments({"--bucket-mb", "4", "--zero", "1"});
  TrainOptions options = parseFlags(arguments.argc(), arguments.argv());
  EXPECT_EQ(options.bucketMegabytes, 4);
  EXPECT_EQ(options.zeroStage, 1);
  EXPECT_EQ(parseFlags(1, Arguments({}).argv()).bucketMegabytes, 25);
  Arguments zero({"--bucket-mb", "0"});
  EXPECT_THROW(parseFlags(zero.argc(), zero.argv()), TrainError);
  Arguments three({"--zero", "3"});
  EXPECT_EQ(parseFlags(three.argc(), three.argv()).zeroStage, 3);
  Arguments stage({"--zero", "4"});
  EXPECT_THROW(parseFlags(stage.argc(), stage.argv()), TrainError);
}

} // namespace
