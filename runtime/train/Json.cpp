//===- Json.cpp - A strict recursive-descent JSON reader -----------------===//
//
// Design: recursive descent over the RFC 8259 grammar, with a depth limit so
// that a hostile header ("[[[[...") cannot overflow the stack. Errors name the
// byte offset, which is what one needs to look at a damaged header.
//
//===----------------------------------------------------------------------===//

#include "Json.h"

#include "TrainError.h"

#include <cstdlib>

namespace tessera::train {

const JsonValue *JsonValue::find(const std::string &key) const {
  const JsonValue *found = nullptr;
  for (const auto &[name, value] : object)
    if (name == key)
      found = &value;
  return found;
}

namespace {

constexpr int kMaxDepth = 64;

class JsonReader {
public:
  JsonReader(const std::string &text, const std::string &what)
      : text(text), what(what) {}

  JsonValue parseDocument() {
    JsonValue value = parseValue(0);
    skipSpace();
    if (position != text.size())
      error("unexpected text after the JSON value");
    return value;
  }

private:
  const std::string &text;
  const std::string &what;
  size_t position = 0;

  [[noreturn]] void error(const std::string &message) {
    fail(what + ": malformed JSON at byte " + std::to_string(position) + ": " +
         message);
  }

  void skipSpace() {
    while (position < text.size() &&
           (text[position] == ' ' || text[position] == '\t' ||
            text[position] == '\n' || text[position] == '\r'))
      ++position;
  }

  bool consume(char expected) {
    skipSpace();
    if (position < text.size() && text[position] == expected) {
      ++position;
      return true;
    }
    return false;
  }

  void expect(char expected) {
    if (!consume(expected))
      error(std::string("expected '") + expected + "'");
  }

  void expectWord(const char *word) {
    for (const char *c = word; *c; ++c, ++position)
      if (position >= text.size() || text[position] != *c)
        error(std::string("expected '") + word + "'");
  }

  JsonValue parseValue(int depth) {
    if (depth > kMaxDepth)
      error("nested deeper than " + std::to_string(kMaxDepth) + " levels");
    skipSpace();
    if (position >= text.size())
      error("unexpected end");
    JsonValue value;
    char c = text[position];
    if (c == '{') {
      ++position;
      value.kind = JsonValue::Kind::Object;
      if (consume('}'))
        return value;
      do {
        skipSpace();
        std::string key = parseString();
        expect(':');
        value.object.emplace_back(std::move(key), parseValue(depth + 1));
      } while (consume(','));
      expect('}');
    } else if (c == '[') {
      ++position;
      value.kind = JsonValue::Kind::Array;
      if (consume(']'))
        return value;
      do
        value.array.push_back(parseValue(depth + 1));
      while (consume(','));
      expect(']');
    } else if (c == '"') {
      value.kind = JsonValue::Kind::String;
      value.string = parseString();
    } else if (c == 't') {
      expectWord("true");
      value.kind = JsonValue::Kind::Bool;
      value.boolean = true;
    } else if (c == 'f') {
      expectWord("false");
      value.kind = JsonValue::Kind::Bool;
    } else if (c == 'n') {
      expectWord("null");
    } else {
      value.kind = JsonValue::Kind::Number;
      parseNumber(value);
    }
    return value;
  }

  void parseNumber(JsonValue &value) {
    size_t start = position;
    auto digits = [&] {
      size_t first = position;
      while (position < text.size() && text[position] >= '0' &&
             text[position] <= '9')
        ++position;
      if (position == first)
        error("expected a digit");
    };
    if (text[position] == '-')
      ++position;
    if (position < text.size() && text[position] == '0')
      ++position;
    else
      digits();
    if (position < text.size() && text[position] == '.') {
      ++position;
      digits();
    }
    if (position < text.size() &&
        (text[position] == 'e' || text[position] == 'E')) {
      ++position;
      if (position < text.size() &&
          (text[position] == '+' || text[position] == '-'))
        ++position;
      digits();
    }
    value.numberText = text.substr(start, position - start);
    value.number = std::strtod(value.numberText.c_str(), nullptr);
  }

  unsigned parseHex4() {
    if (position + 4 > text.size())
      error("truncated \\u escape");
    unsigned code = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text[position++];
      code <<= 4;
      if (c >= '0' && c <= '9')
        code |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        code |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        code |= static_cast<unsigned>(c - 'A' + 10);
      else
        error("bad hex digit in \\u escape");
    }
    return code;
  }

  static void appendUtf8(std::string &out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  std::string parseString() {
    if (position >= text.size() || text[position] != '"')
      error("expected a string");
    ++position;
    std::string out;
    while (true) {
      if (position >= text.size())
        error("unterminated string");
      char c = text[position++];
      if (c == '"')
        return out;
      if (static_cast<unsigned char>(c) < 0x20)
        error("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (position >= text.size())
        error("unterminated escape");
      char escape = text[position++];
      switch (escape) {
      case '"':
      case '\\':
      case '/':
        out += escape;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        unsigned code = parseHex4();
        if (code >= 0xD800 && code < 0xDC00) {
          if (position + 2 > text.size() || text[position] != '\\' ||
              text[position + 1] != 'u')
            error("unpaired surrogate in \\u escape");
          position += 2;
          unsigned low = parseHex4();
          if (low < 0xDC00 || low >= 0xE000)
            error("unpaired surrogate in \\u escape");
          code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
        } else if (code >= 0xDC00 && code < 0xE000) {
          error("unpaired surrogate in \\u escape");
        }
        appendUtf8(out, code);
        break;
      }
      default:
        error(std::string("unknown escape '\\") + escape + "'");
      }
    }
  }
};

} // namespace

JsonValue parseJson(const std::string &text, const std::string &what) {
  return JsonReader(text, what).parseDocument();
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
