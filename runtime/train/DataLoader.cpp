//===- DataLoader.cpp - llm.c token shards and .npy sample arrays ---------===//
//
// Design notes.
//
// Two file kinds, chosen by extension (".npy" or anything else = shard):
//
// * llm.c token shards: a 256 x int32 header (magic 20240520, version 1,
//   header[2] = token count) followed by that many uint16 tokens. As in
//   llm.c's loader, the token stream of a shard is cut into micro-batch
//   chunks: chunk c starts at token c * B * T and holds B * T + 1 tokens;
//   inputs = chunk[:-1] viewed as [B, T], targets = chunk[1:]. Neighbouring
//   chunks share one token (the last target of one is the first input of the
//   next) and the tail of a shard too short for a chunk is not used; chunks
//   never straddle two shards. (The "B x (T+1)" is read as llm.c's
//   B * T + 1, the only size that gives [B, T] inputs and shifted targets.)
//   Shards are causal-LM data only.
// * .npy arrays (numpy format 1.0-3.0, little-endian int32 or int64, C order):
//   causal LM: shape [N, T + 1], one sample a row, inputs = row[:T], targets
//   = row[1:]. MLM: shape [N, 2, T], row n holds the input ids [n, 0, :] and
//   the labels [n, 1, :], where a label equal to the program's ignore index
//   (-100) is not scored. A micro-batch takes B samples.
//
// A "sample" is the unit of shuffling: a chunk of a shard or a row of a .npy
// file, numbered across all files in sorted file order. The loader keeps one
// counter, `position` = samples consumed; sample number p is taken from epoch
// e = p / S (S samples in all) at index p % S of that epoch's order. The order
// is a Fisher-Yates permutation seeded from (seed, e), or the identity with
// --no-shuffle. So the order is a pure function of (files, seed, position):
// a checkpoint stores the position, and the resumed run reads exactly the
// batches the uninterrupted run would have. Epochs wrap around seamlessly (a
// .npy micro-batch may take its last rows from the next epoch), and with .npy
// data the order does not depend on B, so K micro-batches of B rows read the
// same rows as one of K*B.
//
// Data parallelism (R ranks, each with the program's B rows): every rank
// keeps the same global position; a global micro-batch is R consecutive
// micro-batches and rank r reads the r-th (nextBatch's rank/ranks). So R
// ranks with K micro-batches a step read exactly the samples of one rank
// with R*K micro-batches (--grad-accum R*K), and, with .npy data, the rows
// of one rank with batch R*B; checkpoints store the global position, which
// resumes the same order for any rank count that divides it the same way.
//
// Files are validated when opened (magic, version, sizes, row length), but
// token ids are checked when read: scanning gigabytes of shards up front
// would delay every start. A bad id stops the run with the file, position,
// id and vocabulary size.
//
//===----------------------------------------------------------------------===//

#include "DataLoader.h"

#include "Random.h"
#include "TrainError.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tessera::train {

namespace {

constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;
constexpr int64_t kShardHeaderInts = 256;
constexpr int64_t kShardHeaderBytes = kShardHeaderInts * 4;
/// Purpose tag for deriveSeed: the data order of an epoch.
constexpr uint64_t kDataOrderPurpose = 0xda7a;

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::string> expandPattern(const std::string &pattern) {
  glob_t matches;
  std::memset(&matches, 0, sizeof(matches));
  int status = ::glob(pattern.c_str(), 0, nullptr, &matches);
  std::vector<std::string> paths;
  if (status == 0)
    for (size_t i = 0; i < matches.gl_pathc; ++i)
      paths.emplace_back(matches.gl_pathv[i]);
  ::globfree(&matches);
  if (status == GLOB_NOMATCH || paths.empty()) {
    if (pattern.find_first_of("*?[") == std::string::npos)
      fail("--data: " + pattern + ": no such file");
    fail("--data: no file matches '" + pattern + "'");
  }
  if (status != 0)
    fail("--data: cannot expand '" + pattern + "'");
  // glob sorts by the locale's collation; sort bytewise so the order (and so
  // the data order of a seed) does not depend on LC_COLLATE.
  std::sort(paths.begin(), paths.end());
  return paths;
}

/// Reads exactly `size` bytes at `offset`; false on a short read or error.
bool readAt(int descriptor, int64_t offset, void *buffer, int64_t size) {
  auto *cursor = static_cast<char *>(buffer);
  while (size > 0) {
    ssize_t count = ::pread(descriptor, cursor, static_cast<size_t>(size),
                            static_cast<off_t>(offset));
    if (count < 0 && errno == EINTR)
      continue;
    if (count <= 0)
      return false;
    cursor += count;
    offset += count;
    size -= count;
  }
  return true;
}

/// The value of 'key' in a numpy header dict, as raw text up to the next
/// top-level ',' or '}' (tuples kept whole).
std::string npyHeaderField(const std::string &path, const std::string &header,
                           const std::string &key) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos)
    fail(path + ": .npy header has no '" + key + "' entry");
  at = header.find(':', at);
  if (at == std::string::npos)
    fail(path + ": malformed .npy header near '" + key + "'");
  ++at;
  int depth = 0;
  size_t end = at;
  for (; end < header.size(); ++end) {
    char c = header[end];
    if (c == '(')
      ++depth;
    else if (c == ')')
      --depth;
    else if ((c == ',' || c == '}') && depth == 0)
      break;
  }
  std::string value = header.substr(at, end - at);
  size_t first = value.find_first_not_of(" \t");
  size_t last = value.find_last_not_of(" \t");
  return first == std::string::npos ? ""
                                    : value.substr(first, last - first + 1);
}

