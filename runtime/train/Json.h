//===- Json.h - The little JSON the driver reads and writes -----*- C++ -*-===//
//
// The safetensors header is JSON, and the metrics file is JSON lines. The
// reader is nlohmann-json's strict parser (RFC 8259, valid UTF-8; duplicate
// keys keep the last) behind the small tree below, with a depth limit; the
// writers need only the one escaping helper.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_JSON_H
#define TESSERA_RUNTIME_TRAIN_JSON_H

#include <string>
#include <vector>

namespace tessera::train {

struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  /// The number exactly as written, so 64-bit integers survive the parse.
  std::string numberText;
  std::string string;
  std::vector<JsonValue> array;
  /// Object members in the order written (a vector, so that readers can
  /// report the first offending member the way the file lists them).
  std::vector<std::pair<std::string, JsonValue>> object;

  const JsonValue *find(const std::string &key) const;
};

/// Parses `text` as one JSON value. Throws TrainError("<what>: ...") with the
/// byte offset of the problem.
JsonValue parseJson(const std::string &text, const std::string &what);

/// `text` as a JSON string literal, quotes included.
std::string quoteJson(const std::string &text);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_JSON_H
