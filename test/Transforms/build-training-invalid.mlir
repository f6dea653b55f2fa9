// RUN: tessera-opt %s -tess-build-training -split-input-file -verify-diagnostics
// RUN: not tessera-opt %s -tess-build-training=precision=fp8 -split-input-file 2>&1 | FileCheck %s --check-prefix=PRECISION
// RUN: not tessera-opt %s -tess-build-training=loss=seq2seq -split-input-file 2>&1 | FileCheck %s --check-prefix=LOSS

// PRECISION: error: tess-build-training: precision must be fp32, bf16 or fp16, got 'fp8'
// LOSS: error: tess-build-training: loss must be causal-lm or mlm, got 'seq2seq'

// Tests that an op without a VJP between a parameter and the loss is an
// error naming the op.
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x8xf32> {
  %table = tess.parameter "table" trainable : tensor<16x8xf32>
  %e = tess.embedding %table, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  // expected-error@+1 {{op 'tess.silu_grad' has no VJP; cannot differentiate}}
  %y = tess.silu_grad %e, %e : tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Tests that an op without a VJP is fine where no parameter reaches it.
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x8xf32> {
  %table = tess.parameter "table" trainable : tensor<16x8xf32>
  %c = tess.constant dense<1.0> : tensor<2x4x8xf32>
  %g = tess.silu_grad %c, %c : tensor<2x4x8xf32>
  %e = tess.embedding %table, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %y = tess.add %e, %g : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Tests that @forward must take the ids and return logits [B, T, V].
// expected-error@+1 {{@forward must take the token ids (one integer tensor [B, T]) and return the logits [B, T, V], got '(tensor<2x4xf32>) -> tensor<2x4x8xf32>'}}
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4x8xf32> {
  %w = tess.parameter "w" trainable : tensor<4x8xf32>
  %y = tess.linear %x, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %r = tess.reshape %y : (tensor<2x8xf32>) -> tensor<2x1x8xf32>
  %b = tess.broadcast %r : (tensor<2x1x8xf32>) -> tensor<2x4x8xf32>
  return %b : tensor<2x4x8xf32>
}

// -----

// expected-error@+1 {{@forward must take the token ids (one integer tensor [B, T]) and return the logits [B, T, V], got '(tensor<2x4xi64>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>)'}}
func.func @forward(%ids: tensor<2x4xi64>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %table = tess.parameter "table" trainable : tensor<16x8xf32>
  %e = tess.embedding %table, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  return %e, %e : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// expected-error@+1 {{@forward must take the token ids (one integer tensor [B, T]) and return the logits [B, T, V], got '(tensor<2x4xi64>) -> tensor<2x5x8xf32>'}}
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x5x8xf32> {
  %c = tess.constant dense<1.0> : tensor<2x5x8xf32>
  return %c : tensor<2x5x8xf32>
}

// -----

// Tests that the functions to build must not exist yet.
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x8xf32> {
  %table = tess.parameter "table" trainable : tensor<16x8xf32>
  %e = tess.embedding %table, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  return %e : tensor<2x4x8xf32>
}
// expected-error@+1 {{tess-build-training builds @optimizer_step, which already exists}}
func.func @optimizer_step() {
  return
}

// -----

// Tests that one parameter name cannot describe two tensors.
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x8xf32> {
  %table = tess.parameter "table" trainable : tensor<16x8xf32>
  // expected-error@+1 {{parameter 'table' is declared twice with different types or trainability}}
  %again = tess.parameter "table" : tensor<16x8xf32>
  %e = tess.embedding %table, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  return %e : tensor<2x4x8xf32>
}

// -----

// Tests that a trainable parameter must be a float tensor.
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x8xf32> {
  // expected-error@+1 {{trainable parameter 'offsets' must be a float tensor, got 'tensor<2x4xi64>'}}
  %offsets = tess.parameter "offsets" trainable : tensor<2x4xi64>
  %c = tess.constant dense<1.0> : tensor<2x4x8xf32>
  return %c : tensor<2x4x8xf32>
}
