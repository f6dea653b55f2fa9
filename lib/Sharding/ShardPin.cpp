//===- ShardPin.cpp - parsing --shard REGEX=SPEC ---------------------------===//

#include "tessera/Sharding/MeshSharding.h"

using namespace tessera;
using namespace tessera::sharding;

static llvm::Error pinError(llvm::StringRef text, const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "--shard '" + text + "': " + why);
}

llvm::Expected<ShardPin>
sharding::parseShardPin(llvm::StringRef text, const cost::DeviceMesh &mesh) {
  // The spec never holds '=' except in zero=N, so split at the last '='
  // that is not part of "zero=".
  size_t equals = text.rfind('=');
  if (equals != llvm::StringRef::npos && equals >= 4 &&
      text.substr(equals - 4, 4) == "zero")
    equals = text.substr(0, equals - 4).rfind('=');
  if (equals == llvm::StringRef::npos || equals == 0)
    return pinError(text, "expected REGEX=SPEC, e.g. 'h\\.\\d+\\.mlp.*=tp-column'");
  ShardPin pin;
  pin.text = text.str();
  llvm::StringRef regex = text.take_front(equals);
  llvm::StringRef spec = text.drop_front(equals + 1).trim();
  // llvm::Regex is POSIX extended: spell \d as [0-9] for the user.
  std::string posix;
  for (size_t index = 0; index < regex.size(); ++index) {
    if (regex[index] == '\\' && index + 1 < regex.size() &&
        regex[index + 1] == 'd') {
      posix += "[0-9]";
      ++index;
    } else {
      posix += regex[index];
    }
  }
  pin.pattern = std::make_shared<llvm::Regex>(posix);
  std::string regexError;
  if (!pin.pattern->isValid(regexError))
    return pinError(text, "invalid regular expression: " + regexError);
  if (spec.empty())
    return pinError(text, "empty SPEC (expected tp-column, tp-row, "
                          "vocabulary-parallel, dp, replicated, zero=N or a "
                          "layout like [-, tp])");

  // Terms are comma separated, but a layout holds commas: take it whole.
  while (!spec.empty()) {
    llvm::StringRef term;
    if (spec.starts_with("[")) {
      size_t close = spec.find(']');
      if (close == llvm::StringRef::npos)
        return pinError(text, "unterminated layout '" + spec + "'");
      term = spec.take_front(close + 1);
      spec = spec.drop_front(close + 1).ltrim();
      llvm::Expected<TensorLayout> layout = parseTensorLayout(term, mesh);
      if (!layout)
        return pinError(text, llvm::toString(layout.takeError()));
      pin.layout = *layout;
    } else {
      std::tie(term, spec) = spec.split(',');
      term = term.trim();
      int stage = -1;
      if (term == "tp-column" || term == "tp-row" ||
          term == "vocabulary-parallel" || term == "dp" ||
          term == "replicated") {
        if (pin.opKind)
          return pinError(text, "two op strategies ('" + *pin.opKind +
                                    "' and '" + term + "')");
        pin.opKind = term.str();
      } else if (term.consume_front("zero=") && !term.getAsInteger(10, stage) &&
                 stage >= 0 && stage <= 3) {
        pin.zeroStage = stage;
      } else {
        return pinError(text, "unknown term '" + term +
                                  "' (expected tp-column, tp-row, "
                                  "vocabulary-parallel, dp, replicated, "
                                  "zero=0..3 or a layout like [-, tp])");
      }
    }
    spec = spec.ltrim();
    if (spec.consume_front(","))
      spec = spec.ltrim();
  }
  return pin;
}
