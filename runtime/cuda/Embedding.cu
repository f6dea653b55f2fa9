//===- Embedding.cu - Row lookups (embedding, gather) and their grads -----===//
//
// The forwards copy slices: one thread per output element, so a row of the
// table is read by consecutive threads (coalesced) and any element size
// works (the copy is by bytes of the element's width). Every index is
// range-checked on the device; a bad one is recorded (value, flat position,
// range) for tessera_cuda_check_device_errors and its slice is zero-filled.
//
// The gradients scatter-add: the same token may occur many times in a batch
// (a padding id thousands of times). Atomic adds would sum those rows in
// whatever order the warps ran, so repeated steps would differ in the last
// bits; instead the gradient is a sort and a gather:
// 1. the checked indices become 32-bit keys (a bad one the key `length`,
//    sorted last and never read) paired with their positions;
// 2. cub::DeviceRadixSort::SortPairs, over only the bits `length` needs,
//    groups equal keys; it is stable, so a group's positions ascend;
// 3. each group's [start, end) in the sorted order is recorded per table
//    row (rows no index names keep the empty run);
// 4. one pass over the whole gradient: a row's threads (consecutive along
//    the row, coalesced) sum its group's dy rows in ascending position from
//    0.0f and store once, rounding into the storage type; a row without a
//    group stores zeros, so there is no memset and no f32 scratch.
// A group of up to 64 entries is summed that way, exactly as the CPU kernel
// sums (f32, ascending positions, from zero), so the two agree bit for bit.
// A longer group (a padding id) would leave one block reading thousands of
// rows while the GPU idles, so the sorted entries are cut into 64-entry
// tiles: a kernel before step 4 sums each long group's piece in each tile
// (a tile meets at most two long groups: the one holding its first entry
// and the one holding its last), and step 4 adds the pieces in tile order.
// That rounds differently from the CPU, but the same way on every call.
//
// Rows of whole 16-byte packs (every hidden size) are summed and stored a
// pack a thread, the same adds per element in the same order.
//
// Nothing allocates once the stream's scratch has grown and nothing waits
// on the host, so the gradient can be captured in a CUDA graph. Step 4
// writes the gradient once, as the old memset did; at GPT-2 124M's shapes
// (16K tokens, a 50257-row table) the sort is a few microseconds of small
// kernels.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include <cub/device/device_radix_sort.cuh>

using namespace tessera::cuda;
using tessera::cpu::dtypeSize;
using tessera::cpu::elementCount;
using tessera::cpu::product;
using tessera::cpu::requireAxis;
using tessera::cpu::requireIndexType;
using tessera::cpu::requireRowBlock;
using tessera::cpu::requireSameDtype;
using tessera::cpu::requireShape;
using tessera::cpu::requireTensor;
using tessera::cpu::shapeOf;

