//===- TraceJson.cpp - Chrome trace event JSON ----------------------------===//
//
// Design: the document is rendered into one string and written at once
// (TraceFile.h), because a trace covers a few steps and a file that is
// either complete or absent is worth more than streaming. See TraceJson.h
// for the layout.
//
//===----------------------------------------------------------------------===//

#include "TraceJson.h"

#include "Json.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace tessera::train {

void TraceEvent::addInteger(const std::string &key, int64_t value) {
  arguments.emplace_back(key, std::to_string(value));
}

void TraceEvent::addNumber(const std::string &key, double value) {
  arguments.emplace_back(key, formatJsonNumber(value));
}

void TraceEvent::addString(const std::string &key, const std::string &value) {
  arguments.emplace_back(key, quoteJson(value));
}

std::string formatMicroseconds(int64_t nanoseconds) {
  // Integer arithmetic: a double would lose nanoseconds on a machine that
  // has been up for weeks (the monotonic clock counts from boot).
  uint64_t magnitude = nanoseconds < 0
                           ? uint64_t(0) - static_cast<uint64_t>(nanoseconds)
                           : static_cast<uint64_t>(nanoseconds);
  char text[40];
  std::snprintf(text, sizeof(text), "%s%" PRIu64 ".%03" PRIu64,
                nanoseconds < 0 ? "-" : "", magnitude / 1000,
                magnitude % 1000);
  return text;
}

std::string formatJsonNumber(double value) {
  if (!std::isfinite(value))
    return "null";
  char text[40];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(text, sizeof(text), "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value)
      break;
  }
  return text;
}

namespace {

const char *phaseOf(TraceEvent::Kind kind) {
  switch (kind) {
  case TraceEvent::Kind::Complete:
    return "X";
  case TraceEvent::Kind::Instant:
    return "i";
  case TraceEvent::Kind::Counter:
    return "C";
  }
  return "X";
}

void appendArguments(
    std::string &out,
    const std::vector<std::pair<std::string, std::string>> &arguments) {
  out += '{';
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (i > 0)
      out += ',';
    out += quoteJson(arguments[i].first);
    out += ':';
    out += arguments[i].second;
  }
  out += '}';
}

void appendMetadata(std::string &out, int32_t rank, const char *name,
                    const int64_t *track, const std::string &argumentKey,
                    const std::string &argumentValue) {
  out += "{\"ph\":\"M\",\"pid\":" + std::to_string(rank);
  if (track)
    out += ",\"tid\":" + std::to_string(*track);
  out += ",\"name\":\"";
  out += name;
  out += "\",\"args\":{\"" + argumentKey + "\":" + argumentValue + "}},\n";
}

void appendEvent(std::string &out, int32_t rank, const TraceEvent &event) {
  out += "{\"ph\":\"";
  out += phaseOf(event.kind);
  out += "\",\"pid\":" + std::to_string(rank) +
         ",\"tid\":" + std::to_string(event.track) +
         ",\"ts\":" + formatMicroseconds(event.startNanoseconds);
  if (event.kind == TraceEvent::Kind::Complete)
    out += ",\"dur\":" + formatMicroseconds(event.durationNanoseconds);
  if (event.kind == TraceEvent::Kind::Instant)
    out += ",\"s\":\"t\"";
  out += ",\"name\":" + quoteJson(event.name);
  if (!event.category.empty())
    out += ",\"cat\":" + quoteJson(event.category);
  if (!event.arguments.empty()) {
    out += ",\"args\":";
    appendArguments(out, event.arguments);
  }
  out += '}';
}

} // namespace

std::string renderChromeTrace(const TraceDocument &document) {
  std::vector<const TraceEvent *> ordered;
  ordered.reserve(document.events.size());
  std::set<int64_t> tracks;
  for (const TraceEvent &event : document.events) {
    ordered.push_back(&event);
    tracks.insert(event.track);
  }
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const TraceEvent *a, const TraceEvent *b) {
                     if (a->startNanoseconds != b->startNanoseconds)
                       return a->startNanoseconds < b->startNanoseconds;
                     return a->durationNanoseconds > b->durationNanoseconds;
                   });
  for (const auto &[track, name] : document.trackNames)
    tracks.insert(track);

  std::string out = "{\"displayTimeUnit\":\"ms\",\"otherData\":";
  appendArguments(out, document.otherData);
  out += ",\"traceEvents\":[\n";
  const int32_t rank = document.rank;
  appendMetadata(out, rank, "process_name", nullptr, "name",
                 quoteJson("rank " + std::to_string(rank)));
  appendMetadata(out, rank, "process_sort_index", nullptr, "sort_index",
                 std::to_string(rank));
  for (int64_t track : tracks) {
    auto named = document.trackNames.find(track);
    std::string name = named != document.trackNames.end()
                           ? named->second
                           : "track " + std::to_string(track);
    appendMetadata(out, rank, "thread_name", &track, "name", quoteJson(name));
    appendMetadata(out, rank, "thread_sort_index", &track, "sort_index",
                   std::to_string(track));
  }
  for (size_t i = 0; i < ordered.size(); ++i) {
    appendEvent(out, rank, *ordered[i]);
    out += i + 1 < ordered.size() ? ",\n" : "\n";
  }
  // The metadata lines end in a comma; with no events, close the array
  // after the last one without it.
  if (ordered.empty())
    out.erase(out.size() - 2, 1);
  out += "]}\n";
  return out;
}

} // namespace tessera::train
