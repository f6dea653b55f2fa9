//===- StageCostOracle.h - what one pipeline stage costs ---------*- C++ -*-===//
//
// The inter-op search (InterOpSearch.h) asks, for a candidate stage, what it
// costs; how the stage runs on its submesh (its intra-op plan) is the
// oracle's business. A query names the layer range, the submesh, the
// micro-batch and the remat choice; the answer lists every intra-op plan the
// oracle can run it with: the time per micro-batch split into forward,
// backward, recomputation, intra-stage communication and point-to-point
// transfers, the once-per-step gradient synchronization and optimizer step,
// and the memory per device by category with the activations per
// micro-batch kept separate, because how many micro-batches are in flight
// depends on the stage's place in the schedule, which the search knows.
//
// MegatronStageOracle is the first implementation: data x tensor
// parallelism on the submesh (tensor parallelism inside a node, Megatron's
// column/row partition, UnitProfile.h), ZeRO-1 over the data-parallel
// replicas or not, priced with lib/CostModel. The intra-op ILP of
// lib/Sharding can implement the same interface later: a query's layer
// range and submesh are its function and mesh, its plans the candidates.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_PIPELINE_STAGECOSTORACLE_H
#define TESSERA_PIPELINE_STAGECOSTORACLE_H

#include "tessera/CostModel/Cluster.h"
#include "tessera/Pipeline/Remat.h"
#include "tessera/Pipeline/UnitProfile.h"

#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace tessera::pipeline {

/// A block of the cluster: whole nodes, or part of one node.
struct Submesh {
  int64_t nodes = 1;
  int64_t devicesPerNode = 1;

  int64_t devices() const { return nodes * devicesPerNode; }
};

/// The link between the devices of the stages at positions `from` and `to`
/// of a pipeline of stages on equal `submesh`es, placed one after the other
/// on the cluster's devices as the search places them (stage s on devices
/// [s D, (s + 1) D), numbered node by node). TP rank i of one stage talks to
/// rank i of the other, and a stage lies inside one node or fills whole
/// nodes, so their first devices tell: stages of two devices on nodes of
/// four have an intra-node boundary between stages 0 and 1 and an
/// inter-node one between stages 1 and 2.
cost::LinkLevel linkBetweenStages(const cost::Cluster &cluster,
                                  const Submesh &submesh, int64_t from,
                                  int64_t to);

struct StageQuery {
  /// Units [firstUnit, endUnit) of the ProgramProfile.
  size_t firstUnit = 0;
  size_t endUnit = 0;
  Submesh submesh;
  /// Samples in one micro-batch of the whole stage (global batch / m).
  int64_t microBatchSamples = 1;
  /// Micro-batches per step: once-per-step work is reported per step.
  int64_t microBatches = 1;
  /// Applied to the layers of the range (not to the embedding or head).
  RematMode remat = RematMode::None;
  /// Times a micro-batch crosses each of the stage's boundaries (the
  /// interleaved schedule's chunks).
  int64_t boundaryCrossings = 1;
  /// The links to the previous and the next stage's devices, on which the
  /// boundary tensors move (linkBetweenStages for the stage's position);
  /// unused at the program's first and last unit.
  cost::LinkLevel previousLink = cost::LinkLevel::IntraNode;
  cost::LinkLevel nextLink = cost::LinkLevel::IntraNode;
  /// Interleaved schedules: times a micro-batch crosses the wrap between
  /// the last stage's devices and the first's (v - 1 for the first and the
  /// last stage: the last device's chunk k feeds the first device's chunk
  /// k + 1; 0 otherwise), and that link. The tensor is the one between two
  /// layers, the stage's own boundary to the program's middle.
  int64_t wrapCrossings = 0;
  cost::LinkLevel wrapLink = cost::LinkLevel::IntraNode;
};

struct StageMemory {
  double weights = 0;        // master and compute copies
  double gradients = 0;
  double optimizerState = 0;
  /// fp32 gradient accumulators, when a step has several micro-batches.
  double accumulators = 0;
  /// Kept activations of one micro-batch.
  double activationsPerMicroBatch = 0;
  /// Of those, what the program's first unit (the embedding) and its last
  /// (the head) keep, when the stage holds them: an interleaved device
  /// stashes their chunks apart from its layer-only ones (StashDepths).
  double embeddingActivations = 0, headActivations = 0;
  /// Working set of the backward of one layer beyond what is kept.
  double working = 0;
  /// The pipeline's messages (runtime/train/PipelineParallel.cpp's
  /// PipelineStep): per chunk boundary the tensor sent one way and the
  /// slot receiving the other way's, each whole on every TP rank (every
  /// schedule's task order holds one message of a kind at a time:
  /// CompiledPipelineMemory.cpp's receiveSlots).
  double messages = 0;
  /// Every micro-batch's tokens and targets and a working pair, whole on
  /// every device (the driver's reserveMicroBatches).
  double inputs = 0;
  /// The owner's f32 room for the other stage's part of a tied gradient.
  double gradientParts = 0;

