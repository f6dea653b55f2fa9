//===- FuzzTarget.h - What the readers' fuzz targets share ----*- C++ -*-===//
//
// One fuzz target per file format the training driver reads (safetensors
// weights, checkpoints, .npy sample arrays, llm.c token shards). Each is a
// function from the bytes of one would-be file to "accepted" or "refused";
// FuzzEntry.cpp makes it a libFuzzer target, FuzzSeedsTest.cpp runs it over
// the seeds and crash reproducers in the ordinary test build.
//
// The readers take paths and open them through RegularFile (the same checks
// a user's file gets), so an input is written to a file first: a scratch
// file in a directory of this process's own (under /dev/shm where there is
// one; FuzzScratch.cpp), reused for every input and removed at exit.
//
// The contract under test: a reader either accepts its input or throws
// TrainError. A crash, a sanitizer report, another exception escaping, a
// hang or an unbounded allocation is a bug in the reader.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_FUZZ_FUZZTARGET_H
#define TESSERA_RUNTIME_FUZZ_FUZZTARGET_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::train {
struct DataLayout;
} // namespace tessera::train

namespace tessera::fuzz {

/// The targets: true when the reader accepted `data` as a file of its
/// kind, false when it threw TrainError. Any other outcome escapes.
bool readSafetensorsInput(const uint8_t *data, size_t size);
bool readCheckpointInput(const uint8_t *data, size_t size);
bool readNpyInput(const uint8_t *data, size_t size);
bool readTokenShardInput(const uint8_t *data, size_t size);

/// Writes `data` to the scratch file called `name` (its extension is what
/// the data loader goes by) and returns its path. Aborts when the write
/// fails: a full disk is no finding about the reader.
std::string writeScratchFile(const std::string &name, const uint8_t *data,
                             size_t size);

/// The data loader over the one file `path` with `layout`: opens it (the
/// header checks) and reads a few micro-batches, wrapping into a second,
/// reshuffled epoch and reading as rank 1 of 2. True when all of that
/// succeeds, false on TrainError; aborts when a batch it returns holds an
/// id outside the vocabulary (a label that is not the ignore index).
bool readDataBatches(const std::string &path, const train::DataLayout &layout);

} // namespace tessera::fuzz

#endif // TESSERA_RUNTIME_FUZZ_FUZZTARGET_H
