//===- Safetensors.cpp - The safetensors format, read and written ---------===//
//
// Design: safetensors (Hugging Face) is the simplest format PyTorch loads
// without pickle: an 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {"key": "value", ...},
//    "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
//    ...}
// (padded with spaces to a multiple of 8 so the data stays aligned), then the
// raw little-endian tensor bytes, offsets relative to the end of the header.
// Metadata values must be strings, so numbers in checkpoints (step, seed,
// data position) are stored as decimal text.
//
// The writer lays tensors out back to back in the order given, which is what
// safetensors' own validation demands (no gaps, no overlaps), and the reader
// demands the same of every file, so overlapping or stray bytes are an
// error naming the tensors rather than a silently wrong weight. It writes via
// a mkstemp file next to the target, fsyncs it, renames it over the target
// and fsyncs the directory: a killed run or a full disk leaves the previous
// checkpoint intact. The reader checks everything a damaged or foreign file
// can get wrong and names the file and tensor in the error.
//
// The host is assumed little-endian (x86-64, AArch64), like the kernels.
//
//===----------------------------------------------------------------------===//

#include "Safetensors.h"

#include "Json.h"
#include "OutputPaths.h"
#include "RegularFile.h"
#include "TrainError.h"
#include "tessera/runtime/cpu_kernels.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace tessera::train {
namespace {

/// A header larger than this is certainly not a weights file; refusing it
/// avoids a giant allocation on garbage input.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;
/// The file is read whole into host memory: 1 TiB is beyond any host this
/// runs on, and a larger length is a corrupt or hostile one.
constexpr int64_t kMaxFileBytes = int64_t(1) << 40;

struct DtypeName {
  int32_t dtype;
  const char *name;
  int64_t size;
};

constexpr DtypeName kDtypeNames[] = {
    {TESSERA_F32, "F32", 4},   {TESSERA_BF16, "BF16", 2},
    {TESSERA_F16, "F16", 2},   {TESSERA_F64, "F64", 8},
    {TESSERA_I64, "I64", 8},   {TESSERA_I32, "I32", 4},
    {TESSERA_I16, "I16", 2},   {TESSERA_I8, "I8", 1},
    {TESSERA_BOOL, "BOOL", 1},
};

const DtypeName *findDtype(int32_t dtype) {
  for (const DtypeName &entry : kDtypeNames)
    if (entry.dtype == dtype)
      return &entry;
  return nullptr;
}

const DtypeName *findDtype(const std::string &name) {
  for (const DtypeName &entry : kDtypeNames)
    if (name == entry.name)
      return &entry;
  return nullptr;
}

/// A non-negative integer from a JSON number, or -1 when it is not one.
int64_t asCount(const JsonValue &value) {
  if (value.kind != JsonValue::Kind::Number ||
      value.numberText.find_first_of(".eE-") != std::string::npos)
    return -1;
  errno = 0;
  unsigned long long parsed =
      std::strtoull(value.numberText.c_str(), nullptr, 10);
  if (errno == ERANGE || parsed > static_cast<unsigned long long>(INT64_MAX))
    return -1;
  return static_cast<int64_t>(parsed);
}

LoadedTensor parseEntry(const std::string &path, const std::string &name,
                        const JsonValue &entry, uint64_t dataBytes,
                        const char *data) {
  std::string where = path + ": tensor '" + name + "'";
  if (entry.kind != JsonValue::Kind::Object)
    fail(where + ": its header entry is not an object");
  const JsonValue *dtype = entry.find("dtype");
  const JsonValue *shape = entry.find("shape");
  const JsonValue *offsets = entry.find("data_offsets");
  if (!dtype || dtype->kind != JsonValue::Kind::String)
    fail(where + ": missing string 'dtype'");
  const DtypeName *known = findDtype(dtype->string);
  if (!known)
    fail(where + ": unsupported dtype '" + dtype->string +
         "' (F32, BF16, F16, F64, I64, I32, I16, I8, BOOL are read)");
  if (!shape || shape->kind != JsonValue::Kind::Array)
    fail(where + ": missing array 'shape'");
  if (shape->array.size() > TESSERA_MAX_RANK)
    fail(where + ": rank " + std::to_string(shape->array.size()) + " exceeds " +
         std::to_string(TESSERA_MAX_RANK));
  if (!offsets || offsets->kind != JsonValue::Kind::Array ||
      offsets->array.size() != 2)
    fail(where + ": missing 'data_offsets' [begin, end]");

  LoadedTensor tensor;
  tensor.name = name;
  tensor.dtype = known->dtype;
  // Stop as soon as the element count exceeds what the file could hold, so
  // that a hostile shape cannot overflow 64 bits.
  uint64_t elements = 1;
  for (const JsonValue &dimension : shape->array) {
    int64_t size = asCount(dimension);
    if (size < 0)
      fail(where + ": shape entries must be non-negative integers");
    tensor.shape.push_back(size);
    if (size != 0 && elements > dataBytes / static_cast<uint64_t>(size) + 1)
      fail(where + ": shape describes more data than the file holds");
    elements *= static_cast<uint64_t>(size);
  }
  // The loop leaves up to dataBytes + (the last dimension) elements, so the
  // byte count could still wrap: 2^61 + 1 F64 elements would "need" 8 bytes
  // and pass for a tensor whose data is 8 bytes long.
  if (elements > UINT64_MAX / static_cast<uint64_t>(known->size))
    fail(where + ": shape describes more data than the file holds");
  int64_t begin = asCount(offsets->array[0]);
  int64_t end = asCount(offsets->array[1]);
  if (begin < 0 || end < begin || static_cast<uint64_t>(end) > dataBytes)
    fail(where + ": data_offsets [" + offsets->array[0].numberText + ", " +
         offsets->array[1].numberText + "] lie outside the " +
         std::to_string(dataBytes) + " data bytes of the file");
  uint64_t expected = elements * static_cast<uint64_t>(known->size);
  if (static_cast<uint64_t>(end - begin) != expected)
    fail(where + ": data_offsets span " + std::to_string(end - begin) +
         " bytes but " + dtype->string + " of this shape needs " +
         std::to_string(expected));
  tensor.bytes.assign(data + begin, data + end);
  return tensor;
}

std::string buildHeader(const std::vector<TensorView> &tensors,
                        const std::map<std::string, std::string> &metadata,
                        std::vector<uint64_t> &sizes) {
  std::string header = "{";
  bool first = true;
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto &[key, value] : metadata) {
      if (!first)
        header += ",";
      first = false;
      header += quoteJson(key) + ":" + quoteJson(value);
    }
    header += "}";
    first = false;
  }
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const TensorView &tensor : tensors) {
    if (tensor.name == "__metadata__" || !seen.insert(tensor.name).second)
      fail("cannot write tensor '" + tensor.name +
           "': the name is reserved or used twice");
    const DtypeName *known = findDtype(tensor.dtype);
    if (!known)
      fail("cannot write tensor '" + tensor.name + "': unsupported dtype " +
           std::to_string(tensor.dtype));
    uint64_t elements = 1;
    std::string shape = "[";
    for (size_t i = 0; i < tensor.shape.size(); ++i) {
      elements *= static_cast<uint64_t>(tensor.shape[i]);
      shape += (i ? "," : "") + std::to_string(tensor.shape[i]);
    }
    shape += "]";
    uint64_t size = elements * static_cast<uint64_t>(known->size);
    sizes.push_back(size);
    if (!first)
      header += ",";
    first = false;
    header += quoteJson(tensor.name) + ":{\"dtype\":\"" + known->name +
              "\",\"shape\":" + shape + ",\"data_offsets\":[" +
              std::to_string(offset) + "," + std::to_string(offset + size) +
              "]}";
    offset += size;
  }
  header += "}";
  // Pad so that the data starts 8-byte aligned, as safetensors' writer does.
  header.append((8 - (8 + header.size()) % 8) % 8, ' ');
  return header;
}

