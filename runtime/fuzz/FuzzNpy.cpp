//===- FuzzNpy.cpp - Fuzz target for the data loader's .npy reader --------===//
//
// The bytes as a .npy sample array, read by a causal-LM program (rows of
// sequence + 1 ids) and by an MLM program (rows of ids and labels): the same
// header parser, two row shapes and the ignore index. Accepted when either
// program reads it.
//
//===----------------------------------------------------------------------===//

#include "FuzzTarget.h"

#include "DataLoader.h"

namespace tessera::fuzz {

bool readNpyInput(const uint8_t *data, size_t size) {
  std::string path = writeScratchFile("input.npy", data, size);
  train::DataLayout causal;
  causal.batch = 2;
  causal.sequence = 3;
  causal.vocabulary = 50257;
  train::DataLayout masked = causal;
  masked.maskedLanguageModel = true;
  bool causalReads = readDataBatches(path, causal);
  bool maskedReads = readDataBatches(path, masked);
  return causalReads || maskedReads;
}

} // namespace tessera::fuzz
