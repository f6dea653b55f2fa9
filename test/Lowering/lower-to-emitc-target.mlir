// RUN: not tessera-opt %s --tess-lower-to-emitc=target=gpu 2>&1 | FileCheck %s

// The target names the kernels: cpu or cuda.
// CHECK: error: tess-lower-to-emitc: unknown target 'gpu' (expected cpu or cuda)
module {
}