std::vector<int64_t> parseNpyShape(const std::string &path,
                                   const std::string &text) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')')
    fail(path + ": malformed .npy shape '" + text + "'");
  std::vector<int64_t> shape;
  std::string inner = text.substr(1, text.size() - 2);
  size_t start = 0;
  while (start < inner.size()) {
    size_t comma = inner.find(',', start);
    std::string item = inner.substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) {
      char *end = nullptr;
      long long value = std::strtoll(item.c_str(), &end, 10);
      if (*end != '\0' || value < 0)
        fail(path + ": malformed .npy shape '" + text + "'");
      shape.push_back(value);
    }
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return shape;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

/// Where a file's samples are and how many it holds.
struct FileGeometry {
  int64_t dataOffset = 0;   // bytes before the first token
  int64_t elementBytes = 2; // 2 (uint16 shard), 4 or 8 (.npy)
  int64_t samples = 0;
};

FileGeometry inspectShard(const std::string &path, int descriptor, int64_t size,
                          const DataLayout &layout) {
  if (layout.maskedLanguageModel)
    fail(path + ": MLM programs read .npy files of shape [N, 2, " +
         std::to_string(layout.sequence) + "] (ids, labels), not token shards");
  int32_t header[kShardHeaderInts];
  if (size < kShardHeaderBytes ||
      !readAt(descriptor, 0, header, kShardHeaderBytes))
    fail(path + ": truncated token shard: " + std::to_string(size) +
         " bytes, shorter than the 1024-byte header");
  if (header[0] != kShardMagic)
    fail(path + ": bad magic " + std::to_string(header[0]) +
         " (an llm.c token shard starts with " + std::to_string(kShardMagic) +
         ")");
  if (header[1] != kShardVersion)
    fail(path + ": unsupported token shard version " +
         std::to_string(header[1]) +
         " (only version 1, uint16 tokens, is read)");
  int64_t tokens = header[2];
  int64_t expected = kShardHeaderBytes + 2 * tokens;
  if (tokens < 0 || size < expected)
    fail(path + ": truncated token shard: the header announces " +
         std::to_string(tokens) + " tokens (" + std::to_string(expected) +
         " bytes) but the file has " + std::to_string(size) + " bytes");
  if (size > expected)
    fail(path + ": malformed token shard: " + std::to_string(size - expected) +
         " bytes after the announced " + std::to_string(tokens) + " tokens");
  FileGeometry geometry;
  geometry.dataOffset = kShardHeaderBytes;
  geometry.elementBytes = 2;
  int64_t batchTokens = layout.batch * layout.sequence;
  geometry.samples = tokens > batchTokens ? (tokens - 1) / batchTokens : 0;
  return geometry;
}

