//===- OffloadTestLayout.h - The offload tests' three parameters *- C++ -*-===//
//
// The flat layout OptimizerOffloadTest (CPU) and OffloadedOptimizerCudaTest
// (GPU) share: "wte" [1000, 100] read as its master (two chunks), "h.0.w"
// [300, 1] and "h.1.w" [70000, 2] (three chunks) read as bf16 copies,
// packed at 0 and 384 as TrainingBackend places them.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TEST_TRAIN_OFFLOADTESTLAYOUT_H
#define TESSERA_RUNTIME_TEST_TRAIN_OFFLOADTESTLAYOUT_H

#include "ParameterLayout.h"

#include <vector>

namespace tessera::train::offload_test {

inline tessera_tensor_info parameter(const char *name, int64_t rows,
                                     int64_t cols) {
  tessera_tensor_info info{};
  info.name = name;
  info.dtype = TESSERA_F32;
  info.rank = 2;
  info.shape[0] = rows;
  info.shape[1] = cols;
  return info;
}

inline const tessera_tensor_info kParameters[] = {
    parameter("wte", 1000, 100),   // 100000: two chunks
    parameter("h.0.w", 300, 1),    // 300
    parameter("h.1.w", 70000, 2)}; // 140000: three chunks

/// Elements of the copies' buffer: h.0.w's 300 aligned to 384, h.1.w's.
constexpr int64_t kCopyElements = 384 + 140032;

/// A bf16 program of the three (device CUDA).
inline tessera_program program() {
  tessera_program program{};
  program.parameter_count = 3;
  program.parameters = kParameters;
  program.device = TESSERA_DEVICE_CUDA;
  program.precision = TESSERA_PRECISION_BF16;
  return program;
}

/// The whole chunk table, h.0.w without weight decay, copy offsets placed.
inline std::vector<tessera_tensor_chunk>
placedChunks(const ParameterLayout &layout) {
  std::vector<tessera_tensor_chunk> chunks = layout.chunks({true, false, true});
  for (tessera_tensor_chunk &chunk : chunks)
    chunk.copy_offset = chunk.tensor == 0
                            ? -1
                            : (chunk.tensor == 1 ? 0 : 384) +
                                  (chunk.offset - layout.offset(chunk.tensor));
  return chunks;
}

} // namespace tessera::train::offload_test

#endif // TESSERA_RUNTIME_TEST_TRAIN_OFFLOADTESTLAYOUT_H
