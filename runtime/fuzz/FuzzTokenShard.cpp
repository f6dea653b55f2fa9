//===- FuzzTokenShard.cpp - Fuzz target for the llm.c token-shard reader --===//
//
// The bytes as an llm.c token shard (.bin: a 1024-byte header, then uint16
// tokens), read by a causal-LM program with GPT-2's vocabulary. Most of the
// header is reserved zeros; the fuzzer's work is in the magic, the version,
// the announced token count against the file's length, and the tokens.
//
//===----------------------------------------------------------------------===//

#include "FuzzTarget.h"

#include "DataLoader.h"

namespace tessera::fuzz {

bool readTokenShardInput(const uint8_t *data, size_t size) {
  std::string path = writeScratchFile("input.bin", data, size);
  train::DataLayout layout;
  layout.batch = 2;
  layout.sequence = 3;
  layout.vocabulary = 50257;
  return readDataBatches(path, layout);
}

} // namespace tessera::fuzz
