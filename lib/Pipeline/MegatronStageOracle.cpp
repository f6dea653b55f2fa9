//===- MegatronStageOracle.cpp - DP x TP (+ ZeRO-1) stages, priced --------===//
//
// For a stage of units on a submesh of D devices, each tensor-parallel
// degree t that divides D, fits in a node and divides every layer's heads
// and column widths, with d = D / t replicas each taking microBatch / d
// samples:
//
// - per micro-batch: the units' forward and backward kernels at that batch
//   with Megatron's partition (UnitProfile.h); the recomputed forward of the
//   remat choice; the TP all-reduces on the node's link (forward ones again
//   when the whole layer is recomputed); receiving the input activation and
//   sending the output one (and the gradients back), 1/t of it per device
//   (Megatron's scatter-gather of the boundary tensor over the TP group),
//   each on the link that stage's devices and this one's cross
//   (StageQuery::previousLink, nextLink);
// - per step: the gradient all-reduce over the d replicas (one NCCL ring
//   over them, across nodes on each node's adapters: the mesh search's
//   price, cost::groupCollectiveTime), which ZeRO-1 turns into a
//   reduce-scatter of gradients and an all-gather of the updated weights of
//   the same volume; and AdamW plus the weight casts, on 1/d of the weights
//   with ZeRO-1;
// - memory: weights, gradients and AdamW state of the stage's parameters
//   (rank >= 2 ones split by t; master weights and moments by d with
//   ZeRO-1, beside a whole f32 mirror), fp32 gradient accumulators when a
//   step has several micro-batches or the stage several replicas, the
//   kept activations per micro-batch, the largest backward working set of
//   a unit.
//
//===----------------------------------------------------------------------===//

#include "tessera/Pipeline/StageCostOracle.h"

#include "tessera/CostModel/GroupCollective.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace tessera::pipeline {
namespace {

double seconds(const std::vector<OpRecord> &ops,
               const cost::DeviceModel &device, double batch,
               int64_t tensorParallel) {
  double total = 0;
  for (const OpRecord &op : ops)
    total += op.time(device, batch, tensorParallel);
  return total;
}

double modelFlops(const std::vector<OpRecord> &ops, double batch,
                  int64_t tensorParallel) {
  double total = 0;
  for (const OpRecord &op : ops)
    total += op.modelFlops.at(batch) / (op.tensorParallel ? tensorParallel : 1);
  return total;
}

double collectives(cost::Collective collective,
                   const std::vector<Affine> &buffers,
                   const cost::LinkModel &link, double batch,
                   int64_t tensorParallel) {
  double total = 0;
  for (const Affine &bytes : buffers)
    total += link.time(collective, bytes.at(batch), tensorParallel);
  return total;
}

} // namespace

cost::LinkLevel linkBetweenStages(const cost::Cluster &cluster,
                                  const Submesh &submesh, int64_t from,
                                  int64_t to) {
  int64_t perNode = cluster.devicesPerNode;
  bool sameNode = from * submesh.devices() / perNode ==
                  to * submesh.devices() / perNode;
  return sameNode || !cluster.interNode ? cost::LinkLevel::IntraNode
                                        : cost::LinkLevel::InterNode;
}

StageCostOracle::~StageCostOracle() = default;

std::string StageCost::intraOpPlan() const {
  return llvm::formatv("DP {0} x TP {1}{2}", dataParallel, tensorParallel,
                       zero ? ", ZeRO-1" : "")
      .str();
}

std::string MegatronStageOracle::describe() const {
  return "Megatron-style DP x TP (column/row, TP inside a node), ZeRO-1 "
         "over DP or not, priced by lib/CostModel";
}

