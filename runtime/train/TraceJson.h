//===- TraceJson.h - Writing a rank's events as Chrome trace JSON -*- C++ -*-===//
//
// The "JSON object format" of the Chrome trace event format, which
// chrome://tracing and Perfetto (ui.perfetto.dev) open:
//
//   {"displayTimeUnit":"ms","otherData":{...},"traceEvents":[
//   {"ph":"M","pid":R,"tid":0,"name":"process_name","args":{"name":"rank R"}},
//   ... one event per line ...
//   ]}
//
// pid is the rank, tid the track (TraceEvent.h). Metadata comes first (the
// process name and sort index, then one thread_name and thread_sort_index
// per track), then the events in time order; events that start together
// are written longest first, so an enclosing range precedes the ranges it
// contains, and otherwise in the order they were recorded. Times are
// microseconds with three decimals, exact to the nanosecond.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_TRACEJSON_H
#define TESSERA_RUNTIME_TRAIN_TRACEJSON_H

#include "TraceEvent.h"

#include <map>
#include <string>
#include <vector>

namespace tessera::train {

struct TraceDocument {
  int32_t rank = 0;
  /// Track number -> its name ("host", "stream 7"); every track an event
  /// uses gets a name (unnamed ones are called "track N").
  std::map<int64_t, std::string> trackNames;
  std::vector<TraceEvent> events;
  /// Written under "otherData": key -> a JSON-encoded value.
  std::vector<std::pair<std::string, std::string>> otherData;
};

/// The whole file's text.
std::string renderChromeTrace(const TraceDocument &document);

/// `nanoseconds` as microseconds with exactly three decimals ("-0.500").
std::string formatMicroseconds(int64_t nanoseconds);

/// A finite double as the shortest JSON number that reads back the same;
/// "null" when it is not finite.
std::string formatJsonNumber(double value);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_TRACEJSON_H
