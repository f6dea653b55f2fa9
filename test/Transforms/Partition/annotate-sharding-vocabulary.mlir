// RUN: tessera-opt %s -split-input-file --tess-annotate-sharding='mesh=1x2 strategy=tp' | FileCheck %s
// RUN: tessera-opt %s -split-input-file --tess-annotate-sharding='mesh=1x2 strategy=tp' --tess-partition-spmd | FileCheck %s --check-prefix=LOCAL

// Megatron's forced TP on an untied token table (Llama's embed_tokens, its
// head a table of its own): vocabulary-parallel, as Megatron-LM's
// VocabParallelEmbedding, the rule the stage model prices
// (MegatronPartition.h). The table's rows are over tp, the lookup is a
// partial sum completed by an all-reduce, and its gradient is computed as
// the rank's block of rows (rows_axis), not whole and then sliced. The
// head is in no Megatron block: it runs whole.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: tensor<8x4xf32> {tess.layout = #tess.layout<[tp, -]>, tess.parameter = "embed"}
// CHECK-SAME: tensor<6x4xf32> {tess.parameter = "head"}
// LOCAL-LABEL: func.func @forward_backward
// LOCAL: tess.embedding %{{.*}} {rows_axis = "tp"} : (tensor<4x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
// LOCAL-NEXT: tess.all_reduce
// LOCAL: tess.embedding_grad %{{.*}} {rows_axis = "tp"} : (tensor<2x3xi64>, tensor<2x3x4xf32>) -> tensor<4x4xf32>
// LOCAL-NOT: tess.all_gather
module {
  func.func @forward_backward(%ids: tensor<2x3xi64> {tess.input = "input_ids"},
                              %table: tensor<8x4xf32> {tess.parameter = "embed"},
                              %head: tensor<6x4xf32> {tess.parameter = "head"},
                              %scale: tensor<4xf32> {tess.parameter = "norm"},
                              %dy: tensor<2x3x4xf32> {tess.buffer = "dy"})
      -> (tensor<2x3x6xf32>, tensor<8x4xf32> {tess.gradient = "embed"}) {
    %e = tess.embedding %table, %ids : (tensor<8x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %n = tess.rms_norm %e scale %scale {epsilon = 1.0e-06 : f64} : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
    %logits = tess.linear %n, %head {transpose_weight} : (tensor<2x3x4xf32>, tensor<6x4xf32>) -> tensor<2x3x6xf32>
    %g = tess.embedding_grad %ids, %dy : (tensor<2x3xi64>, tensor<2x3x4xf32>) -> tensor<8x4xf32>
    return %logits, %g : tensor<2x3x6xf32>, tensor<8x4xf32>
  }
}

// -----

// A tied table (GPT-2's wte, Llama 3.2's embed_tokens) is also the head's
// weight, which runs whole: it stays whole, and so does the lookup.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: tensor<8x4xf32> {tess.parameter = "wte"}
// LOCAL-LABEL: func.func @forward_backward
// LOCAL-NOT: rows_axis
module {
  func.func @forward_backward(%ids: tensor<2x3xi64> {tess.input = "input_ids"},
                              %table: tensor<8x4xf32> {tess.parameter = "wte"})
      -> tensor<2x3x8xf32> {
    %e = tess.embedding %table, %ids : (tensor<8x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %logits = tess.linear %e, %table {transpose_weight} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
    return %logits : tensor<2x3x8xf32>
  }
}
