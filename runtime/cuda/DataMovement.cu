//===- DataMovement.cu - Copy, transpose, broadcast, slice, concat, split -===//
//
// Two mechanisms cover every op here:
// - copies of contiguous runs go to the copy engine: copy is one
//   cudaMemcpyAsync; concat and split are one cudaMemcpy2DAsync per piece
//   (each piece is `outer` runs of `length * inner` elements, a pitched 2-D
//   copy), so no kernel of ours runs at all;
// - transpose, broadcast, slice and slice_grad are one "strided copy"
//   kernel: each output element's source offset is its index decomposed by
//   the output shape and dotted with per-dim source strides (0 for
//   broadcast dims, permuted for transposes, step-scaled for slices). The
//   kernel moves elements as 1/2/4/8-byte words, so every dtype works.
// slice_grad zeroes dx and scatters dy through the same strides.
//
// The strided copy first simplifies its walk (drops size-1 dims, merges
// dims the source walks contiguously), then picks one of three kernels:
// - rows: the innermost dim stays contiguous on both sides (the attention
//   head transposes [B,T,H,D] <-> [B,H,T,D]); each row moves as the widest
//   word (16, 8, 4 or 2 bytes) the row length, strides and pointers allow,
//   with the row's offset computed once per word in 32-bit arithmetic when
//   the tensor is small enough;
// - tiles: the innermost dim moves (a matrix transpose); a 32x32 tile is read
//   coalesced along the source's contiguous dim into shared memory and
//   written coalesced along the output's;
// - elements: anything else, one offset decomposition per element.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "OperandChecks.h"

#include <algorithm>
#include <cstdlib>

using namespace tessera::cuda;
using tessera::cpu::dtypeSize;
using tessera::cpu::elementCount;
using tessera::cpu::JoinLayout;
using tessera::cpu::product;
using tessera::cpu::requireCopyOperands;
using tessera::cpu::requireJoin;
using tessera::cpu::requireSameDtype;
using tessera::cpu::requireTensor;
using tessera::cpu::shapeOf;
using tessera::cpu::sliceStrides;
using tessera::cpu::transposeStrides;