namespace {

/// The lookup view shared by embedding (outer = 1, inner = width) and
/// gather: y[o, n, i] = x[o, index[n], i] with index in [-length, length)
/// (negative counts back, allowed only for gather).
struct Lookup {
  int64_t outer;
  int64_t length;
  int64_t inner;
  int64_t indexCount;
  bool allowNegative;
  /// A vocabulary-parallel block (embedding only): x holds rows
  /// [firstRow, firstRow + length) of a table of totalRows (-1: length);
  /// an index of another block resolves to -1 without an error.
  int64_t firstRow = 0;
  int64_t totalRows = -1;
};

__device__ int64_t lookupIndex(const void *indices, int indexType,
                               int64_t position, const Lookup &lookup,
                               DeviceErrorRecord *errors, const char *kernel) {
  int64_t index = loadInteger(indices, indexType, position);
  int64_t low = lookup.allowNegative ? -lookup.length : 0;
  int64_t total = lookup.totalRows < 0 ? lookup.length : lookup.totalRows;
  if (index < low || index >= total) {
    reportDeviceError(errors, kIndexOutOfRange, index, position, low, total,
                      kernel);
    return -1;
  }
  if (index < 0)
    return index + lookup.length;
  int64_t local = index - lookup.firstRow;
  return local >= 0 && local < lookup.length ? local : -1;
}

template <typename Element>
__global__ void lookupKernel(const Element *x, const void *indices,
                             int indexType, Element *y, Lookup lookup,
                             DeviceErrorRecord *errors, const char *kernel) {
  int64_t count = lookup.outer * lookup.indexCount * lookup.inner;
  TESSERA_GRID_STRIDE_LOOP(i, count) {
    int64_t inner = i % lookup.inner;
    int64_t n = (i / lookup.inner) % lookup.indexCount;
    int64_t o = i / (lookup.inner * lookup.indexCount);
    int64_t index = lookupIndex(indices, indexType, n, lookup, errors, kernel);
    y[i] = index < 0 ? Element(0)
                     : x[(o * lookup.length + index) * lookup.inner + inner];
  }
}

/// Threads a row of the pack kernel at most: a warp loops over a wide row's
/// packs. A block a row (256 threads for Llama's 2048 columns, one 16-byte
/// store each after reading the row's run) left the [128256, 2048] bf16
/// table at 1.3 TB/s; a warp a row, 8 rows a block, writes it at 2.4
/// (llama_kernels_bench: 0.41 -> 0.25 ms; 64 threads 0.26, 128 0.31).
constexpr int kMaxThreadsPerPackRow = 32;

/// Sorted entries per tile of a long run (longRunPartialsKernel).
constexpr uint32_t kRunTile = 64;

/// Step 1: key n is index n resolved into [0, length), or `length` when it
/// is out of range (recorded as a device error); value n is n.
__global__ void sortKeysKernel(const void *indices, int indexType,
                               Lookup lookup, uint32_t *keys,
                               uint32_t *positions, DeviceErrorRecord *errors,
                               const char *kernel) {
  TESSERA_GRID_STRIDE_LOOP(n, lookup.indexCount) {
    int64_t index = lookupIndex(indices, indexType, n, lookup, errors, kernel);
    keys[n] = static_cast<uint32_t>(index < 0 ? lookup.length : index);
    positions[n] = static_cast<uint32_t>(n);
  }
}

/// Step 3: runs[key] = the [start, end) of key's group in the sorted keys.
__global__ void markRunsKernel(const uint32_t *sortedKeys, int64_t count,
                               int64_t length, uint2 *runs) {
  TESSERA_GRID_STRIDE_LOOP(k, count) {
    uint32_t key = sortedKeys[k];
    if (key >= length)
      continue;
    if (k == 0 || sortedKeys[k - 1] != key)
      runs[key].x = static_cast<uint32_t>(k);
    if (k == count - 1 || sortedKeys[k + 1] != key)
      runs[key].y = static_cast<uint32_t>(k + 1);
  }
}

/// The sum, from 0.0f in ascending k, of dy[start + positions[k] * stride]
/// over k in [first, last). Loads go out eight at a time (the adds stay in
/// order): a run is latency-bound otherwise.
__device__ float sumInOrder(const void *dy, int dyType,
                            const uint32_t *positions, uint32_t first,
                            uint32_t last, int64_t start, int64_t stride) {
  float sum = 0.0f;
  uint32_t k = first;
  for (; k + 8 <= last; k += 8) {
    float values[8];
#pragma unroll
    for (int u = 0; u < 8; ++u)
      values[u] = loadFloat(dy, dyType, start + positions[k + u] * stride);
#pragma unroll
    for (int u = 0; u < 8; ++u)
      sum += values[u];
  }
  for (; k < last; ++k)
    sum += loadFloat(dy, dyType, start + positions[k] * stride);
  return sum;
}

/// Step 4a, for runs longer than one tile (kRunTile sorted entries, tile t
/// holding entries [t kRunTile, (t + 1) kRunTile)): such a run meets tile t
/// in one piece that holds the tile's first entry (slot 0) or its last
/// (slot 1), so block t sums at most two pieces, every (o, inner) element,
/// into partials[((2 t + slot) outer + o) inner + inner].
__global__ void longRunPartialsKernel(const void *dy, int dyType,
                                      const uint32_t *sortedKeys,
                                      const uint32_t *sortedPositions,
                                      const uint2 *runs, float *partials,
                                      Lookup lookup) {
  int64_t tileFirst = static_cast<int64_t>(blockIdx.x) * kRunTile;
  int64_t tileEnd = min(lookup.indexCount, tileFirst + kRunTile);
  for (int slot = 0; slot < 2; ++slot) {
    uint32_t key = sortedKeys[slot == 0 ? tileFirst : tileEnd - 1];
    if (key >= lookup.length)
      continue;
    uint2 run = runs[key];
    if (run.y - run.x <= kRunTile || (slot == 1 && run.x <= tileFirst))
      continue; // short, or slot 0's piece
    uint32_t first = max(run.x, static_cast<uint32_t>(tileFirst));
    uint32_t last = min(run.y, static_cast<uint32_t>(tileEnd));
    float *piece =
        partials + (2 * blockIdx.x + slot) * lookup.outer * lookup.inner;
    for (int64_t e = threadIdx.x; e < lookup.outer * lookup.inner;
         e += blockDim.x) {
      int64_t o = e / lookup.inner, i = e - o * lookup.inner;
      piece[e] =
          sumInOrder(dy, dyType, sortedPositions, first, last,
                     o * lookup.indexCount * lookup.inner + i, lookup.inner);
    }
  }
}

/// The gradient row (o, table row) that this thread of a sum-runs kernel
/// works on, `threadsPerRow` threads a row, and its run of sorted entries.
struct RunRow {
  bool valid; // false past the last row
  int64_t gradientRow, o;
  uint2 run;
  bool longRun;    // longer than kRunTile: summed from its tiles' partials
  int64_t dyStart; // dy's first element of slice o
};

__device__ __forceinline__ RunRow runRowOf(const uint2 *runs, Lookup lookup,
                                           int threadsPerRow) {
  int64_t gradientRow =
      static_cast<int64_t>(blockIdx.x) * (blockDim.x / threadsPerRow) +
      threadIdx.x / threadsPerRow;
  if (gradientRow >= lookup.outer * lookup.length)
    return {false, gradientRow, 0, {}, false, 0};
  int64_t o = gradientRow / lookup.length;
  uint2 run = runs[gradientRow - o * lookup.length];
  return {true,
          gradientRow,
          o,
          run,
          run.y - run.x > kRunTile,
          o * lookup.indexCount * lookup.inner};
}

/// Step 4b: `threadsPerRow` (a power of two) threads per gradient row
/// (o, row), `256 / threadsPerRow` rows a block. A run of up to kRunTile
/// entries is summed here in ascending position; a longer one adds its
/// tiles' pieces in tile order.
__global__ void sumRunsKernel(const void *dy, int dyType,
                              const uint32_t *sortedPositions,
                              const uint2 *runs, const float *partials,
                              void *dx, int dxType, Lookup lookup,
                              int threadsPerRow) {
  const RunRow row = runRowOf(runs, lookup, threadsPerRow);
  if (!row.valid)
    return;
  for (int64_t i = threadIdx.x % threadsPerRow; i < lookup.inner;
       i += threadsPerRow) {
    float sum;
    if (!row.longRun) {
      sum = sumInOrder(dy, dyType, sortedPositions, row.run.x, row.run.y,
                       row.dyStart + i, lookup.inner);
    } else {
      sum = 0.0f;
      for (uint32_t t = row.run.x / kRunTile; t <= (row.run.y - 1) / kRunTile;
           ++t) {
        int slot = row.run.x <= t * kRunTile ? 0 : 1;
        sum += partials[((2 * t + slot) * lookup.outer + row.o) * lookup.inner +
                        i];
      }
    }
    storeFloat(dx, dxType, row.gradientRow * lookup.inner + i, sum);
  }
}

/// sumInOrder over the kPack consecutive elements of a pack at once (rows
/// whose width is whole 16-byte packs): per element the same adds in the
/// same order, so the same bits, with one 16-byte load a dy row instead of
/// eight 2-byte ones.
__device__ void sumPackInOrder(const void *dy, int dyType,
                               const uint32_t *positions, uint32_t first,
                               uint32_t last, int64_t start, int64_t stride,
                               float (&sum)[kPack]) {
#pragma unroll
  for (int e = 0; e < kPack; ++e)
    sum[e] = 0.0f;
  uint32_t k = first;
  for (; k + 4 <= last; k += 4) {
    float values[4][kPack];
#pragma unroll
    for (int u = 0; u < 4; ++u)
      loadPack(dy, dyType, start + positions[k + u] * stride, values[u]);
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
      for (int e = 0; e < kPack; ++e)
        sum[e] += values[u][e];
  }
  for (; k < last; ++k) {
    float values[kPack];
    loadPack(dy, dyType, start + positions[k] * stride, values);
#pragma unroll
    for (int e = 0; e < kPack; ++e)
      sum[e] += values[e];
  }
}

/// sumRunsKernel for rows of whole packs (inner % kPack == 0, dy and dx
/// 16-byte aligned float storage): `threadsPerRow` threads over a row's
/// inner / kPack packs. Most rows of a large vocabulary's table have no
/// run: they are one 16-byte store of zeros a pack, where the element
/// kernel spent eight 2-byte stores (Llama's [128256, 2048] bf16 table at
/// 820 GB/s).
__global__ void sumRunsPackKernel(const void *dy, int dyType,
                                  const uint32_t *sortedPositions,
                                  const uint2 *runs, const float *partials,
                                  void *dx, int dxType, Lookup lookup,
                                  int threadsPerRow) {
  const RunRow row = runRowOf(runs, lookup, threadsPerRow);
  if (!row.valid)
    return;
  for (int64_t i = (threadIdx.x % threadsPerRow) * int64_t{kPack};
       i < lookup.inner; i += threadsPerRow * int64_t{kPack}) {
    float sum[kPack];
    if (!row.longRun) {
      sumPackInOrder(dy, dyType, sortedPositions, row.run.x, row.run.y,
                     row.dyStart + i, lookup.inner, sum);
    } else {
#pragma unroll
      for (int e = 0; e < kPack; ++e)
        sum[e] = 0.0f;
      for (uint32_t t = row.run.x / kRunTile; t <= (row.run.y - 1) / kRunTile;
           ++t) {
        int slot = row.run.x <= t * kRunTile ? 0 : 1;
        float piece[kPack];
        loadPack(partials, TESSERA_F32,
                 ((2 * t + slot) * lookup.outer + row.o) * lookup.inner + i,
                 piece);
#pragma unroll
        for (int e = 0; e < kPack; ++e)
          sum[e] += piece[e];
      }
    }
    storePack(dx, dxType, row.gradientRow * lookup.inner + i, sum);
  }
}

// Kernel names live in device memory so that device code can copy them.
__device__ const char kEmbeddingName[] = "tessera_cuda_embedding";
__device__ const char kEmbeddingGradName[] = "tessera_cuda_embedding_grad";
__device__ const char kGatherName[] = "tessera_cuda_gather";
__device__ const char kGatherGradName[] = "tessera_cuda_gather_grad";

template <typename Symbol> const char *deviceNameOf(const Symbol &symbol) {
  void *address = nullptr;
  cudaCheck(cudaGetSymbolAddress(&address, symbol));
  return static_cast<const char *>(address);
}

void launchLookup(const tessera_tensor &x, const tessera_tensor &indices,
                  tessera_tensor &y, const Lookup &lookup, const char *kernel,
                  cudaStream_t stream) {
  int64_t count = lookup.outer * lookup.indexCount * lookup.inner;
  if (count == 0)
    return;
  DeviceErrorRecord *errors = deviceErrorRecord();
  unsigned grid = gridFor(count);
  switch (dtypeSize(x.dtype)) {
  case 1:
    lookupKernel<<<grid, kThreadsPerBlock, 0, stream>>>(
        static_cast<const uint8_t *>(x.data), indices.data, indices.dtype,
        static_cast<uint8_t *>(y.data), lookup, errors, kernel);
    break;
  case 2:
    lookupKernel<<<grid, kThreadsPerBlock, 0, stream>>>(
        static_cast<const uint16_t *>(x.data), indices.data, indices.dtype,
        static_cast<uint16_t *>(y.data), lookup, errors, kernel);
    break;
  case 4:
    lookupKernel<<<grid, kThreadsPerBlock, 0, stream>>>(
        static_cast<const uint32_t *>(x.data), indices.data, indices.dtype,
        static_cast<uint32_t *>(y.data), lookup, errors, kernel);
    break;
  default:
    lookupKernel<<<grid, kThreadsPerBlock, 0, stream>>>(
        static_cast<const uint64_t *>(x.data), indices.data, indices.dtype,
        static_cast<uint64_t *>(y.data), lookup, errors, kernel);
    break;
  }
  cudaCheckLaunch();
}

constexpr int kSortScratchSlot = 3100; // streamScratch slot of the sort

size_t roundUp256(size_t bytes) { return (bytes + 255) / 256 * 256; }

void launchScatterAdd(const tessera_tensor &dy, const tessera_tensor &indices,
                      tessera_tensor &dx, const Lookup &lookup,
                      const char *kernel, cudaStream_t stream) {
  int64_t dxCount = elementCount(dx);
  if (dxCount == 0)
    return;
  int64_t count = lookup.indexCount;
  if (count == 0 || lookup.inner == 0) {
    cudaCheck(
        cudaMemsetAsync(dx.data, 0, dxCount * dtypeSize(dx.dtype), stream));
    return;
  }
  if (count > INT32_MAX || lookup.length >= INT32_MAX)
    fail("the GPU gradient takes fewer than 2^31 indices and table rows, got " +
         std::to_string(count) + " indices into " +
         std::to_string(lookup.length) + " rows");
  int64_t gradientRows = lookup.outer * lookup.length;
  // Whole 16-byte packs a row: the pack kernel, a thread per pack up to
  // kMaxThreadsPerPackRow a row (then each thread loops over several).
  bool packed = lookup.inner % kPack == 0 && packable(dy) && packable(dx);
  int64_t rowUnits = packed ? lookup.inner / kPack : lookup.inner;
  int threadsPerRow = 1;
  int maxThreadsPerRow = packed ? kMaxThreadsPerPackRow : kThreadsPerBlock;
  while (threadsPerRow < maxThreadsPerRow && threadsPerRow < rowUnits)
    threadsPerRow *= 2;
  int64_t rowsPerBlock = kThreadsPerBlock / threadsPerRow;
  int64_t blocks = (gradientRows + rowsPerBlock - 1) / rowsPerBlock;
  if (blocks > INT32_MAX)
    fail("the gradient has too many rows (" + std::to_string(gradientRows) +
         ")");
  // Keys hold [0, length]: `length` is the bad-index key.
  int endBit = 1;
  while ((int64_t{1} << endBit) <= lookup.length)
    ++endBit;
  int items = static_cast<int>(count);
  size_t sortBytes = 0;
  cudaCheck(cub::DeviceRadixSort::SortPairs(
      nullptr, sortBytes, static_cast<const uint32_t *>(nullptr),
      static_cast<uint32_t *>(nullptr), static_cast<const uint32_t *>(nullptr),
      static_cast<uint32_t *>(nullptr), items, 0, endBit, stream));
  int64_t tiles = (count + kRunTile - 1) / kRunTile;
  size_t arrayBytes = roundUp256(count * sizeof(uint32_t));
  size_t runBytes = roundUp256(lookup.length * sizeof(uint2));
  size_t partialBytes =
      roundUp256(2 * tiles * lookup.outer * lookup.inner * sizeof(float));
  char *scratch = static_cast<char *>(streamScratch(
      stream, 4 * arrayBytes + runBytes + partialBytes + sortBytes,
      kSortScratchSlot));
  uint32_t *keys = reinterpret_cast<uint32_t *>(scratch);
  uint32_t *positions = reinterpret_cast<uint32_t *>(scratch + arrayBytes);
  uint32_t *sortedKeys = reinterpret_cast<uint32_t *>(scratch + 2 * arrayBytes);
  uint32_t *sortedPositions =
      reinterpret_cast<uint32_t *>(scratch + 3 * arrayBytes);
  uint2 *runs = reinterpret_cast<uint2 *>(scratch + 4 * arrayBytes);
  float *partials =
      reinterpret_cast<float *>(scratch + 4 * arrayBytes + runBytes);
  void *sortStorage = scratch + 4 * arrayBytes + runBytes + partialBytes;

  sortKeysKernel<<<gridFor(count), kThreadsPerBlock, 0, stream>>>(
      indices.data, indices.dtype, lookup, keys, positions, deviceErrorRecord(),
      kernel);
  cudaCheckLaunch();
  cudaCheck(cub::DeviceRadixSort::SortPairs(
      sortStorage, sortBytes, keys, sortedKeys, positions, sortedPositions,
      items, 0, endBit, stream));
  cudaCheck(cudaMemsetAsync(runs, 0, lookup.length * sizeof(uint2), stream));
  markRunsKernel<<<gridFor(count), kThreadsPerBlock, 0, stream>>>(
      sortedKeys, count, lookup.length, runs);
  cudaCheckLaunch();
  longRunPartialsKernel<<<static_cast<unsigned>(tiles), kThreadsPerBlock, 0,
                          stream>>>(dy.data, dy.dtype, sortedKeys,
                                    sortedPositions, runs, partials, lookup);
  cudaCheckLaunch();
  auto sumRuns = packed ? sumRunsPackKernel : sumRunsKernel;
  sumRuns<<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0, stream>>>(
      dy.data, dy.dtype, sortedPositions, runs, partials, dx.data, dx.dtype,
      lookup, threadsPerRow);
  cudaCheckLaunch();
}

Lookup gatherLookup(const tessera_tensor &x, const tessera_tensor &indices,
                    const tessera_tensor &y, int64_t axis, const char *yName) {
  requireIndexType(indices, "indices");
  requireAxis(axis, x.rank, "axis");
  Shape xShape = shapeOf(x);
  Shape expected(xShape.begin(), xShape.begin() + axis);
  for (int32_t dim = 0; dim < indices.rank; ++dim)
    expected.push_back(indices.shape[dim]);
  expected.insert(expected.end(), xShape.begin() + axis + 1, xShape.end());
  requireShape(y, expected, yName);
  return {product(xShape, 0, static_cast<size_t>(axis)), xShape[axis],
          product(xShape, static_cast<size_t>(axis) + 1, xShape.size()),
          elementCount(indices), true};
}

} // namespace

