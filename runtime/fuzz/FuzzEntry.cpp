//===- FuzzEntry.cpp - libFuzzer's entry point for one reader -------------===//
//
// Compiled once per fuzz target with TESSERA_FUZZ_READER naming its
// function (CMakeLists.txt). A refused input is as good an outcome as an
// accepted one; anything else escapes to libFuzzer: an exception other than
// TrainError reaches std::terminate, which libFuzzer reports as a crash with
// the input saved.
//
//===----------------------------------------------------------------------===//

#include "FuzzTarget.h"

#ifndef TESSERA_FUZZ_READER
#error "TESSERA_FUZZ_READER must name the reader's function (FuzzTarget.h)"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)tessera::fuzz::TESSERA_FUZZ_READER(data, size);
  return 0;
}