namespace {

/// gather: y[i] = x[base + offset(i)]; scatter: y[base + offset(i)] = x[i].
template <typename Element, bool Scatter>
__global__ void stridedCopyKernel(const Element *x, Element *y,
                                  StridedLayout<1> layout, int64_t base,
                                  int64_t count) {
  TESSERA_GRID_STRIDE_LOOP(i, count) {
    int64_t offsets[1];
    layout.offsets(i, offsets);
    if (Scatter)
      y[base + offsets[0]] = x[i];
    else
      y[i] = x[base + offsets[0]];
  }
}

/// The outer dims of a row copy, strides counted in words.
template <typename Index> struct RowLayout {
  int rank;
  Index shape[TESSERA_MAX_RANK];
  Index strides[TESSERA_MAX_RANK];
};

/// Copies rows of `rowWords` words: the walked side is dense, the other side
/// puts each row at `base + sum(index * stride)` over the outer dims. Index
/// is 32-bit when every offset fits, which makes the divisions cheap.
template <typename Word, typename Index, bool Scatter>
__global__ void rowCopyKernel(const Word *x, Word *y, RowLayout<Index> layout,
                              Index base, Index rowWords, Index count) {
  for (Index i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += blockDim.x * gridDim.x) {
    Index row = i / rowWords;
    Index offset = base + (i - row * rowWords);
    for (int dim = layout.rank - 1; dim >= 0; --dim) {
      Index index = row % layout.shape[dim];
      row /= layout.shape[dim];
      offset += index * layout.strides[dim];
    }
    if (Scatter)
      y[offset] = x[i];
    else
      y[i] = x[offset];
  }
}

constexpr int kTile = 32;
constexpr int kTileRowsPerPass = 8;

/// A gather whose source is contiguous along output dim `rows` while the
/// output is contiguous along its last dim `columns`: the other dims are a
/// batch of independent matrix transposes.
struct TileLayout {
  int64_t rows;
  int64_t columns;
  int64_t sourceColumnStride;
  int64_t outputRowStride;
  int64_t batches;
  int batchRank;
  int64_t batchShape[TESSERA_MAX_RANK];
  int64_t batchSourceStrides[TESSERA_MAX_RANK];
  int64_t batchOutputStrides[TESSERA_MAX_RANK];
};

/// Reads a tile coalesced along the source's contiguous dim into shared
/// memory and writes it coalesced along the output's; blockDim is
/// (kTile, kTileRowsPerPass).
template <typename Element>
__global__ void tileTransposeKernel(const Element *x, Element *y,
                                    TileLayout layout, int64_t base) {
  // One padding column keeps the column reads off a single bank.
  __shared__ Element tile[kTile][kTile + 1];
  int64_t rowStart = static_cast<int64_t>(blockIdx.y) * kTile;
  int64_t columnStart = static_cast<int64_t>(blockIdx.x) * kTile;
  for (int64_t batch = blockIdx.z; batch < layout.batches;
       batch += gridDim.z) {
    int64_t source = base, output = 0, rest = batch;
    for (int dim = layout.batchRank - 1; dim >= 0; --dim) {
      int64_t index = rest % layout.batchShape[dim];
      rest /= layout.batchShape[dim];
      source += index * layout.batchSourceStrides[dim];
      output += index * layout.batchOutputStrides[dim];
    }
    for (int k = threadIdx.y; k < kTile; k += kTileRowsPerPass) {
      int64_t row = rowStart + threadIdx.x, column = columnStart + k;
      if (row < layout.rows && column < layout.columns)
        tile[k][threadIdx.x] =
            x[source + row + column * layout.sourceColumnStride];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < kTile; k += kTileRowsPerPass) {
      int64_t row = rowStart + k, column = columnStart + threadIdx.x;
      if (row < layout.rows && column < layout.columns)
        y[output + row * layout.outputRowStride + column] = tile[threadIdx.x][k];
    }
    __syncthreads(); // the next batch overwrites the tile
  }
}

/// A strided walk with size-1 dims dropped and neighbours merged where the
/// strided side is walked contiguously too (fewer dims: less index math).
struct Walk {
  Shape shape;
  Shape strides;
};

Walk simplifyWalk(const Shape &shape, const Shape &strides) {
  Walk walk;
  for (size_t dim = 0; dim < shape.size(); ++dim) {
    if (shape[dim] == 1)
      continue;
    if (!walk.shape.empty() &&
        walk.strides.back() == strides[dim] * shape[dim]) {
      walk.shape.back() *= shape[dim];
      walk.strides.back() = strides[dim];
      continue;
    }
    walk.shape.push_back(shape[dim]);
    walk.strides.push_back(strides[dim]);
  }
  if (walk.shape.empty()) { // a single element
    walk.shape.push_back(1);
    walk.strides.push_back(1);
  }
  return walk;
}

/// Launches the element kernel on words of `Element`'s size.
template <bool Scatter>
void launchElementCopy(const void *x, void *y, size_t elementSize,
                       const Walk &walk, int64_t base, int64_t count,
                       cudaStream_t stream) {
  Shape operandStrides[1] = {walk.strides};
  StridedLayout<1> layout = makeLayout(walk.shape, operandStrides);
  unsigned grid = gridFor(count);
  switch (elementSize) {
  case 1:
    stridedCopyKernel<uint8_t, Scatter><<<grid, kThreadsPerBlock, 0, stream>>>(
        static_cast<const uint8_t *>(x), static_cast<uint8_t *>(y), layout,
        base, count);
    break;
  case 2:
    stridedCopyKernel<uint16_t, Scatter><<<grid, kThreadsPerBlock, 0, stream>>>(
        static_cast<const uint16_t *>(x), static_cast<uint16_t *>(y), layout,
        base, count);
    break;
  case 4:
    stridedCopyKernel<uint32_t, Scatter><<<grid, kThreadsPerBlock, 0, stream>>>(
        static_cast<const uint32_t *>(x), static_cast<uint32_t *>(y), layout,
        base, count);
    break;
  default:
    stridedCopyKernel<uint64_t, Scatter><<<grid, kThreadsPerBlock, 0, stream>>>(
        static_cast<const uint64_t *>(x), static_cast<uint64_t *>(y), layout,
        base, count);
    break;
  }
}

template <typename Word, typename Index, bool Scatter>
void launchRowCopyAs(const void *x, void *y, const RowLayout<Index> &layout,
                     int64_t base, int64_t rowWords, int64_t count,
                     cudaStream_t stream) {
  rowCopyKernel<Word, Index, Scatter>
      <<<gridFor(count), kThreadsPerBlock, 0, stream>>>(
          static_cast<const Word *>(x), static_cast<Word *>(y), layout,
          static_cast<Index>(base), static_cast<Index>(rowWords),
          static_cast<Index>(count));
}

template <typename Index, bool Scatter>
void launchRowCopy(const void *x, void *y, size_t word, const Walk &walk,
                   int64_t base, int64_t rowWords, int64_t count,
                   cudaStream_t stream) {
  RowLayout<Index> layout{};
  layout.rank = static_cast<int>(walk.shape.size()) - 1;
  for (int dim = 0; dim < layout.rank; ++dim) {
    layout.shape[dim] = static_cast<Index>(walk.shape[dim]);
    layout.strides[dim] = static_cast<Index>(
        walk.strides[dim] / static_cast<int64_t>(word));
  }
  switch (word) {
  case 16:
    launchRowCopyAs<uint4, Index, Scatter>(x, y, layout, base, rowWords, count,
                                           stream);
    break;
  case 8:
    launchRowCopyAs<uint2, Index, Scatter>(x, y, layout, base, rowWords, count,
                                           stream);
    break;
  case 4:
    launchRowCopyAs<uint32_t, Index, Scatter>(x, y, layout, base, rowWords,
                                              count, stream);
    break;
  case 2:
    launchRowCopyAs<uint16_t, Index, Scatter>(x, y, layout, base, rowWords,
                                              count, stream);
    break;
  default:
    launchRowCopyAs<uint8_t, Index, Scatter>(x, y, layout, base, rowWords,
                                             count, stream);
    break;
  }
}

/// Copies with the innermost dim contiguous on both sides: `walk`'s strides
/// are in elements and its last stride is 1.
template <bool Scatter>
void rowCopy(const void *x, void *y, size_t elementSize, Walk walk,
             int64_t base, int64_t count, cudaStream_t stream) {
  // The widest word that divides the row, every stride, the base offset and
  // both pointers.
  int64_t rowBytes = walk.shape.back() * static_cast<int64_t>(elementSize);
  uintptr_t alignment = reinterpret_cast<uintptr_t>(x) |
                        reinterpret_cast<uintptr_t>(y) |
                        static_cast<uintptr_t>(rowBytes) |
                        static_cast<uintptr_t>(base * elementSize);
  for (size_t dim = 0; dim + 1 < walk.shape.size(); ++dim)
    alignment |= static_cast<uintptr_t>(walk.strides[dim] * elementSize);
  size_t word = 16;
  while (word > 1 && (alignment % word) != 0)
    word /= 2;
  // Strides become byte strides, divided into words by launchRowCopy.
  int64_t span = base * static_cast<int64_t>(elementSize) + rowBytes;
  for (size_t dim = 0; dim + 1 < walk.shape.size(); ++dim) {
    walk.strides[dim] *= static_cast<int64_t>(elementSize);
    span += (walk.shape[dim] - 1) * std::abs(walk.strides[dim]);
  }
  int64_t wordSize = static_cast<int64_t>(word);
  int64_t rowWords = rowBytes / wordSize;
  int64_t words = count * static_cast<int64_t>(elementSize) / wordSize;
  int64_t baseWords = base * static_cast<int64_t>(elementSize) / wordSize;
  if (span / wordSize < INT32_MAX && words < INT32_MAX)
    launchRowCopy<uint32_t, Scatter>(x, y, word, walk, baseWords, rowWords,
                                     words, stream);
  else
    launchRowCopy<int64_t, Scatter>(x, y, word, walk, baseWords, rowWords,
                                    words, stream);
}

template <typename Element>
void launchTileTranspose(const void *x, void *y, const TileLayout &layout,
                         int64_t base, cudaStream_t stream) {
  dim3 block(kTile, kTileRowsPerPass);
  dim3 grid(static_cast<unsigned>((layout.columns + kTile - 1) / kTile),
            static_cast<unsigned>((layout.rows + kTile - 1) / kTile),
            static_cast<unsigned>(std::min<int64_t>(layout.batches, 65535)));
  tileTransposeKernel<Element><<<grid, block, 0, stream>>>(
      static_cast<const Element *>(x), static_cast<Element *>(y), layout,
      base);
}

/// A gather whose innermost output dim is strided in x but some other output
/// dim is contiguous in x; false when the tiles do not apply.
bool tileTranspose(const void *x, void *y, size_t elementSize,
                   const Walk &walk, int64_t base, cudaStream_t stream) {
  int rank = static_cast<int>(walk.shape.size());
  int rowDim = -1;
  for (int dim = 0; dim + 1 < rank; ++dim)
    if (walk.strides[dim] == 1)
      rowDim = dim;
  if (rowDim < 0 || (walk.shape[rowDim] + kTile - 1) / kTile > 65535 ||
      (walk.shape.back() + kTile - 1) / kTile > INT32_MAX)
    return false;
  TileLayout layout{};
  layout.rows = walk.shape[rowDim];
  layout.columns = walk.shape.back();
  layout.sourceColumnStride = walk.strides.back();
  layout.batches = 1;
  int64_t outputStride = 1;
  for (int dim = rank - 1; dim >= 0; --dim) {
    if (dim == rowDim) {
      layout.outputRowStride = outputStride;
    } else if (dim != rank - 1) {
      // Batch dims keep their order, listed from the outermost.
      int slot = dim - (dim > rowDim ? 1 : 0);
      layout.batchShape[slot] = walk.shape[dim];
      layout.batchSourceStrides[slot] = walk.strides[dim];
      layout.batchOutputStrides[slot] = outputStride;
      layout.batches *= walk.shape[dim];
    }
    outputStride *= walk.shape[dim];
  }
  layout.batchRank = rank - 2;
  switch (elementSize) {
  case 1:
    launchTileTranspose<uint8_t>(x, y, layout, base, stream);
    break;
  case 2:
    launchTileTranspose<uint16_t>(x, y, layout, base, stream);
    break;
  case 4:
    launchTileTranspose<uint32_t>(x, y, layout, base, stream);
    break;
  default:
    launchTileTranspose<uint64_t>(x, y, layout, base, stream);
    break;
  }
  return true;
}

/// Walks `shape` (the smaller tensor's); `strides` index the larger one.
template <bool Scatter>
void stridedCopy(const void *x, void *y, int32_t dtype, const Shape &shape,
                 const Shape &strides, int64_t base, cudaStream_t stream) {
  int64_t count = product(shape, 0, shape.size());
  if (count == 0)
    return;
  size_t elementSize = dtypeSize(dtype);
  Walk walk = simplifyWalk(shape, strides);
  if (walk.strides.back() == 1)
    rowCopy<Scatter>(x, y, elementSize, walk, base, count, stream);
  else if (Scatter || !tileTranspose(x, y, elementSize, walk, base, stream))
    launchElementCopy<Scatter>(x, y, elementSize, walk, base, count, stream);
  cudaCheckLaunch();
}

/// Copies `outer` runs of `run` elements between a piece and the joined
/// tensor, whose runs are `joinedRun` apart, starting at `joinedOffset`.
void copyRuns(void *destination, size_t destinationPitch, const void *source,
              size_t sourcePitch, size_t runBytes, int64_t outer,
              cudaStream_t stream) {
  if (runBytes == 0 || outer == 0)
    return;
  cudaCheck(cudaMemcpy2DAsync(destination, destinationPitch, source,
                              sourcePitch, runBytes,
                              static_cast<size_t>(outer),
                              cudaMemcpyDeviceToDevice, stream));
}

} // namespace

