//===- FixtureChecks.h - a model's numbers against its fixture --*- C++ -*-===//
//
// The checks every fixture test runs, whatever the model: the fused forward
// graph's logits, and one fp32 training step (loss, every gradient norm, the
// parameters after one AdamW step) against PyTorch's numbers.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TEST_INTEGRATION_FIXTURECHECKS_H
#define TESSERA_TEST_INTEGRATION_FIXTURECHECKS_H

#include "llvm/Support/JSON.h"

#include <cstdint>
#include <map>
#include <string>

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
};

/// Builds the fp32 training step of the model and checks it against the
/// fixture: the loss within 1e-5 relative, every parameter's gradient norm
/// within 1e-4 relative (1e-8 absolute for gradients that are zero in exact
/// arithmetic), and the parameters after one AdamW step within 1e-5 absolute.
void checkTrainingStep(const llvm::json::Object &fixture,
                       const TrainingStepSetup &setup);

} // namespace tessera::fixtures

#endif // TESSERA_TEST_INTEGRATION_FIXTURECHECKS_H
