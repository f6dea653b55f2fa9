//===- OutputPaths.h - Checking where a run will write, before it runs -*- C++
//-*-===//
//
// A run writes its dumps at the end, its checkpoints every N steps and its
// trace when it finishes: a path that cannot be written must fail the run
// before the first step, not after hours of training. These checks run at
// start on the rank that writes; the writes themselves stay atomic
// (Safetensors.cpp, TraceFile.cpp), so a failure later still leaves the
// previous file intact.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_OUTPUTPATHS_H
#define TESSERA_RUNTIME_TRAIN_OUTPUTPATHS_H

#include <string>

namespace tessera::train {

/// Creates a new file named `prefix` followed by six unique characters
/// (mkstemp) and returns its descriptor, its name in `created`; -1 with
/// errno set when it cannot. The staging file of every atomic write and
/// the writability probe.
int createUniqueFile(const std::string &prefix, std::string &created);

/// The directory a file path is in ("." for a bare name).
std::string parentDirectory(const std::string &path);

/// Throws TrainError naming `flag` unless `path` can be created or replaced
/// as a file: not a directory, in an existing directory this process can
/// create files in (the file is created under a temporary name and renamed
/// over `path`, so the directory, not `path`, must take writes).
void requireWritableFile(const std::string &flag, const std::string &path);

/// Throws TrainError naming `flag` unless `directory` (existing) is a
/// directory this process can create files in: it creates and removes a
/// uniquely named file there (OutputPaths.cpp says why not access(2)).
void requireWritableDirectory(const std::string &flag,
                              const std::string &directory);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_OUTPUTPATHS_H