/// Writes all of `bytes` or returns false with errno set.
bool writeAll(int descriptor, const void *bytes, uint64_t size) {
  auto *cursor = static_cast<const char *>(bytes);
  while (size > 0) {
    size_t chunk = size > (1u << 30) ? (1u << 30) : static_cast<size_t>(size);
    ssize_t written = ::write(descriptor, cursor, chunk);
    if (written < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    cursor += written;
    size -= static_cast<uint64_t>(written);
  }
  return true;
}


} // namespace

const LoadedTensor *SafetensorsFile::find(const std::string &name) const {
  for (const LoadedTensor &tensor : tensors)
    if (tensor.name == name)
      return &tensor;
  return nullptr;
}

int64_t safetensorsElementSize(int32_t dtype) {
  const DtypeName *known = findDtype(dtype);
  if (!known)
    fail("dtype " + std::to_string(dtype) + " has no safetensors name");
  return known->size;
}

const char *safetensorsDtypeName(int32_t dtype) {
  const DtypeName *known = findDtype(dtype);
  return known ? known->name : "?";
}

SafetensorsFile readSafetensors(const std::string &path) {
  std::string contents =
      readRegularFile(path, kMaxFileBytes, "a safetensors file");
  if (contents.size() < 8)
    fail(path + ": not a safetensors file (" + std::to_string(contents.size()) +
         " bytes, shorter than the 8-byte header length)");
  uint64_t headerBytes = 0;
  std::memcpy(&headerBytes, contents.data(), 8);
  if (headerBytes > kMaxHeaderBytes || headerBytes > contents.size() - 8)
    fail(path + ": not a safetensors file (header length " +
         std::to_string(headerBytes) + " does not fit the " +
         std::to_string(contents.size()) + "-byte file)");
  std::string headerText = contents.substr(8, headerBytes);
  if (headerText.empty() || headerText[0] != '{')
    fail(path + ": not a safetensors file (the header is not a JSON object)");
  JsonValue header = parseJson(headerText, path);
  if (header.kind != JsonValue::Kind::Object)
    fail(path + ": the header is not a JSON object");

  uint64_t dataBytes = contents.size() - 8 - headerBytes;
  const char *data = contents.data() + 8 + headerBytes;
  SafetensorsFile file;
  std::vector<std::pair<int64_t, LoadedTensor>> ordered;
  std::set<std::string> seen;
  for (const auto &[name, entry] : header.object) {
    if (!seen.insert(name).second)
      fail(path + ": tensor '" + name + "' appears twice in the header");
    if (name == "__metadata__") {
      if (entry.kind != JsonValue::Kind::Object)
        fail(path + ": __metadata__ is not an object");
      for (const auto &[key, value] : entry.object) {
        if (value.kind != JsonValue::Kind::String)
          fail(path + ": __metadata__ value of '" + key + "' is not a string");
        file.metadata[key] = value.string;
      }
      continue;
    }
    LoadedTensor tensor = parseEntry(path, name, entry, dataBytes, data);
    int64_t begin = asCount(entry.find("data_offsets")->array[0]);
    ordered.emplace_back(begin, std::move(tensor));
  }
  std::stable_sort(
      ordered.begin(), ordered.end(),
      [](const auto &a, const auto &b) { return a.first < b.first; });
  // As safetensors' own loader insists: the tensors tile the data exactly,
  // in offset order, with no gap and no byte shared (overlapping offsets
  // would load one tensor's bytes as another's).
  uint64_t covered = 0;
  std::string previous;
  for (auto &[begin, tensor] : ordered) {
    const auto start = static_cast<uint64_t>(begin);
    const std::string offsets =
        "data_offsets [" + std::to_string(start) + ", " +
        std::to_string(start + tensor.bytes.size()) + "]";
    if (start < covered)
      fail(path + ": tensor '" + tensor.name + "' (" + offsets +
           ") overlaps tensor '" + previous + "', which ends at byte " +
           std::to_string(covered));
    if (start > covered)
      fail(path + ": bytes " + std::to_string(covered) + " to " +
           std::to_string(start) + " before tensor '" + tensor.name + "' (" +
           offsets + ") belong to no tensor (the data must be contiguous)");
    covered = start + tensor.bytes.size();
    previous = tensor.name;
    file.tensors.push_back(std::move(tensor));
  }
  if (covered != dataBytes)
    fail(path + ": the last " + std::to_string(dataBytes - covered) +
         " data bytes belong to no tensor (the file is longer than its "
         "header says)");
  return file;
}

