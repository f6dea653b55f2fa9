//===- UnitProfile.h - what one layer costs, at any micro-batch and TP -*- C++ -*-===//
//
// The inter-op search prices thousands of (layer range, micro-batch size,
// tensor-parallel degree, remat) combinations; it must not walk the IR for
// each. So every unit of the program (ProgramUnits.h) is reduced once to a
// profile: its forward and backward ops as FLOPs and bytes, the activations
// it keeps for the backward, the collectives Megatron-style tensor
// parallelism adds, its parameters and its optimizer work.
//
// Micro-batch. The program is built twice, at batches b0 and b0 + 1 (b0 = 2:
// at batch 1 canonicalization folds the batch dim away in places, so the
// two programs would differ op by op); every op's FLOPs and bytes, and every
// value's bytes, are affine in the batch (a weight is read once whatever the
// batch, activations grow with it), so the two give the exact value at any
// batch b, 1 included.
//
// Repeated layers. Units whose ops have the same names and result types in
// the same order (a "structure") share one profile: a 96-layer GPT-3 has
// three structures, the embedding, a layer and the head.
//
// Tensor parallelism (Megatron-LM's partition of a Transformer layer, the
// rule a stage mesh compiles: tessera/Analysis/MegatronPartition.h). The
// partition's column-parallel linears (and the LM head, over the
// vocabulary) have their result split and their input's gradient
// all-reduced in the backward; its row-parallel ones give a partial sum,
// all-reduced in the forward; a vocabulary-parallel lookup of the token ids
// is all-reduced too, and so are the vocabulary-parallel loss's row
// statistics (three values a row forward, two backward); any other linear
// runs whole, and any other op's result is split when an operand
// is. A forward op's work divides by the TP degree t when it is a split
// linear or when one of its operands or results is split. A backward op's
// work divides by t when it reads a split weight, computes a split
// parameter's gradient, or touches a tensor whose shape only split forward
// values of the unit have (the 4h-wide MLP activations, the per-head
// tensors): the gradients of split values are split. The partition's
// weights and column biases are split, every other parameter counted
// whole. No sequence parallelism: the norms and residual adds run
// replicated, as in the Megatron-LM GPT-3 run.
//
// Each op's part in this recipe comes from its sharding labels (the tess
// ShardingInterface, Tess/IR/TessShardingLabels.h), the rule the intra-op
// search and the partition rewrite read: an op offering column- and
// row-parallel splits is a linear layer (its in/out features are the sizes
// of those labels), one offering a vocabulary-parallel split an embedding
// (the vocabulary its indexed label), one offering a heads split attention
// (the TP degree must divide each head count), and one with a contracted
// label a contraction.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_PIPELINE_UNITPROFILE_H
#define TESSERA_PIPELINE_UNITPROFILE_H

#include "tessera/CostModel/DeviceModel.h"
#include "tessera/CostModel/OpCost.h"
#include "tessera/Pipeline/ProgramUnits.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace tessera::pipeline {

/// A quantity linear in the micro-batch: its value at one sample, plus
/// `perSample` for each further sample.
struct Affine {
  double atOne = 0;
  double perSample = 0;

  double at(double batch) const { return atOne + (batch - 1) * perSample; }
  Affine operator*(double factor) const {
    return {atOne * factor, perSample * factor};
  }
  Affine &operator+=(const Affine &other) {
    atOne += other.atOne;
    perSample += other.perSample;
    return *this;
  }
};

/// Bytes of which tensor parallelism divides the `split` part by t.
struct TensorBytes {
  Affine replicated;
  Affine split;
  /// What only a tensor-parallel program holds, already divided like
  /// `split` (t > 1): the vocabulary-parallel loss's kept softmax and its
  /// f32 temporaries, less the logits that loss no longer keeps
  /// (VocabularyParallelLoss.h; at t = 1 the fused loss kernel runs).
  Affine tensorParallelOnly;