extern "C" int tessera_cuda_embedding(const tessera_tensor *table,
                                      const tessera_tensor *ids,
                                      tessera_tensor *y, cudaStream_t stream) {
  return tessera_cuda_embedding_rows(table, ids, y, 0,
                                     table ? table->shape[0] : 0, stream);
}

extern "C" int tessera_cuda_embedding_rows(const tessera_tensor *table,
                                           const tessera_tensor *ids,
                                           tessera_tensor *y, int64_t first_row,
                                           int64_t total_rows,
                                           cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_embedding", [&] {
    const tessera_tensor &weights = requireTensor(table, "table");
    const tessera_tensor &tokens = requireTensor(ids, "ids");
    tessera_tensor &output = requireTensor(y, "y");
    if (weights.rank != 2)
      fail("table must have rank 2, got " +
           tessera::cpu::formatShape(shapeOf(weights)));
    requireIndexType(tokens, "ids");
    requireSameDtype(weights, "table", output, "y");
    Shape expected = shapeOf(tokens);
    expected.push_back(weights.shape[1]);
    requireShape(output, expected, "y");
    requireRowBlock(first_row, weights.shape[0], total_rows);
    Lookup lookup{1,     weights.shape[0], weights.shape[1], elementCount(tokens),
                  false, first_row,        total_rows};
    launchLookup(weights, tokens, output, lookup, deviceNameOf(kEmbeddingName),
                 stream);
  });
}

