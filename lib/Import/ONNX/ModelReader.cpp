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

#include <limits>

using namespace tessera::onnx_import;

namespace {

/// Parses the bytes of an .onnx file; `path` names it in messages.
llvm::Expected<onnx::ModelProto> parseModel(llvm::StringRef bytes,
                                            llvm::StringRef path) {
  if (bytes.empty())
    return llvm::createStringError(path + ": the file is empty");
  // CodedInputStream counts bytes in an int; protobuf cannot parse more.
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    return llvm::createStringError(
        path + ": the file is larger than 2 GiB, which protobuf cannot parse "
               "(store the weights as external data)");
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream stream(
      reinterpret_cast<const uint8_t *>(bytes.data()),
      static_cast<int>(bytes.size()));
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

llvm::Expected<onnx::ModelProto> readModel(llvm::StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!buffer)
    return llvm::createStringError(path + ": cannot read: " +
                                   buffer.getError().message());
  return parseModel((*buffer)->getBuffer(), path);
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

llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
tessera::onnx_import::importOnnxModelFromBuffer(
    llvm::StringRef bytes, llvm::StringRef nameForMessages,
    const ImportOptions &options, mlir::MLIRContext &context) {
  context.loadDialect<tess::TessDialect, mlir::func::FuncDialect>();
  llvm::Expected<onnx::ModelProto> model = parseModel(bytes, nameForMessages);
  if (!model)
    return model.takeError();
  GraphImporter importer(*model, nameForMessages, options, context);
  return importer.run();
}