const MegatronStageOracle::UnitSums &
MegatronStageOracle::sums(int64_t batch, int64_t tensorParallel,
                          RematMode remat) const {
  auto key = std::make_tuple(batch, tensorParallel, static_cast<int>(remat));
  auto found = cache.find(key);
  if (found != cache.end())
    return found->second;

  const cost::DeviceModel &device = cluster.device;
  double samples = static_cast<double>(batch);
  // Each distinct structure once; units then add up their structure's.
  std::vector<UnitSums::Additive> ofStructure(profile.structures.size() * 2);
  std::vector<double> workingOfStructure(profile.structures.size() * 2);
  std::vector<double> tensorParallelWorkingOfStructure(
      profile.structures.size() * 2);
  for (auto [index, unit] : llvm::enumerate(profile.structures)) {
    // Slot 0: as the embedding and head run (never recomputed); slot 1: as
    // a layer runs under `remat`.
    for (size_t variant = 0; variant < 2; ++variant) {
      RematMode mode = variant == 0 ? RematMode::None : remat;
      size_t slot = index * 2 + variant;
      UnitSums::Additive &sum = ofStructure[slot];
      sum.forward = seconds(unit.forward, device, samples, tensorParallel);
      sum.backward = seconds(unit.backward, device, samples, tensorParallel);
      sum.recompute = seconds(recomputedOps(unit, mode), device, samples,
                              tensorParallel);
      double forwardAllReduce =
          collectives(cost::Collective::AllReduce, unit.forwardAllReduces,
                      cluster.intraNode, samples, tensorParallel);
      sum.tensorParallelCommunication =
          forwardAllReduce * (mode == RematMode::Full ? 2 : 1) +
          collectives(cost::Collective::AllReduce, unit.backwardAllReduces,
                      cluster.intraNode, samples, tensorParallel) +
          collectives(cost::Collective::AllGather, unit.backwardAllGathers,
                      cluster.intraNode, samples, tensorParallel);
      sum.modelFlops = modelFlops(unit.forward, samples, tensorParallel) +
                       modelFlops(unit.backward, samples, tensorParallel);
      sum.kept = keptActivations(unit, mode).at(samples, tensorParallel);
      for (const HeldParameter &parameter : unit.parameters) {
        double held = profile.heldElements(parameter.elements,
                                           parameter.split, tensorParallel);
        sum.parameters += held;
        if (parameter.uncopied)
          sum.uncopied += held;
      }
      sum.prepared = unit.preparedBytes +
                     unit.preparedSplitBytes /
                         static_cast<double>(tensorParallel);
      sum.stepOnce = seconds(unit.stepOnce, device, 1, tensorParallel);
      TensorBytes working = backwardWorkingBytes(unit, mode);
      workingOfStructure[slot] = working.at(samples, tensorParallel);
      tensorParallelWorkingOfStructure[slot] =
          tensorParallel > 1
              ? working.tensorParallelOnly.at(samples) / tensorParallel
              : 0.0;
    }
  }

  UnitSums result;
  size_t unitCount = profile.units.size();
  result.prefix.assign(unitCount + 1, UnitSums::Additive());
  result.working.assign(unitCount, 0);
  result.tensorParallelWorking.assign(unitCount, 0);
  for (size_t unit = 0; unit < unitCount; ++unit) {
    bool layer = profile.units[unit].kind == UnitKind::Layer;
    size_t slot = profile.structureOf[unit] * 2 + (layer ? 1 : 0);
    result.prefix[unit + 1] = result.prefix[unit];
    result.prefix[unit + 1].accumulate(ofStructure[slot], 1);
    result.working[unit] = workingOfStructure[slot];
    result.tensorParallelWorking[unit] = tensorParallelWorkingOfStructure[slot];
  }
  return cache.emplace(key, std::move(result)).first->second;
}

