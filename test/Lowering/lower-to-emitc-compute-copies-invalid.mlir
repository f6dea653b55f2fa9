// RUN: tessera-opt %s -split-input-file --tess-lower-to-emitc -verify-diagnostics

// Tests that a parameter is read as its f32 master or as the compute copy
// of the step's own precision (program.h's parameter_step_dtypes): the
// driver keeps no other copy.
// expected-error @+1 {{tess-lower-to-emitc: parameter 'w' is read as 'f16'; a bf16 step reads a parameter as its f32 master or its compute copy of that precision}}
func.func @forward_backward(%w: tensor<4x4xf16> {tess.parameter = "w"},
                            %ids: tensor<2x8xi64> {tess.input = "input_ids"},
                            %targets: tensor<2x8xi64> {tess.input = "targets"},
                            %scale: tensor<f32> {tess.input = "loss_scale"})
    -> (tensor<f32>, tensor<4x4xbf16> {tess.gradient = "w"})
    attributes {tess.precision = "bf16"} {
  %g = tess.cast %w : tensor<4x4xf16> to tensor<4x4xbf16>
  return %scale, %g : tensor<f32>, tensor<4x4xbf16>
}

// -----

// Tests an fp32 step: it has no compute copies.
// expected-error @+1 {{tess-lower-to-emitc: parameter 'w' is read as 'bf16'; an fp32 step reads every parameter as its f32 master}}
func.func @forward_backward(%w: tensor<4x4xbf16> {tess.parameter = "w"},
                            %ids: tensor<2x8xi64> {tess.input = "input_ids"},
                            %targets: tensor<2x8xi64> {tess.input = "targets"},
                            %scale: tensor<f32> {tess.input = "loss_scale"})
    -> (tensor<f32>, tensor<4x4xf32> {tess.gradient = "w"})
    attributes {tess.precision = "fp32"} {
  %g = tess.cast %w : tensor<4x4xbf16> to tensor<4x4xf32>
  return %scale, %g : tensor<f32>, tensor<4x4xf32>
}