extern "C" int tessera_cuda_copy(const tessera_tensor *x, tessera_tensor *y,
                                 cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_copy", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireCopyOperands(input, output);
    size_t bytes = elementCount(input) * dtypeSize(input.dtype);
    if (input.data != output.data && bytes > 0)
      cudaCheck(cudaMemcpyAsync(output.data, input.data, bytes,
                                cudaMemcpyDeviceToDevice, stream));
  });
}

extern "C" int tessera_cuda_transpose(const tessera_tensor *x,
                                      tessera_tensor *y,
                                      const int64_t *permutation,
                                      cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_transpose", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    Shape strides = transposeStrides(input, output, permutation);
    stridedCopy<false>(input.data, output.data, input.dtype, shapeOf(output),
                       strides, 0, stream);
  });
}

extern "C" int tessera_cuda_broadcast(const tessera_tensor *x,
                                      tessera_tensor *y, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_broadcast", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireSameDtype(input, "x", output, "y");
    Shape shape = shapeOf(output);
    Shape strides = tessera::cpu::broadcastStrides(input, "x", shape);
    stridedCopy<false>(input.data, output.data, input.dtype, shape, strides, 0,
                       stream);
  });
}

extern "C" int tessera_cuda_slice(const tessera_tensor *x, tessera_tensor *y,
                                  const int64_t *starts, const int64_t *strides,
                                  cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_slice", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireSameDtype(input, "x", output, "y");
    if (input.rank != output.rank)
      fail("x and y have different ranks");
    Shape shape = shapeOf(output);
    int64_t base = 0;
    Shape steps = sliceStrides(input, shape, starts, strides, base);
    stridedCopy<false>(input.data, output.data, input.dtype, shape, steps,
                       base, stream);
  });
}

