//===- TraceFile.h - Where a rank's --trace file goes ------------*- C++ -*-===//
//
// One file per rank, so that ranks never write the same file: with several
// ranks, "trace.json" becomes "trace.rank3.json" (".rankN" before a final
// ".json", else at the end), unless the name holds "%r", which is replaced
// by the rank (every occurrence; then a single rank gets "%r" -> "0" too).
//
// The file is written atomically: a temporary file next to it, then a
// rename, so a reader never sees half a trace and a failed write leaves any
// previous file in place.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_TRACEFILE_H
#define TESSERA_RUNTIME_TRAIN_TRACEFILE_H

#include <cstdint>
#include <string>

namespace tessera::train {

/// The file of `rank` out of `worldSize` for the --trace name `pattern`.
std::string traceFileForRank(const std::string &pattern, int32_t rank,
                             int32_t worldSize);

/// Writes `contents` to `path` through a temporary file and a rename.
/// Throws TrainError naming the path and the system's reason.
void writeTraceFile(const std::string &path, const std::string &contents);

/// Creates and removes the temporary file `path` would be written through,
/// so that an unwritable --trace fails before training, not after it.
/// Throws TrainError like writeTraceFile.
void checkTraceFileWritable(const std::string &path);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_TRACEFILE_H
