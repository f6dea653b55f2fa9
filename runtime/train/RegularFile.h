//===- RegularFile.h - Opening the driver's input files safely -*- C++ -*-===//
//
// Every file the driver reads (--data, --weights, checkpoints) is opened
// here: non-blocking, so that a FIFO or a terminal named by mistake cannot
// hang the open; then fstat'ed on the open descriptor (no race with a rename
// in between) and refused unless it is a regular file, so that /dev/zero or
// a directory is an error naming the file, not an endless read; and its
// length is known before a byte is read, so a reader checks it against what
// it can hold first.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_REGULARFILE_H
#define TESSERA_RUNTIME_TRAIN_REGULARFILE_H

#include <cstdint>
#include <string>

namespace tessera::train {

/// An open regular file, closed when destroyed.
class RegularFile {
public:
  /// Throws TrainError "<path>: ..." when it cannot be opened or is not a
  /// regular file (saying what it is instead).
  explicit RegularFile(const std::string &path);
  ~RegularFile();
  RegularFile(const RegularFile &) = delete;
  RegularFile &operator=(const RegularFile &) = delete;
  RegularFile(RegularFile &&other) noexcept;
  RegularFile &operator=(RegularFile &&other) noexcept;

  int descriptor() const { return fd; }
  /// Its length in bytes when it was opened.
  int64_t size() const { return bytes; }

private:
  int fd = -1;
  int64_t bytes = 0;
};

/// The whole of the regular file `path`, refused before reading when it is
/// longer than `limit` bytes (`what` says what the file is for, e.g. "a
/// weights file"). Throws TrainError naming the file.
std::string readRegularFile(const std::string &path, int64_t limit,
                            const std::string &what);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_REGULARFILE_H
