// RUN: tessera-opt %s -cse -canonicalize -split-input-file | FileCheck %s

// Ops that draw random numbers (tess.dropout, tess.attention with dropout)
// write the tess::RandomNumbers resource: CSE must not merge two of them and
// canonicalization must not drop an unused one. Attention without dropout
// stays pure.

// Tests that two attentions with dropout stay two, and equal attentions
// without dropout are merged.
// CHECK-LABEL: func.func @attention_dropout_not_merged
// CHECK-COUNT-2: tess.attention {{.*}}dropout = 1.000000e-01
// CHECK: %[[PURE:.*]] = tess.attention
// CHECK-NOT: tess.attention
// CHECK: return %{{.*}}, %{{.*}}, %[[PURE]], %[[PURE]]
func.func @attention_dropout_not_merged(%q: tensor<1x1x4x8xf32>) -> (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) {
  %a = tess.attention %q, %q, %q {causal, scale = 0.5 : f64, dropout = 0.1 : f64} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  %b = tess.attention %q, %q, %q {causal, scale = 0.5 : f64, dropout = 0.1 : f64} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  %c = tess.attention %q, %q, %q {causal, scale = 0.5 : f64} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  %d = tess.attention %q, %q, %q {causal, scale = 0.5 : f64} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return %a, %b, %c, %d : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>
}

// -----

// Tests that dropouts are neither merged nor removed when unused, while an
// unused pure attention is removed.
// CHECK-LABEL: func.func @dropout_kept
// CHECK-COUNT-2: tess.dropout
// CHECK-NOT: tess.attention
func.func @dropout_kept(%q: tensor<1x1x4x8xf32>) {
  %x = tess.dropout %q {rate = 0.1 : f64} : tensor<1x1x4x8xf32>
  %y = tess.dropout %q {rate = 0.1 : f64} : tensor<1x1x4x8xf32>
  %z = tess.attention %q, %q, %q {causal, scale = 0.5 : f64} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return
}
