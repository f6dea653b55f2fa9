//===- Normalization.cu - LayerNorm and RMSNorm, forward and backward -----===//
//
// One block per row (the elements of dims [axis, rank)), as in llm.c: a row
// of a transformer's hidden size (768..8192) fits a block's registers and
// L1, so the statistics pass and the normalize pass read DRAM about once.
// Statistics are accumulated in f64 per thread and block-reduced, like the
// CPU kernels' f64 sums, so the two backends agree to f32 rounding; LayerNorm
// uses the two-pass variance (mean first), which stays accurate for rows
// with a large mean.
//
// LayerNorm and RMSNorm share the kernels (`rms` selects: RMSNorm is
// LayerNorm with the mean fixed at 0 and no bias). The backward kernel
// recomputes the statistics (the ABI passes no saved mean/rstd), writes dx
// and leaves (mean, rstd) per row in scratch for the parameter gradients.
// Those are column sums over all rows: a second kernel gives each thread one
// column and a chunk of rows (coalesced along the row), adds its f64 partial
// with atomicAdd into scratch, and a last kernel rounds the sums into dscale
// and dbias. This avoids per-element atomics of the one-kernel version.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

using namespace tessera::cuda;
using tessera::cpu::elementCount;
using tessera::cpu::product;
using tessera::cpu::requireAxis;
using tessera::cpu::requireShape;
using tessera::cpu::requireTensor;
using tessera::cpu::shapeOf;

namespace {

constexpr int kNormThreads = 256;
constexpr int kRowsPerColumnChunk = 64;

struct RowStatistics {
  float mean;
  float reciprocalStd;
};

/// Every thread of the block gets the row's statistics.
__device__ RowStatistics rowStatistics(const void *x, int xType,
                                       int64_t rowStart, int64_t width,
                                       double epsilon, bool rms,
                                       double *shared) {
  double mean = 0.0;
  if (!rms) {
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < width; j += blockDim.x)
      sum += loadFloat(x, xType, rowStart + j);
    mean = blockSum(sum, shared) / static_cast<double>(width);
  }
  // As the CPU kernels: f64 deviations from the f64 mean (rms: the value).
  float meanF = static_cast<float>(mean);
  double squares = 0.0;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    double deviation = rms ? static_cast<double>(loadFloat(x, xType, rowStart + j))
                           : static_cast<double>(loadFloat(x, xType, rowStart + j)) - mean;
    squares += deviation * deviation;
  }
  double variance = blockSum(squares, shared) / static_cast<double>(width);
  return {meanF, static_cast<float>(1.0 / sqrt(variance + epsilon))};
}

__global__ void normForwardKernel(const void *x, int xType, const void *scale,
                                  int scaleType, const void *bias, int biasType,
                                  void *y, int yType, int64_t width,
                                  double epsilon, bool rms) {
  __shared__ double shared[32];
  int64_t rowStart = static_cast<int64_t>(blockIdx.x) * width;
  RowStatistics statistics =
      rowStatistics(x, xType, rowStart, width, epsilon, rms, shared);
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    float value = loadFloat(x, xType, rowStart + j);
    float normalized = rms ? value * statistics.reciprocalStd
                           : (value - statistics.mean) * statistics.reciprocalStd;
    if (scale)
      normalized *= loadFloat(scale, scaleType, j);
    if (bias)
      normalized += loadFloat(bias, biasType, j);
    storeFloat(y, yType, rowStart + j, normalized);
  }
}

__global__ void normBackwardKernel(const void *x, int xType, const void *scale,
                                   int scaleType, const void *dy, int dyType,
                                   void *dx, int dxType, int64_t width,
                                   double epsilon, bool rms,
                                   RowStatistics *savedStatistics) {
  __shared__ double shared[32];
  int64_t row = blockIdx.x;
  int64_t rowStart = row * width;
  RowStatistics statistics =
      rowStatistics(x, xType, rowStart, width, epsilon, rms, shared);
  // layer_norm: dx = rstd (h - mean(h) - xhat mean(h xhat))
  // rms_norm:   dx = rstd (h - x rstd^2 mean(h x))
  double sumScaled = 0.0, sumScaledTimesOther = 0.0;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    float value = loadFloat(x, xType, rowStart + j);
    float upstream = loadFloat(dy, dyType, rowStart + j);
    float scaled = scale ? upstream * loadFloat(scale, scaleType, j) : upstream;
    float other = rms ? value
                      : (value - statistics.mean) * statistics.reciprocalStd;
    sumScaled += scaled;
    sumScaledTimesOther += static_cast<double>(scaled) * other;
  }
  double widthD = static_cast<double>(width);
  float meanScaled = static_cast<float>(blockSum(sumScaled, shared) / widthD);
  double meanProduct = blockSum(sumScaledTimesOther, shared) / widthD;
  float correction =
      rms ? static_cast<float>(statistics.reciprocalStd *
                               statistics.reciprocalStd * meanProduct)
          : static_cast<float>(meanProduct);
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    float value = loadFloat(x, xType, rowStart + j);
    float upstream = loadFloat(dy, dyType, rowStart + j);
    float scaled = scale ? upstream * loadFloat(scale, scaleType, j) : upstream;
    float result;
    if (rms) {
      result = statistics.reciprocalStd * (scaled - value * correction);
    } else {
      float normalized = (value - statistics.mean) * statistics.reciprocalStd;
      result = statistics.reciprocalStd *
               (scaled - meanScaled - normalized * correction);
    }
    storeFloat(dx, dxType, rowStart + j, result);
  }
  if (threadIdx.x == 0 && savedStatistics)
    savedStatistics[row] = statistics;
}

