//===- ProgramDefinition.h - the tessera_program table and main -*- C++ -*-===//
//
// Internal to lib/Lowering: what tess-lower-to-emitc knows about the program
// besides its step function, and the EmitC that defines it for the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_LOWERING_PROGRAMDEFINITION_H
#define TESSERA_LIB_LOWERING_PROGRAMDEFINITION_H

#include "mlir/IR/Builders.h"

#include <string>
#include <vector>

namespace tessera::lowering {

/// One parameter or buffer, in @forward_backward's argument order.
struct ProgramTensor {
  std::string name;
  int32_t dtype = 0; // tessera_dtype
  std::vector<int64_t> shape;
  /// A partitioned program's: per dim the mesh axis it is split over, or -1
  /// (program.h's tessera_tensor_split); empty for one device.
  std::vector<int32_t> split;
  /// Per dim the count of equal pieces a rank holds its block of each of
  /// (program.h's pieces, tess.pieces); empty: 1 everywhere.
  std::vector<int64_t> pieces;
};

struct ProgramInfo {
  std::string modelName;
  std::string weightsFile; // empty: compiled without weights
  int32_t lossKind = 0;    // tessera_loss_kind
  int32_t precision = 0;   // tessera_precision
  int32_t device = 0;      // tessera_device_kind of forward_backward's tensors
  int64_t batch = 0, sequence = 0, vocabulary = 0, ignoreIndex = -100;
  /// Model FLOPs of one forward_backward call (program.h).
  double flopsPerMicroBatch = 0;
  std::vector<ProgramTensor> parameters, buffers;
  /// Per parameter, the dtype the step reads it in (program.h's
  /// parameter_step_dtypes): f32, or the compute copy's bf16/f16. Empty
  /// for a pipelined program (its chunks read the masters).
  std::vector<int32_t> parameterStepDtypes;
  /// The mesh a partitioned program runs on, outermost axis first (empty:
  /// one device).
  std::vector<std::string> meshAxisNames;
  std::vector<int64_t> meshShape;
  /// The module's #tess.plan as printed (program.h's plan); empty: none.
  std::string plan;
  /// The plan offloads the optimizer (program.h's offload_optimizer).
  bool offloadOptimizer = false;
  /// program.h's zero_stage: the plan's ZeRO-1 inside a pipeline's stage
  /// mesh (each stage's dp group shards its optimizer state), else 0.
  int32_t zeroStage = 0;
  /// Per parameter, the write position of its gradient in
  /// forward_backward (program.h's gradient_write_positions); empty for a
  /// pipelined program.
  std::vector<int32_t> gradientWritePositions;
  /// Per parameter four read positions in forward_backward (program.h's
  /// parameter_read_intervals); empty for a pipelined program.
  std::vector<int32_t> parameterReadIntervals;
  /// Per parameter, the mesh axes its gradient leaves pending over
  /// (program.h's gradient_partial_axes); empty when none is, and for a
  /// pipelined program (its pipeline's table).
  std::vector<int32_t> gradientPartialAxes;
  /// Per parameter, the plan's ZeRO stage of a gradient pending over mesh
  /// axes (program.h's gradient_zero_stages: 1 or 2, 0 when complete);
  /// empty when none is, and for a pipelined program.
  std::vector<int32_t> gradientZeroStages;
  /// Per parameter, 1 where its pending gradient is returned whole, the same
  /// on every rank of its axes (program.h's gradient_whole); empty when
  /// none is.
  std::vector<int32_t> gradientWhole;
};

/// The C name of a tessera_dtype ("TESSERA_F32", ...).
const char *dtypeName(int32_t dtype);

/// `TESSERA_F32, 2, {64, 64}`: the dtype, rank and dims fields of a tensor
/// table row (tessera_tensor_info's, tessera_stage_tensor's).
std::string dtypeAndShape(int32_t dtype, const std::vector<int64_t> &shape);

/// A C string literal of `text` (quoted, escaped).
std::string cStringLiteral(llvm::StringRef text);

/// Appends `static const <elementType> name[count] = initializer;` (an
/// aggregate initializer's text) at the builder's insertion point and
/// returns `name`, or returns "NULL" without a table when count is 0 (a C
/// array cannot be empty).
std::string emitConstTable(mlir::OpBuilder &builder, mlir::Location loc,
                           llvm::StringRef name, llvm::StringRef elementType,
                           size_t count, llvm::StringRef initializer);

/// Appends, at the builder's insertion point in the module body, the
/// parameter and buffer tables (and, partitioned, the mesh and the splits), `static tessera_program tessera_program_
/// definition` (its forward_backward = `forwardBackwardName`, a function
/// defined before this point or NULL, and its pipeline = `pipeline`, the
/// address of a tessera_pipeline or NULL) and `int main(argc, argv)` calling
/// tessera_train_main, or tessera_cuda_train_main for a CUDA program (the
/// driver's GPU backend, which lives in its own library so that a CPU
/// executable never links the CUDA runtime).
void emitProgramDefinition(mlir::OpBuilder &builder, mlir::Location loc,
                           const ProgramInfo &info,
                           llvm::StringRef forwardBackwardName,
                           llvm::StringRef pipeline = "NULL");

} // namespace tessera::lowering

#endif // TESSERA_LIB_LOWERING_PROGRAMDEFINITION_H
