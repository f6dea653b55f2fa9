//===- TessDialect.h - the tess dialect ------------------------*- C++ -*-===//
#ifndef TESSERA_DIALECT_TESS_TESSDIALECT_H
#define TESSERA_DIALECT_TESS_TESSDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "Tess/IR/TessDialect.h.inc"

#endif // TESSERA_DIALECT_TESS_TESSDIALECT_H