/// sums[j] += over a chunk of rows of dy * xhat (sums[width + j] += dy).
__global__ void parameterGradientKernel(const void *x, int xType,
                                        const void *dy, int dyType,
                                        const RowStatistics *statistics,
                                        int64_t rows, int64_t width, bool rms,
                                        double *sums) {
  int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= width)
    return;
  int64_t firstRow = static_cast<int64_t>(blockIdx.y) * kRowsPerColumnChunk;
  int64_t lastRow = min(rows, firstRow + kRowsPerColumnChunk);
  double scaleSum = 0.0, biasSum = 0.0;
  for (int64_t row = firstRow; row < lastRow; ++row) {
    float value = loadFloat(x, xType, row * width + j);
    float upstream = loadFloat(dy, dyType, row * width + j);
    RowStatistics s = statistics[row];
    float normalized = rms ? value * s.reciprocalStd
                           : (value - s.mean) * s.reciprocalStd;
    // The CPU kernel's rms product is dy * x * rstd, in f64: keep the order.
    scaleSum += rms ? static_cast<double>(upstream) * value * s.reciprocalStd
                    : static_cast<double>(upstream) * normalized;
    biasSum += upstream;
  }
  atomicAdd(&sums[j], scaleSum);
  atomicAdd(&sums[width + j], biasSum);
}

__global__ void storeSumsKernel(const double *sums, void *output,
                                int outputType, int64_t width) {
  TESSERA_GRID_STRIDE_LOOP(j, width) {
    storeFloat(output, outputType, j, static_cast<float>(sums[j]));
  }
}

struct RowLayout {
  int64_t rows;
  int64_t width;
  Shape normalizedShape;
};

RowLayout rowLayout(const tessera_tensor &x, int64_t axis) {
  requireAxis(axis, x.rank, "axis");
  Shape shape = shapeOf(x);
  return {product(shape, 0, static_cast<size_t>(axis)),
          product(shape, static_cast<size_t>(axis), shape.size()),
          Shape(shape.begin() + axis, shape.end())};
}

/// The data pointer and dtype of an optional parameter, checked.
const tessera_tensor *parameter(const tessera_tensor *tensor, const char *name,
                                const RowLayout &layout) {
  if (!tensor)
    return nullptr;
  requireShape(requireTensor(tensor, name), layout.normalizedShape, name);
  requireKernelFloat(*tensor, name);
  return tensor;
}

void checkEpsilon(double epsilon) {
  if (!(epsilon >= 0.0))
    fail("epsilon " + std::to_string(epsilon) + " must be >= 0");
}

const void *dataOf(const tessera_tensor *tensor) {
  return tensor ? tensor->data : nullptr;
}
int typeOf(const tessera_tensor *tensor) {
  return tensor ? tensor->dtype : TESSERA_F32;
}

void normForward(const tessera_tensor *x, const tessera_tensor *scale,
                 const tessera_tensor *bias, tessera_tensor *y, int64_t axis,
                 double epsilon, bool rms, cudaStream_t stream) {
  const tessera_tensor &input = requireTensor(x, "x");
  tessera_tensor &output = requireTensor(y, "y");
  requireShape(output, shapeOf(input), "y");
  requireKernelFloat(input, "x");
  requireKernelFloat(output, "y");
  checkEpsilon(epsilon);
  RowLayout layout = rowLayout(input, axis);
  const tessera_tensor *scaleTensor = parameter(scale, "scale", layout);
  const tessera_tensor *biasTensor = parameter(bias, "bias", layout);
  if (layout.rows == 0 || layout.width == 0)
    return;
  if (layout.rows > INT32_MAX)
    fail("more than 2^31 rows");
  normForwardKernel<<<static_cast<unsigned>(layout.rows), kNormThreads, 0,
                      stream>>>(input.data, input.dtype, dataOf(scaleTensor),
                                typeOf(scaleTensor), dataOf(biasTensor),
                                typeOf(biasTensor), output.data, output.dtype,
                                layout.width, epsilon, rms);
  cudaCheckLaunch();
}