FileGeometry inspectNpy(const std::string &path, int descriptor, int64_t size,
                        const DataLayout &layout) {
  unsigned char prefix[12];
  if (size < 10 || !readAt(descriptor, 0, prefix, 10) ||
      std::memcmp(prefix, "\x93NUMPY", 6) != 0)
    fail(path + ": not a .npy file (bad magic)");
  int major = prefix[6];
  int64_t headerLength;
  int64_t headerStart;
  if (major == 1) {
    headerLength = prefix[8] | (prefix[9] << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12 || !readAt(descriptor, 0, prefix, 12))
      fail(path + ": truncated .npy header");
    headerLength = static_cast<int64_t>(prefix[8]) | (prefix[9] << 8) |
                   (prefix[10] << 16) |
                   (static_cast<int64_t>(prefix[11]) << 24);
    headerStart = 12;
  } else {
    fail(path + ": unsupported .npy format version " + std::to_string(major));
  }
  if (headerStart + headerLength > size)
    fail(path + ": truncated .npy header");
  std::string header(static_cast<size_t>(headerLength), '\0');
  if (!readAt(descriptor, headerStart, header.data(), headerLength))
    fail(path + ": truncated .npy header");

  FileGeometry geometry;
  std::string descr = npyHeaderField(path, header, "descr");
  if (descr == "'<i4'" || descr == "'|i4'")
    geometry.elementBytes = 4;
  else if (descr == "'<i8'" || descr == "'|i8'")
    geometry.elementBytes = 8;
  else
    fail(path + ": .npy dtype " + descr +
         " is not little-endian int32 or int64");
  if (npyHeaderField(path, header, "fortran_order") != "False")
    fail(path + ": Fortran-ordered .npy arrays are not supported; save with "
                "numpy.ascontiguousarray");

  std::vector<int64_t> shape =
      parseNpyShape(path, npyHeaderField(path, header, "shape"));
  std::vector<int64_t> wanted = layout.maskedLanguageModel
                                    ? std::vector<int64_t>{2, layout.sequence}
                                    : std::vector<int64_t>{layout.sequence + 1};
  std::vector<int64_t> rowShape;
  if (!shape.empty())
    rowShape.assign(shape.begin() + 1, shape.end());
  if (shape.empty() || rowShape != wanted)
    fail(path + ": array of shape " + shapeText(shape) +
         " has the wrong row length: this program reads [N, " +
         (layout.maskedLanguageModel
              ? "2, " + std::to_string(layout.sequence) +
                    "] (input ids and labels per row)"
              : std::to_string(layout.sequence + 1) + "] (sequence " +
                    std::to_string(layout.sequence) +
                    " plus the next-token target)"));
  int64_t rowElements =
      layout.maskedLanguageModel ? 2 * layout.sequence : layout.sequence + 1;
  geometry.dataOffset = headerStart + headerLength;
  geometry.samples = shape[0];
  int64_t rowBytes = rowElements * geometry.elementBytes;
  // Compare by division first: a corrupt row count could overflow the
  // product.
  if (shape[0] > size / rowBytes ||
      geometry.dataOffset + shape[0] * rowBytes > size)
    fail(path + ": truncated .npy file: shape " + shapeText(shape) +
         " needs more data than the file's " + std::to_string(size) + " bytes");
  return geometry;
}

} // namespace

struct DataLoader::DataFile : FileGeometry {
  bool isNpy = false;
  int64_t firstSample = 0; // global number of its first sample
};

DataLoader::DataLoader(const std::string &pattern, const DataLayout &layout,
                       uint64_t seed, bool shuffle)
    : layout(layout), seed(seed), shuffle(shuffle) {
  paths = expandPattern(pattern);
  const bool npy = endsWith(paths.front(), ".npy");
  for (const std::string &path : paths) {
    if (endsWith(path, ".npy") != npy)
      fail("--data: '" + pattern + "' mixes .npy files and token shards (" +
           paths.front() + ", " + path + "); use one kind");
    RegularFile opened(path);
    DataFile file;
    static_cast<FileGeometry &>(file) =
        npy ? inspectNpy(path, opened.descriptor(), opened.size(), layout)
            : inspectShard(path, opened.descriptor(), opened.size(), layout);
    file.isNpy = npy;
    file.firstSample = sampleCount;
    sampleCount += file.samples;
    files.push_back(file);
  }
  if (npy) {
    samplesPerBatch = layout.batch;
    if (sampleCount < layout.batch)
      fail("--data: '" + pattern + "' holds " + std::to_string(sampleCount) +
           " rows, fewer than one micro-batch of " +
           std::to_string(layout.batch));
  } else if (sampleCount == 0) {
    fail("--data: no shard of '" + pattern + "' holds a micro-batch of " +
         std::to_string(layout.batch * layout.sequence + 1) +
         " tokens (batch " + std::to_string(layout.batch) + " x sequence " +
         std::to_string(layout.sequence) + " + 1)");
  }
}

DataLoader::~DataLoader() = default;

int64_t DataLoader::sampleAt(int64_t globalPosition) {
  int64_t epoch = globalPosition / sampleCount;
  int64_t index = globalPosition % sampleCount;
  if (!shuffle)
    return index;
  if (epoch != orderEpoch) {
    order = randomPermutation(
        sampleCount,
        deriveSeed(seed, kDataOrderPurpose, static_cast<uint64_t>(epoch)));
    orderEpoch = epoch;
  }
  return order[static_cast<size_t>(index)];
}

void DataLoader::readBytes(size_t fileIndex, int64_t offset, void *buffer,
                           int64_t size) {
  const std::string &path = paths[fileIndex];
  if (openFileIndex != static_cast<int>(fileIndex)) {
    openFile.reset();
    openFileIndex = -1;
    openFile.emplace(path);
    openFileIndex = static_cast<int>(fileIndex);
  }
  if (!readAt(openFile->descriptor(), offset, buffer, size))
    fail(path + ": read failed at byte " + std::to_string(offset) +
         " (was the file changed during the run?)");
}

