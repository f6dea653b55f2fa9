//===- DeviceModel.h - compute rates and memory of one accelerator -*- C++ -*-===//
//
// What the cost model knows about one device: how fast its matrix units
// multiply in each precision, how fast its other arithmetic runs, how much
// memory it has and how fast that memory is read. An op's time on it is the
// roofline: the larger of its arithmetic time and its memory time
// (DeviceModel::roofline), a contraction's arithmetic at the rate GEMMs of
// its shape were measured to reach (matrixRate(precision, m, n, k)), plus
// what every kernel costs beyond its work (kernelSeconds).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_COSTMODEL_DEVICEMODEL_H
#define TESSERA_COSTMODEL_DEVICEMODEL_H

#include "llvm/ADT/StringRef.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace tessera::cost {

/// The floating-point formats a device has distinct rates for.
enum class Precision { BF16, FP16, FP32 };

/// "bf16", "fp16", "fp32": the keys of the cluster file and the names of
/// tesserac's --precision.
llvm::StringRef precisionName(Precision precision);
std::optional<Precision> parsePrecisionName(llvm::StringRef name);

/// One measured GEMM: C[m, n] = A[m, k] @ B[k, n] ran at `flops` FLOP/s.
struct GemmRate {
  double m = 0, n = 0, k = 0;
  double flops = 0;
};

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
  /// The softmax between attention's two GEMMs keeps it well below the GEMM
  /// rate (on an H200 in bf16: cuDNN's fused kernels 493 TFLOP/s, Tessera's
  /// own flash kernels 291, the GEMMs 787).
  std::array<double, 3> attentionFlops{};
  /// GEMMs measured at the shapes Transformers' linears train at
  /// (bench/measure_kernels.py), indexed by Precision; empty where the file
  /// gives none, and then every contraction is timed at matrixFlops. A K of
  /// 768 or a weight gradient's reduction over the tokens runs well below
  /// the square 4096^3 rate (474 to 715 TFLOP/s against 787 for GPT-2's on
  /// an H200).
  std::array<std::vector<GemmRate>, 3> gemmShapes;
  /// Seconds every kernel costs beyond its roofline time: the gap between
  /// launches and a kernel's minimum duration (0.93 us a kernel of a
  /// replayed CUDA graph on an H200; a step is ~1,000 kernels).
  double kernelSeconds = 0;

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
  /// The rate of an m x n x k contraction: the measured shapes' rates
  /// weighted by inverse squared distance in log2 space over the four
  /// nearest (the shape's own when measured); matrixRate without a table
  /// or without a shape (any dim 0).
  double matrixRate(Precision precision, double m, double n, double k) const;

  /// Seconds for a kernel doing `flops` at `flopRate` and moving `bytes`
  /// through memory: max(flops / rate, bytes / bandwidth). Kernels overlap
  /// arithmetic and loads, so the slower of the two bounds the time.
  double roofline(double flops, double flopRate, double bytes) const;
};

} // namespace tessera::cost

#endif // TESSERA_COSTMODEL_DEVICEMODEL_H
