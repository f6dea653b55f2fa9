//===- AdamW.cu - The AdamW step and the gradient's sum of squares --------===//
//
// AdamW is one elementwise pass over (param, grad, m, v): read 4 tensors,
// write 3, arithmetic identical to runtime/cpu/AdamW.cpp (step-dependent
// factors computed once in f64 on the host, per-element math in f32, the
// parameter rounded once into its storage). It is launched once per tensor;
// a multi-tensor launch (a table of tensors walked by one grid, as
// PyTorch's foreach kernels do) is the next step once launch overhead shows.
//
// sum_squares feeds the global gradient norm without a host round trip:
// per-thread f64 partial sums, a block reduction, and one f64 atomicAdd per
// block into the caller's device accumulator.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include <cmath>

using namespace tessera::cuda;
using tessera::cpu::elementCount;
using tessera::cpu::requireShape;
using tessera::cpu::requireTensor;
using tessera::cpu::shapeOf;

namespace {

struct AdamWFactors {
  float decay, stepSize, sqrtCorrection2, beta1, beta2, oneMinusBeta1,
      oneMinusBeta2, epsilon, gradScale;
};

__global__ void adamwKernel(void *param, int paramType, const void *grad,
                            int gradType, float *m, float *v, int64_t count,
                            AdamWFactors f) {
  TESSERA_GRID_STRIDE_LOOP(i, count) {
    float g = loadFloat(grad, gradType, i) * f.gradScale;
    float mi = f.beta1 * m[i] + f.oneMinusBeta1 * g;
    float vi = f.beta2 * v[i] + f.oneMinusBeta2 * g * g;
    m[i] = mi;
    v[i] = vi;
    float denominator = sqrtf(vi) / f.sqrtCorrection2 + f.epsilon;
    float p = loadFloat(param, paramType, i);
    storeFloat(param, paramType, i, p * f.decay - f.stepSize * mi / denominator);
  }
}

__global__ void sumSquaresKernel(const void *x, int xType, int64_t count,
                                 double *accumulator) {
  __shared__ double shared[32];
  double sum = 0.0;
  TESSERA_GRID_STRIDE_LOOP(i, count) {
    double value = loadNumber(x, xType, i);
    sum += value * value;
  }
  sum = blockSum(sum, shared);
  if (threadIdx.x == 0)
    atomicAdd(accumulator, sum);
}

} // namespace

extern "C" int tessera_cuda_adamw(tessera_tensor *param,
                                  const tessera_tensor *grad, tessera_tensor *m,
                                  tessera_tensor *v, int64_t step, double lr,
                                  double beta1, double beta2, double eps,
                                  double weight_decay, double grad_scale,
                                  cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_adamw", [&] {
    tessera_tensor &parameter = requireTensor(param, "param");
    const tessera_tensor &gradient = requireTensor(grad, "grad");
    tessera_tensor &firstMoment = requireTensor(m, "m");
    tessera_tensor &secondMoment = requireTensor(v, "v");
    Shape shape = shapeOf(parameter);
    requireShape(gradient, shape, "grad");
    requireShape(firstMoment, shape, "m");
    requireShape(secondMoment, shape, "v");
    requireKernelFloat(parameter, "param");
    requireKernelFloat(gradient, "grad");
    if (firstMoment.dtype != TESSERA_F32 || secondMoment.dtype != TESSERA_F32)
      fail("the moments m and v must be f32");
    if (step < 1)
      fail("step " + std::to_string(step) + " must be >= 1");
    double stepD = static_cast<double>(step);
    AdamWFactors factors{
        static_cast<float>(1.0 - lr * weight_decay),
        static_cast<float>(lr / (1.0 - std::pow(beta1, stepD))),
        static_cast<float>(std::sqrt(1.0 - std::pow(beta2, stepD))),
        static_cast<float>(beta1),
        static_cast<float>(beta2),
        static_cast<float>(1.0 - beta1),
        static_cast<float>(1.0 - beta2),
        static_cast<float>(eps),
        static_cast<float>(grad_scale)};
    int64_t count = elementCount(parameter);
    if (count == 0)
      return;
    adamwKernel<<<gridFor(count), kThreadsPerBlock, 0, stream>>>(
        parameter.data, parameter.dtype, gradient.data, gradient.dtype,
        static_cast<float *>(firstMoment.data),
        static_cast<float *>(secondMoment.data), count, factors);
    cudaCheckLaunch();
  });
}

extern "C" int tessera_cuda_sum_squares(const tessera_tensor *x,
                                        double *accumulator,
                                        cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_sum_squares", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera::cpu::requireFloatType(input, "x");
    if (!accumulator)
      fail("accumulator is null");
    int64_t count = elementCount(input);
    if (count == 0)
      return;
    unsigned grid = std::min<unsigned>(gridFor(count), 1024);
    sumSquaresKernel<<<grid, kThreadsPerBlock, 0, stream>>>(
        input.data, input.dtype, count, accumulator);
    cudaCheckLaunch();
  });
}