  double at(double batch, int64_t tensorParallel) const {
    return replicated.at(batch) +
           (split.at(batch) +
            (tensorParallel > 1 ? tensorParallelOnly.at(batch) : 0.0)) /
               tensorParallel;
  }
  TensorBytes &operator+=(const TensorBytes &other) {
    replicated += other.replicated;
    split += other.split;
    tensorParallelOnly += other.tensorParallelOnly;
    return *this;
  }
};

/// One kernel of the unit.
struct OpRecord {
  cost::OpKind kind = cost::OpKind::Free;
  bool usesMatrixUnits = false;
  cost::Precision precision = cost::Precision::FP32;
  Affine flops;
  Affine modelFlops;
  Affine bytes;
  /// A contraction's GEMM dims (OpCost's m, n, k), each affine in the
  /// batch: the token dim grows with it, the weight's dims do not.
  Affine m, n, k;
  /// Its work divides by the tensor-parallel degree.
  bool tensorParallel = false;

  /// Seconds on `device` at micro-batch `batch`, TP degree `tp`
  /// (cost::kernelTime; tensor parallelism splits the larger of the
  /// weight's dims of a contraction, as Megatron's column and row splits
  /// do).
  double time(const cost::DeviceModel &device, double batch,
              int64_t tensorParallel) const;
};

/// How tensor parallelism splits a parameter (MegatronPartition.h).
enum class ParameterSplit {
  Replicated,
  TensorParallel,
  /// A vocabulary-parallel table: split only where TP divides the
  /// vocabulary (ProgramProfile::vocabularyDivisor).
  Vocabulary,
};

/// One trainable parameter of a unit.
struct HeldParameter {
  double elements = 0;
  ParameterSplit split = ParameterSplit::Replicated;
  /// The unit reads it only through a prepared value (preparedBytes): its
  /// stage holds no compute copy of it.
  bool uncopied = false;
};

struct UnitProfile {
  /// Op names and result types, in order: equal for repeated layers.
  std::string signature;
  std::vector<OpRecord> forward;
  std::vector<OpRecord> backward;
  /// The forward ops selective recomputation runs again: the ops of
  /// planLayerRecomputation(..., RematMode::Selective) (Remat.h), the ones
  /// tess-rematerialize clones.
  std::vector<OpRecord> selectiveRecompute;

  /// Activations kept for the backward, per micro-batch: everything the
  /// backward reads (no remat), that less the values selective
  /// recomputation rebuilds (planLayerRecomputation's values), the unit's
  /// input alone (full).
  TensorBytes savedAll;
  TensorBytes savedSelective;
  TensorBytes savedInput;
  /// The working set beyond the saved values: the larger of the forward's
  /// and the backward's peaks of live temporaries (the device's one arena
  /// holds either in turn).
  TensorBytes working;
  /// The same under selective and under full recomputation: the larger of
  /// the forward's peak and that of the backward re-running the forward
  /// ops first (selective recomputation's, or all), the values they
  /// rebuild live from their recomputation to their last reader.
  TensorBytes workingSelective;
  TensorBytes workingRecomputing;

  /// Bytes of each tensor-parallel all-reduce, forward and backward.
  std::vector<Affine> forwardAllReduces;
  std::vector<Affine> backwardAllReduces;
  /// Bytes (whole) of each tensor-parallel all-gather of the backward: the
  /// gradient of an LM head's padded weight, which each rank computes for
  /// its block of classes and the whole (replicated) table takes whole.
  std::vector<Affine> backwardAllGathers;
  /// Sizes that the TP degree must divide (attention heads, the output
  /// features of column-parallel linears).
  std::vector<int64_t> tensorParallelDivisors;