void DataLoader::readSample(int64_t sample, int64_t *tokens, int64_t *targets) {
  auto found = std::upper_bound(files.begin(), files.end(), sample,
                                [](int64_t value, const DataFile &file) {
                                  return value < file.firstSample;
                                });
  size_t fileIndex = static_cast<size_t>(found - files.begin()) - 1;
  // Files without samples share firstSample with their successor; step to
  // the one that actually holds this sample.
  while (files[fileIndex].samples == 0 ||
         sample >= files[fileIndex].firstSample + files[fileIndex].samples)
    ++fileIndex;
  const DataFile &file = files[fileIndex];
  const std::string &path = paths[fileIndex];
  int64_t local = sample - file.firstSample;
  const int64_t sequence = layout.sequence;
  const int64_t vocabulary = layout.vocabulary;

  if (!file.isNpy) {
    int64_t batchTokens = layout.batch * sequence;
    std::vector<uint16_t> chunk(static_cast<size_t>(batchTokens + 1));
    int64_t firstToken = local * batchTokens;
    readBytes(fileIndex, file.dataOffset + 2 * firstToken, chunk.data(),
              2 * (batchTokens + 1));
    for (int64_t i = 0; i <= batchTokens; ++i)
      if (chunk[static_cast<size_t>(i)] >= vocabulary)
        fail(path + ": token id " +
             std::to_string(chunk[static_cast<size_t>(i)]) +
             " at token position " + std::to_string(firstToken + i) +
             " is outside the vocabulary of " + std::to_string(vocabulary) +
             " ids");
    for (int64_t i = 0; i < batchTokens; ++i) {
      tokens[i] = chunk[static_cast<size_t>(i)];
      targets[i] = chunk[static_cast<size_t>(i + 1)];
    }
    return;
  }

  int64_t rowElements =
      layout.maskedLanguageModel ? 2 * sequence : sequence + 1;
  std::vector<unsigned char> raw(
      static_cast<size_t>(rowElements * file.elementBytes));
  readBytes(fileIndex,
            file.dataOffset + local * rowElements * file.elementBytes,
            raw.data(), static_cast<int64_t>(raw.size()));
  std::vector<int64_t> row(static_cast<size_t>(rowElements));
  for (int64_t i = 0; i < rowElements; ++i) {
    if (file.elementBytes == 4) {
      int32_t value;
      std::memcpy(&value, raw.data() + 4 * i, 4);
      row[static_cast<size_t>(i)] = value;
    } else {
      std::memcpy(&row[static_cast<size_t>(i)], raw.data() + 8 * i, 8);
    }
  }
  for (int64_t i = 0; i < rowElements; ++i) {
    int64_t id = row[static_cast<size_t>(i)];
    bool isLabel = layout.maskedLanguageModel && i >= sequence;
    if (isLabel && id == layout.ignoreIndex)
      continue;
    if (id < 0 || id >= vocabulary) {
      std::string where =
          layout.maskedLanguageModel
              ? std::string(isLabel ? "label" : "token id") + " " +
                    std::to_string(id) + " at row " + std::to_string(local) +
                    ", column " + std::to_string(i % sequence)
              : "token id " + std::to_string(id) + " at row " +
                    std::to_string(local) + ", column " + std::to_string(i);
      fail(path + ": " + where + " is outside the vocabulary of " +
           std::to_string(vocabulary) + " ids" +
           (isLabel ? " (and is not the ignore index " +
                          std::to_string(layout.ignoreIndex) + ")"
                    : ""));
    }
  }
  if (layout.maskedLanguageModel) {
    std::copy(row.begin(), row.begin() + sequence, tokens);
    std::copy(row.begin() + sequence, row.end(), targets);
  } else {
    std::copy(row.begin(), row.begin() + sequence, tokens);
    std::copy(row.begin() + 1, row.end(), targets);
  }
}

void DataLoader::nextBatch(int64_t *tokens, int64_t *targets, int32_t rank,
                           int32_t ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    fail("internal error: data of rank " + std::to_string(rank) + " of " +
         std::to_string(ranks));
  int64_t rowsPerSample = files.front().isNpy ? 1 : layout.batch;
  int64_t stride = rowsPerSample * layout.sequence;
  int64_t first = position + rank * samplesPerBatch;
  for (int64_t i = 0; i < samplesPerBatch; ++i)
    readSample(sampleAt(first + i), tokens + i * stride, targets + i * stride);
  position += ranks * samplesPerBatch;
}

} // namespace tessera::train
