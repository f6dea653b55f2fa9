//===- StepSignature.h - how an emitted step binds its function -*- C++ -*-===//
//
// Internal to lib/Lowering. tess-lower-to-emitc turns a func.func into a C
// function of program.h's ABI; the two ABIs it emits (forward_backward and
// a pipeline stage's call) differ only in where each argument comes from
// and where each result goes, which this records per argument and result.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_LOWERING_STEPSIGNATURE_H
#define TESSERA_LIB_LOWERING_STEPSIGNATURE_H

#include <vector>

namespace tessera::lowering {

/// Where the C function of one step takes each argument of its source
/// function from and puts each result: program.h's forward_backward
/// (parameters, buffers, tokens, targets, the loss scale; the loss and the
/// gradients) or a pipeline stage's call, which also takes `inputs` and
/// fills `outputs` (tessera_stage_function).
struct StepSignature {
  enum class Source { Parameter, Buffer, Tokens, Targets, LossScale, Input };
  enum class Destination { Loss, Gradient, Output };
  struct Argument {
    Source source = Source::Parameter;
    unsigned index = 0; // into parameters, buffers or inputs
  };
  struct Result {
    Destination destination = Destination::Loss;
    unsigned index = 0; // into gradients (a parameter's) or outputs
  };
  bool stage = false;
  std::vector<Argument> arguments;
  std::vector<Result> results;
};

} // namespace tessera::lowering

#endif // TESSERA_LIB_LOWERING_STEPSIGNATURE_H