std::vector<StageCost>
MegatronStageOracle::plans(const StageQuery &query) const {
  std::vector<StageCost> result;
  int64_t devices = query.submesh.devices();

  for (int64_t tensorParallel = 1;
       tensorParallel <= std::min(devices, cluster.devicesPerNode);
       tensorParallel *= 2) {
    if (devices % tensorParallel != 0)
      continue;
    int64_t replicas = devices / tensorParallel;
    if (query.microBatchSamples % replicas != 0)
      continue;
    int64_t batch = query.microBatchSamples / replicas;
    if (!layersDivide(query.firstUnit, query.endUnit, tensorParallel))
      continue;

    const UnitSums &unitSums = sums(batch, tensorParallel, query.remat);
    UnitSums::Additive range = unitSums.prefix[query.endUnit];
    range.accumulate(unitSums.prefix[query.firstUnit], -1);
    StageCost base;
    base.tensorParallel = tensorParallel;
    base.dataParallel = replicas;
    base.replicaBatch = batch;
    base.forward = range.forward;
    base.backward = range.backward;
    base.recompute = range.recompute;
    base.tensorParallelCommunication = range.tensorParallelCommunication;
    base.modelFlops = range.modelFlops;
    // The kept values are the compiled stash's (the saved values a chunk's
    // forward returns), exact. A device's chunk functions (forward and
    // backward, interleaved chunks' alike) share one arena, whose peak is
    // the largest unit's working set. Only the whole program on one device
    // compiles otherwise: as the one-device step, one arena whose peak the
    // calibration (ProgramProfile::workingScale) measured.
    base.memory.activationsPerMicroBatch = range.kept;
    size_t units = profile.units.size();
    auto keptOf = [&](size_t unit) {
      return unitSums.prefix[unit + 1].kept - unitSums.prefix[unit].kept;
    };
    if (query.firstUnit == 0)
      base.memory.embeddingActivations = keptOf(0);
    if (query.endUnit == units)
      base.memory.headActivations = keptOf(units - 1);
    bool oneDeviceStep = devices == 1 && query.firstUnit == 0 &&
                         query.endUnit == units &&
                         query.boundaryCrossings == 1;
    base.memory.working =
        oneDeviceStep
            ? unitSums.workingOver(query.firstUnit, query.endUnit,
                                   profile.structureOf, profile.workingScale)
            : unitSums.workingOver(query.firstUnit, query.endUnit,
                                   profile.structureOf);
    // The prepare's peak, in the same arena: a split LM head's padded
    // weight built whole before each rank takes its block.
    if (tensorParallel > 1)
      for (size_t unit = query.firstUnit; unit < query.endUnit; ++unit)
        base.memory.working = std::max(base.memory.working,
                                       profile.unit(unit).prepareWorking);

    // Receive the input and send the output, activations forward and
    // gradients backward, 1/t per device, each on the link to the
    // neighbouring stage's devices.
    double samples = static_cast<double>(batch);
    auto transfer = [&](size_t boundary, cost::LinkLevel level) {
      return cluster.link(level).time(
          cost::Collective::SendRecv,
          profile.boundary[boundary].at(samples) / tensorParallel, 2);
    };
    double transfers = 0;
    if (query.firstUnit > 0)
      transfers += transfer(query.firstUnit, query.previousLink);
    if (query.endUnit < profile.units.size())
      transfers += transfer(query.endUnit, query.nextLink);
    // An interleaved schedule's wrap, last device to first: the tensor
    // between two layers, the first stage's output boundary or the last
    // stage's input one.
    double wrap = 0;
    if (query.wrapCrossings > 0)
      wrap = query.wrapCrossings *
             transfer(query.firstUnit > 0 ? query.firstUnit : query.endUnit,
                      query.wrapLink);
    base.pointToPoint = 2 * (query.boundaryCrossings * transfers + wrap);

    // Each of the stage's chunks holds, per boundary it has, the tensor it
    // sends one way and the slot of the one it receives the other way,
    // whole on every TP rank; the program's first chunk has no input and
    // its last no output. Interleaved, the chunks' other boundaries cut
    // between two layers (the stage's own boundary to the program's
    // middle).
    size_t middle = query.firstUnit > 0 ? query.firstUnit : query.endUnit;
    int64_t chunks = query.boundaryCrossings;
    auto sides = [&](bool programEnd, size_t cut) {
      double own = programEnd ? 0 : profile.boundary[cut].at(samples);
      double inner = middle < units ? profile.boundary[middle].at(samples) : 0;
      return own + (chunks - 1) * inner;
    };
    base.memory.messages =
        2 * (sides(query.firstUnit == 0, query.firstUnit) +
             sides(query.endUnit == units, query.endUnit));
    // Every device keeps every micro-batch's tokens and targets, whole.
    base.memory.inputs =
        (query.microBatches + 1) *
        profile.inputs.at(static_cast<double>(query.microBatchSamples));

    double parametersPerDevice = range.parameters;
    // A tied parameter each of whose readers the stage holds is one tensor.
    // One some of whose readers are on other stages is summed once a step
    // by its owner, the stage of its first reader, in an f32 buffer for
    // the other stages' part (runtime/train/PipelineParallel.cpp).
    // Of those, the tied parameters another stage owns: under ZeRO-1 the
    // owner alone keeps their masters and moments (StageZero.cpp buckets
    // what a stage only reads apart; CompiledPipelineMemory.cpp).
    double readOnlyElements = 0;
    for (const ProgramProfile::TiedParameter &tied : profile.tiedParameters) {
      auto inStage = llvm::count_if(tied.units, [&](size_t unit) {
        return unit >= query.firstUnit && unit < query.endUnit;
      });
      double elements =
          profile.heldElements(tied.elements, tied.split, tensorParallel);
      if (inStage > 1) {
        parametersPerDevice -= (inStage - 1) * elements;
        // Its later readers' parts of its gradient (the head's of a tied
        // table) live in the arena from their backward until the first
        // reader adds its own part to them: beside the working set of
        // every unit from the first reader to the last one's predecessor,
        // and at the sum beside that part.
        if (!oneDeviceStep) {
          size_t first = std::max(query.firstUnit, tied.units.front());
          size_t last = first;
          for (size_t unit : tied.units)
            if (unit < query.endUnit)
              last = std::max(last, unit);
          double part = elements * profile.gradientBytesPerParameter;
          base.memory.working = std::max(
              base.memory.working,
              std::max(unitSums.workingOver(first, last, profile.structureOf),
                       part) +
                  (inStage - 1) * part);
        }
      }
      bool owner = !tied.units.empty() && tied.units.front() >= query.firstUnit &&
                   tied.units.front() < query.endUnit;
      if (inStage > 0 && !owner)
        readOnlyElements += elements;
      if (owner && inStage < static_cast<int64_t>(tied.units.size()))
        base.memory.gradientParts =
            std::max(base.memory.gradientParts,
                     elements * profile.accumulatorBytesPerParameter);
    }
    double uncopied = range.uncopied;
    double gradientBytes =
        parametersPerDevice * profile.gradientBytesPerParameter;
    // The replicas of a TP rank, t apart: the same function prices a mesh
    // axis's groups for the mesh search. The driver all-reduces the
    // gradients in buckets, each with its latency, as the mesh search
    // prices them (a stage's parameters are many tensors, each smaller
    // than a bucket or about one).
    cost::DeviceGroup group =
        cost::stridedGroup(cluster, replicas, tensorParallel);
    double gradientSync = cost::bucketedTime(
        gradientBytes, cost::kGradientBucketBytes, [&](double bytes) {
          return cost::groupCollectiveTime(
              cluster, cost::Collective::AllReduce, bytes, group);
        });

    for (bool zero : {false, true}) {
      if (zero && replicas == 1)
        continue;
      StageCost plan = base;
      plan.zero = zero;
      double shard = zero ? static_cast<double>(replicas) : 1.0;
      plan.gradientSync = gradientSync;
      plan.optimizer = range.stepOnce / shard;
      // ZeRO-1's chunks read a whole f32 mirror of the weights, the
      // masters being the rank's shard (runtime/train/StageZero.h).
      double updated =
          zero ? parametersPerDevice - readOnlyElements : parametersPerDevice;
      plan.memory.weights =
          updated * profile.masterBytesPerParameter / shard +
          parametersPerDevice * ((zero ? profile.masterBytesPerParameter : 0) +
                                 profile.computeBytesPerParameter) +
          range.prepared - uncopied * profile.computeBytesPerParameter;
      plan.memory.gradients = gradientBytes;
      plan.memory.optimizerState =
          updated * profile.optimizerBytesPerParameter / shard;
      // The driver sums the micro-batches' gradients in fp32, whole on
      // every replica, and so the replicas' sums of a stage mesh with dp
      // (runtime/train/TrainMain.cpp's pipeline options).
      if (query.microBatches > 1 || replicas > 1)
        plan.memory.accumulators =
            parametersPerDevice * profile.accumulatorBytesPerParameter;
      result.push_back(std::move(plan));
    }
  }
  return result;
}

