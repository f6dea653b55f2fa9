//===- KernelCallContext.cpp - the patterns' view of the step -------------===//
//
// KernelCallContext's key function, so that its vtable has one home.
//
//===----------------------------------------------------------------------===//

#include "KernelCalls.h"

tessera::lowering::KernelCallContext::~KernelCallContext() = default;
