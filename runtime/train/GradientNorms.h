//===- GradientNorms.h - Per-parameter and per-layer gradient norms -*- C++
//-*-===//
//
// --grad-norms-every N: every N steps the driver reports each parameter's
// and each layer's gradient L2 norm (of the gradient AdamW reads, averaged
// over micro-batches and ranks, loss scale removed, before clipping: what
// --dump-grads writes), from the per-parameter sums of squares the global
// norm is made of, so there is no second pass over the gradients. On
// several ranks the sums are agreed first (TrainMain.cpp).
//
// A layer is read off the parameter's name, the way exporters name them:
// up to the first all-digit component ("model.layers.3.mlp.up_proj.weight"
// is in "model.layers.3", "transformer.h.0.attn.c_attn.weight" in
// "transformer.h.0"); a name without one is grouped by all but its last
// component ("model.norm.weight" in "model.norm", "lm_head.weight" in
// "lm_head"), a name without a dot is its own layer. Layers are listed in
// the order their first parameter comes.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_GRADIENTNORMS_H
#define TESSERA_RUNTIME_TRAIN_GRADIENTNORMS_H

#include "tessera/runtime/program.h"

#include <string>
#include <utility>
#include <vector>

namespace tessera::train {

/// Named norms, in program order.
using NamedNorms = std::vector<std::pair<std::string, double>>;

struct GradientNorms {
  NamedNorms parameters;
  NamedNorms layers;
};

/// The layer `parameter` (a parameter's name) belongs to.
std::string layerOfParameter(const std::string &parameter);

/// The norms from `sums` (per parameter of `program`, the sums of squares
/// of the gradients as the program wrote them) and the divisor that makes
/// them the averaged, unscaled gradient's (K x ranks x loss scale).
GradientNorms gradientNorms(const tessera_program &program,
                            const std::vector<double> &sums, double divisor);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_GRADIENTNORMS_H
