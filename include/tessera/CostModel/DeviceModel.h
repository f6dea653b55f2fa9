//===- DeviceModel.h - compute rates and memory of one accelerator -*- C++ -*-===//
//
// What the cost model knows about one device: how fast its matrix units
// multiply in each precision, how fast its other arithmetic runs, how much
// memory it has and how fast that memory is read. An op's time on it is the
// roofline: the larger of its arithmetic time and its memory time
// (DeviceModel::roofline).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_COSTMODEL_DEVICEMODEL_H
#define TESSERA_COSTMODEL_DEVICEMODEL_H

#include "llvm/ADT/StringRef.h"

#include <array>
#include <optional>
#include <string>

namespace tessera::cost {

/// The floating-point formats a device has distinct rates for.
enum class Precision { BF16, FP16, FP32 };

/// "bf16", "fp16", "fp32": the keys of the cluster file and the names of
/// tesserac's --precision.
llvm::StringRef precisionName(Precision precision);
std::optional<Precision> parsePrecisionName(llvm::StringRef name);

struct DeviceModel {
  std::string name;
  /// Usable memory in bytes (HBM).
  double memoryBytes = 0;
  /// Memory bandwidth in bytes/s.
  double memoryBandwidth = 0;
  /// Dense matrix-multiply rates in FLOP/s that kernels reach in practice,
  /// indexed by Precision: what contractions are timed with.
  std::array<double, 3> matrixFlops{};
  /// The datasheet's dense peaks, indexed by Precision: what MFU is
  /// measured against. Equal to matrixFlops when the file gives none.
  std::array<double, 3> peakMatrixFlops{};
  /// Rate of elementwise arithmetic (not on the matrix units), in FLOP/s.
  double vectorFlops = 0;
  /// The rates the fused attention kernels reach (forward and backward
  /// together, FLOPs counted as OpCost counts them), indexed by Precision; 0
  /// where the file gives none, and then attention is timed at matrixFlops.
  /// Flash attention's softmax between its two GEMMs keeps it well below the
  /// GEMM rate (291 TFLOP/s against 787 on an H200 in bf16).
  std::array<double, 3> attentionFlops{};

  double matrixRate(Precision precision) const {
    return matrixFlops[static_cast<size_t>(precision)];
  }
  double peakMatrixRate(Precision precision) const {
    return peakMatrixFlops[static_cast<size_t>(precision)];
  }
  double attentionRate(Precision precision) const {
    double rate = attentionFlops[static_cast<size_t>(precision)];
    return rate > 0 ? rate : matrixRate(precision);
  }

  /// Seconds for a kernel doing `flops` at `flopRate` and moving `bytes`
  /// through memory: max(flops / rate, bytes / bandwidth). Kernels overlap
  /// arithmetic and loads, so the slower of the two bounds the time.
  double roofline(double flops, double flopRate, double bytes) const;
};

} // namespace tessera::cost

#endif // TESSERA_COSTMODEL_DEVICEMODEL_H