void normBackward(const tessera_tensor *x, const tessera_tensor *scale,
                  const tessera_tensor *dy, tessera_tensor *dx,
                  tessera_tensor *dscale, tessera_tensor *dbias, int64_t axis,
                  double epsilon, bool rms, cudaStream_t stream) {
  const tessera_tensor &input = requireTensor(x, "x");
  const tessera_tensor &upstream = requireTensor(dy, "dy");
  tessera_tensor &inputGradient = requireTensor(dx, "dx");
  requireShape(upstream, shapeOf(input), "dy");
  requireShape(inputGradient, shapeOf(input), "dx");
  requireKernelFloat(input, "x");
  requireKernelFloat(upstream, "dy");
  requireKernelFloat(inputGradient, "dx");
  checkEpsilon(epsilon);
  RowLayout layout = rowLayout(input, axis);
  const tessera_tensor *scaleTensor = parameter(scale, "scale", layout);
  if (dscale && !scale)
    fail("dscale was requested without a scale");
  parameter(dscale, "dscale", layout);
  parameter(dbias, "dbias", layout);
  if (layout.width == 0)
    return;
  if (layout.rows > INT32_MAX)
    fail("more than 2^31 rows");
  bool parameterGradients = dscale || dbias;
  RowStatistics *statistics = nullptr;
  double *sums = nullptr;
  if (parameterGradients) {
    size_t statisticsBytes = layout.rows * sizeof(RowStatistics);
    size_t sumsBytes = 2 * layout.width * sizeof(double);
    char *scratch = static_cast<char *>(
        streamScratch(stream, statisticsBytes + sumsBytes + 16));
    sums = reinterpret_cast<double *>(scratch);
    statistics = reinterpret_cast<RowStatistics *>(scratch + sumsBytes);
    cudaCheck(cudaMemsetAsync(sums, 0, sumsBytes, stream));
  }
  if (layout.rows > 0) {
    normBackwardKernel<<<static_cast<unsigned>(layout.rows), kNormThreads, 0,
                         stream>>>(
        input.data, input.dtype, dataOf(scaleTensor), typeOf(scaleTensor),
        upstream.data, upstream.dtype, inputGradient.data, inputGradient.dtype,
        layout.width, epsilon, rms, statistics);
    cudaCheckLaunch();
  }
  if (!parameterGradients)
    return;
  if (layout.rows > 0) {
    dim3 grid(static_cast<unsigned>((layout.width + kNormThreads - 1) /
                                    kNormThreads),
              static_cast<unsigned>((layout.rows + kRowsPerColumnChunk - 1) /
                                    kRowsPerColumnChunk));
    parameterGradientKernel<<<grid, kNormThreads, 0, stream>>>(
        input.data, input.dtype, upstream.data, upstream.dtype, statistics,
        layout.rows, layout.width, rms, sums);
    cudaCheckLaunch();
  }
  if (dscale) {
    storeSumsKernel<<<gridFor(layout.width), kThreadsPerBlock, 0, stream>>>(
        sums, dscale->data, dscale->dtype, layout.width);
    cudaCheckLaunch();
  }
  if (dbias) {
    storeSumsKernel<<<gridFor(layout.width), kThreadsPerBlock, 0, stream>>>(
        sums + layout.width, dbias->data, dbias->dtype, layout.width);
    cudaCheckLaunch();
  }
}

} // namespace

extern "C" int tessera_cuda_layer_norm(const tessera_tensor *x,
                                       const tessera_tensor *scale,
                                       const tessera_tensor *bias,
                                       tessera_tensor *y, int64_t axis,
                                       double epsilon, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_layer_norm", [&] {
    normForward(x, scale, bias, y, axis, epsilon, /*rms=*/false, stream);
  });
}

extern "C" int tessera_cuda_layer_norm_grad(
    const tessera_tensor *x, const tessera_tensor *scale,
    const tessera_tensor *dy, tessera_tensor *dx, tessera_tensor *dscale,
    tessera_tensor *dbias, int64_t axis, double epsilon, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_layer_norm_grad", [&] {
    normBackward(x, scale, dy, dx, dscale, dbias, axis, epsilon,
                 /*rms=*/false, stream);
  });
}

extern "C" int tessera_cuda_rms_norm(const tessera_tensor *x,
                                     const tessera_tensor *scale,
                                     tessera_tensor *y, int64_t axis,
                                     double epsilon, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_rms_norm", [&] {
    normForward(x, scale, nullptr, y, axis, epsilon, /*rms=*/true, stream);
  });
}

extern "C" int tessera_cuda_rms_norm_grad(const tessera_tensor *x,
                                          const tessera_tensor *scale,
                                          const tessera_tensor *dy,
                                          tessera_tensor *dx,
                                          tessera_tensor *dscale, int64_t axis,
                                          double epsilon, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_rms_norm_grad", [&] {
    normBackward(x, scale, dy, dx, dscale, nullptr, axis, epsilon,
                 /*rms=*/true, stream);
  });
}
