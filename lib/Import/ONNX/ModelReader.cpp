//===- ModelReader.cpp - read and check an ONNX file, then import it -----===//
//
// The file is parsed with libonnx's protobuf classes only: libonnx 1.12's
// checker and shape inference predate IR 10 / opset 20 and reject what
// PyTorch writes today, and Tessera computes every shape itself anyway.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "Tess/IR/TessOps.h"
#include "llvm/Support/MemoryBuffer.h"

#include <google/protobuf/io/coded_stream.h>

using namespace tessera::onnx_import;

namespace {

llvm::Expected<onnx::ModelProto> readModel(llvm::StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!buffer)
    return llvm::createStringError(path + ": cannot read: " +
                                   buffer.getError().message());
  if ((*buffer)->getBufferSize() == 0)
    return llvm::createStringError(path + ": the file is empty");
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream stream(
      reinterpret_cast<const uint8_t *>((*buffer)->getBufferStart()),
      static_cast<int>((*buffer)->getBufferSize()));
  // Graph-only exports of large models are tens of MB of protobuf.
  stream.SetTotalBytesLimit(std::numeric_limits<int>::max());
  if (!model.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage())
    return llvm::createStringError(
        path + ": not a valid ONNX model (the protobuf does not parse: the "
               "file is truncated or is not ONNX)");
  // Random bytes can parse as a protobuf with only unknown fields; a real
  // model has an IR version, an opset and a graph with outputs.
  if (model.ir_version() <= 0 || !model.has_graph() ||
      model.graph().output_size() == 0 || model.opset_import_size() == 0)
    return llvm::createStringError(
        path + ": not a valid ONNX model (no IR version, opset or graph "
               "outputs)");
  return model;
}

} // namespace

llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
tessera::onnx_import::importOnnxModel(llvm::StringRef path,
                                      const ImportOptions &options,
                                      mlir::MLIRContext &context) {
  context.loadDialect<tess::TessDialect, mlir::func::FuncDialect>();
  llvm::Expected<onnx::ModelProto> model = readModel(path);
  if (!model)
    return model.takeError();
  GraphImporter importer(*model, path, options, context);
  return importer.run();
}
