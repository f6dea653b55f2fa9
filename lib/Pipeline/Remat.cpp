//===- Remat.cpp - activation memory and recomputation per remat mode -----===//

#include "tessera/Pipeline/Remat.h"

namespace tessera::pipeline {

llvm::StringRef rematName(RematMode mode) {
  switch (mode) {
  case RematMode::None:
    return "none";
  case RematMode::Selective:
    return "selective";
  case RematMode::Full:
    return "full";
  }
  return "unknown";
}

std::optional<RematMode> parseRematName(llvm::StringRef name) {
  for (RematMode mode :
       {RematMode::None, RematMode::Selective, RematMode::Full})
    if (rematName(mode) == name)
      return mode;
  return std::nullopt;
}

const TensorBytes &keptActivations(const UnitProfile &unit, RematMode mode) {
  switch (mode) {
  case RematMode::Selective:
    return unit.savedSelective;
  case RematMode::Full:
    return unit.savedInput;
  case RematMode::None:
    break;
  }
  return unit.savedAll;
}

TensorBytes backwardWorkingBytes(const UnitProfile &unit, RematMode mode) {
  TensorBytes bytes = unit.working;
  if (mode == RematMode::Full)
    bytes += unit.savedAll;
  return bytes;
}

const std::vector<OpRecord> &recomputedOps(const UnitProfile &unit,
                                           RematMode mode) {
  static const std::vector<OpRecord> none;
  switch (mode) {
  case RematMode::Selective:
    return unit.attentionCore;
  case RematMode::Full:
    return unit.forward;
  case RematMode::None:
    break;
  }
  return none;
}

} // namespace tessera::pipeline
