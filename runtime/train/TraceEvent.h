//===- TraceEvent.h - One event of a --trace file ----------------*- C++ -*-===//
//
// What the recorder (Trace.h) and the GPU activity collector (TraceCupti.h)
// hand the writer (TraceJson.h): an event of the Chrome trace event format,
// with times in nanoseconds of the host's monotonic clock (steady_clock,
// CLOCK_MONOTONIC on Linux). That clock is shared by every process of a
// machine, so the ranks of one node line up in Perfetto without any
// exchange; device timestamps are mapped onto it by the collector.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_TRACEEVENT_H
#define TESSERA_RUNTIME_TRAIN_TRACEEVENT_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessera::train {

/// The tracks of one rank's process. Host threads get small numbers: 0 is
/// the thread that made the Trace (the driver's), others follow in the order
/// they first record. CUDA streams get kStreamTrackBase + 100000 * device +
/// stream id, so the two never collide and the host tracks sort first.
constexpr int64_t kHostTrack = 0;
constexpr int64_t kStreamTrackBase = 1000;

struct TraceEvent {
  enum class Kind {
    /// A range with a start and a duration ("ph":"X").
    Complete,
    /// A point in time on one track ("ph":"i").
    Instant,
    /// A sample of a named value ("ph":"C"), drawn as a graph per name.
    Counter,
  };
  Kind kind = Kind::Complete;
  std::string name;
  /// "host", "kernel", "nccl", "memcpy", "memset", "counter", ...
  std::string category;
  int64_t track = kHostTrack;
  int64_t startNanoseconds = 0;
  int64_t durationNanoseconds = 0;
  /// Key and value already encoded as JSON (a number, a quoted string).
  std::vector<std::pair<std::string, std::string>> arguments;

  void addInteger(const std::string &key, int64_t value);
  /// Non-finite values are written as null (JSON has no NaN).
  void addNumber(const std::string &key, double value);
  void addString(const std::string &key, const std::string &value);
};

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_TRACEEVENT_H
