// RUN: tessera-opt %s | tessera-opt | FileCheck %s
// RUN: tessera-opt %s --mlir-print-op-generic | tessera-opt | FileCheck %s

// Round trip of the mesh attribute and of every op of TessCollectiveOps.td
// (the examples of their descriptions), through the custom and the generic
// form.

// CHECK: module attributes {tess.mesh = #tess.mesh<dp = 2, tp = 2>}
module attributes {tess.mesh = #tess.mesh<dp = 2, tp = 2>} {
  // CHECK-LABEL: func.func @collectives
  func.func @collectives(%x: tensor<2x31x64xf32>, %part: tensor<2x31x32xf32>,
                         %g: tensor<64x192xf32>, %t: tensor<16x64xf32>,
                         %h: tensor<2x4x31x16xf32>) {
    // CHECK: tess.all_reduce %{{.*}} {axis = "tp"} : tensor<2x31x64xf32>
    %0 = tess.all_reduce %x {axis = "tp", reduction = #tess<reduction sum>} : tensor<2x31x64xf32>
    // CHECK: tess.all_reduce %{{.*}} {axis = "dp", reduction = #tess<reduction max>} : tensor<2x31x64xf32>
    %1 = tess.all_reduce %x {axis = "dp", reduction = #tess<reduction max>} : tensor<2x31x64xf32>
    // CHECK: tess.all_gather %{{.*}} {axis = "tp", dim = 2 : i64} : (tensor<2x31x32xf32>) -> tensor<2x31x64xf32>
    %2 = tess.all_gather %part {axis = "tp", dim = 2 : i64}
      : (tensor<2x31x32xf32>) -> tensor<2x31x64xf32>
    // CHECK: tess.reduce_scatter %{{.*}} {axis = "dp", dim = 0 : i64} : (tensor<64x192xf32>) -> tensor<32x192xf32>
    %3 = tess.reduce_scatter %g {axis = "dp", dim = 0 : i64}
      : (tensor<64x192xf32>) -> tensor<32x192xf32>
    // CHECK: tess.all_to_all %{{.*}} {axis = "tp", concat_dim = 0 : i64, split_dim = 1 : i64} : (tensor<16x64xf32>) -> tensor<32x32xf32>
    %4 = tess.all_to_all %t {axis = "tp", split_dim = 1 : i64, concat_dim = 0 : i64}
      : (tensor<16x64xf32>) -> tensor<32x32xf32>
    // CHECK: tess.shard_slice %{{.*}} {axis = "tp", dim = 1 : i64} : (tensor<2x4x31x16xf32>) -> tensor<2x2x31x16xf32>
    %5 = tess.shard_slice %h {axis = "tp", dim = 1 : i64}
      : (tensor<2x4x31x16xf32>) -> tensor<2x2x31x16xf32>
    return
  }
}

// -----

// A collective is never dropped, even when its result is unused: every rank
// must call the same collectives in the same order.
// RUN: tessera-opt %s -split-input-file -canonicalize -cse | FileCheck %s --check-prefix=KEEP
// KEEP-LABEL: func.func @unused
// KEEP-COUNT-2: tess.all_reduce
// KEEP-NOT: tess.shard_slice
module attributes {tess.mesh = #tess.mesh<dp = 4>} {
  func.func @unused(%x: tensor<8xf32>) {
    %0 = tess.all_reduce %x {axis = "dp"} : tensor<8xf32>
    %1 = tess.all_reduce %x {axis = "dp"} : tensor<8xf32>
    %2 = tess.shard_slice %x {axis = "dp", dim = 0 : i64} : (tensor<8xf32>) -> tensor<2xf32>
    return
  }
}
