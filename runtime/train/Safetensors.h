//===- Safetensors.h - Reading and writing .safetensors files ---*- C++ -*-===//
//
// The checkpoint, initial-weights and --dump-params format. See
// Safetensors.cpp for the layout and the atomic write.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_SAFETENSORS_H
#define TESSERA_RUNTIME_TRAIN_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tessera::train {

/// A tensor to write, borrowed from its owner (no copy of the data).
struct TensorView {
  std::string name;
  int32_t dtype; // tessera_dtype
  std::vector<int64_t> shape;
  const void *data;
};

/// A tensor read from a file, owning its bytes (little-endian, row-major).
struct LoadedTensor {
  std::string name;
  int32_t dtype; // tessera_dtype
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  /// In the order of their data in the file.
  std::vector<LoadedTensor> tensors;

  const LoadedTensor *find(const std::string &name) const;
};

/// Reads and validates `path`. Throws TrainError naming the file (and the
/// tensor) on any problem: missing file, bad header, unknown dtype, data
/// offsets outside the file or not matching the shape.
SafetensorsFile readSafetensors(const std::string &path);

/// Writes `path` atomically: the bytes go to a temporary file in the same
/// directory, which is flushed to disk and renamed over `path`, so a crash or
/// a full disk leaves either the old file or the new one, never a mix. On
/// failure the temporary file is removed and TrainError is thrown.
void writeSafetensors(const std::string &path,
                      const std::vector<TensorView> &tensors,
                      const std::map<std::string, std::string> &metadata);

/// Bytes per element of the dtypes safetensors files may hold here; throws
/// for others.
int64_t safetensorsElementSize(int32_t dtype);
/// "F32", "BF16", ... for a tessera_dtype.
const char *safetensorsDtypeName(int32_t dtype);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_SAFETENSORS_H
