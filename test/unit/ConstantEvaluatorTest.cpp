//===- ConstantEvaluatorTest.cpp - ONNX constant folding tests ------------===//
//
// Numbers marked "onnxruntime" were produced by running the same single-node
// model through onnxruntime's CPU provider while writing the test.
//
//===----------------------------------------------------------------------===//

#include "tessera/Import/ONNX/ConstantEvaluator.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <cmath>
#include <cstring>

using namespace tessera::onnx_import;
using onnx::TensorProto;

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// A node named "node" with inputs "x0".."x{n-1}" and outputs "y0"...
onnx::NodeProto makeNode(const std::string &opType, int inputCount,
                         int outputCount = 1) {
  onnx::NodeProto node;
  node.set_name("node");
  node.set_op_type(opType);
  for (int i = 0; i < inputCount; ++i)
    node.add_input("x" + std::to_string(i));
  for (int i = 0; i < outputCount; ++i)
    node.add_output("y" + std::to_string(i));
  return node;
}

void setInt(onnx::NodeProto &node, const std::string &name, int64_t value) {
  onnx::AttributeProto *attribute = node.add_attribute();
  attribute->set_name(name);
  attribute->set_type(onnx::AttributeProto::INT);
  attribute->set_i(value);
}

void setInts(onnx::NodeProto &node, const std::string &name,
             std::vector<int64_t> values) {
  onnx::AttributeProto *attribute = node.add_attribute();
  attribute->set_name(name);
  attribute->set_type(onnx::AttributeProto::INTS);
  for (int64_t value : values)
    attribute->add_ints(value);
}

HostTensor ints(std::vector<int64_t> shape, std::vector<int64_t> values) {
  return HostTensor::fromInts(TensorProto::INT64, std::move(shape),
                              std::move(values));
}
HostTensor int32s(std::vector<int64_t> shape, std::vector<int64_t> values) {
  return HostTensor::fromInts(TensorProto::INT32, std::move(shape),
                              std::move(values));
}
HostTensor floats(std::vector<int64_t> shape, std::vector<double> values) {
  return HostTensor::fromDoubles(TensorProto::FLOAT, std::move(shape),
                                 std::move(values));
}
HostTensor bools(std::vector<int64_t> shape, std::vector<int64_t> values) {
  return HostTensor::fromInts(TensorProto::BOOL, std::move(shape),
                              std::move(values));
}
HostTensor scalar(int64_t value) { return HostTensor::scalarInt(value); }

/// Evaluates and expects a folded result.
std::vector<HostTensor> fold(const onnx::NodeProto &node,
                             std::vector<const HostTensor *> inputs,
                             int64_t opset = 17) {
  auto result = evaluateNode(node, inputs, opset);
  if (!result) {
    ADD_FAILURE() << llvm::toString(result.takeError());
    return {};
  }
  if (!*result) {
    ADD_FAILURE() << "node was not folded";
    return {};
  }
  return std::move(**result);
}

/// Evaluates a single-output node; returns an empty FLOAT tensor on failure.
HostTensor fold1(const onnx::NodeProto &node,
                 std::vector<const HostTensor *> inputs, int64_t opset = 17) {
  std::vector<HostTensor> results = fold(node, std::move(inputs), opset);
  if (results.size() != 1) {
    ADD_FAILURE() << "expected one result, got " << results.size();
    return HostTensor();
  }
  return std::move(results.front());
}

/// Evaluates and expects an error; returns its message.
std::string foldError(const onnx::NodeProto &node,
                      std::vector<const HostTensor *> inputs,
                      int64_t opset = 17) {
  auto result = evaluateNode(node, inputs, opset);
  if (result) {
    ADD_FAILURE() << "expected an error";
    return "";
  }
  return llvm::toString(result.takeError());
}

/// Evaluates and expects "not folded".
bool isNotFolded(const onnx::NodeProto &node,
                 std::vector<const HostTensor *> inputs, int64_t opset = 17) {
  auto result = evaluateNode(node, inputs, opset);
  if (!result) {
    ADD_FAILURE() << llvm::toString(result.takeError());
    return false;
  }
  return !result->has_value();
}

#define EXPECT_TENSOR_EQ(actual, expected)                                     \
  EXPECT_TRUE((actual).isIdenticalTo(expected))                                \
      << "actual " << (actual).describe() << " " << format(actual)             \
      << "\nexpected " << (expected).describe() << " " << format(expected)

std::string format(const HostTensor &tensor) {
  std::string text;
  for (int64_t i = 0; i < tensor.numElements(); ++i) {
    text += i ? ", " : "{";
    text += tensor.isFloat() ? std::to_string(tensor.getDouble(i))
                             : std::to_string(tensor.getInt(i));
  }
  return text + "}";
}

/// Distance in units in the last place between two floats of equal sign.
int64_t ulpDistance(float a, float b) {
  int32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return std::abs(static_cast<int64_t>(x) - static_cast<int64_t>(y));
}

//===----------------------------------------------------------------------===//
// Constants and shapes
//===----------------------------------------------------------------------===//

