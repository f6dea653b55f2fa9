//===- Npy.cpp - NumPy .npy files for tensors ----------------------------===//
//
// Format: magic "\x93NUMPY", version (1, 0), a 2-byte header length, then a
// Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces to a multiple of 64 bytes, then the raw data.
//
//===----------------------------------------------------------------------===//

#include "tessera/Execution/Npy.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

using namespace tessera::execution;

namespace {

struct NpyType {
  const char *descr;
  tessera_dtype dtype;
};

constexpr NpyType kTypes[] = {
    {"<f4", TESSERA_F32}, {"<f8", TESSERA_F64}, {"<f2", TESSERA_F16},
    {"<i8", TESSERA_I64}, {"<i4", TESSERA_I32}, {"<i2", TESSERA_I16},
    {"|i1", TESSERA_I8},  {"|b1", TESSERA_BOOL}};

llvm::Error npyError(llvm::StringRef path, const llvm::Twine &message) {
  return llvm::createStringError(path + ": " + message);
}

/// The text after `key': ` in the header dict.
llvm::StringRef valueOf(llvm::StringRef header, llvm::StringRef key) {
  size_t at = header.find(("'" + key + "'").str());
  if (at == llvm::StringRef::npos)
    return {};
  llvm::StringRef rest = header.drop_front(at + key.size() + 2).ltrim();
  return rest.consume_front(":") ? rest.ltrim() : llvm::StringRef();
}

} // namespace

llvm::Expected<HostTensorBuffer>
tessera::execution::readNpy(llvm::StringRef path) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return npyError(path, "cannot read: " + file.getError().message());
  llvm::StringRef bytes = (*file)->getBuffer();
  if (bytes.size() < 10 || !bytes.starts_with("\x93NUMPY"))
    return npyError(path, "not a .npy file");
  unsigned major = static_cast<uint8_t>(bytes[6]);
  size_t headerLength, offset;
  if (major == 1) {
    headerLength = static_cast<uint8_t>(bytes[8]) |
                   (static_cast<uint8_t>(bytes[9]) << 8);
    offset = 10;
  } else if (bytes.size() >= 12) {
    headerLength = 0;
    for (int i = 0; i < 4; ++i)
      headerLength |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + i]))
                      << (8 * i);
    offset = 12;
  } else {
    return npyError(path, "truncated header");
  }
  if (bytes.size() < offset + headerLength)
    return npyError(path, "truncated header");
  llvm::StringRef header = bytes.substr(offset, headerLength);

  llvm::StringRef descr = valueOf(header, "descr");
  const NpyType *type = nullptr;
  for (const NpyType &candidate : kTypes)
    if (descr.starts_with(("'" + llvm::Twine(candidate.descr) + "'").str()))
      type = &candidate;
  if (!type)
    return npyError(path, "unsupported dtype " +
                              descr.take_until([](char c) { return c == ','; }));
  if (valueOf(header, "fortran_order").starts_with("True"))
    return npyError(path, "Fortran-ordered arrays are not supported");
  llvm::StringRef shapeText = valueOf(header, "shape");
  if (!shapeText.consume_front("("))
    return npyError(path, "malformed shape");
  shapeText = shapeText.take_until([](char c) { return c == ')'; });
  std::vector<int64_t> shape;
  while (!(shapeText = shapeText.ltrim()).empty()) {
    llvm::StringRef dimText = shapeText.take_until([](char c) { return c == ','; });
    shapeText = shapeText.drop_front(dimText.size()).drop_front(1);
    int64_t dim;
    if (dimText.trim().getAsInteger(10, dim) || dim < 0)
      return npyError(path, "malformed shape");
    shape.push_back(dim);
  }
  HostTensorBuffer buffer = HostTensorBuffer::zeros(type->dtype, shape);
  size_t dataBytes = buffer.numElements() * dtypeSize(type->dtype);
  if (bytes.size() - offset - headerLength < dataBytes)
    return npyError(path, "holds fewer bytes than its shape needs");
  std::memcpy(buffer.data(), bytes.data() + offset + headerLength, dataBytes);
  return buffer;
}

llvm::Error tessera::execution::writeNpy(llvm::StringRef path,
                                         const HostTensorBuffer &buffer) {
  tessera_dtype dtype =
      buffer.dtype() == TESSERA_BF16 ? TESSERA_F32 : buffer.dtype();
  const char *descr = nullptr;
  for (const NpyType &candidate : kTypes)
    if (candidate.dtype == dtype)
      descr = candidate.descr;
  std::string header = "{'descr': '" + std::string(descr) +
                       "', 'fortran_order': False, 'shape': (";
  for (int64_t dim : buffer.shape())
    header += std::to_string(dim) + ", ";
  header += "), }";
  while ((10 + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::error_code error;
  llvm::raw_fd_ostream os(path, error);
  if (error)
    return npyError(path, "cannot write: " + error.message());
  os << "\x93NUMPY" << '\x01' << '\x00';
  os << static_cast<char>(header.size() & 0xff)
     << static_cast<char>(header.size() >> 8) << header;
  if (buffer.dtype() == TESSERA_BF16) {
    for (float value : buffer.toFloats())
      os.write(reinterpret_cast<const char *>(&value), sizeof(value));
  } else {
    os.write(static_cast<const char *>(buffer.data()),
             buffer.numElements() * dtypeSize(dtype));
  }
  return llvm::Error::success();
}
