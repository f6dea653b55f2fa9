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

// -----

// The LM head whose result is the loss's logits is column-parallel over the
// vocabulary (Megatron-LM's output layer), and so is a table tied to it;
// the loss and its gradient are then computed on each rank's block of the
// classes, as Megatron's vocab_parallel_cross_entropy: each row's maximum
// (all-reduced by max), exponent sum and target logit (by sum), the loss
// whole on every rank, the gradient each rank's block of classes, made of
// the softmax the loss kept. No logits are gathered for the loss; the
// function records
// the classes and ignore index the lowering reads.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: tensor<8x4xf32> {tess.layout = #tess.layout<[tp, -]>, tess.parameter = "wte"}
// LOCAL-LABEL: func.func @forward_backward
// LOCAL-SAME: tess.ignore_index = -100 : i64, tess.partitioned, tess.vocabulary = 8 : i64
// LOCAL:      tess.embedding %{{.*}} {rows_axis = "tp"} : (tensor<4x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
// LOCAL:      %[[LOGITS:.*]] = tess.linear %{{.*}} {transpose_weight} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
// LOCAL:      %[[MAX:.*]] = tess.reduce_max %[[LOGITS]] {dims = array<i64: -1>, keep_dims}
// LOCAL-NEXT: tess.all_reduce %[[MAX]] {axis = "tp", reduction = #tess<reduction max>} : tensor<2x3x1xf32>
// LOCAL:      tess.all_reduce %{{.*}} {axis = "tp"} : tensor<2x3x1xf32>
// LOCAL:      %[[IDS:.*]] = tess.shard_slice %{{.*}} {axis = "tp", dim = 2 : i64} : (tensor<1x1x8xi64>) -> tensor<1x1x4xi64>
// LOCAL:      tess.compare eq, %{{.*}}, %[[IDS]]
// LOCAL:      tess.all_reduce %{{.*}} {axis = "tp"} : tensor<2x3x1xf32>
// LOCAL:      tess.div %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// LOCAL:      tess.sub %{{.*}} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// LOCAL-NOT:  tess.cross_entropy
// Only the gradient this function returns whole is gathered, at its return.
// LOCAL:      tess.all_gather %{{.*}} {axis = "tp", dim = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x8xf32>
// LOCAL-NEXT: return
module {
  func.func @forward_backward(%ids: tensor<2x3xi64> {tess.input = "input_ids"},
                              %targets: tensor<2x3xi64> {tess.input = "targets"},
                              %scale: tensor<f32> {tess.input = "loss_scale"},
                              %table: tensor<8x4xf32> {tess.parameter = "wte"})
      -> (tensor<f32>, tensor<2x3x8xf32>) {
    %e = tess.embedding %table, %ids : (tensor<8x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %logits = tess.linear %e, %table {transpose_weight} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
    %loss = tess.cross_entropy %logits, %targets : (tensor<2x3x8xf32>, tensor<2x3xi64>) -> tensor<f32>
    %dlogits = tess.cross_entropy_grad %logits, %targets, %scale : (tensor<2x3x8xf32>, tensor<2x3xi64>, tensor<f32>) -> tensor<2x3x8xf32>
    return %loss, %dlogits : tensor<f32>, tensor<2x3x8xf32>
  }
}