void writeSafetensors(const std::string &path,
                      const std::vector<TensorView> &tensors,
                      const std::map<std::string, std::string> &metadata) {
  std::vector<uint64_t> sizes;
  std::string header = buildHeader(tensors, metadata, sizes);

  std::string temporary;
  int descriptor = createUniqueFile(path + ".tmp.", temporary);
  if (descriptor < 0)
    fail("cannot write " + describeSystemError(path));

  auto abandon = [&](const std::string &message) {
    int savedErrno = errno;
    ::close(descriptor);
    ::unlink(temporary.c_str());
    errno = savedErrno;
    fail("cannot write " + path + ": " + message + ": " +
         std::strerror(savedErrno));
  };

  uint64_t headerBytes = header.size();
  if (!writeAll(descriptor, &headerBytes, 8) ||
      !writeAll(descriptor, header.data(), header.size()))
    abandon("writing the header failed");
  for (size_t i = 0; i < tensors.size(); ++i)
    if (sizes[i] > 0 && !writeAll(descriptor, tensors[i].data, sizes[i]))
      abandon("writing tensor '" + tensors[i].name + "' failed");
  // mkstemp creates the file 0600; a weights file is ordinary data.
  if (::fchmod(descriptor, 0644) != 0)
    abandon("setting permissions failed");
  if (::fsync(descriptor) != 0)
    abandon("flushing to disk failed");
  if (::close(descriptor) != 0) {
    int savedErrno = errno;
    ::unlink(temporary.c_str());
    fail("cannot write " + path +
         ": closing failed: " + std::strerror(savedErrno));
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    int savedErrno = errno;
    ::unlink(temporary.c_str());
    fail("cannot write " + path +
         ": renaming the temporary file failed: " + std::strerror(savedErrno));
  }
  // Make the rename itself durable. Some file systems cannot fsync a
  // directory; the data is safe in the file either way, so this is best
  // effort.
  int directory = ::open(parentDirectory(path).c_str(), O_RDONLY | O_DIRECTORY);
  if (directory >= 0) {
    (void)::fsync(directory);
    ::close(directory);
  }
}

} // namespace tessera::train