  /// Bytes of the values computed from parameters alone that the unit
  /// reads, other than a parameter's cast (the position embeddings'
  /// gather, the LM head's padded table): the stage's prepare makes them
  /// once a step and keeps them, whole on every TP rank but the split LM
  /// head's padded weight and bias (preparedSplitBytes, whole here), of
  /// which each rank keeps its block of classes.
  double preparedBytes = 0;
  double preparedSplitBytes = 0;
  /// The prepare's own peak, in the device's arena: the split LM head's
  /// padded weight whole beside the cast it is joined from, before each
  /// rank takes its block (0 where the prepare makes no such copy).
  double prepareWorking = 0;
  /// The unit's trainable parameters, one entry each.
  std::vector<HeldParameter> parameters;
  /// AdamW and the cast of master weights to the compute precision: once
  /// per step, not per micro-batch (`tensorParallel` marks the split
  /// parameters'). ZeRO-1 divides them by the data-parallel degree.
  std::vector<OpRecord> stepOnce;
};

struct ProgramProfile {
  std::vector<ProgramUnit> units;
  /// Per unit, its index into `structures`.
  std::vector<unsigned> structureOf;
  std::vector<UnitProfile> structures;
  /// boundary[u]: bytes of the activations crossing a cut just before unit
  /// u (u >= 1), per micro-batch: what a stage starting at u receives.
  std::vector<Affine> boundary;
  /// Bytes of one micro-batch's tokens and targets (the step's batched
  /// tess.input arguments).
  Affine inputs;

  /// Resident bytes per trainable element (the driver's training state,
  /// tessera/Analysis/StepMemory.h's TrainingStateBytes), and those of the
  /// fp32 gradient accumulators a step of several micro-batches adds.
  double masterBytesPerParameter = 0;
  double computeBytesPerParameter = 0;
  double gradientBytesPerParameter = 0;
  double optimizerBytesPerParameter = 0;
  double accumulatorBytesPerParameter = 0;
  /// Gradient bytes of parameters read by more than one unit (a tied
  /// embedding), all-reduced between the stages holding a copy.
  double tiedGradientBytes = 0;
  /// Each such parameter: its elements, whether tensor parallelism splits
  /// it (MegatronPartition.h), and the units reading it. A stage holding several of
  /// those units holds the parameter once, though each unit counts it.
  struct TiedParameter {
    double elements = 0;
    ParameterSplit split = ParameterSplit::Replicated;
    std::vector<size_t> units;
  };
  std::vector<TiedParameter> tiedParameters;
  /// Scales the working set of the whole program as one stage, which
  /// compiles as the one-device step (one arena, not a chunk's forward and
  /// backward arenas): set so that it predicts the peak of the step as
  /// compiled (tessera/Analysis/StepMemory.h); 1 until then.
  double workingScale = 1;

  cost::Precision precision = cost::Precision::FP32;
  /// Model shape, for the Megatron FLOPs formula and the report.
  int64_t sequence = 0;
  int64_t width = 0;
  int64_t vocabulary = 0;
  int64_t trainableParameters = 0;

  /// What TP degree t divides a vocabulary-parallel table by: t where it
  /// divides the vocabulary, else 1, as tess-annotate-sharding's `tp` (a
  /// stage mesh) splits it (MegatronPartition.h).
  int64_t vocabularyDivisor(int64_t tensorParallel) const {
    return vocabulary > 0 && vocabulary % tensorParallel == 0 ? tensorParallel
                                                               : 1;
  }

  /// The elements of a parameter of `elements` split as `split` that one
  /// TP rank of degree `tensorParallel` holds, as the driver lays them out:
  /// its block, rounded up to a whole slice (TrainingStateBytes::
  /// sliceElements).
  double heldElements(double elements, ParameterSplit split,
                      int64_t tensorParallel) const;

  const UnitProfile &unit(size_t index) const {
    return structures[structureOf[index]];
  }
  size_t layerCount() const { return units.size() - 2; }
};

/// Profiles the training program built at batch `firstBatch` (`first`) and
/// at `firstBatch + 1` (`second`), the same model otherwise. Errors: the
/// programs differ in structure, or ProgramUnits' errors.
llvm::Expected<ProgramProfile> profileProgram(mlir::ModuleOp first,
                                              mlir::ModuleOp second,
                                              int64_t firstBatch);

} // namespace tessera::pipeline

#endif // TESSERA_PIPELINE_UNITPROFILE_H
