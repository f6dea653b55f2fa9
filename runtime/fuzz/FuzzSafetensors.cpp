//===- FuzzSafetensors.cpp - Fuzz target for readSafetensors --------------===//
//
// The bytes as a .safetensors file (initial weights, --weights, and the
// container of every checkpoint). Beyond "no crash", an accepted file must
// keep the promises its readers build on: every tensor's bytes are exactly
// its shape's element count times its dtype's size (a shape that claims more
// elements than the bytes hold sends the cast past the end of the data), and
// every tensor converts to f32 or i64 the way the weights loader converts
// it, under ASan.
//
//===----------------------------------------------------------------------===//

#include "FuzzTarget.h"

#include "Checkpoint.h"
#include "Safetensors.h"
#include "TrainError.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace tessera::fuzz {
namespace {

[[noreturn]] void reportBrokenPromise(const std::string &tensor,
                                      const char *promise) {
  std::fprintf(stderr, "readSafetensors accepted tensor '%s', but %s\n",
               tensor.c_str(), promise);
  std::abort();
}

bool isFloat(int32_t dtype) {
  return dtype == TESSERA_F32 || dtype == TESSERA_BF16 ||
         dtype == TESSERA_F16 || dtype == TESSERA_F64;
}

void checkAcceptedTensor(const std::string &path,
                         const train::LoadedTensor &tensor) {
  uint64_t elements = 1;
  for (int64_t size : tensor.shape) {
    if (size < 0)
      reportBrokenPromise(tensor.name, "its shape has a negative dimension");
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(size),
                               &elements))
      reportBrokenPromise(tensor.name, "its element count overflows 64 bits");
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(
          elements,
          static_cast<uint64_t>(train::safetensorsElementSize(tensor.dtype)),
          &bytes) ||
      bytes != tensor.bytes.size())
    reportBrokenPromise(tensor.name,
                        "its bytes do not match its shape and dtype");
  if (tensor.shape.size() > TESSERA_MAX_RANK)
    reportBrokenPromise(tensor.name, "its rank exceeds TESSERA_MAX_RANK");
  // What the weights loader does with a tensor of the program's dtype.
  if (isFloat(tensor.dtype)) {
    std::vector<float> converted(static_cast<size_t>(elements));
    train::convertTensor(path, tensor, TESSERA_F32, converted.data());
  } else {
    std::vector<int64_t> converted(static_cast<size_t>(elements));
    train::convertTensor(path, tensor, TESSERA_I64, converted.data());
  }
}

} // namespace

bool readSafetensorsInput(const uint8_t *data, size_t size) {
  std::string path = writeScratchFile("input.safetensors", data, size);
  try {
    train::SafetensorsFile file = train::readSafetensors(path);
    for (const train::LoadedTensor &tensor : file.tensors)
      checkAcceptedTensor(path, tensor);
    return true;
  } catch (const train::TrainError &) {
    return false;
  }
}

} // namespace tessera::fuzz
