//===- Embedding.cu - Row lookups (embedding, gather) and their grads -----===//
//
// The forwards copy slices: one thread per output element, so a row of the
// table is read by consecutive threads (coalesced) and any element size
// works (the copy is by bytes of the element's width). Every index is
// range-checked on the device; a bad one is recorded (value, flat position,
// range) for tessera_cuda_check_device_errors and its slice is zero-filled.
//
// The gradients scatter-add: the same token may occur many times in a batch,
// so each dy element is added with an f32 atomicAdd into an f32 buffer (the
// gradient itself when it is f32, else scratch rounded once at the end).
// This is sort-free and fast for embedding tables (few collisions per row);
// the summation order is not fixed, so results match the CPU to f32
// rounding, not bit for bit.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

using namespace tessera::cuda;
using tessera::cpu::dtypeSize;
using tessera::cpu::elementCount;
using tessera::cpu::product;
using tessera::cpu::requireAxis;
using tessera::cpu::requireIndexType;
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
};

__device__ int64_t lookupIndex(const void *indices, int indexType,
                               int64_t position, const Lookup &lookup,
                               DeviceErrorRecord *errors, const char *kernel) {
  int64_t index = loadInteger(indices, indexType, position);
  int64_t low = lookup.allowNegative ? -lookup.length : 0;
  if (index < low || index >= lookup.length) {
    reportDeviceError(errors, kIndexOutOfRange, index, position, low,
                      lookup.length, kernel);
    return -1;
  }
  return index < 0 ? index + lookup.length : index;
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

__global__ void scatterAddKernel(const void *dy, int dyType,
                                 const void *indices, int indexType,
                                 float *accumulator, Lookup lookup,
                                 DeviceErrorRecord *errors,
                                 const char *kernel) {
  int64_t count = lookup.outer * lookup.indexCount * lookup.inner;
  TESSERA_GRID_STRIDE_LOOP(i, count) {
    int64_t inner = i % lookup.inner;
    int64_t n = (i / lookup.inner) % lookup.indexCount;
    int64_t o = i / (lookup.inner * lookup.indexCount);
    int64_t index = lookupIndex(indices, indexType, n, lookup, errors, kernel);
    if (index >= 0)
      atomicAdd(&accumulator[(o * lookup.length + index) * lookup.inner + inner],
                loadFloat(dy, dyType, i));
  }
}

__global__ void roundKernel(const float *source, void *destination,
                            int destinationType, int64_t count) {
  TESSERA_GRID_STRIDE_LOOP(i, count) {
    storeFloat(destination, destinationType, i, source[i]);
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

void launchScatterAdd(const tessera_tensor &dy, const tessera_tensor &indices,
                      tessera_tensor &dx, const Lookup &lookup,
                      const char *kernel, cudaStream_t stream) {
  int64_t dxCount = elementCount(dx);
  if (dxCount == 0)
    return;
  bool direct = dx.dtype == TESSERA_F32;
  float *accumulator =
      direct ? static_cast<float *>(dx.data)
             : static_cast<float *>(
                   streamScratch(stream, dxCount * sizeof(float)));
  cudaCheck(cudaMemsetAsync(accumulator, 0, dxCount * sizeof(float), stream));
  int64_t count = lookup.outer * lookup.indexCount * lookup.inner;
  if (count > 0) {
    scatterAddKernel<<<gridFor(count), kThreadsPerBlock, 0, stream>>>(
        dy.data, dy.dtype, indices.data, indices.dtype, accumulator, lookup,
        deviceErrorRecord(), kernel);
    cudaCheckLaunch();
  }
  if (!direct) {
    roundKernel<<<gridFor(dxCount), kThreadsPerBlock, 0, stream>>>(
        accumulator, dx.data, dx.dtype, dxCount);
    cudaCheckLaunch();
  }
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
    Lookup lookup{1, weights.shape[0], weights.shape[1], elementCount(tokens),
                  false};
    launchLookup(weights, tokens, output, lookup, deviceNameOf(kEmbeddingName),
                 stream);
  });
}

extern "C" int tessera_cuda_embedding_grad(const tessera_tensor *ids,
                                           const tessera_tensor *dy,
                                           tessera_tensor *dtable,
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
    Lookup lookup{1, tableGradient.shape[0], tableGradient.shape[1],
                  elementCount(tokens), false};
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