TEST(ConstantEvaluatorTest, IdentityAndSize) {
  HostTensor x = ints({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TENSOR_EQ(fold1(makeNode("Identity", 1), {&x}), x);
  EXPECT_TENSOR_EQ(fold1(makeNode("Size", 1), {&x}), scalar(6));
}

TEST(ConstantEvaluatorTest, ConstantAttributes) {
  onnx::NodeProto tensorNode = makeNode("Constant", 0);
  onnx::AttributeProto *value = tensorNode.add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(TensorProto::INT64);
  value->mutable_t()->add_dims(2);
  value->mutable_t()->add_int64_data(4);
  value->mutable_t()->add_int64_data(-1);
  EXPECT_TENSOR_EQ(fold1(tensorNode, {}), ints({2}, {4, -1}));

  onnx::NodeProto floatNode = makeNode("Constant", 0);
  onnx::AttributeProto *f = floatNode.add_attribute();
  f->set_name("value_float");
  f->set_f(0.5f);
  EXPECT_TENSOR_EQ(fold1(floatNode, {}), HostTensor::scalarDouble(0.5));

  onnx::NodeProto floatsNode = makeNode("Constant", 0);
  onnx::AttributeProto *fs = floatsNode.add_attribute();
  fs->set_name("value_floats");
  fs->add_floats(1.0f);
  fs->add_floats(0.1f);
  EXPECT_TENSOR_EQ(fold1(floatsNode, {}), floats({2}, {1.0, 0.1}));

  onnx::NodeProto intNode = makeNode("Constant", 0);
  setInt(intNode, "value_int", 7);
  EXPECT_TENSOR_EQ(fold1(intNode, {}), scalar(7));

  onnx::NodeProto intsNode = makeNode("Constant", 0);
  setInts(intsNode, "value_ints", {1, 2, 3});
  EXPECT_TENSOR_EQ(fold1(intsNode, {}), ints({3}, {1, 2, 3}));

  onnx::NodeProto stringNode = makeNode("Constant", 0);
  onnx::AttributeProto *s = stringNode.add_attribute();
  s->set_name("value_string");
  s->set_s("hello");
  EXPECT_EQ(foldError(stringNode, {}),
            "node 'node' (Constant): holds strings or a sparse tensor, which "
            "Tessera does not compute with");

  EXPECT_EQ(foldError(makeNode("Constant", 0), {}),
            "node 'node' (Constant): has no value attribute");
}

TEST(ConstantEvaluatorTest, ShapeWithStartAndEnd) {
  HostTensor x = HostTensor::zeros(TensorProto::FLOAT, {8, 1, 16, 4});
  EXPECT_TENSOR_EQ(fold1(makeNode("Shape", 1), {&x}), ints({4}, {8, 1, 16, 4}));
  onnx::NodeProto negative = makeNode("Shape", 1);
  setInt(negative, "start", -2);
  EXPECT_TENSOR_EQ(fold1(negative, {&x}, 15), ints({2}, {16, 4}));
  onnx::NodeProto clamped = makeNode("Shape", 1);
  setInt(clamped, "start", -100);
  setInt(clamped, "end", 100);
  EXPECT_TENSOR_EQ(fold1(clamped, {&x}, 15), ints({4}, {8, 1, 16, 4}));
  onnx::NodeProto empty = makeNode("Shape", 1);
  setInt(empty, "start", 3);
  setInt(empty, "end", 1);
  EXPECT_TENSOR_EQ(fold1(empty, {&x}, 15), ints({0}, {}));
  HostTensor s = scalar(3);
  EXPECT_TENSOR_EQ(fold1(makeNode("Shape", 1), {&s}), ints({0}, {}));
}

TEST(ConstantEvaluatorTest, SqueezeAndUnsqueeze) {
  HostTensor x = ints({1, 3, 1}, {1, 2, 3});
  HostTensor lastAxis = ints({1}, {-1});
  EXPECT_TENSOR_EQ(fold1(makeNode("Squeeze", 2), {&x, &lastAxis}),
                   ints({1, 3}, {1, 2, 3}));
  EXPECT_TENSOR_EQ(fold1(makeNode("Squeeze", 1), {&x}), ints({3}, {1, 2, 3}));
  onnx::NodeProto legacy = makeNode("Squeeze", 1);
  setInts(legacy, "axes", {0});
  EXPECT_TENSOR_EQ(fold1(legacy, {&x}, 11), ints({3, 1}, {1, 2, 3}));
  HostTensor middle = ints({1}, {1});
  EXPECT_EQ(foldError(makeNode("Squeeze", 2), {&x, &middle}),
            "node 'node' (Squeeze): cannot squeeze axis 1 of size 3");

  HostTensor v = ints({3}, {1, 2, 3});
  HostTensor axes = ints({2}, {0, -1});
  EXPECT_TENSOR_EQ(fold1(makeNode("Unsqueeze", 2), {&v, &axes}),
                   ints({1, 3, 1}, {1, 2, 3}));
  HostTensor s = scalar(5);
  HostTensor zero = ints({1}, {0});
  EXPECT_TENSOR_EQ(fold1(makeNode("Unsqueeze", 2), {&s, &zero}),
                   ints({1}, {5}));
  onnx::NodeProto legacyUnsqueeze = makeNode("Unsqueeze", 1);
  setInts(legacyUnsqueeze, "axes", {1});
  EXPECT_TENSOR_EQ(fold1(legacyUnsqueeze, {&v}, 11), ints({3, 1}, {1, 2, 3}));
  HostTensor repeated = ints({2}, {0, -3});
  EXPECT_EQ(foldError(makeNode("Unsqueeze", 2), {&v, &repeated}),
            "node 'node' (Unsqueeze): axis -3 is repeated");
  HostTensor outOfRange = ints({1}, {3});
  EXPECT_EQ(foldError(makeNode("Unsqueeze", 2), {&v, &outOfRange}),
            "node 'node' (Unsqueeze): axis 3 is out of range for rank 2");
}

TEST(ConstantEvaluatorTest, Reshape) {
  HostTensor x = ints({2, 3, 4}, std::vector<int64_t>(24, 1));
  HostTensor copyAndInfer = ints({3}, {0, -1, 2});
  EXPECT_EQ(fold1(makeNode("Reshape", 2), {&x, &copyAndInfer}).getShape(),
            (llvm::ArrayRef<int64_t>{2, 6, 2}));
  HostTensor flat = ints({1}, {-1});
  EXPECT_EQ(fold1(makeNode("Reshape", 2), {&x, &flat}).getShape(),
            (llvm::ArrayRef<int64_t>{24}));

  HostTensor empty = ints({0, 4}, {});
  HostTensor zeroShape = ints({2}, {4, 0});
  onnx::NodeProto allowZero = makeNode("Reshape", 2);
  setInt(allowZero, "allowzero", 1);
  EXPECT_EQ(fold1(allowZero, {&empty, &zeroShape}).getShape(),
            (llvm::ArrayRef<int64_t>{4, 0}));

  HostTensor wrong = ints({2}, {5, 5});
  EXPECT_EQ(foldError(makeNode("Reshape", 2), {&x, &wrong}),
            "node 'node' (Reshape): cannot reshape INT64[2x3x4] (24 elements) "
            "to a shape with 25 elements");
  HostTensor twoInferred = ints({2}, {-1, -1});
  EXPECT_EQ(foldError(makeNode("Reshape", 2), {&x, &twoInferred}),
            "node 'node' (Reshape): shape has more than one -1");
}

TEST(ConstantEvaluatorTest, Concat) {
  HostTensor a = ints({2, 1}, {1, 2});
  HostTensor b = ints({2, 2}, {3, 4, 5, 6});
  onnx::NodeProto node = makeNode("Concat", 2);
  setInt(node, "axis", -1);
  EXPECT_TENSOR_EQ(fold1(node, {&a, &b}), ints({2, 3}, {1, 3, 4, 2, 5, 6}));
  HostTensor c = ints({1}, {7});
  HostTensor d = ints({2}, {8, 9});
  HostTensor e = ints({0}, {});
  onnx::NodeProto three = makeNode("Concat", 3);
  setInt(three, "axis", 0);
  EXPECT_TENSOR_EQ(fold1(three, {&c, &e, &d}), ints({3}, {7, 8, 9}));
  onnx::NodeProto bad = makeNode("Concat", 2);
  setInt(bad, "axis", 0);
  EXPECT_EQ(foldError(bad, {&a, &b}),
            "node 'node' (Concat): inputs differ outside the concatenation "
            "axis: INT64[2x1] and INT64[2x2]");
}

//===----------------------------------------------------------------------===//
// Indexing
//===----------------------------------------------------------------------===//

TEST(ConstantEvaluatorTest, Gather) {
  HostTensor shape = ints({4}, {8, 1, 16, 64});
  HostTensor index = scalar(-2);
  // Gather with a scalar index drops the axis, as shape subgraphs rely on.
  EXPECT_TENSOR_EQ(fold1(makeNode("Gather", 2), {&shape, &index}), scalar(16));
  HostTensor matrix = ints({2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor columns = ints({2, 2}, {2, 0, -1, 1});
  onnx::NodeProto axis1 = makeNode("Gather", 2);
  setInt(axis1, "axis", 1);
  EXPECT_TENSOR_EQ(fold1(axis1, {&matrix, &columns}),
                   ints({2, 2, 2}, {3, 1, 3, 2, 6, 4, 6, 5}));
  HostTensor tooBig = int32s({1}, {3});
  EXPECT_EQ(foldError(axis1, {&matrix, &tooBig}),
            "node 'node' (Gather): index 3 is out of range for axis 1 of "
            "size 3");
  HostTensor floatIndex = floats({1}, {0});
  EXPECT_EQ(foldError(axis1, {&matrix, &floatIndex}),
            "node 'node' (Gather): indices must be an integer tensor, got "
            "FLOAT[1]");
}

TEST(ConstantEvaluatorTest, GatherElements) {
  // onnxruntime: [1, 2, 3, 5].
  HostTensor data = ints({3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  HostTensor indices = ints({2, 2}, {1, -1, 0, 2});
  onnx::NodeProto node = makeNode("GatherElements", 2);
  setInt(node, "axis", 1);
  EXPECT_TENSOR_EQ(fold1(node, {&data, &indices}), ints({2, 2}, {1, 2, 3, 5}));
  onnx::NodeProto axis0 = makeNode("GatherElements", 2);
  HostTensor rows = ints({1, 3}, {2, 0, 1});
  EXPECT_TENSOR_EQ(fold1(axis0, {&data, &rows}), ints({1, 3}, {6, 1, 5}));
  HostTensor bad = ints({1, 1}, {3});
  EXPECT_EQ(foldError(node, {&data, &bad}),
            "node 'node' (GatherElements): index 3 is out of range for axis 1 "
            "of size 3");
}

TEST(ConstantEvaluatorTest, GatherND) {
  std::vector<int64_t> values(24);
  for (int64_t i = 0; i < 24; ++i)
    values[i] = i;
  HostTensor data = ints({2, 3, 4}, values);
  // onnxruntime, batch_dims=0: rows 1 then 0.
  HostTensor rows = ints({2, 1}, {1, 0});
  std::vector<int64_t> swapped(values.begin() + 12, values.end());
  swapped.insert(swapped.end(), values.begin(), values.begin() + 12);
  EXPECT_TENSOR_EQ(fold1(makeNode("GatherND", 2), {&data, &rows}),
                   ints({2, 3, 4}, swapped));
  // onnxruntime, batch_dims=1: [6, 0, 23, 23].
  HostTensor pairs = ints({2, 2, 2}, {1, 2, 0, 0, 2, 3, -1, -1});
  onnx::NodeProto batched = makeNode("GatherND", 2);
  setInt(batched, "batch_dims", 1);
  EXPECT_TENSOR_EQ(fold1(batched, {&data, &pairs}),
                   ints({2, 2}, {6, 0, 23, 23}));
  HostTensor outOfRange = ints({1, 2}, {0, 3});
  EXPECT_EQ(foldError(makeNode("GatherND", 2), {&data, &outOfRange}),
            "node 'node' (GatherND): index 3 is out of range for data "
            "dimension 1 of size 3");
  HostTensor tooLong = ints({1, 4}, {0, 0, 0, 0});
  EXPECT_EQ(foldError(makeNode("GatherND", 2), {&data, &tooLong}),
            "node 'node' (GatherND): last indices dimension 4 must be between "
            "1 and 3");
}

TEST(ConstantEvaluatorTest, ScatterND) {
  // OPT's mask as an in-place slice assignment: rows 2 then 0 of a 3 x 2
  // constant rewritten (onnxruntime: [[5, 6], [2, 3], [7, 8]]).
  HostTensor data = ints({3, 2}, {0, 1, 2, 3, 4, 5});
  HostTensor rows = ints({2, 1}, {2, -3});
  HostTensor updates = ints({2, 2}, {7, 8, 5, 6});
  EXPECT_TENSOR_EQ(fold1(makeNode("ScatterND", 3), {&data, &rows, &updates}),
                   ints({3, 2}, {5, 6, 2, 3, 7, 8}));
  // One element by a full index tuple.
  HostTensor element = ints({1, 2}, {1, 0});
  HostTensor nine = ints({1}, {9});
  EXPECT_TENSOR_EQ(
      fold1(makeNode("ScatterND", 3), {&data, &element, &nine}),
      ints({3, 2}, {0, 1, 9, 3, 4, 5}));
  // A reduction is left to the importer, which refuses it by name.
  onnx::NodeProto add = makeNode("ScatterND", 3);
  onnx::AttributeProto *reduction = add.add_attribute();
  reduction->set_name("reduction");
  reduction->set_s("add");
  EXPECT_TRUE(isNotFolded(add, {&data, &rows, &updates}));
  HostTensor outOfRange = ints({1, 1}, {3});
  HostTensor oneRow = ints({1, 2}, {1, 1});
  EXPECT_EQ(foldError(makeNode("ScatterND", 3), {&data, &outOfRange, &oneRow}),
            "node 'node' (ScatterND): index 3 is out of range for data "
            "dimension 0 of size 3");
  EXPECT_EQ(foldError(makeNode("ScatterND", 3), {&data, &rows, &nine}),
            "node 'node' (ScatterND): updates INT64[1] must have the data's "
            "element type and the shape indices.shape[:-1] + "
            "data.shape[indices.shape[-1]:]");
}

TEST(ConstantEvaluatorTest, Slice) {
  std::vector<int64_t> ten(10);
  for (int64_t i = 0; i < 10; ++i)
    ten[i] = i;
  HostTensor x = ints({10}, ten);
  // onnxruntime: starts=-1, ends=INT64_MIN, steps=-3 gives [9, 6, 3, 0].
  HostTensor start = ints({1}, {-1});
  HostTensor end = ints({1}, {INT64_MIN});
  HostTensor axis = ints({1}, {0});
  HostTensor step = ints({1}, {-3});
  EXPECT_TENSOR_EQ(
      fold1(makeNode("Slice", 5), {&x, &start, &end, &axis, &step}),
      ints({4}, {9, 6, 3, 0}));

  std::vector<int64_t> twelve(12);
  for (int64_t i = 0; i < 12; ++i)
    twelve[i] = i;
  HostTensor m = ints({3, 4}, twelve);
  // onnxruntime: starts=[1,1], ends=[INT64_MAX]*2, steps=[1,2] gives
  // [5, 7, 9, 11].
  HostTensor starts = ints({2}, {1, 1});
  HostTensor ends = ints({2}, {INT64_MAX, INT64_MAX});
  HostTensor axes = ints({2}, {0, 1});
  HostTensor steps = ints({2}, {1, 2});
  EXPECT_TENSOR_EQ(
      fold1(makeNode("Slice", 5), {&m, &starts, &ends, &axes, &steps}),
      ints({2, 2}, {5, 7, 9, 11}));

  // Axes and steps omitted; negative axis; empty result.
  HostTensor lastColumn = ints({1}, {-1});
  HostTensor toEnd = ints({1}, {INT64_MAX});
  HostTensor minusOne = ints({1}, {-1});
  onnx::NodeProto withAxis = makeNode("Slice", 4);
  EXPECT_TENSOR_EQ(fold1(withAxis, {&m, &lastColumn, &toEnd, &minusOne}),
                   ints({3, 1}, {3, 7, 11}));
  HostTensor backwards = ints({1}, {0});
  EXPECT_TENSOR_EQ(fold1(makeNode("Slice", 3), {&x, &minusOne, &backwards}),
                   ints({0}, {}));
  // Optional axes input left empty, steps given.
  onnx::NodeProto skipAxes = makeNode("Slice", 5);
  skipAxes.set_input(3, "");
  HostTensor reverseAll = ints({1}, {-1});
  HostTensor fromEnd = ints({1}, {INT64_MAX});
  EXPECT_TENSOR_EQ(fold1(skipAxes, {&x, &fromEnd, &end, nullptr, &reverseAll}),
                   ints({10}, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));

  onnx::NodeProto legacy = makeNode("Slice", 1);
  setInts(legacy, "starts", {2});
  setInts(legacy, "ends", {-5});
  EXPECT_TENSOR_EQ(fold1(legacy, {&x}, 9), ints({3}, {2, 3, 4}));

  HostTensor zeroStep = ints({1}, {0});
  EXPECT_EQ(
      foldError(makeNode("Slice", 5), {&x, &start, &end, &axis, &zeroStep}),
      "node 'node' (Slice): slice step for axis 0 must not be 0");
}

TEST(ConstantEvaluatorTest, ExpandIsBidirectional) {
  HostTensor column = ints({3, 1}, {1, 2, 3});
  HostTensor shape = ints({2}, {1, 4});
  EXPECT_TENSOR_EQ(fold1(makeNode("Expand", 2), {&column, &shape}),
                   ints({3, 4}, {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}));
  HostTensor row = floats({3}, {0.5, 1, 2});
  HostTensor higher = ints({3}, {2, 1, 1});
  EXPECT_TENSOR_EQ(fold1(makeNode("Expand", 2), {&row, &higher}),
                   floats({2, 1, 3}, {0.5, 1, 2, 0.5, 1, 2}));
  HostTensor bad = ints({1}, {2});
  EXPECT_EQ(foldError(makeNode("Expand", 2), {&row, &bad}),
            "node 'node' (Expand): shapes [3] and [2] do not broadcast");
}

TEST(ConstantEvaluatorTest, Transpose) {
  HostTensor x = ints({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TENSOR_EQ(fold1(makeNode("Transpose", 1), {&x}),
                   ints({3, 2}, {1, 4, 2, 5, 3, 6}));
  HostTensor y = ints({1, 2, 3}, {1, 2, 3, 4, 5, 6});
  onnx::NodeProto perm = makeNode("Transpose", 1);
  setInts(perm, "perm", {2, 0, 1});
  EXPECT_TENSOR_EQ(fold1(perm, {&y}), ints({3, 1, 2}, {1, 4, 2, 5, 3, 6}));
  onnx::NodeProto bad = makeNode("Transpose", 1);
  setInts(bad, "perm", {0, 0});
  EXPECT_EQ(foldError(bad, {&x}),
            "node 'node' (Transpose): perm is not a permutation of 0..1");
}

TEST(ConstantEvaluatorTest, Tile) {
  HostTensor x = ints({2, 2}, {1, 2, 3, 4});
  HostTensor repeats = ints({2}, {2, 3});
  EXPECT_TENSOR_EQ(fold1(makeNode("Tile", 2), {&x, &repeats}),
                   ints({4, 6}, {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4,
                                 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
  HostTensor none = ints({2}, {0, 1});
  EXPECT_TENSOR_EQ(fold1(makeNode("Tile", 2), {&x, &none}), ints({0, 2}, {}));
  HostTensor wrongLength = ints({1}, {2});
  EXPECT_EQ(foldError(makeNode("Tile", 2), {&x, &wrongLength}),
            "node 'node' (Tile): repeats has 1 entries for an input of rank 2");
}

//===----------------------------------------------------------------------===//
// Generators
//===----------------------------------------------------------------------===//

TEST(ConstantEvaluatorTest, Range) {
  HostTensor start = scalar(10), limit = scalar(1), delta = scalar(-3);
  EXPECT_TENSOR_EQ(fold1(makeNode("Range", 3), {&start, &limit, &delta}),
                   ints({3}, {10, 7, 4}));
  HostTensor zero = scalar(0), seq = scalar(5), one = scalar(1);
  EXPECT_TENSOR_EQ(fold1(makeNode("Range", 3), {&zero, &seq, &one}),
                   ints({5}, {0, 1, 2, 3, 4}));
  EXPECT_TENSOR_EQ(fold1(makeNode("Range", 3), {&seq, &zero, &one}),
                   ints({0}, {}));
  // onnxruntime accumulates in fp32: Range(0, 1, 0.1) has 10 elements and
  // ends at 0x1.ccccd0p-1, not 0.9f.
  HostTensor fStart = HostTensor::scalarDouble(0.0);
  HostTensor fLimit = HostTensor::scalarDouble(1.0);
  HostTensor fDelta = HostTensor::scalarDouble(0.1);
  HostTensor expected =
      floats({10}, {0.0, 0x1.99999ap-4, 0x1.99999ap-3, 0x1.333334p-2,
                    0x1.99999ap-2, 0x1.0p-1, 0x1.333334p-1, 0x1.666668p-1,
                    0x1.99999cp-1, 0x1.ccccd0p-1});
  EXPECT_TENSOR_EQ(fold1(makeNode("Range", 3), {&fStart, &fLimit, &fDelta}),
                   expected);
  HostTensor zeroDelta = scalar(0);
  EXPECT_EQ(foldError(makeNode("Range", 3), {&zero, &seq, &zeroDelta}),
            "node 'node' (Range): delta must not be 0");
  HostTensor int32Limit = HostTensor::scalarInt(5, TensorProto::INT32);
  EXPECT_EQ(foldError(makeNode("Range", 3), {&zero, &int32Limit, &one}),
            "node 'node' (Range): input element types differ: INT64[] and "
            "INT32[]");
}

TEST(ConstantEvaluatorTest, ConstantOfShape) {
  HostTensor shape = ints({2}, {2, 3});
  EXPECT_TENSOR_EQ(fold1(makeNode("ConstantOfShape", 1), {&shape}),
                   floats({2, 3}, {0, 0, 0, 0, 0, 0}));
  onnx::NodeProto withValue = makeNode("ConstantOfShape", 1);
  onnx::AttributeProto *value = withValue.add_attribute();
  value->set_name("value");
  value->mutable_t()->set_data_type(TensorProto::INT64);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_int64_data(-1);
  EXPECT_TENSOR_EQ(fold1(withValue, {&shape}),
                   ints({2, 3}, {-1, -1, -1, -1, -1, -1}));
  HostTensor empty = ints({0}, {});
  EXPECT_TENSOR_EQ(fold1(withValue, {&empty}), ints({}, {-1}));
  HostTensor negative = ints({1}, {-2});
  EXPECT_EQ(foldError(withValue, {&negative}),
            "node 'node' (ConstantOfShape): shape has negative dimension -2");
  HostTensor huge = ints({2}, {1 << 20, 1 << 20});
  EXPECT_TRUE(isNotFolded(withValue, {&huge}));
}

TEST(ConstantEvaluatorTest, CumSum) {
  // onnxruntime: exclusive=1, reverse=1 over axis 1 of [[1,2,3],[4,5,6]].
  HostTensor x = ints({2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor axis = HostTensor::scalarInt(-1, TensorProto::INT32);
  onnx::NodeProto both = makeNode("CumSum", 2);
  setInt(both, "exclusive", 1);
  setInt(both, "reverse", 1);
  EXPECT_TENSOR_EQ(fold1(both, {&x, &axis}), ints({2, 3}, {5, 3, 0, 11, 6, 0}));
  HostTensor axis0 = scalar(0);
  EXPECT_TENSOR_EQ(fold1(makeNode("CumSum", 2), {&x, &axis0}),
                   ints({2, 3}, {1, 2, 3, 5, 7, 9}));
  onnx::NodeProto exclusive = makeNode("CumSum", 2);
  setInt(exclusive, "exclusive", 1);
  EXPECT_TENSOR_EQ(fold1(exclusive, {&x, &axis}),
                   ints({2, 3}, {0, 1, 3, 0, 4, 9}));
  onnx::NodeProto reverse = makeNode("CumSum", 2);
  setInt(reverse, "reverse", 1);
  EXPECT_TENSOR_EQ(fold1(reverse, {&x, &axis}),
                   ints({2, 3}, {6, 5, 3, 15, 11, 6}));
  // onnxruntime accumulates in fp32: 1e8 absorbs the following 1.0 and 0.7.
  HostTensor f = floats({7}, {0.1, 0.2, 0.3, 0.4, 1e8, 1.0, 0.7});
  EXPECT_TENSOR_EQ(fold1(makeNode("CumSum", 2), {&f, &axis0}),
                   floats({7}, {0x1.99999ap-4, 0x1.333334p-2, 0x1.333334p-1,
                                1.0, 1e8, 1e8, 1e8}));
}

TEST(ConstantEvaluatorTest, Trilu) {
  std::vector<int64_t> values(12);
  for (int64_t i = 0; i < 12; ++i)
    values[i] = i + 1;
  HostTensor x = ints({3, 4}, values);
  // onnxruntime: lower with k=-1, upper with k=1.
  HostTensor minusOne = scalar(-1);
  onnx::NodeProto lower = makeNode("Trilu", 2);
  setInt(lower, "upper", 0);
  EXPECT_TENSOR_EQ(fold1(lower, {&x, &minusOne}),
                   ints({3, 4}, {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0}));
  HostTensor plusOne = scalar(1);
  EXPECT_TENSOR_EQ(fold1(makeNode("Trilu", 2), {&x, &plusOne}),
                   ints({3, 4}, {0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12}));
  EXPECT_TENSOR_EQ(fold1(makeNode("Trilu", 1), {&x}),
                   ints({3, 4}, {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12}));
  HostTensor vector = ints({2}, {1, 2});
  EXPECT_EQ(foldError(makeNode("Trilu", 1), {&vector}),
            "node 'node' (Trilu): input must have rank at least 2, got "
            "INT64[2]");
}

TEST(ConstantEvaluatorTest, Split) {
  HostTensor x = ints({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  HostTensor sizes = ints({2}, {1, 3});
  onnx::NodeProto node = makeNode("Split", 2, 2);
  setInt(node, "axis", -1);
  std::vector<HostTensor> parts = fold(node, {&x, &sizes});
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_TENSOR_EQ(parts[0], ints({2, 1}, {1, 5}));
  EXPECT_TENSOR_EQ(parts[1], ints({2, 3}, {2, 3, 4, 6, 7, 8}));

  std::vector<HostTensor> halves = fold(makeNode("Split", 1, 2), {&x});
  ASSERT_EQ(halves.size(), 2u);
  EXPECT_TENSOR_EQ(halves[1], ints({1, 4}, {5, 6, 7, 8}));

  // onnxruntime, opset 18: 7 elements into num_outputs=3 gives 3, 3, 1.
  HostTensor seven = ints({7}, {0, 1, 2, 3, 4, 5, 6});
  onnx::NodeProto numOutputs = makeNode("Split", 1, 3);
  setInt(numOutputs, "num_outputs", 3);
  std::vector<HostTensor> chunks = fold(numOutputs, {&seven}, 18);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_TENSOR_EQ(chunks[0], ints({3}, {0, 1, 2}));
  EXPECT_TENSOR_EQ(chunks[1], ints({3}, {3, 4, 5}));
  EXPECT_TENSOR_EQ(chunks[2], ints({1}, {6}));

  onnx::NodeProto legacy = makeNode("Split", 1, 2);
  setInts(legacy, "split", {5, 2});
  std::vector<HostTensor> legacyParts = fold(legacy, {&seven}, 11);
  ASSERT_EQ(legacyParts.size(), 2u);
  EXPECT_TENSOR_EQ(legacyParts[1], ints({2}, {5, 6}));

  EXPECT_EQ(foldError(makeNode("Split", 1, 3), {&seven}),
            "node 'node' (Split): cannot split axis of size 7 evenly into 3 "
            "outputs");
  HostTensor badSizes = ints({2}, {3, 3});
  EXPECT_EQ(foldError(makeNode("Split", 2, 2), {&seven, &badSizes}),
            "node 'node' (Split): split sizes add up to 6 but axis 0 has size "
            "7");
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

TEST(ConstantEvaluatorTest, Cast) {
  onnx::NodeProto toInt32 = makeNode("Cast", 1);
  setInt(toInt32, "to", TensorProto::INT32);
  // onnxruntime: truncation toward zero.
  HostTensor f = floats({4}, {-2.7, 2.7, -0.5, 100.99});
  EXPECT_TENSOR_EQ(fold1(toInt32, {&f}), int32s({4}, {-2, 2, 0, 100}));

  // onnxruntime: fp32 -> fp16 rounding, overflow to infinity.
  onnx::NodeProto toHalf = makeNode("Cast", 1);
  setInt(toHalf, "to", TensorProto::FLOAT16);
  HostTensor g = floats({6}, {0.1, 65504, 65520, 1e-7, -3.14159, 2049});
  HostTensor half = fold1(toHalf, {&g});
  EXPECT_EQ(half.getElementType(), TensorProto::FLOAT16);
  EXPECT_EQ(half.getFloatData(),
            (llvm::ArrayRef<double>{0.0999755859375, 65504.0, INFINITY, 0x1p-23,
                                    -3.140625, 2048.0}));

  onnx::NodeProto toBool = makeNode("Cast", 1);
  setInt(toBool, "to", TensorProto::BOOL);
  HostTensor mixed = floats({3}, {0.0, -0.5, NAN});
  EXPECT_TENSOR_EQ(fold1(toBool, {&mixed}), bools({3}, {0, 1, 1}));
  HostTensor i = ints({3}, {0, 2, -1});
  EXPECT_TENSOR_EQ(fold1(toBool, {&i}), bools({3}, {0, 1, 1}));

  onnx::NodeProto toFloat = makeNode("Cast", 1);
  setInt(toFloat, "to", TensorProto::FLOAT);
  HostTensor b = bools({2}, {1, 0});
  EXPECT_TENSOR_EQ(fold1(toFloat, {&b}), floats({2}, {1, 0}));
  // int64 -> fp32 rounds once: 2^24 + 1 becomes 2^24.
  HostTensor large = ints({1}, {16777217});
  EXPECT_TENSOR_EQ(fold1(toFloat, {&large}), floats({1}, {16777216}));

  onnx::NodeProto toInt8 = makeNode("Cast", 1);
  setInt(toInt8, "to", TensorProto::INT8);
  HostTensor wide = ints({2}, {200, -1});
  EXPECT_TENSOR_EQ(fold1(toInt8, {&wide}),
                   HostTensor::fromInts(TensorProto::INT8, {2}, {-56, -1}));
  onnx::NodeProto toUint64 = makeNode("Cast", 1);
  setInt(toUint64, "to", TensorProto::UINT64);
  HostTensor minusOne = ints({1}, {-1});
  EXPECT_EQ(fold1(toUint64, {&minusOne}).getDouble(0), 18446744073709551615.0);

  // Out-of-range float -> int is undefined in ONNX: left to the backend.
  HostTensor outOfRange = floats({1}, {3e9});
  EXPECT_TRUE(isNotFolded(toInt32, {&outOfRange}));
  HostTensor nan = floats({1}, {NAN});
  EXPECT_TRUE(isNotFolded(toInt32, {&nan}));
  onnx::NodeProto toString = makeNode("Cast", 1);
  setInt(toString, "to", TensorProto::STRING);
  EXPECT_TRUE(isNotFolded(toString, {&i}));

  HostTensor like = HostTensor::scalarDouble(0.0, TensorProto::DOUBLE);
  HostTensor castLike = fold1(makeNode("CastLike", 2), {&i, &like});
  EXPECT_TENSOR_EQ(
      castLike, HostTensor::fromDoubles(TensorProto::DOUBLE, {3}, {0, 2, -1}));
  EXPECT_EQ(foldError(makeNode("Cast", 1), {&i}),
            "node 'node' (Cast): missing required attribute 'to'");
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST(ConstantEvaluatorTest, ArithmeticMatchesOnnxruntime) {
  // onnxruntime: integer Div truncates toward zero.
  HostTensor a = ints({5}, {-7, 7, -7, 7, -1});
  HostTensor b = ints({5}, {2, -2, -2, 2, 3});
  EXPECT_TENSOR_EQ(fold1(makeNode("Div", 2), {&a, &b}),
                   ints({5}, {-3, -3, 3, 3, 0}));
  // onnxruntime fp32 Div and Add, bit for bit.
  HostTensor x = floats({4}, {1, 2, 10, -7});
  HostTensor y = floats({4}, {3, 3, 7, 0.1});
  EXPECT_TENSOR_EQ(
      fold1(makeNode("Div", 2), {&x, &y}),
      floats({4}, {0x1.555556p-2, 0x1.555556p-1, 0x1.6db6dcp+0, -70.0}));
  HostTensor p = floats({3}, {0.1, 1e8, 16777216.0});
  HostTensor q = floats({3}, {0.2, 1.0, 1.0});
  EXPECT_TENSOR_EQ(fold1(makeNode("Add", 2), {&p, &q}),
                   floats({3}, {0x1.333334p-2, 1e8, 16777216.0}));
}

TEST(ConstantEvaluatorTest, ArithmeticBroadcastsAndWraps) {
  HostTensor column = ints({2, 1}, {10, 20});
  HostTensor row = ints({3}, {1, 2, 3});
  EXPECT_TENSOR_EQ(fold1(makeNode("Sub", 2), {&column, &row}),
                   ints({2, 3}, {9, 8, 7, 19, 18, 17}));
  EXPECT_TENSOR_EQ(fold1(makeNode("Mul", 2), {&column, &row}),
                   ints({2, 3}, {10, 20, 30, 20, 40, 60}));
  HostTensor s = scalar(5);
  EXPECT_TENSOR_EQ(fold1(makeNode("Add", 2), {&s, &row}), ints({3}, {6, 7, 8}));
  HostTensor big = int32s({1}, {2147483647});
  HostTensor oneInt32 = int32s({1}, {1});
  EXPECT_TENSOR_EQ(fold1(makeNode("Add", 2), {&big, &oneInt32}),
                   int32s({1}, {-2147483648}));
  HostTensor minimum = ints({1}, {INT64_MIN});
  HostTensor minusOne = ints({1}, {-1});
  EXPECT_TENSOR_EQ(fold1(makeNode("Div", 2), {&minimum, &minusOne}),
                   ints({1}, {INT64_MIN}));
  HostTensor h = HostTensor::fromDoubles(TensorProto::FLOAT16, {1}, {1.0});
  HostTensor tiny =
      HostTensor::fromDoubles(TensorProto::FLOAT16, {1}, {0x1p-11});
  // 1 + 2^-11 is a tie in fp16 and rounds to even (1.0).
  EXPECT_EQ(fold1(makeNode("Add", 2), {&h, &tiny}).getDouble(0), 1.0);
}

TEST(ConstantEvaluatorTest, ArithmeticErrors) {
  HostTensor a = ints({2}, {1, 2});
  HostTensor three = ints({3}, {1, 2, 3});
  onnx::NodeProto add = makeNode("Add", 2);
  add.set_name("encoder/add_7");
  EXPECT_EQ(foldError(add, {&a, &three}),
            "node 'encoder/add_7' (Add): shapes [2] and [3] do not broadcast");
  HostTensor zero = ints({2}, {1, 0});
  EXPECT_EQ(foldError(makeNode("Div", 2), {&a, &zero}),
            "node 'node' (Div): integer division by zero");
  HostTensor f = floats({2}, {1, 2});
  EXPECT_EQ(foldError(makeNode("Mul", 2), {&a, &f}),
            "node 'node' (Mul): input element types differ: INT64[2] and "
            "FLOAT[2]");
  EXPECT_EQ(foldError(makeNode("Mul", 2), {&a}),
            "node 'node' (Mul): expected 2 inputs, got 1");
  onnx::NodeProto unnamed = makeNode("Sub", 2);
  unnamed.clear_name();
  EXPECT_EQ(foldError(unnamed, {&a, &three}),
            "node '<unnamed, output y0>' (Sub): shapes [2] and [3] do not "
            "broadcast");
  // Float division by zero is IEEE, not an error.
  HostTensor fz = floats({2}, {0, 0});
  HostTensor quotient = fold1(makeNode("Div", 2), {&f, &fz});
  EXPECT_EQ(quotient.getDouble(0), INFINITY);
}

TEST(ConstantEvaluatorTest, Pow) {
  // onnxruntime.
  HostTensor base = floats({3}, {2, 1.5, 9});
  HostTensor exponent = floats({3}, {0.5, 3, -0.5});
  EXPECT_TENSOR_EQ(fold1(makeNode("Pow", 2), {&base, &exponent}),
                   floats({3}, {0x1.6a09e6p+0, 3.375, 0x1.555556p-2}));
  HostTensor intBase = ints({4}, {2, -3, 5, 2});
  HostTensor intExponent = ints({4}, {10, 3, 0, -1});
  EXPECT_TENSOR_EQ(fold1(makeNode("Pow", 2), {&intBase, &intExponent}),
                   ints({4}, {1024, -27, 1, 0}));
  // Mixed types: the result has the base's type.
  HostTensor two = int32s({}, {2});
  EXPECT_TENSOR_EQ(fold1(makeNode("Pow", 2), {&base, &two}),
                   floats({3}, {4, 2.25, 81}));
}

TEST(ConstantEvaluatorTest, VariadicMaxMin) {
  HostTensor a = ints({2, 1}, {1, 5});
  HostTensor b = ints({3}, {0, 3, 6});
  HostTensor c = scalar(4);
  EXPECT_TENSOR_EQ(fold1(makeNode("Max", 3), {&a, &b, &c}),
                   ints({2, 3}, {4, 4, 6, 5, 5, 6}));
  EXPECT_TENSOR_EQ(fold1(makeNode("Min", 3), {&a, &b, &c}),
                   ints({2, 3}, {0, 1, 1, 0, 3, 4}));
  EXPECT_TENSOR_EQ(fold1(makeNode("Max", 1), {&a}), a);
  // onnxruntime propagates NaN.
  HostTensor x = floats({3}, {1, NAN, 3});
  HostTensor y = floats({3}, {NAN, 2, 1});
  HostTensor result = fold1(makeNode("Max", 2), {&x, &y});
  EXPECT_TRUE(std::isnan(result.getDouble(0)));
  EXPECT_TRUE(std::isnan(result.getDouble(1)));
  EXPECT_EQ(result.getDouble(2), 3.0);
}

TEST(ConstantEvaluatorTest, Comparisons) {
  HostTensor a = ints({2, 2}, {1, 2, 3, 4});
  HostTensor three = scalar(3);
  EXPECT_TENSOR_EQ(fold1(makeNode("Equal", 2), {&a, &three}),
                   bools({2, 2}, {0, 0, 1, 0}));
  EXPECT_TENSOR_EQ(fold1(makeNode("Less", 2), {&a, &three}),
                   bools({2, 2}, {1, 1, 0, 0}));
  EXPECT_TENSOR_EQ(fold1(makeNode("LessOrEqual", 2), {&a, &three}),
                   bools({2, 2}, {1, 1, 1, 0}));
  EXPECT_TENSOR_EQ(fold1(makeNode("Greater", 2), {&a, &three}),
                   bools({2, 2}, {0, 0, 0, 1}));
  EXPECT_TENSOR_EQ(fold1(makeNode("GreaterOrEqual", 2), {&a, &three}),
                   bools({2, 2}, {0, 0, 1, 1}));
  HostTensor f = floats({3}, {0.5, NAN, -1});
  HostTensor g = floats({1}, {0.5});
  EXPECT_TENSOR_EQ(fold1(makeNode("Equal", 2), {&f, &g}),
                   bools({3}, {1, 0, 0}));
  HostTensor u = HostTensor::fromInts(TensorProto::UINT64, {1}, {-1});
  HostTensor one = HostTensor::fromInts(TensorProto::UINT64, {1}, {1});
  EXPECT_TENSOR_EQ(fold1(makeNode("Greater", 2), {&u, &one}), bools({1}, {1}));
}

TEST(ConstantEvaluatorTest, Logical) {
  HostTensor a = bools({4}, {0, 0, 1, 1});
  HostTensor b = bools({4}, {0, 1, 0, 1});
  EXPECT_TENSOR_EQ(fold1(makeNode("And", 2), {&a, &b}),
                   bools({4}, {0, 0, 0, 1}));
  EXPECT_TENSOR_EQ(fold1(makeNode("Or", 2), {&a, &b}),
                   bools({4}, {0, 1, 1, 1}));
  EXPECT_TENSOR_EQ(fold1(makeNode("Xor", 2), {&a, &b}),
                   bools({4}, {0, 1, 1, 0}));
  EXPECT_TENSOR_EQ(fold1(makeNode("Not", 1), {&a}), bools({4}, {1, 1, 0, 0}));
  HostTensor i = ints({1}, {1});
  EXPECT_EQ(foldError(makeNode("Not", 1), {&i}),
            "node 'node' (Not): inputs must be BOOL, got INT64[1]");
}

TEST(ConstantEvaluatorTest, Where) {
  HostTensor condition = bools({2, 1}, {1, 0});
  HostTensor x = floats({3}, {1, 2, 3});
  HostTensor y = HostTensor::scalarDouble(-INFINITY);
  EXPECT_TENSOR_EQ(fold1(makeNode("Where", 3), {&condition, &x, &y}),
                   floats({2, 3}, {1, 2, 3, -INFINITY, -INFINITY, -INFINITY}));
  HostTensor notBool = ints({1}, {1});
  EXPECT_EQ(foldError(makeNode("Where", 3), {&notBool, &x, &y}),
            "node 'node' (Where): condition must be BOOL, got INT64[1]");
}

TEST(ConstantEvaluatorTest, UnaryMathMatchesOnnxruntime) {
  struct Case {
    const char *opType;
    std::vector<double> input;
    std::vector<double> expected; // onnxruntime fp32 results.
  };
  const Case cases[] = {
      {"Sigmoid",
       {-3, -0.5, 0, 0.5, 3},
       {0x1.848340p-5, 0x1.829a08p-2, 0.5, 0x1.3eb2fcp-1, 0x1.e7b7ccp-1}},
      {"Erf",
       {-1.5, -0.3, 0, 0.3, 1.5},
       {-0x1.eea556p-1, -0x1.50838ap-2, 0, 0x1.50838ap-2, 0x1.eea556p-1}},
      {"Tanh", {-2, 0.25, 1}, {-0x1.ed9506p-1, 0x1.f597eap-3, 0x1.85efacp-1}},
      {"Exp", {-1, 0.5, 2}, {0x1.78b564p-2, 0x1.a61298p+0, 0x1.d8e64cp+2}},
      // Cos and Sin (rotary embedding tables): numpy's float32 results.
      {"Cos",
       {-2, 0.25, 1, 100},
       {-0x1.aa2264p-2, 0x1.f0154ap-1, 0x1.14a28p-1, 0x1.b981dcp-1}},
      {"Sin",
       {-2, 0.25, 1, 100},
       {-0x1.d18f6ep-1, 0x1.faaeeep-3, 0x1.aed54ap-1, -0x1.03425cp-1}},
  };
  for (const Case &c : cases) {
    HostTensor x = floats({static_cast<int64_t>(c.input.size())}, c.input);
    HostTensor result = fold1(makeNode(c.opType, 1), {&x});
    ASSERT_EQ(result.numElements(), static_cast<int64_t>(c.expected.size()));
    // onnxruntime uses its own vectorized approximations; allow 2 ulp.
    for (size_t i = 0; i < c.expected.size(); ++i)
      EXPECT_LE(ulpDistance(static_cast<float>(result.getDouble(i)),
                            static_cast<float>(c.expected[i])),
                2)
          << c.opType << "(" << c.input[i] << ")";
  }
}

TEST(ConstantEvaluatorTest, UnaryExact) {
  HostTensor f = floats({4}, {-2.5, -0.5, 0.5, 4});
  EXPECT_TENSOR_EQ(fold1(makeNode("Neg", 1), {&f}),
                   floats({4}, {2.5, 0.5, -0.5, -4}));
  EXPECT_TENSOR_EQ(fold1(makeNode("Abs", 1), {&f}),
                   floats({4}, {2.5, 0.5, 0.5, 4}));
  EXPECT_TENSOR_EQ(fold1(makeNode("Floor", 1), {&f}),
                   floats({4}, {-3, -1, 0, 4}));
  EXPECT_TENSOR_EQ(fold1(makeNode("Ceil", 1), {&f}),
                   floats({4}, {-2, -0.0, 1, 4}));
  EXPECT_TENSOR_EQ(fold1(makeNode("Reciprocal", 1), {&f}),
                   floats({4}, {-0.4, -2, 2, 0.25}));
  HostTensor squares = floats({3}, {4, 2, 0});
  EXPECT_TENSOR_EQ(fold1(makeNode("Sqrt", 1), {&squares}),
                   floats({3}, {2, 0x1.6a09e6p+0, 0}));
  EXPECT_TENSOR_EQ(
      fold1(makeNode("Log", 1), {&squares}),
      floats({3}, {static_cast<double>(std::log(4.0f)),
                   static_cast<double>(std::log(2.0f)), -INFINITY}));
  HostTensor i = ints({3}, {-3, 0, INT64_MIN});
  EXPECT_TENSOR_EQ(fold1(makeNode("Neg", 1), {&i}),
                   ints({3}, {3, 0, INT64_MIN}));
  EXPECT_TENSOR_EQ(fold1(makeNode("Abs", 1), {&i}),
                   ints({3}, {3, 0, INT64_MIN}));
  EXPECT_EQ(foldError(makeNode("Sqrt", 1), {&i}),
            "node 'node' (Sqrt): input must be a floating-point tensor, got "
            "INT64[3]");
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

TEST(ConstantEvaluatorTest, Reductions) {
  HostTensor x = ints({2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor lastAxis = ints({1}, {-1});
  EXPECT_TENSOR_EQ(fold1(makeNode("ReduceSum", 2), {&x, &lastAxis}, 13),
                   ints({2, 1}, {6, 15}));
  onnx::NodeProto flat = makeNode("ReduceSum", 1);
  setInt(flat, "keepdims", 0);
  EXPECT_TENSOR_EQ(fold1(flat, {&x}, 13), ints({}, {21}));
  onnx::NodeProto noop = makeNode("ReduceSum", 1);
  setInt(noop, "noop_with_empty_axes", 1);
  EXPECT_TENSOR_EQ(fold1(noop, {&x}, 13), x);
  HostTensor noAxes = ints({0}, {});
  EXPECT_TENSOR_EQ(fold1(makeNode("ReduceSum", 2), {&x, &noAxes}, 13),
                   ints({1, 1}, {21}));

  // Opset 17: axes is an attribute for everything but ReduceSum.
  onnx::NodeProto max17 = makeNode("ReduceMax", 1);
  setInts(max17, "axes", {0});
  EXPECT_TENSOR_EQ(fold1(max17, {&x}, 17), ints({1, 3}, {4, 5, 6}));
  HostTensor axis0 = ints({1}, {0});
  onnx::NodeProto min18 = makeNode("ReduceMin", 2);
  setInt(min18, "keepdims", 0);
  EXPECT_TENSOR_EQ(fold1(min18, {&x, &axis0}, 18), ints({3}, {1, 2, 3}));
  EXPECT_EQ(foldError(makeNode("ReduceMin", 2), {&x, &axis0}, 17),
            "node 'node' (ReduceMin): expected 1 inputs, got 2");
  EXPECT_TENSOR_EQ(fold1(makeNode("ReduceProd", 2), {&x, &lastAxis}, 18),
                   ints({2, 1}, {6, 120}));

  // onnxruntime: integer ReduceMean truncates, [[1,2],[4,4]] -> [1, 4].
  HostTensor pairs = int32s({2, 2}, {1, 2, 4, 4});
  onnx::NodeProto mean = makeNode("ReduceMean", 1);
  setInts(mean, "axes", {1});
  setInt(mean, "keepdims", 0);
  EXPECT_TENSOR_EQ(fold1(mean, {&pairs}, 17), int32s({2}, {1, 4}));
  // onnxruntime fp32 ReduceMean over axis 0.
  HostTensor f = floats({2, 2}, {0.1, 0.2, 0.3, 0.4});
  onnx::NodeProto meanAxis0 = makeNode("ReduceMean", 1);
  setInts(meanAxis0, "axes", {0});
  EXPECT_TENSOR_EQ(fold1(meanAxis0, {&f}, 17),
                   floats({1, 2}, {0x1.99999ap-3, 0x1.333334p-2}));

  HostTensor badAxis = ints({1}, {2});
  EXPECT_EQ(foldError(makeNode("ReduceSum", 2), {&x, &badAxis}, 13),
            "node 'node' (ReduceSum): axis 2 is out of range for rank 2");
}

//===----------------------------------------------------------------------===//
// Dispatch, arity, optional inputs
//===----------------------------------------------------------------------===//

TEST(ConstantEvaluatorTest, UnknownOpsAndDomainsAreNotFolded) {
  HostTensor x = floats({2}, {1, 2});
  EXPECT_TRUE(isNotFolded(makeNode("MatMul", 2), {&x, &x}));
  EXPECT_TRUE(isNotFolded(makeNode("Softmax", 1), {&x}));
  onnx::NodeProto custom = makeNode("Add", 2);
  custom.set_domain("com.microsoft");
  EXPECT_TRUE(isNotFolded(custom, {&x, &x}));
}

TEST(ConstantEvaluatorTest, MissingRequiredInputIsAnError) {
  HostTensor x = ints({2}, {1, 2});
  onnx::NodeProto gather = makeNode("Gather", 2);
  gather.set_input(1, "");
  EXPECT_EQ(foldError(gather, {&x, nullptr}),
            "node 'node' (Gather): expected 2 inputs, got 1");
  HostTensor starts = ints({1}, {0});
  onnx::NodeProto slice = makeNode("Slice", 3);
  EXPECT_EQ(foldError(slice, {&x, nullptr, &starts}),
            "node 'node' (Slice): required input 1 is missing");
}

TEST(ConstantEvaluatorTest, BroadcastShapes) {
  auto shape = broadcastShapes({8, 1, 6, 1}, {7, 1, 5});
  ASSERT_TRUE(static_cast<bool>(shape));
  EXPECT_EQ(*shape, (std::vector<int64_t>{8, 7, 6, 5}));
  auto withZero = broadcastShapes({0, 3}, {1, 3});
  ASSERT_TRUE(static_cast<bool>(withZero));
  EXPECT_EQ(*withZero, (std::vector<int64_t>{0, 3}));
  auto scalarShape = broadcastShapes({}, {});
  ASSERT_TRUE(static_cast<bool>(scalarShape));
  EXPECT_TRUE(scalarShape->empty());
  auto bad = broadcastShapes({2, 3}, {3, 3});
  ASSERT_FALSE(static_cast<bool>(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()),
            "shapes [2x3] and [3x3] do not broadcast");
}

//===----------------------------------------------------------------------===//
// Performance: the causal mask of an [8, 1, 1024, 1024] attention.
//===----------------------------------------------------------------------===//

TEST(ConstantEvaluatorTest, FoldsLargeCausalMaskQuickly) {
  using Clock = std::chrono::steady_clock;
  constexpr int64_t kSequence = 1024;
  HostTensor ones =
      HostTensor::fromInts(TensorProto::INT64, {1, 1, kSequence, kSequence},
                           std::vector<int64_t>(kSequence * kSequence, 1));
  HostTensor zero = scalar(0);
  HostTensor targetShape = ints({4}, {8, 1, kSequence, kSequence});
  HostTensor reversedBatches = ints({8, 1}, {7, 6, 5, 4, 3, 2, 1, 0});

  // The budget is on this thread's CPU time: wall time also counts the
  // waits of a machine busy with other tests (ctest -j), which made it flaky.
  auto threadSeconds = [] {
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) + 1e-9 * now.tv_nsec;
  };
  const double cpuStart = threadSeconds();
  auto start = Clock::now();
  onnx::NodeProto trilu = makeNode("Trilu", 1);
  setInt(trilu, "upper", 0);
  HostTensor lower = fold1(trilu, {&ones});
  auto afterTrilu = Clock::now();
  HostTensor expanded = fold1(makeNode("Expand", 2), {&lower, &targetShape});
  auto afterExpand = Clock::now();
  HostTensor mask = fold1(makeNode("Equal", 2), {&expanded, &zero});
  auto afterEqual = Clock::now();
  HostTensor gathered =
      fold1(makeNode("GatherND", 2), {&mask, &reversedBatches});
  auto afterGather = Clock::now();
  const double cpuMilliseconds = 1000.0 * (threadSeconds() - cpuStart);

  auto milliseconds = [](Clock::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
  };
  double total = milliseconds(afterGather - start);
  std::printf("[ timing   ] Trilu %.1f ms, Expand %.1f ms, Equal %.1f ms, "
              "GatherND %.1f ms on [8,1,1024,1024]; total %.1f ms (%.1f ms "
              "of CPU)\n",
              milliseconds(afterTrilu - start),
              milliseconds(afterExpand - afterTrilu),
              milliseconds(afterEqual - afterExpand),
              milliseconds(afterGather - afterEqual), total, cpuMilliseconds);

  ASSERT_EQ(gathered.getShape(),
            (llvm::ArrayRef<int64_t>{8, 1, kSequence, kSequence}));
  EXPECT_EQ(gathered.getElementType(), TensorProto::BOOL);
  // Above the diagonal is masked (true), on and below it is not.
  int64_t lastBatch = 7 * kSequence * kSequence;
  EXPECT_EQ(gathered.getInt(lastBatch + 0 * kSequence + 1), 1);
  EXPECT_EQ(gathered.getInt(lastBatch + 5 * kSequence + 5), 0);
  EXPECT_EQ(gathered.getInt(lastBatch + 1023 * kSequence + 0), 0);
  EXPECT_LT(cpuMilliseconds, 1000.0);
}

} // namespace

// A required input given as an empty name ahead of a present one used to be
// dereferenced as null (found by fuzzing).
TEST(ConstantEvaluatorTest, EmptyRequiredInputIsAnError) {
  onnx::NodeProto node = makeNode("Add", 2);
  node.set_input(0, "");
  HostTensor x = floats({2}, {1, 2});
  EXPECT_EQ(foldError(node, {nullptr, &x}),
            "node 'node' (Add): required input 0 is missing");
  onnx::NodeProto gather = makeNode("Gather", 2);
  gather.set_input(0, "");
  HostTensor indices = ints({1}, {0});
  EXPECT_EQ(foldError(gather, {nullptr, &indices}),
            "node 'node' (Gather): required input 0 is missing");
}
