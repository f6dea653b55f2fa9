//===- ShardingTestSupport.h - meshes and parsed functions for tests -*- C++
//-*-===//
//
// The built-in `h200` cluster, a mesh placed on it, and tess functions parsed
// from text: what every sharding test starts from.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TEST_UNIT_SHARDING_SHARDINGTESTSUPPORT_H
#define TESSERA_TEST_UNIT_SHARDING_SHARDINGTESTSUPPORT_H

#include "tessera/CostModel/Cluster.h"
#include "tessera/CostModel/DeviceMesh.h"

#include "Tess/IR/TessOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera::sharding::testing {

class ShardingTest : public ::testing::Test {
protected:
  ShardingTest() {
    context.loadDialect<tess::TessDialect, mlir::func::FuncDialect>();
    llvm::Expected<cost::Cluster> loaded = cost::loadCluster("h200");
    if (!loaded) {
      ADD_FAILURE() << llvm::toString(loaded.takeError());
      return;
    }
    cluster = std::move(*loaded);
  }

  /// Parses `spec` (e.g. "1x4", "dp=2,tp=4") and places it on the cluster.
  cost::DeviceMesh meshOf(llvm::StringRef spec) {
    llvm::Expected<cost::DeviceMesh> mesh = cost::parseMesh(spec);
    if (!mesh) {
      ADD_FAILURE() << llvm::toString(mesh.takeError());
      return cost::DeviceMesh();
    }
    if (llvm::Error error = cost::placeOnCluster(*mesh, cluster))
      ADD_FAILURE() << llvm::toString(std::move(error));
    return *mesh;
  }

  /// The first function of `source`, or null after a test failure.
  mlir::func::FuncOp parseFunction(const std::string &source) {
    module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    if (!module) {
      ADD_FAILURE() << "cannot parse:\n" << source;
      return nullptr;
    }
    auto functions = module->getOps<mlir::func::FuncOp>();
    if (functions.empty()) {
      ADD_FAILURE() << "no function in:\n" << source;
      return nullptr;
    }
    return *functions.begin();
  }

  /// The first op named `name` in the parsed module.
  mlir::Operation *firstOp(llvm::StringRef name) {
    mlir::Operation *found = nullptr;
    module->walk([&](mlir::Operation *op) {
      if (!found && op->getName().getStringRef() == name)
        found = op;
    });
    EXPECT_NE(found, nullptr) << name.str();
    return found;
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  cost::Cluster cluster;
};

} // namespace tessera::sharding::testing

#endif // TESSERA_TEST_UNIT_SHARDING_SHARDINGTESTSUPPORT_H
