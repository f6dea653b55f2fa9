//===- Passes.h - Tessera's lowering passes --------------------*- C++ -*-===//
#ifndef TESSERA_LOWERING_PASSES_H
#define TESSERA_LOWERING_PASSES_H

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace tessera {

#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "tessera/Lowering/Passes.h.inc"

} // namespace tessera

#endif // TESSERA_LOWERING_PASSES_H