extern "C" int tessera_cuda_embedding_grad(const tessera_tensor *ids,
                                           const tessera_tensor *dy,
                                           tessera_tensor *dtable,
                                           cudaStream_t stream) {
  return tessera_cuda_embedding_grad_rows(ids, dy, dtable, 0,
                                          dtable ? dtable->shape[0] : 0,
                                          stream);
}

extern "C" int tessera_cuda_embedding_grad_rows(const tessera_tensor *ids,
                                                const tessera_tensor *dy,
                                                tessera_tensor *dtable,
                                                int64_t first_row,
                                                int64_t total_rows,
                                                cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_embedding_grad", [&] {
    const tessera_tensor &tokens = requireTensor(ids, "ids");
    const tessera_tensor &upstream = requireTensor(dy, "dy");
    tessera_tensor &tableGradient = requireTensor(dtable, "dtable");
    if (tableGradient.rank != 2)
      fail("dtable must have rank 2, got " +
           tessera::cpu::formatShape(shapeOf(tableGradient)));
    requireIndexType(tokens, "ids");
    requireKernelFloat(upstream, "dy");
    requireKernelFloat(tableGradient, "dtable");
    Shape expected = shapeOf(tokens);
    expected.push_back(tableGradient.shape[1]);
    requireShape(upstream, expected, "dy");
    requireRowBlock(first_row, tableGradient.shape[0], total_rows);
    Lookup lookup{1,
                  tableGradient.shape[0],
                  tableGradient.shape[1],
                  elementCount(tokens),
                  false,
                  first_row,
                  total_rows};
    launchScatterAdd(upstream, tokens, tableGradient, lookup,
                     deviceNameOf(kEmbeddingGradName), stream);
  });
}

