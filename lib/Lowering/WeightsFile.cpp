//===- WeightsFile.cpp - the executable's initial weights ----------------===//
//
// safetensors: an 8-byte little-endian header size, a JSON header naming
// each tensor's dtype, shape and [begin, end) byte range, then the bytes.
// The header is padded with spaces to a multiple of 8 so every tensor's
// data starts 8-byte aligned in the file.
//
//===----------------------------------------------------------------------===//

#include "tessera/Lowering/WeightsFile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace tessera::lowering {

namespace {

const char *safetensorsDtype(tessera_dtype dtype) {
  switch (dtype) {
  case TESSERA_F32:
    return "F32";
  case TESSERA_BF16:
    return "BF16";
  case TESSERA_F16:
    return "F16";
  case TESSERA_F64:
    return "F64";
  case TESSERA_I64:
    return "I64";
  case TESSERA_I32:
    return "I32";
  case TESSERA_I8:
    return "I8";
  case TESSERA_I16:
    return "I16";
  case TESSERA_BOOL:
    return "BOOL";
  }
  return "F32";
}

} // namespace

llvm::Error writeSafetensors(llvm::StringRef path,
                             llvm::ArrayRef<NamedTensor> tensors) {
  llvm::json::Object header;
  int64_t offset = 0;
  for (const NamedTensor &entry : tensors) {
    int64_t bytes = entry.tensor->numElements() *
                    execution::dtypeSize(entry.tensor->dtype());
    llvm::json::Array shape;
    for (int64_t dim : entry.tensor->shape())
      shape.push_back(dim);
    header[entry.name] = llvm::json::Object{
        {"dtype", safetensorsDtype(entry.tensor->dtype())},
        {"shape", std::move(shape)},
        {"data_offsets", llvm::json::Array{offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(header));
  text.append((8 - text.size() % 8) % 8, ' ');

  std::error_code code;
  llvm::raw_fd_ostream os(path, code, llvm::sys::fs::OF_None);
  if (code)
    return llvm::createStringError("cannot write '" + path.str() +
                                   "': " + code.message());
  uint64_t size = text.size();
  for (int i = 0; i < 8; ++i)
    os << static_cast<char>((size >> (8 * i)) & 0xff);
  os << text;
  for (const NamedTensor &entry : tensors)
    os.write(static_cast<const char *>(entry.tensor->data()),
             entry.tensor->numElements() *
                 execution::dtypeSize(entry.tensor->dtype()));
  os.close();
  if (os.has_error())
    return llvm::createStringError("cannot write '" + path.str() +
                                   "': " + os.error().message());
  return llvm::Error::success();
}

} // namespace tessera::lowering