bool MegatronStageOracle::layersDivide(size_t firstUnit, size_t endUnit,
                                       int64_t tensorParallel) const {
  auto [found, inserted] = undividedPrefix.try_emplace(tensorParallel);
  std::vector<size_t> &prefix = found->second;
  if (inserted) {
    prefix.assign(profile.units.size() + 1, 0);
    for (size_t unit = 0; unit < profile.units.size(); ++unit) {
      bool divides = true;
      if (profile.units[unit].kind == UnitKind::Layer)
        for (int64_t size : profile.unit(unit).tensorParallelDivisors)
          divides = divides && size % tensorParallel == 0;
      prefix[unit + 1] = prefix[unit] + (divides ? 0 : 1);
    }
  }
  return prefix[endUnit] == prefix[firstUnit];
}

double MegatronStageOracle::UnitSums::workingOver(
    size_t firstUnit, size_t endUnit, const std::vector<unsigned> &structureOf,
    double calibrated) const {
  // Repeated layers share a structure: the first and last units and one
  // unit of each run of a structure are enough.
  double largest = 0;
  for (size_t unit = firstUnit; unit < endUnit; ++unit) {
    double own = tensorParallelWorking[unit];
    largest = std::max(largest, (working[unit] - own) * calibrated + own);
    while (unit + 1 < endUnit && structureOf[unit + 1] == structureOf[unit])
      ++unit;
  }
  return largest;
}

} // namespace tessera::pipeline
