//===- GptTrainingProgram.h - a GPT-2-shaped training step for tests -*- C++ -*-===//
//
// Writes the forward of a GPT-2 of any size in tess ops, shaped exactly as
// `tesserac --emit=mlir` imports Hugging Face's GPT2LMHeadModel (tied
// embeddings, fused QKV, pre-norm blocks, tanh GELU, causal attention), and
// runs tess-build-training on it, so that cost-model tests can check FLOPs and
// memory against hand formulas at real sizes without the ONNX file.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TEST_UNIT_COSTMODEL_GPTTRAININGPROGRAM_H
#define TESSERA_TEST_UNIT_COSTMODEL_GPTTRAININGPROGRAM_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <string>

namespace tessera::cost::test_programs {

struct GptShape {
  int64_t layers = 12;
  int64_t width = 768;
  int64_t heads = 12;
  int64_t vocabulary = 50257;
  int64_t batch = 16;
  int64_t sequence = 1024;
  /// Attention dropout (GPT-2's attn_pdrop in training; 0: none).
  double attentionDropout = 0;
  /// The LM head reads the token table (GPT-2's); false: a table of its
  /// own (Llama 3 8B's untied head).
  bool tied = true;

  /// Parameters as PyTorch counts them (wpe with `sequence` positions).
  int64_t parameters() const {
    return (tied ? 1 : 2) * vocabulary * width + sequence * width +
           layers * (12 * width * width + 13 * width) + 2 * width;
  }
};

/// The GPT-2 124M shape at batch 16, sequence 1024.
inline GptShape gpt2Small() { return GptShape(); }

/// `func.func @forward` of the model, as MLIR text.
std::string gptForwardText(const GptShape &shape);

/// Parses the forward and builds its training step with `precision`
/// ("fp32", "bf16", "fp16"), then canonicalizes and CSEs as tesserac does.
/// Null (after a gtest failure) if anything fails.
mlir::OwningOpRef<mlir::ModuleOp>
buildGptTrainingProgram(mlir::MLIRContext &context, const GptShape &shape,
                        const std::string &precision);

} // namespace tessera::cost::test_programs

#endif // TESSERA_TEST_UNIT_COSTMODEL_GPTTRAININGPROGRAM_H
