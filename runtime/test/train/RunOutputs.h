//===- RunOutputs.h - Reading back what a driver run wrote -------*- C++ -*-===//
//
// The driver's tests run training executables' mains and compare what they
// wrote: the --metrics file (a JSON object a step) and safetensors dumps
// and checkpoints.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TEST_TRAIN_RUNOUTPUTS_H
#define TESSERA_RUNTIME_TEST_TRAIN_RUNOUTPUTS_H

#include "Json.h"
#include "Safetensors.h"
#include "TrainTestSupport.h"

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

} // namespace tessera_train_test

#endif // TESSERA_RUNTIME_TEST_TRAIN_RUNOUTPUTS_H
