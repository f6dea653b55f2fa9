//===- TessDialect.cpp - registration of the tess dialect ----------------===//

#include "Tess/IR/TessOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace tessera::tess;

#include "Tess/IR/TessDialect.cpp.inc"
#include "Tess/IR/TessEnums.cpp.inc"
#include "Tess/IR/TessInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "Tess/IR/TessAttrs.cpp.inc"

void TessDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "Tess/IR/TessAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "Tess/IR/TessOps.cpp.inc"
      >();
}

Operation *TessDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto elements = llvm::dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}
