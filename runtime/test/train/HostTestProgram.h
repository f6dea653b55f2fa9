//===- HostTestProgram.h - the fields of a hand-built test program -*- C++ -*-===//
//
// The driver's tests build tessera_programs by hand; what every one of them
// needs besides its tensors (a host fp32 program of one 2-token sequence
// over an 8-token vocabulary) is set here once.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TEST_TRAIN_HOSTTESTPROGRAM_H
#define TESSERA_RUNTIME_TEST_TRAIN_HOSTTESTPROGRAM_H

#include "tessera/runtime/program.h"

namespace tessera_train_test {

/// A host fp32 program named `modelName` of batch 1, sequence 2 and
/// vocabulary 8, with no tensors yet.
inline tessera_program hostTestProgram(const char *modelName) {
  tessera_program program{};
  program.model_name = modelName;
  program.precision = TESSERA_PRECISION_FP32;
  program.device = TESSERA_DEVICE_HOST;
  program.batch = 1;
  program.sequence = 2;
  program.vocabulary = 8;
  return program;
}

} // namespace tessera_train_test

#endif // TESSERA_RUNTIME_TEST_TRAIN_HOSTTESTPROGRAM_H