extern "C" int tessera_cuda_slice_grad(const tessera_tensor *dy,
                                       tessera_tensor *dx,
                                       const int64_t *starts,
                                       const int64_t *strides,
                                       cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_slice_grad", [&] {
    const tessera_tensor &upstream = requireTensor(dy, "dy");
    tessera_tensor &inputGradient = requireTensor(dx, "dx");
    requireSameDtype(upstream, "dy", inputGradient, "dx");
    if (upstream.rank != inputGradient.rank)
      fail("dy and dx have different ranks");
    Shape shape = shapeOf(upstream);
    int64_t base = 0;
    Shape steps = sliceStrides(inputGradient, shape, starts, strides, base);
    size_t bytes = elementCount(inputGradient) * dtypeSize(inputGradient.dtype);
    if (bytes > 0)
      cudaCheck(cudaMemsetAsync(inputGradient.data, 0, bytes, stream));
    stridedCopy<true>(upstream.data, inputGradient.data, upstream.dtype, shape,
                      steps, base, stream);
  });
}

extern "C" int tessera_cuda_concat(const tessera_tensor *const *inputs,
                                   int32_t count, tessera_tensor *y,
                                   int64_t axis, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_concat", [&] {
    tessera_tensor &output = requireTensor(y, "y");
    JoinLayout layout =
        requireJoin("concat", "input", inputs, count, output, "y", axis);
    int64_t outer = layout.outer, inner = layout.inner;
    size_t elementSize = dtypeSize(output.dtype);
    size_t joinedPitch = output.shape[axis] * inner * elementSize;
    size_t offset = 0;
    for (int32_t k = 0; k < count; ++k) {
      size_t runBytes = inputs[k]->shape[axis] * inner * elementSize;
      copyRuns(static_cast<char *>(output.data) + offset, joinedPitch,
               inputs[k]->data, runBytes, runBytes, outer, stream);
      offset += runBytes;
    }
  });
}

extern "C" int tessera_cuda_split(const tessera_tensor *x,
                                  tessera_tensor *const *outputs,
                                  int32_t count, int64_t axis,
                                  cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_split", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    JoinLayout layout =
        requireJoin("split", "output", outputs, count, input, "x", axis);
    int64_t outer = layout.outer, inner = layout.inner;
    size_t elementSize = dtypeSize(input.dtype);
    size_t joinedPitch = input.shape[axis] * inner * elementSize;
    size_t offset = 0;
    for (int32_t k = 0; k < count; ++k) {
      size_t runBytes = outputs[k]->shape[axis] * inner * elementSize;
      copyRuns(outputs[k]->data, runBytes,
               static_cast<const char *>(input.data) + offset, joinedPitch,
               runBytes, outer, stream);
      offset += runBytes;
    }
  });
}
