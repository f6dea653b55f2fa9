//===- SafetensorsMutator.cpp - Mutations that keep the header framed -----===//
//
// A safetensors file starts with the byte length of its JSON header. Almost
// every insertion or deletion libFuzzer makes in the header leaves that
// length wrong, and the reader refuses the file before the JSON is parsed.
// Half of the mutations here therefore mutate the header alone and write
// its new length; the other half mutate the whole file as usual, to keep
// fuzzing the framing itself. (On the reader before the byte-count fix, 4
// minutes from the seeds reached 4610 coverage features with this and 3825
// without; neither run hit that bug, which needs one exact shape.) Linked
// into the safetensors and checkpoint targets only: libFuzzer calls
// LLVMFuzzerCustomMutator when a target defines it.
//
//===----------------------------------------------------------------------===//

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned int seed) {
  uint64_t headerBytes = 0;
  if (seed % 2 == 0 || size < 8)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(&headerBytes, data, 8);
  const size_t tailBytes = size - 8 - headerBytes;
  if (headerBytes > size - 8 || maxSize <= 8 + tailBytes)
    return LLVMFuzzerMutate(data, size, maxSize);
  const size_t room = maxSize - 8 - tailBytes; // what the header may grow to
  std::vector<uint8_t> header(data + 8, data + 8 + headerBytes);
  header.resize(room > headerBytes ? room : headerBytes);
  size_t mutatedBytes = LLVMFuzzerMutate(header.data(), headerBytes, room);
  // The data after the header moves to its new start, then the header goes
  // in front of it with its length.
  std::memmove(data + 8 + mutatedBytes, data + 8 + headerBytes, tailBytes);
  std::memcpy(data + 8, header.data(), mutatedBytes);
  uint64_t length = mutatedBytes;
  std::memcpy(data, &length, 8);
  return 8 + mutatedBytes + tailBytes;
}
