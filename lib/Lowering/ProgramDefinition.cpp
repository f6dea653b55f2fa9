//===- ProgramDefinition.cpp - the tessera_program table and main --------===//
//
// The tables are aggregate initializers, which EmitC has no typed attribute
// for: they are `emitc.global`s of the runtime's struct types with an opaque
// initializer written here (names escaped as C strings).
//
//===----------------------------------------------------------------------===//

#include "ProgramDefinition.h"

#include "tessera/runtime/program.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace tessera::lowering {

const char *dtypeName(int32_t dtype) {
  static const char *const names[] = {
      "TESSERA_F32", "TESSERA_BF16", "TESSERA_F16", "TESSERA_F64",
      "TESSERA_I64", "TESSERA_I32",  "TESSERA_I8",  "TESSERA_I16",
      "TESSERA_BOOL"};
  if (dtype < 0 || dtype >= static_cast<int32_t>(std::size(names)))
    return "TESSERA_F32";
  return names[dtype];
}

std::string cStringLiteral(llvm::StringRef text) {
  std::string literal = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      literal += '\\';
      literal += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      // Octal escapes end after three digits, unlike \x, so the next
      // character can never be read as part of the escape.
      char escape[5];
      std::snprintf(escape, sizeof(escape), "\\%03o", c);
      literal += escape;
    } else {
      literal += static_cast<char>(c);
    }
  }
  return literal + "\"";
}

std::string emitConstTable(OpBuilder &builder, Location loc, StringRef name,
                           StringRef elementType, size_t count,
                           StringRef initializer) {
  if (count == 0)
    return "NULL";
  MLIRContext *context = builder.getContext();
  auto type = emitc::ArrayType::get({static_cast<int64_t>(count)},
                                    emitc::OpaqueType::get(context, elementType));
  emitc::GlobalOp::create(builder, loc, name, type,
                          emitc::OpaqueAttr::get(context, initializer),
                          /*extern_specifier=*/false,
                          /*static_specifier=*/true,
                          /*const_specifier=*/true);
  return name.str();
}

std::string dtypeAndShape(int32_t dtype, const std::vector<int64_t> &shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << dtypeName(dtype) << ", " << shape.size() << ", {";
  for (auto [d, dim] : llvm::enumerate(shape))
    os << (d ? ", " : "") << dim;
  if (shape.empty())
    os << "0";
  os << "}";
  return text;
}

namespace {

/// `{{"name", TESSERA_F32, 2, {64, 64}}, ...}`.
std::string tensorInfoInitializer(const std::vector<ProgramTensor> &tensors) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "{";
  for (auto [index, tensor] : llvm::enumerate(tensors)) {
    os << (index ? ",\n    " : "\n    ") << "{" << cStringLiteral(tensor.name)
       << ", " << dtypeAndShape(tensor.dtype, tensor.shape) << "}";
  }
  os << "}";
  return text;
}

/// A global table of tensor infos, or NULL when there are none (a C array
/// cannot be empty).
std::string emitTensorTable(OpBuilder &builder, Location loc, StringRef name,
                            const std::vector<ProgramTensor> &tensors) {
  return emitConstTable(builder, loc, name, "tessera_tensor_info",
                        tensors.size(), tensorInfoInitializer(tensors));
}

/// `{{{-1, 1, -1, -1, -1, -1, -1, -1}, {1, 3, 1, 1, 1, 1, 1, 1}}, ...}`: the
/// splits (mesh axes and piece counts) of `tensors`, or NULL for one device
/// or no tensors.
std::string emitSplitTable(OpBuilder &builder, Location loc, StringRef name,
                           const std::vector<ProgramTensor> &tensors,
                           bool partitioned) {
  if (!partitioned || tensors.empty())
    return "NULL";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "{";
  for (auto [index, tensor] : llvm::enumerate(tensors)) {
    os << (index ? ",\n    " : "\n    ") << "{{";
    for (int d = 0; d < TESSERA_MAX_RANK; ++d)
      os << (d ? ", " : "")
         << (d < static_cast<int>(tensor.split.size()) ? tensor.split[d] : -1);
    os << "}, {";
    for (int d = 0; d < TESSERA_MAX_RANK; ++d)
      os << (d ? ", " : "")
         << (d < static_cast<int>(tensor.pieces.size()) ? tensor.pieces[d]
                                                        : 1);
    os << "}}";
  }
  os << "}";
  return emitConstTable(builder, loc, name, "tessera_tensor_split",
                        tensors.size(), text);
}

