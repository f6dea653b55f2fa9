//===- FixtureChecks.h - a model's numbers against its fixture --*- C++ -*-===//
//
// The checks every fixture test runs, whatever the model: the fused forward
// graph's logits, and one fp32 training step (loss, every gradient norm, the
// parameters after one AdamW step) against PyTorch's numbers.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TEST_INTEGRATION_FIXTURECHECKS_H
#define TESSERA_TEST_INTEGRATION_FIXTURECHECKS_H

#include "tessera/Execution/HostTensorBuffer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera::fixtures {

/// Runs the forward function of test/models/<file> (imported with its weights
/// and fused, `dims` bound) on the fixture's [2, 32] input ids and compares the
/// logits' first eight values and their sum with the fixture's.
void checkForward(const llvm::json::Object &fixture, const std::string &file,
                  const std::map<std::string, int64_t> &dims);

struct TrainingStepSetup {
  /// The model under test/models and the tess-build-training loss kind.
  std::string file, loss;
  int64_t sequence;
  /// Causal LM: tokens [:, :T] predict [:, 1:]; MLM: labels are the ids.
  bool shiftTargets;
  /// tess-build-training's vocabulary-multiple: the bundled models' 512
  /// classes are a multiple of the default 64, so a test that wants the
  /// padded head asks for another multiple.
  int64_t vocabularyMultiple = 64;
  /// Also run tess-lowering-preparation (with this logits-block-bytes)
  /// before interpreting: the step as the lowering takes it, the fused ops
  /// of tess-fuse-epilogues included, so the fixture tests the kernel calls
  /// the executable makes. Unset: the step as tess-build-training makes it.
  std::optional<int64_t> loweringPreparationLogitsBlock;
  /// The fused kinds (countFusedOps' names) the prepared step must hold,
  /// so that the check covers their kernels.
  std::vector<std::string> fusedOps;
};

/// How many ops of each fused kind (tess-fuse-epilogues: linear_gelu,
/// linear_gelu_grad, linear_add, matmul_add, matmul_bias_grad,
/// cross_entropy_with_grad, and norm gradients with a residual) `module` holds, by op name ("norm_grad_add"
/// for the latter).
std::map<std::string, int> countFusedOps(mlir::ModuleOp module);

/// Builds the fp32 training step of the model and checks it against the
/// fixture: the loss within 1e-5 relative, every parameter's gradient norm
/// within 1e-4 relative (1e-8 absolute for gradients that are zero in exact
/// arithmetic), and the parameters after one AdamW step as
/// checkUpdatedParameters says.
void checkTrainingStep(const llvm::json::Object &fixture,
                       const TrainingStepSetup &setup);

/// The tess-build-training pipeline of the fp32 step with `loss` and the
/// fixture's AdamW hyperparameters ("adamw": beta1, beta2, eps,
/// weight_decay; the pass's defaults differ from PyTorch's).
std::string trainingPipeline(const llvm::json::Object &fixture,
                             llvm::StringRef loss,
                             int64_t vocabularyMultiple = 64);

/// The fixture's AdamW learning rate.
double learningRate(const llvm::json::Object &fixture);

/// The global gradient norm of the fixture's step: the L2 norm over every
/// parameter's gradient, from their grad_norm.
double globalGradientNorm(const llvm::json::Object &fixture);

/// The fixture's first optimizer step as @optimizer_step's `tess.input`s:
/// its lr, step 1 and grad_scale `gradientScale` (1: no clipping, the loss
/// scale is 1).
std::map<std::string, execution::HostTensorBuffer>
firstStepInputs(const llvm::json::Object &fixture, double gradientScale = 1);

/// The arguments of `function` (a function of tess-build-training, whole or
/// partitioned) from its tess.* argument attributes: tess.parameter and
/// tess.buffer from `parameters`, tess.gradient from `gradients`, tess.input
/// from `inputs`, the optimizer moments zero (the first step). A missing
/// value fails the test (and binds zeros).
std::vector<execution::HostTensorBuffer> bindArguments(
    mlir::func::FuncOp function,
    const std::map<std::string, execution::HostTensorBuffer> &parameters,
    const std::map<std::string, execution::HostTensorBuffer> &gradients,
    const std::map<std::string, execution::HostTensorBuffer> &inputs);

/// `results` of `function` by the name in their attribute `role`
/// (tess.gradient, tess.parameter, ...); results without it are left out.
std::map<std::string, execution::HostTensorBuffer>
resultsNamed(mlir::func::FuncOp function,
             const std::vector<execution::HostTensorBuffer> &results,
             llvm::StringRef role);

/// Checks the parameters after one AdamW step, by ONNX initializer name
/// (full tensors), against every fixture parameter's after_step_first8
/// (within 1e-5 absolute) and after_step_sum (within 1e-5 absolute per
/// element summed: the sum of a few thousand updates of +-lr). `where`
/// names the run in failures. Returns the largest difference of a first8
/// element.
double checkUpdatedParameters(
    const llvm::json::Object &fixture,
    const std::map<std::string, execution::HostTensorBuffer> &updated,
    const std::string &where = "");

} // namespace tessera::fixtures

#endif // TESSERA_TEST_INTEGRATION_FIXTURECHECKS_H
