// RUN: tessera-opt %s -split-input-file -tess-print-sharding-labels=mesh=2x2 -verify-diagnostics -o /dev/null > /dev/null
// RUN: not tessera-opt %s -split-input-file -tess-print-sharding-labels=mesh=2y2 -o /dev/null 2>&1 | FileCheck %s --check-prefix=MESH

// MESH: error: tess-print-sharding-labels: mesh '2y2':

// Tests that a split of a dim the op normalizes is gathered first.
func.func @normalized_dim(%x: tensor<2x32x64xf32>) {
  // expected-warning@+1 {{operand 0 dim 2 arrives split over 'tp', but the op keeps that dim whole: it is resharded first}}
  %0 = tess.layer_norm %x {tess.arriving = [#tess.layout<[dp, -, tp]>]} : (tensor<2x32x64xf32>) -> tensor<2x32x64xf32>
  return
}

// -----

// Tests that a split's axis (pieced) arriving split is gathered: only the
// search splits it.
func.func @pieced_axis(%x: tensor<2x32x192xf32>) {
  // expected-warning@+1 {{operand 0 dim 2 arrives split over 'tp', but the op keeps its pieced label whole (only the search splits it): it is resharded first}}
  %0:2 = tess.split %x {axis = -1 : i64, sizes = array<i64: 64, 128>, tess.arriving = [#tess.layout<[-, -, tp]>]} : (tensor<2x32x192xf32>) -> (tensor<2x32x64xf32>, tensor<2x32x128xf32>)
  return
}


// -----

// Tests that one label takes one axis, the first operand's: a weight whose
// rows arrive over another axis than the input's features is resharded.
func.func @label_taken(%x: tensor<8x64xf32>, %w: tensor<64x128xf32>) {
  // expected-warning@+1 {{operand 1 dim 0 arrives split over 'dp', but the op runs with that label on another axis: it is resharded first}}
  %0 = tess.linear %x, %w {tess.arriving = [#tess.layout<[-, tp]>, #tess.layout<[dp, -]>]} : (tensor<8x64xf32>, tensor<64x128xf32>) -> tensor<8x128xf32>
  return
}

// -----

func.func @arriving_length(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{tess.arriving must be an array of one #tess.layout per operand (1)}}
  %0 = tess.gelu %x {tess.arriving = []} : tensor<4x8xf32>
  return
}

// -----

func.func @arriving_not_a_layout(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{tess.arriving: operand 0's layout is not a #tess.layout}}
  %0 = tess.gelu %x {tess.arriving = ["[dp, -]"]} : tensor<4x8xf32>
  return
}

// -----

func.func @arriving_axis(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{tess.arriving: operand 0:}}
  %0 = tess.gelu %x {tess.arriving = [#tess.layout<[pp, -]>]} : tensor<4x8xf32>
  return
}

// -----

func.func @arriving_rank(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{tess.arriving: operand 0's layout has rank 1, the operand 2}}
  %0 = tess.gelu %x {tess.arriving = [#tess.layout<[dp]>]} : tensor<4x8xf32>
  return
}