/// The mesh's shape and axis names as static tables, or NULL for one device.
std::pair<std::string, std::string> emitMeshTables(OpBuilder &builder,
                                                   Location loc,
                                                   const ProgramInfo &info) {
  if (info.meshShape.empty())
    return {"NULL", "NULL"};
  MLIRContext *context = builder.getContext();
  int64_t axes = static_cast<int64_t>(info.meshShape.size());
  auto shapeType = emitc::ArrayType::get({axes}, builder.getI64Type());
  emitc::GlobalOp::create(
      builder, loc, "tessera_mesh_shape", shapeType,
      DenseIntElementsAttr::get(
          RankedTensorType::get({axes}, builder.getI64Type()), info.meshShape),
      /*extern_specifier=*/false, /*static_specifier=*/true,
      /*const_specifier=*/true);
  std::string names;
  llvm::raw_string_ostream os(names);
  os << "{";
  for (auto [index, name] : llvm::enumerate(info.meshAxisNames))
    os << (index ? ", " : "") << cStringLiteral(name);
  os << "}";
  auto namesType = emitc::ArrayType::get(
      {axes}, emitc::OpaqueType::get(context, "const char *const"));
  emitc::GlobalOp::create(builder, loc, "tessera_mesh_axis_names", namesType,
                          emitc::OpaqueAttr::get(context, names),
                          /*extern_specifier=*/false,
                          /*static_specifier=*/true,
                          /*const_specifier=*/false);
  return {"tessera_mesh_shape", "tessera_mesh_axis_names"};
}

} // namespace

