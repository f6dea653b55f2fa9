//===- MemoryText.cpp - bytes as the planners' messages say them ----------===//

#include "tessera/CostModel/MemoryText.h"

#include "llvm/Support/FormatVariadic.h"

std::string tessera::cost::memoryText(double bytes) {
  constexpr double kMiB = 1024.0 * 1024.0, kGiB = 1024.0 * kMiB;
  return bytes >= kGiB ? llvm::formatv("{0:F2} GiB", bytes / kGiB).str()
                       : llvm::formatv("{0:F3} MiB", bytes / kMiB).str();
}