  double resident() const {
    return weights + gradients + optimizerState + accumulators;
  }
  /// What does not grow with the micro-batches in flight.
  double fixed() const {
    return resident() + working + messages + inputs + gradientParts;
  }
  double total(double inFlight) const {
    return fixed() + inFlight * activationsPerMicroBatch;
  }
};

struct StageCost {
  int64_t tensorParallel = 1;
  int64_t dataParallel = 1;
  bool zero = false;
  /// Samples per data-parallel replica per micro-batch.
  int64_t replicaBatch = 1;

  /// Per micro-batch, seconds.
  double forward = 0;
  double backward = 0;
  double recompute = 0;
  double tensorParallelCommunication = 0;
  double pointToPoint = 0;
  /// Per step, seconds.
  double gradientSync = 0;
  double optimizer = 0;
  /// Model FLOPs per device per micro-batch (no recomputation).
  double modelFlops = 0;

  StageMemory memory;

  double perMicroBatch() const {
    return forward + backward + recompute + tensorParallelCommunication +
           pointToPoint;
  }
  double perStep() const { return gradientSync + optimizer; }
  /// "DP 8 x TP 8, ZeRO-1".
  std::string intraOpPlan() const;
};

class StageCostOracle {
public:
  virtual ~StageCostOracle();
  /// Every intra-op plan the stage can run with (possibly none).
  virtual std::vector<StageCost> plans(const StageQuery &query) const = 0;
  /// One line naming the oracle for reports.
  virtual std::string describe() const = 0;
};

class MegatronStageOracle : public StageCostOracle {
public:
  MegatronStageOracle(const ProgramProfile &profile,
                      const cost::Cluster &cluster)
      : profile(profile), cluster(cluster) {}
  std::vector<StageCost> plans(const StageQuery &query) const override;
  std::string describe() const override;

private:
  /// Per unit, at one (replica batch, TP degree, remat): prefix sums of the
  /// additive costs, so that a layer range is priced in constant time.
  struct UnitSums {
    struct Additive {
      double forward = 0, backward = 0, recompute = 0;
      double tensorParallelCommunication = 0, modelFlops = 0, kept = 0;
      /// Parameter elements a TP rank holds (ProgramProfile::heldElements),
      /// and of those the ones it reads only through a prepared value.
      double parameters = 0, uncopied = 0, stepOnce = 0, prepared = 0;

      /// Adds `other` times `sign` (+1 or -1), field by field.
      void accumulate(const Additive &other, double sign) {
        forward += sign * other.forward;
        backward += sign * other.backward;
        recompute += sign * other.recompute;
        tensorParallelCommunication +=
            sign * other.tensorParallelCommunication;
        modelFlops += sign * other.modelFlops;
        kept += sign * other.kept;
        parameters += sign * other.parameters;
        uncopied += sign * other.uncopied;
        stepOnce += sign * other.stepOnce;
        prepared += sign * other.prepared;
      }
    };
    std::vector<Additive> prefix;
    /// Per unit: its working set, and the part of it only a
    /// tensor-parallel program has (TensorBytes::tensorParallelOnly).
    std::vector<double> working, tensorParallelWorking;

    /// The largest unit working set of [firstUnit, endUnit), the part a
    /// one-device step calibrates scaled by `calibrated`.
    double workingOver(size_t firstUnit, size_t endUnit,
                       const std::vector<unsigned> &structureOf,
                       double calibrated = 1) const;
  };

  const UnitSums &sums(int64_t batch, int64_t tensorParallel,
                       RematMode remat) const;
  /// Whether `tensorParallel` divides every head count and width of the
  /// layers in [firstUnit, endUnit): O(1) per query from a prefix count of
  /// the units it does not divide (the search asks for every stage range).
  bool layersDivide(size_t firstUnit, size_t endUnit,
                    int64_t tensorParallel) const;

  const ProgramProfile &profile;
  const cost::Cluster &cluster;
  mutable std::map<std::tuple<int64_t, int64_t, int>, UnitSums> cache;
  /// Per TP degree: how many of the first u units it does not divide.
  mutable std::map<int64_t, std::vector<size_t>> undividedPrefix;
};

} // namespace tessera::pipeline

#endif // TESSERA_PIPELINE_STAGECOSTORACLE_H