extern "C" int tessera_cuda_gather(const tessera_tensor *x,
                                   const tessera_tensor *indices,
                                   tessera_tensor *y, int64_t axis,
                                   cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_gather", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    const tessera_tensor &positions = requireTensor(indices, "indices");
    tessera_tensor &output = requireTensor(y, "y");
    requireSameDtype(input, "x", output, "y");
    Lookup lookup = gatherLookup(input, positions, output, axis, "y");
    launchLookup(input, positions, output, lookup, deviceNameOf(kGatherName),
                 stream);
  });
}

extern "C" int tessera_cuda_gather_grad(const tessera_tensor *indices,
                                        const tessera_tensor *dy,
                                        tessera_tensor *dx, int64_t axis,
                                        cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_gather_grad", [&] {
    const tessera_tensor &positions = requireTensor(indices, "indices");
    const tessera_tensor &upstream = requireTensor(dy, "dy");
    tessera_tensor &inputGradient = requireTensor(dx, "dx");
    requireKernelFloat(upstream, "dy");
    requireKernelFloat(inputGradient, "dx");
    Lookup lookup =
        gatherLookup(inputGradient, positions, upstream, axis, "dy");
    launchScatterAdd(upstream, positions, inputGradient, lookup,
                     deviceNameOf(kGatherGradName), stream);
  });
}
