// RUN: tessera-opt %s -split-input-file -tess-look-up-before-cast | FileCheck %s

// Tests an untied token embedding in mixed precision: the table's bf16 copy
// is not made; the rows are looked up in the f32 master table and cast.
// CHECK-LABEL: func.func @untied_embedding(
// CHECK-SAME: %[[W:[^:]*]]: tensor<512x64xf32>, %[[IDS:[^:]*]]: tensor<2x32xi64>
// CHECK-NOT: tess.cast %[[W]]
// CHECK: %[[ROWS:.*]] = tess.embedding %[[W]], %[[IDS]] : (tensor<512x64xf32>, tensor<2x32xi64>) -> tensor<2x32x64xf32>
// CHECK-NEXT: %[[E:.*]] = tess.cast %[[ROWS]] : tensor<2x32x64xf32> to tensor<2x32x64xbf16>
// CHECK-NEXT: return %[[E]]
func.func @untied_embedding(%w: tensor<512x64xf32>, %ids: tensor<2x32xi64>) -> tensor<2x32x64xbf16> {
  %t = tess.cast %w : tensor<512x64xf32> to tensor<512x64xbf16>
  %e = tess.embedding %t, %ids : (tensor<512x64xbf16>, tensor<2x32xi64>) -> tensor<2x32x64xbf16>
  return %e : tensor<2x32x64xbf16>
}

// -----

// Tests two lookups of one table (token ids and, say, a second batch): each
// reads the master table, and the copy goes.
// CHECK-LABEL: func.func @two_lookups(
// CHECK-SAME: %[[W:[^:]*]]: tensor<512x64xf32>
// CHECK-NOT: tensor<512x64xbf16>
// CHECK: tess.embedding %[[W]]
// CHECK: tess.cast
// CHECK: tess.embedding %[[W]]
// CHECK: tess.cast
func.func @two_lookups(%w: tensor<512x64xf32>, %a: tensor<2x32xi64>, %b: tensor<4xi64>)
    -> (tensor<2x32x64xbf16>, tensor<4x64xbf16>) {
  %t = tess.cast %w : tensor<512x64xf32> to tensor<512x64xbf16>
  %e = tess.embedding %t, %a : (tensor<512x64xbf16>, tensor<2x32xi64>) -> tensor<2x32x64xbf16>
  %f = tess.embedding %t, %b : (tensor<512x64xbf16>, tensor<4xi64>) -> tensor<4x64xbf16>
  return %e, %f : tensor<2x32x64xbf16>, tensor<4x64xbf16>
}

// -----

// Tests a tied table (the embedding is also the LM head's weight): the copy
// feeds a GEMM too, so it stays and the lookup reads it.
// CHECK-LABEL: func.func @tied_embedding(
// CHECK: %[[T:.*]] = tess.cast
// CHECK: tess.embedding %[[T]]
// CHECK: tess.linear %{{.*}}, %[[T]]
func.func @tied_embedding(%w: tensor<512x64xf32>, %ids: tensor<2x32xi64>) -> tensor<2x32x512xbf16> {
  %t = tess.cast %w : tensor<512x64xf32> to tensor<512x64xbf16>
  %e = tess.embedding %t, %ids : (tensor<512x64xbf16>, tensor<2x32xi64>) -> tensor<2x32x64xbf16>
  %logits = tess.linear %e, %t {transpose_weight} : (tensor<2x32x64xbf16>, tensor<512x64xbf16>) -> tensor<2x32x512xbf16>
  return %logits : tensor<2x32x512xbf16>
}

// -----

// Tests a copy that is also returned: a cast with any user besides lookups
// stays, and the lookup keeps reading it.
// CHECK-LABEL: func.func @copy_also_returned(
// CHECK: %[[T:.*]] = tess.cast
// CHECK: tess.embedding %[[T]]
func.func @copy_also_returned(%w: tensor<512x64xf32>, %ids: tensor<2x32xi64>)
    -> (tensor<2x32x64xbf16>, tensor<512x64xbf16>) {
  %t = tess.cast %w : tensor<512x64xf32> to tensor<512x64xbf16>
  %e = tess.embedding %t, %ids : (tensor<512x64xbf16>, tensor<2x32xi64>) -> tensor<2x32x64xbf16>
  return %e, %t : tensor<2x32x64xbf16>, tensor<512x64xbf16>
}