void emitProgramDefinition(OpBuilder &builder, Location loc,
                           const ProgramInfo &info,
                           StringRef forwardBackwardName,
                           StringRef pipeline) {
  MLIRContext *context = builder.getContext();
  std::string parameters = emitTensorTable(builder, loc, "tessera_parameters",
                                           info.parameters);
  std::string buffers =
      emitTensorTable(builder, loc, "tessera_buffers", info.buffers);
  bool partitioned = !info.meshShape.empty();
  std::string parameterSplits = emitSplitTable(
      builder, loc, "tessera_parameter_splits", info.parameters, partitioned);
  std::string bufferSplits = emitSplitTable(
      builder, loc, "tessera_buffer_splits", info.buffers, partitioned);
  auto [meshShape, meshAxisNames] = emitMeshTables(builder, loc, info);
  // NULL when the step reads every master (f32 and pipelined programs).
  std::string stepDtypes = "NULL";
  if (llvm::any_of(info.parameterStepDtypes,
                   [](int32_t dtype) { return dtype != TESSERA_F32; })) {
    std::string row;
    for (auto [index, dtype] : llvm::enumerate(info.parameterStepDtypes))
      row += std::string(index ? ", " : "") + dtypeName(dtype);
    stepDtypes = emitConstTable(builder, loc, "tessera_parameter_step_dtypes",
                                "int32_t", info.parameterStepDtypes.size(),
                                "{" + row + "}");
  }

  // What a ZeRO-2 driver plans its ring of bucket buffers from, and a
  // ZeRO-3 driver its gathers of the weights.
  auto int32Table = [&](StringRef name, const std::vector<int32_t> &values) {
    if (values.empty())
      return std::string("NULL");
    std::string row;
    for (auto [index, value] : llvm::enumerate(values))
      row += (index ? ", " : "") + std::to_string(value);
    return emitConstTable(builder, loc, name, "int32_t", values.size(),
                          "{" + row + "}");
  };
  std::string writePositions = int32Table("tessera_gradient_write_positions",
                                          info.gradientWritePositions);
  std::string readIntervals = int32Table("tessera_parameter_read_intervals",
                                         info.parameterReadIntervals);
  std::string partialAxes = int32Table("tessera_gradient_partial_axes",
                                       info.gradientPartialAxes);
  std::string zeroStages = int32Table("tessera_gradient_zero_stages",
                                      info.gradientZeroStages);
  std::string whole =
      int32Table("tessera_gradient_whole", info.gradientWhole);

  static const char *const lossKinds[] = {"TESSERA_LOSS_CAUSAL_LM",
                                          "TESSERA_LOSS_MLM"};
  static const char *const precisions[] = {"TESSERA_PRECISION_FP32",
                                           "TESSERA_PRECISION_BF16",
                                           "TESSERA_PRECISION_FP16"};
  static const char *const devices[] = {"TESSERA_DEVICE_HOST",
                                        "TESSERA_DEVICE_CUDA"};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "{\n    /*model_name=*/" << cStringLiteral(info.modelName)
     << ",\n    /*weights_file=*/"
     << (info.weightsFile.empty() ? std::string("NULL")
                                  : cStringLiteral(info.weightsFile))
     << ",\n    /*loss_kind=*/" << lossKinds[info.lossKind]
     << ",\n    /*precision=*/" << precisions[info.precision]
     << ",\n    /*batch=*/" << info.batch << ",\n    /*sequence=*/"
     << info.sequence << ",\n    /*vocabulary=*/" << info.vocabulary
     << ",\n    /*ignore_index=*/" << info.ignoreIndex
     << ",\n    /*parameter_count=*/" << info.parameters.size()
     << ",\n    /*parameters=*/" << parameters
     << ",\n    /*buffer_count=*/" << info.buffers.size()
     << ",\n    /*buffers=*/" << buffers << ",\n    /*forward_backward=*/"
     << forwardBackwardName << ",\n    /*device=*/" << devices[info.device]
     << ",\n    /*mesh_axis_count=*/" << info.meshShape.size()
     << ",\n    /*mesh_shape=*/" << meshShape
     << ",\n    /*mesh_axis_names=*/" << meshAxisNames
     // The driver's ZeRO over data-parallel ranks: a pipeline's stage
     // mesh's dp group; a partitioned program's own sharding is in its
     // splits.
     << ",\n    /*zero_stage=*/" << info.zeroStage
     << ",\n    /*flops_per_micro_batch=*/"
     << llvm::format("%.17g", info.flopsPerMicroBatch)
     << ",\n    /*parameter_splits=*/" << parameterSplits
     << ",\n    /*buffer_splits=*/" << bufferSplits
     << ",\n    /*pipeline=*/" << pipeline
     << ",\n    /*parameter_step_dtypes=*/" << stepDtypes
     << ",\n    /*plan=*/"
     << (info.plan.empty() ? std::string("NULL") : cStringLiteral(info.plan))
     << ",\n    /*offload_optimizer=*/" << (info.offloadOptimizer ? 1 : 0)
     << ",\n    /*gradient_write_positions=*/" << writePositions
     << ",\n    /*parameter_read_intervals=*/" << readIntervals
     << ",\n    /*gradient_partial_axes=*/" << partialAxes
     << ",\n    /*gradient_zero_stages=*/" << zeroStages
     << ",\n    /*gradient_whole=*/" << whole << "}";

  auto programType = emitc::OpaqueType::get(context, "tessera_program");
  emitc::GlobalOp::create(builder, loc, "tessera_program_definition",
                          programType, emitc::OpaqueAttr::get(context, text),
                          /*extern_specifier=*/false,
                          /*static_specifier=*/true,
                          /*const_specifier=*/false);

  // int main(int argc, char **argv) {
  //   return tessera_train_main(argc, argv, &tessera_program_definition);
  // }
  Type i32 = builder.getI32Type();
  Type argv = emitc::PointerType::get(
      emitc::PointerType::get(emitc::OpaqueType::get(context, "char")));
  auto main = emitc::FuncOp::create(builder, loc, "main",
                                    builder.getFunctionType({i32, argv}, {i32}));
  Block *body = main.addEntryBlock();
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(body);
  Value program = emitc::GetGlobalOp::create(
      builder, loc, emitc::LValueType::get(programType),
      "tessera_program_definition");
  Value address = emitc::AddressOfOp::create(
      builder, loc, emitc::PointerType::get(programType), program);
  Value status =
      emitc::CallOpaqueOp::create(
          builder, loc, TypeRange{i32},
          info.device == TESSERA_DEVICE_CUDA ? "tessera_cuda_train_main"
                                             : "tessera_train_main",
          ValueRange{body->getArgument(0), body->getArgument(1), address})
          .getResult(0);
  emitc::ReturnOp::create(builder, loc, status);
}

} // namespace tessera::lowering
