//===- AdamW.cpp - One AdamW step, in place -------------------------------===//
//
// torch.optim.AdamW's update (decoupled weight decay, bias-corrected moments):
//   param *= 1 - lr * weight_decay
//   g = grad * grad_scale
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   param -= (lr / (1 - beta1^step)) * m / (sqrt(v) / sqrt(1 - beta2^step) +
//   eps)
// The step-dependent factors are computed once in f64; the per-element math
// is f32 like PyTorch's, on the moments (always f32: bf16 moments lose the
// small updates late in training) and on the parameter widened from its
// storage, then rounded once back into it. grad_scale lets the caller fold
// gradient clipping and loss-scale division into this pass.
//
//===----------------------------------------------------------------------===//

#include "AdamWFactors.h"
#include "Errors.h"
#include "TensorAccess.h"

#include <cmath>

using namespace tessera::cpu;

extern "C" int tessera_cpu_adamw(tessera_tensor *param,
                                 const tessera_tensor *grad, tessera_tensor *m,
                                 tessera_tensor *v, int64_t step, double lr,
                                 double beta1, double beta2, double eps,
                                 double weight_decay, double grad_scale) {
  return runKernel("tessera_cpu_adamw", [&] {
    tessera_tensor &parameter = requireTensor(param, "param");
    const tessera_tensor &gradient = requireTensor(grad, "grad");
    tessera_tensor &firstMoment = requireTensor(m, "m");
    tessera_tensor &secondMoment = requireTensor(v, "v");
    Shape shape = shapeOf(parameter);
    requireShape(gradient, shape, "grad");
    requireShape(firstMoment, shape, "m");
    requireShape(secondMoment, shape, "v");
    if (firstMoment.dtype != TESSERA_F32 || secondMoment.dtype != TESSERA_F32)
      fail("the moments m and v must be f32");
    const AdamWFactors f =
        adamwFactors(step, lr, beta1, beta2, eps, weight_decay, grad_scale);

    FloatOutput parameterValues(parameter, "param", /*loadCurrent=*/true);
    FloatInput gradientValues(gradient, "grad");
    float *mValues = static_cast<float *>(firstMoment.data);
    float *vValues = static_cast<float *>(secondMoment.data);
    float decay = f.decay, stepSize = f.stepSize;
    float sqrtCorrection2 = f.sqrtCorrection2;
    float b1 = f.beta1, b2 = f.beta2;
    float oneMinusB1 = f.oneMinusBeta1, oneMinusB2 = f.oneMinusBeta2;
    float epsilon = f.epsilon, scale = f.gradScale;
    int64_t count = elementCount(parameter);
    for (int64_t i = 0; i < count; ++i) {
      float g = gradientValues[i] * scale;
      mValues[i] = b1 * mValues[i] + oneMinusB1 * g;
      vValues[i] = b2 * vValues[i] + oneMinusB2 * g * g;
      float denominator = std::sqrt(vValues[i]) / sqrtCorrection2 + epsilon;
      parameterValues[i] =
          parameterValues[i] * decay - stepSize * mValues[i] / denominator;
    }
    parameterValues.commit();
  });
}
