//===- Json.cpp - JSON read through nlohmann-json ------------------------===//
//
// Design: nlohmann-json's SAX parser does the RFC 8259 grammar (strict: one
// value, no comments, valid UTF-8, no trailing text); the handler below only
// builds the driver's JsonValue tree from its events. It keeps the limits
// the driver relies on: no value nested deeper than kMaxDepth containers, so
// that a hostile header ("[[[[...") cannot blow up the tree or the readers
// that walk it recursively, and every error names the file and the byte
// offset, which is what one needs to look at a damaged header. The SAX
// parser is iterative, so the depth check is ours, not a guard of the stack.
//
//===----------------------------------------------------------------------===//

#include "Json.h"

#include "TrainError.h"

#include <nlohmann/json.hpp>

namespace tessera::train {

const JsonValue *JsonValue::find(const std::string &key) const {
  const JsonValue *found = nullptr;
  for (const auto &[name, value] : object)
    if (name == key)
      found = &value;
  return found;
}

namespace {

constexpr size_t kMaxDepth = 64;

/// nlohmann's message without its "[json.exception.parse_error.101] parse
/// error at line 1, column 5: " prefix: the byte offset replaces the line
/// and column (a header is one line).
std::string describeParseError(const std::string &message) {
  std::string text = message;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find("] ");
    if (close != std::string::npos)
      text.erase(0, close + 2);
  }
  if (text.rfind("parse error", 0) == 0) {
    size_t colon = text.find(": ");
    if (colon != std::string::npos)
      text.erase(0, colon + 2);
  }
  return text;
}

/// Builds a JsonValue from nlohmann's SAX events (the interface
/// nlohmann::json::sax_parse expects). A callback returning false stops the
/// parse; `error` then says why.
class JsonBuilder {
public:
  JsonValue document;
  std::string error;

  bool null() { return place() != nullptr; }
  bool boolean(bool value) {
    JsonValue *slot = place();
    if (!slot)
      return false;
    slot->kind = JsonValue::Kind::Bool;
    slot->boolean = value;
    return true;
  }
  // nlohmann reports a number written with a '-' as a signed integer and one
  // without as unsigned, so the text is rebuilt exactly, "-0" included.
  bool number_integer(int64_t value) {
    return number(static_cast<double>(value),
                  value == 0 ? "-0" : std::to_string(value));
  }
  bool number_unsigned(uint64_t value) {
    return number(static_cast<double>(value), std::to_string(value));
  }
  bool number_float(double value, const std::string &text) {
    return number(value, text);
  }
  bool string(std::string &value) {
    JsonValue *slot = place();
    if (!slot)
      return false;
    slot->kind = JsonValue::Kind::String;
    slot->string = std::move(value);
    return true;
  }
  bool binary(nlohmann::json::binary_t &) {
    error = "binary data in a JSON document";
    return false;
  }
  bool start_object(size_t) { return openContainer(JsonValue::Kind::Object); }
  bool key(std::string &name) {
    containers.back()->object.emplace_back(std::move(name), JsonValue());
    return true;
  }
  bool end_object() { return closeContainer(); }
  bool start_array(size_t) { return openContainer(JsonValue::Kind::Array); }
  bool end_array() { return closeContainer(); }
  bool parse_error(size_t position, const std::string &,
                   const nlohmann::json::exception &exception) {
    error = "malformed JSON at byte " + std::to_string(position) + ": " +
            describeParseError(exception.what());
    return false;
  }

private:
  /// The containers being filled, outermost first. A pointer stays valid
  /// while its container is open: only the innermost one grows.
  std::vector<JsonValue *> containers;

  /// The JsonValue the next value goes to, or null past the depth limit.
  JsonValue *place() {
    if (containers.size() > kMaxDepth) {
      error = "malformed JSON: nested deeper than " +
              std::to_string(kMaxDepth) + " levels";
      return nullptr;
    }
    if (containers.empty())
      return &document;
    JsonValue &parent = *containers.back();
    if (parent.kind == JsonValue::Kind::Array)
      return &parent.array.emplace_back();
    return &parent.object.back().second; // key() added the member
  }

  bool number(double value, std::string text) {
    JsonValue *slot = place();
    if (!slot)
      return false;
    slot->kind = JsonValue::Kind::Number;
    slot->number = value;
    slot->numberText = std::move(text);
    return true;
  }

  bool openContainer(JsonValue::Kind kind) {
    JsonValue *slot = place();
    if (!slot)
      return false;
    slot->kind = kind;
    containers.push_back(slot);
    return true;
  }

  bool closeContainer() {
    containers.pop_back();
    return true;
  }
};

} // namespace

JsonValue parseJson(const std::string &text, const std::string &what) {
  JsonBuilder builder;
  if (!nlohmann::json::sax_parse(text, &builder,
                                 nlohmann::json::input_format_t::json,
                                 /*strict=*/true, /*ignore_comments=*/false))
    fail(what + ": " +
         (builder.error.empty() ? "malformed JSON" : builder.error));
  return std::move(builder.document);
}

std::string quoteJson(const std::string &text) {
  static const char *hex = "0123456789abcdef";
  std::string out = "\"";
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20) {
      out += "\\u00";
      out += hex[byte >> 4];
      out += hex[byte & 0xF];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

} // namespace tessera::train
