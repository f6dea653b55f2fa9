//===- RunOutputs.h - Reading back what a driver run wrote -------*- C++ -*-===//
//
// The driver's tests run training executables' mains and compare what they
// wrote: the --metrics file (a JSON object a step) and safetensors dumps
// and checkpoints; their hand-written programs fail as lowered ones do.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TEST_TRAIN_RUNOUTPUTS_H
#define TESSERA_RUNTIME_TEST_TRAIN_RUNOUTPUTS_H

#include "Json.h"
#include "Safetensors.h"
#include "TrainTestSupport.h"
#include "tessera/runtime/cpu_kernels.h"

#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace tessera_train_test {

/// The objects of a metrics file, one per line.
inline std::vector<tessera::train::JsonValue>
readMetrics(const std::string &path) {
  std::vector<tessera::train::JsonValue> records;
  std::istringstream lines(readBytes(path));
  for (std::string line; std::getline(lines, line);)
    records.push_back(tessera::train::parseJson(line, path));
  return records;
}

/// The f32 values of tensor `name` of `file` (a failure when it is absent).
inline std::vector<float> floats(const tessera::train::SafetensorsFile &file,
                                 const std::string &name) {
  const tessera::train::LoadedTensor *tensor = file.find(name);
  EXPECT_TRUE(tensor) << name;
  if (!tensor)
    return {};
  std::vector<float> values(tensor->bytes.size() / 4);
  std::memcpy(values.data(), tensor->bytes.data(), tensor->bytes.size());
  return values;
}

/// Expects two checkpoints to hold the same state bit for bit: every
/// tensor's bytes and every metadata entry but "run" (each run has its own
/// id; a resumed run keeps it, an independent one of the same arithmetic
/// does not).
inline void expectSameState(const std::string &a, const std::string &b) {
  tessera::train::SafetensorsFile first = tessera::train::readSafetensors(a);
  tessera::train::SafetensorsFile second = tessera::train::readSafetensors(b);
  first.metadata.erase("run");
  second.metadata.erase("run");
  EXPECT_EQ(first.metadata, second.metadata) << a << " vs " << b;
  ASSERT_EQ(first.tensors.size(), second.tensors.size()) << a << " vs " << b;
  for (size_t i = 0; i < first.tensors.size(); ++i) {
    EXPECT_EQ(first.tensors[i].name, second.tensors[i].name);
    EXPECT_EQ(first.tensors[i].bytes, second.tensors[i].bytes)
        << first.tensors[i].name;
  }
}

/// Fails the way a lowered program does: a kernel rejects its input (an
/// embedding index out of range) and leaves its message in
/// tessera_cpu_last_error(). Returns the kernel's nonzero status.
inline int failLikeAKernel() {
  float table[2] = {0, 0};
  int64_t id = 5;
  tessera_tensor tableTensor{table, TESSERA_F32, 2, {2, 1}};
  tessera_tensor ids{&id, TESSERA_I64, 1, {1}};
  tessera_tensor out{table, TESSERA_F32, 2, {1, 1}};
  return tessera_cpu_embedding(&tableTensor, &ids, &out);
}

} // namespace tessera_train_test

#endif // TESSERA_RUNTIME_TEST_TRAIN_RUNOUTPUTS_H
