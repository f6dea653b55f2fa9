//===- TensorLayoutTest.cpp - layouts' text form and shape checks
//----------===//

#include "tessera/Sharding/TensorLayout.h"

#include "tessera/Sharding/PlanAnnotation.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace tessera;
using namespace tessera::sharding;

namespace {

cost::DeviceMesh dpTpMesh() {
  return llvm::cantFail(cost::parseMesh("dp=2,tp=4"));
}

std::string roundTrip(llvm::StringRef text) {
  cost::DeviceMesh mesh = dpTpMesh();
  llvm::Expected<TensorLayout> layout = parseTensorLayout(text, mesh);
  if (!layout)
    return "error: " + llvm::toString(layout.takeError());
  return layout->print(mesh);
}

std::string parseError(llvm::StringRef text) {
  llvm::Expected<TensorLayout> layout = parseTensorLayout(text, dpTpMesh());
  if (layout)
    return "parsed";
  return llvm::toString(layout.takeError());
}

TEST(TensorLayoutTest, PrintsAndParses) {
  EXPECT_EQ(roundTrip("[tp, -]"), "[tp, -]");
  EXPECT_EQ(roundTrip("[-,-] partial(dp)"), "[-, -] partial(dp)");
  EXPECT_EQ(roundTrip("[tp, -] partial(dp)"), "[tp, -] partial(dp)");
  EXPECT_EQ(roundTrip("[dp, -, tp]"), "[dp, -, tp]");
  EXPECT_EQ(roundTrip("[]"), "[]");
  EXPECT_EQ(roundTrip("[] partial(tp, dp)"), "[] partial(dp, tp)");

  cost::DeviceMesh mesh = dpTpMesh();
  TensorLayout layout =
      llvm::cantFail(parseTensorLayout("[tp, -] partial(dp)", mesh));
  EXPECT_EQ(layout.dimSplitOver(1), 0);
  EXPECT_EQ(layout.dimSplitOver(0), kUnsplit);
  EXPECT_TRUE(layout.isPartialOver(0));
  EXPECT_FALSE(layout.isPartialOver(1));
  EXPECT_FALSE(layout.isReplicated());
  TensorLayout expected = TensorLayout::splitDim(2, 0, 1);
  expected.partialAxes.push_back(0);
  EXPECT_EQ(layout, expected);
  EXPECT_TRUE(TensorLayout::replicated(3).isReplicated());
  EXPECT_EQ(TensorLayout::partial(2, 1).print(mesh), "[-, -] partial(tp)");
}

TEST(TensorLayoutTest, RejectsBadText) {
  EXPECT_EQ(parseError("[sp, -]"),
            "invalid tensor layout '[sp, -]': no mesh axis named 'sp' in "
            "dp=2,tp=4");
  EXPECT_EQ(parseError("[tp, tp]"),
            "invalid tensor layout '[tp, tp]': mesh axis 'tp' is used twice");
  EXPECT_EQ(parseError("[tp] partial(tp)"),
            "invalid tensor layout '[tp] partial(tp)': mesh axis 'tp' is used "
            "twice");
  EXPECT_EQ(parseError("tp, -"), "invalid tensor layout 'tp, -': expected '['");
  EXPECT_EQ(parseError("[tp, -"),
            "invalid tensor layout '[tp, -': expected ']'");
  EXPECT_EQ(parseError("[tp, ]"),
            "invalid tensor layout '[tp, ]': empty dim entry");
  EXPECT_EQ(parseError("[-] partial dp"),
            "invalid tensor layout '[-] partial dp': expected "
            "'partial(AXIS, ...)' after the dims");
}

TEST(TensorLayoutTest, ChecksShapesAndCountsLocalElements) {
  cost::DeviceMesh mesh = dpTpMesh();
  TensorLayout layout = llvm::cantFail(parseTensorLayout("[tp, dp]", mesh));
  EXPECT_TRUE(fitsShape(layout, {8, 6}, mesh));
  EXPECT_FALSE(fitsShape(layout, {6, 6}, mesh));    // 6 rows over 4 devices
  EXPECT_FALSE(fitsShape(layout, {8, 3}, mesh));    // 3 columns over 2
  EXPECT_FALSE(fitsShape(layout, {8, 6, 1}, mesh)); // wrong rank
  EXPECT_EQ(layout.splitFactor(mesh), 8);
  EXPECT_DOUBLE_EQ(layout.localElements({8, 6}, mesh), 6.0);
  // A partial sum is whole on every device.
  TensorLayout partial =
      llvm::cantFail(parseTensorLayout("[-, -] partial(tp)", mesh));
  EXPECT_DOUBLE_EQ(partial.localElements({8, 6}, mesh), 48.0);
}

// The IR form (#tess.layout, PlanAnnotation.h) names the axes the mesh
// indexes: the same layout both ways, partial axes back in the mesh's
// order whatever order the attribute lists them in.
TEST(TensorLayoutTest, ConvertsToAndFromTheLayoutAttribute) {
  mlir::MLIRContext context;
  context.loadDialect<tess::TessDialect>();
  cost::DeviceMesh mesh = dpTpMesh();
  TensorLayout layout =
      llvm::cantFail(parseTensorLayout("[-, dp] partial(tp)", mesh));
  tess::LayoutAttr attribute = layoutAttr(&context, layout, mesh);
  std::string printed;
  llvm::raw_string_ostream(printed) << attribute;
  EXPECT_EQ(printed, "#tess.layout<[-, dp] partial(tp)>");
  EXPECT_EQ(llvm::cantFail(tensorLayout(attribute, mesh)), layout);

  auto name = [&](llvm::StringRef text) {
    return mlir::StringAttr::get(&context, text);
  };
  auto bothPartial =
      tess::LayoutAttr::get(&context, {name("")}, {name("tp"), name("dp")});
  EXPECT_EQ(llvm::cantFail(tensorLayout(bothPartial, mesh)).print(mesh),
            "[-] partial(dp, tp)");
  auto unknown = tess::LayoutAttr::get(&context, {name("sp")}, {});
  llvm::Expected<TensorLayout> read = tensorLayout(unknown, mesh);
  ASSERT_FALSE(static_cast<bool>(read));
  EXPECT_EQ(llvm::toString(read.takeError()),
            "layout #tess.layout<[sp]> names 'sp', no axis of the mesh");
}

} // namespace
