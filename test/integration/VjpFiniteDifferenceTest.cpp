//===- VjpFiniteDifferenceTest.cpp - every VJP against finite differences -===//
//
// For each differentiable tess op: a one-op function f, a random cotangent
// c, and the objective L(x) = <c, f(x)>. The op's VJP (built through
// DifferentiableOpInterface, run on the CPU kernels) must equal the central
// difference (L(x + h e_i) - L(x - h e_i)) / 2h of L for every element of
// every floating-point operand.
//
//===----------------------------------------------------------------------===//

#include "Tess/IR/TessOps.h"
#include "tessera/Execution/Interpreter.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;
using namespace tessera;
using execution::HostTensorBuffer;

namespace {

struct VjpCase {
  const char *name;
  /// `func.func @f(...) -> ...` holding one op and its return.
  const char *function;
  /// Integer operands (ids, indices) are drawn from [0, indexLimit).
  int64_t indexLimit = 1;
  /// Inputs are drawn from [low, high] (log, sqrt, pow need positives).
  double low = -1.0, high = 1.0;
};

std::ostream &operator<<(std::ostream &os, const VjpCase &c) {
  return os << c.name;
}

HostTensorBuffer randomBuffer(RankedTensorType type, std::mt19937 &random,
                              const VjpCase &c) {
  HostTensorBuffer buffer = std::move(*HostTensorBuffer::zeros(type));
  std::vector<float> values(buffer.numElements());
  if (type.getElementType().isInteger(64)) {
    std::uniform_int_distribution<int64_t> ids(0, c.indexLimit - 1);
    std::vector<int64_t> integers(buffer.numElements());
    for (int64_t &id : integers)
      id = ids(random);
    return HostTensorBuffer::fromInts(type.getShape(), integers);
  }
  if (type.getElementType().isInteger(1)) {
    auto *bytes = static_cast<uint8_t *>(buffer.data());
    for (int64_t i = 0; i < buffer.numElements(); ++i)
      bytes[i] = random() % 2;
    return buffer;
  }
  std::uniform_real_distribution<float> uniform(c.low, c.high);
  for (float &value : values)
    value = uniform(random);
  return HostTensorBuffer::fromFloats(type.getShape(), values);
}

double dot(const HostTensorBuffer &a, const HostTensorBuffer &b) {
  double sum = 0;
  for (int64_t i = 0; i < a.numElements(); ++i)
    sum += a.getDouble(i) * b.getDouble(i);
  return sum;
}

class VjpFiniteDifferenceTest : public ::testing::TestWithParam<VjpCase> {};

TEST_P(VjpFiniteDifferenceTest, MatchesCentralDifferences) {
  const VjpCase &c = GetParam();
  MLIRContext context;
  context.loadDialect<tess::TessDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(c.function, &context);
  ASSERT_TRUE(module);
  auto forward = module->lookupSymbol<func::FuncOp>("f");
  ASSERT_TRUE(forward);
  Operation *op = &forward.getBody().front().front();
  auto differentiable = llvm::dyn_cast<tess::DifferentiableOpInterface>(op);
  ASSERT_TRUE(differentiable) << op->getName().getStringRef().str()
                              << " has no VJP";

  // @vjp(inputs..., cotangents...) -> (operand cotangents that exist...).
  OpBuilder builder(&context);
  builder.setInsertionPointToEnd(module->getBody());
  SmallVector<Type> vjpInputs(forward.getArgumentTypes());
  llvm::append_range(vjpInputs, forward.getResultTypes());
  auto vjp = func::FuncOp::create(builder, forward.getLoc(), "vjp",
                                  builder.getFunctionType(vjpInputs, {}));
  Block *body = vjp.addEntryBlock();
  builder.setInsertionPointToStart(body);
  IRMapping mapping;
  for (auto [from, to] : llvm::zip(forward.getArguments(), body->getArguments()))
    mapping.map(from, to);
  Operation *clone = builder.clone(*op, mapping);
  SmallVector<Value> cotangents(
      body->getArguments().drop_front(forward.getNumArguments()));
  SmallVector<Value> operandCotangents;
  ASSERT_TRUE(succeeded(llvm::cast<tess::DifferentiableOpInterface>(clone)
                            .buildVjp(builder, cotangents, operandCotangents)));
  SmallVector<Value> returned;
  SmallVector<unsigned> differentiated;
  for (auto [index, cotangent] : llvm::enumerate(operandCotangents))
    if (cotangent) {
      returned.push_back(cotangent);
      differentiated.push_back(index);
    }
  func::ReturnOp::create(builder, forward.getLoc(), returned);
  vjp.setType(builder.getFunctionType(vjpInputs, ValueRange(returned).getTypes()));
  ASSERT_TRUE(succeeded(verify(*module)));
  ASSERT_FALSE(differentiated.empty());

  std::mt19937 random(1234);
  std::vector<HostTensorBuffer> inputs, cotangentValues;
  for (Type type : forward.getArgumentTypes())
    inputs.push_back(randomBuffer(llvm::cast<RankedTensorType>(type), random, c));
  VjpCase cotangentRange = c;
  cotangentRange.low = -1;
  cotangentRange.high = 1;
  for (Type type : forward.getResultTypes())
    cotangentValues.push_back(
        randomBuffer(llvm::cast<RankedTensorType>(type), random, cotangentRange));

  execution::Interpreter interpreter;
  auto objective = [&](std::vector<HostTensorBuffer> arguments) -> double {
    auto results = interpreter.run(forward, std::move(arguments));
    EXPECT_TRUE(static_cast<bool>(results)) << llvm::toString(results.takeError());
    double sum = 0;
    for (size_t i = 0; i < cotangentValues.size(); ++i)
      sum += dot((*results)[i], cotangentValues[i]);
    return sum;
  };

  std::vector<HostTensorBuffer> vjpArguments = inputs;
  vjpArguments.insert(vjpArguments.end(), cotangentValues.begin(),
                      cotangentValues.end());
  auto gradients = interpreter.run(vjp, vjpArguments);
  ASSERT_TRUE(static_cast<bool>(gradients)) << llvm::toString(gradients.takeError());

  for (auto [position, operandIndex] : llvm::enumerate(differentiated)) {
    const HostTensorBuffer &gradient = (*gradients)[position];
    HostTensorBuffer &input = inputs[operandIndex];
    ASSERT_EQ(input.dtype(), TESSERA_F32);
    auto *data = static_cast<float *>(input.data());
    for (int64_t i = 0; i < input.numElements(); ++i) {
      float original = data[i];
      float step = 1e-2f * std::max(1.0f, std::abs(original));
      data[i] = original + step;
      double plus = objective(inputs);
      data[i] = original - step;
      double minus = objective(inputs);
      data[i] = original;
      double expected = (plus - minus) / (2.0 * step);
      EXPECT_NEAR(gradient.getDouble(i), expected,
                  2e-2 * std::max(1.0, std::abs(expected)))
          << c.name << ": d/d operand " << operandIndex << "[" << i << "]";
    }
  }
}

const VjpCase kCases[] = {
    {"add_broadcast", R"(func.func @f(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
      %0 = tess.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      return %0 : tensor<2x3xf32> })"},
    {"sub_broadcast", R"(func.func @f(%a: tensor<2x1xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
      %0 = tess.sub %a, %b : (tensor<2x1xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
      return %0 : tensor<2x3xf32> })"},
    {"mul_broadcast", R"(func.func @f(%a: tensor<2x3xf32>, %b: tensor<f32>) -> tensor<2x3xf32> {
      %0 = tess.mul %a, %b : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
      return %0 : tensor<2x3xf32> })"},
    {"div", R"(func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
      %0 = tess.div %a, %b : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
      return %0 : tensor<2x3xf32> })", 1, 0.5, 2.0},
    {"pow", R"(func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
      %0 = tess.pow %a, %b : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
      return %0 : tensor<2x3xf32> })", 1, 0.5, 2.0},
    {"maximum", R"(func.func @f(%a: tensor<6xf32>, %b: tensor<6xf32>) -> tensor<6xf32> {
      %0 = tess.maximum %a, %b : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
      return %0 : tensor<6xf32> })"},
    {"minimum", R"(func.func @f(%a: tensor<6xf32>, %b: tensor<6xf32>) -> tensor<6xf32> {
      %0 = tess.minimum %a, %b : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
      return %0 : tensor<6xf32> })"},
    {"neg", R"(func.func @f(%a: tensor<5xf32>) -> tensor<5xf32> {
      %0 = tess.neg %a : tensor<5xf32>
      return %0 : tensor<5xf32> })"},
    {"exp", R"(func.func @f(%a: tensor<5xf32>) -> tensor<5xf32> {
      %0 = tess.exp %a : tensor<5xf32>
      return %0 : tensor<5xf32> })"},
    {"log", R"(func.func @f(%a: tensor<5xf32>) -> tensor<5xf32> {
      %0 = tess.log %a : tensor<5xf32>
      return %0 : tensor<5xf32> })", 1, 0.5, 2.0},
    {"sqrt", R"(func.func @f(%a: tensor<5xf32>) -> tensor<5xf32> {
      %0 = tess.sqrt %a : tensor<5xf32>
      return %0 : tensor<5xf32> })", 1, 0.5, 2.0},
    {"rsqrt", R"(func.func @f(%a: tensor<5xf32>) -> tensor<5xf32> {
      %0 = tess.rsqrt %a : tensor<5xf32>
      return %0 : tensor<5xf32> })", 1, 0.5, 2.0},
    {"reciprocal", R"(func.func @f(%a: tensor<5xf32>) -> tensor<5xf32> {
      %0 = tess.reciprocal %a : tensor<5xf32>
      return %0 : tensor<5xf32> })", 1, 0.5, 2.0},
    {"tanh", R"(func.func @f(%a: tensor<5xf32>) -> tensor<5xf32> {
      %0 = tess.tanh %a : tensor<5xf32>
      return %0 : tensor<5xf32> })"},
    {"erf", R"(func.func @f(%a: tensor<5xf32>) -> tensor<5xf32> {
      %0 = tess.erf %a : tensor<5xf32>
      return %0 : tensor<5xf32> })"},
    {"sigmoid", R"(func.func @f(%a: tensor<5xf32>) -> tensor<5xf32> {
      %0 = tess.sigmoid %a : tensor<5xf32>
      return %0 : tensor<5xf32> })"},
    {"silu", R"(func.func @f(%a: tensor<5xf32>) -> tensor<5xf32> {
      %0 = tess.silu %a : tensor<5xf32>
      return %0 : tensor<5xf32> })"},
    {"gelu_erf", R"(func.func @f(%a: tensor<5xf32>) -> tensor<5xf32> {
      %0 = tess.gelu %a : tensor<5xf32>
      return %0 : tensor<5xf32> })"},
    {"gelu_tanh", R"(func.func @f(%a: tensor<5xf32>) -> tensor<5xf32> {
      %0 = tess.gelu %a {approximation = #tess<gelu_approximation tanh>} : tensor<5xf32>
      return %0 : tensor<5xf32> })"},
    {"cos", R"(func.func @f(%a: tensor<5xf32>) -> tensor<5xf32> {
      %0 = tess.cos %a : tensor<5xf32>
      return %0 : tensor<5xf32> })"},
    {"sin", R"(func.func @f(%a: tensor<5xf32>) -> tensor<5xf32> {
      %0 = tess.sin %a : tensor<5xf32>
      return %0 : tensor<5xf32> })"},
    {"where", R"(func.func @f(%c: tensor<2x3xi1>, %a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
      %0 = tess.where %c, %a, %b : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      return %0 : tensor<2x3xf32> })"},
    {"matmul_batched", R"(func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>) -> tensor<2x3x5xf32> {
      %0 = tess.matmul %a, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
      return %0 : tensor<2x3x5xf32> })"},
    {"matmul_transposed", R"(func.func @f(%a: tensor<2x4x3xf32>, %b: tensor<2x5x4xf32>) -> tensor<2x3x5xf32> {
      %0 = tess.matmul %a, %b {transpose_lhs, transpose_rhs} : (tensor<2x4x3xf32>, tensor<2x5x4xf32>) -> tensor<2x3x5xf32>
      return %0 : tensor<2x3x5xf32> })"},
    {"linear", R"(func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<4x5xf32>, %b: tensor<5xf32>) -> tensor<2x3x5xf32> {
      %0 = tess.linear %x, %w, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
      return %0 : tensor<2x3x5xf32> })"},
    {"linear_transposed", R"(func.func @f(%x: tensor<3x4xf32>, %w: tensor<5x4xf32>) -> tensor<3x5xf32> {
      %0 = tess.linear %x, %w {transpose_weight} : (tensor<3x4xf32>, tensor<5x4xf32>) -> tensor<3x5xf32>
      return %0 : tensor<3x5xf32> })"},
    {"layer_norm", R"(func.func @f(%x: tensor<2x3x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x3x8xf32> {
      %0 = tess.layer_norm %x scale %g bias %b : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
      return %0 : tensor<2x3x8xf32> })"},
    {"rms_norm", R"(func.func @f(%x: tensor<2x3x8xf32>, %g: tensor<8xf32>) -> tensor<2x3x8xf32> {
      %0 = tess.rms_norm %x scale %g : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
      return %0 : tensor<2x3x8xf32> })"},
    {"swiglu", R"(func.func @f(%g: tensor<3x7xf32>, %u: tensor<3x7xf32>) -> tensor<3x7xf32> {
      %0 = tess.swiglu %g, %u : tensor<3x7xf32>
      return %0 : tensor<3x7xf32> })"},
    {"packed_swiglu", R"(func.func @f(%gu: tensor<3x14xf32>) -> tensor<3x7xf32> {
      %0 = tess.packed_swiglu %gu : (tensor<3x14xf32>) -> tensor<3x7xf32>
      return %0 : tensor<3x7xf32> })"},
    // cos and sin carry no gradient (a null cotangent, as the mask above).
    {"rotary", R"(func.func @f(%x: tensor<2x3x4x6xf32>, %c: tensor<1x1x4x6xf32>, %s: tensor<1x1x4x6xf32>) -> tensor<2x3x4x6xf32> {
      %0 = tess.rotary %x, %c, %s : (tensor<2x3x4x6xf32>, tensor<1x1x4x6xf32>, tensor<1x1x4x6xf32>) -> tensor<2x3x4x6xf32>
      return %0 : tensor<2x3x4x6xf32> })"},
    {"rotary_adjoint", R"(func.func @f(%x: tensor<3x8xf32>, %c: tensor<3x8xf32>, %s: tensor<1x8xf32>) -> tensor<3x8xf32> {
      %0 = tess.rotary %x, %c, %s {adjoint} : (tensor<3x8xf32>, tensor<3x8xf32>, tensor<1x8xf32>) -> tensor<3x8xf32>
      return %0 : tensor<3x8xf32> })"},
    {"softmax", R"(func.func @f(%x: tensor<2x3x5xf32>) -> tensor<2x3x5xf32> {
      %0 = tess.softmax %x {axis = 1 : i64} : tensor<2x3x5xf32>
      return %0 : tensor<2x3x5xf32> })"},
    {"embedding", R"(func.func @f(%t: tensor<7x4xf32>, %i: tensor<2x3xi64>) -> tensor<2x3x4xf32> {
      %0 = tess.embedding %t, %i : (tensor<7x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
      return %0 : tensor<2x3x4xf32> })", 7},
    {"gather", R"(func.func @f(%x: tensor<3x6x2xf32>, %i: tensor<4xi64>) -> tensor<3x4x2xf32> {
      %0 = tess.gather %x, %i {axis = 1 : i64} : (tensor<3x6x2xf32>, tensor<4xi64>) -> tensor<3x4x2xf32>
      return %0 : tensor<3x4x2xf32> })", 6},
    {"attention_causal_gqa", R"(func.func @f(%q: tensor<1x4x5x3xf32>, %k: tensor<1x2x5x3xf32>, %v: tensor<1x2x5x3xf32>) -> tensor<1x4x5x3xf32> {
      %0 = tess.attention %q, %k, %v {causal, scale = 0.5 : f64} : (tensor<1x4x5x3xf32>, tensor<1x2x5x3xf32>, tensor<1x2x5x3xf32>) -> tensor<1x4x5x3xf32>
      return %0 : tensor<1x4x5x3xf32> })"},
    // A sliding window over more keys than queries: each query sees 2 keys.
    {"attention_sliding_window", R"(func.func @f(%q: tensor<1x4x3x3xf32>, %k: tensor<1x2x6x3xf32>, %v: tensor<1x2x6x3xf32>) -> tensor<1x4x3x3xf32> {
      %0 = tess.attention %q, %k, %v {causal, scale = 0.5 : f64, window = 2 : i64} : (tensor<1x4x3x3xf32>, tensor<1x2x6x3xf32>, tensor<1x2x6x3xf32>) -> tensor<1x4x3x3xf32>
      return %0 : tensor<1x4x3x3xf32> })"},
    // Gemma-2's softcap at 1.0 with scores past it, and a window: the tanh's
    // derivative in dq and dk.
    {"attention_softcap", R"(func.func @f(%q: tensor<1x4x4x3xf32>, %k: tensor<1x2x4x3xf32>, %v: tensor<1x2x4x3xf32>) -> tensor<1x4x4x3xf32> {
      %0 = tess.attention %q, %k, %v {causal, scale = 2.0 : f64, softcap = 1.0 : f64, window = 3 : i64} : (tensor<1x4x4x3xf32>, tensor<1x2x4x3xf32>, tensor<1x2x4x3xf32>) -> tensor<1x4x4x3xf32>
      return %0 : tensor<1x4x4x3xf32> })"},
    {"attention_mask", R"(func.func @f(%q: tensor<2x2x3x4xf32>, %k: tensor<2x2x5x4xf32>, %v: tensor<2x2x5x4xf32>, %m: tensor<2x1x3x5xf32>) -> tensor<2x2x3x4xf32> {
      %0 = tess.attention %q, %k, %v mask %m {scale = 0.5 : f64} : (tensor<2x2x3x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>, tensor<2x1x3x5xf32>) -> tensor<2x2x3x4xf32>
      return %0 : tensor<2x2x3x4xf32> })"},
    {"attention_dropout", R"(func.func @f(%q: tensor<1x2x4x3xf32>, %k: tensor<1x2x4x3xf32>, %v: tensor<1x2x4x3xf32>) -> tensor<1x2x4x3xf32> {
      %0 = tess.attention %q, %k, %v {causal, scale = 0.5 : f64, dropout = 0.3 : f64, seed = 5 : i64} : (tensor<1x2x4x3xf32>, tensor<1x2x4x3xf32>, tensor<1x2x4x3xf32>) -> tensor<1x2x4x3xf32>
      return %0 : tensor<1x2x4x3xf32> })"},
    {"dropout", R"(func.func @f(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
      %0 = tess.dropout %x {rate = 0.4 : f64, seed = 3 : i64} : tensor<4x5xf32>
      return %0 : tensor<4x5xf32> })"},
    {"reshape", R"(func.func @f(%x: tensor<2x6xf32>) -> tensor<3x4xf32> {
      %0 = tess.reshape %x : (tensor<2x6xf32>) -> tensor<3x4xf32>
      return %0 : tensor<3x4xf32> })"},
    {"transpose", R"(func.func @f(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
      %0 = tess.transpose %x {permutation = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
      return %0 : tensor<4x2x3xf32> })"},
    {"broadcast", R"(func.func @f(%x: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
      %0 = tess.broadcast %x : (tensor<3x1xf32>) -> tensor<2x3x4xf32>
      return %0 : tensor<2x3x4xf32> })"},
    {"slice", R"(func.func @f(%x: tensor<4x6xf32>) -> tensor<2x2xf32> {
      %0 = tess.slice %x {starts = array<i64: 1, 0>, limits = array<i64: 3, 6>, strides = array<i64: 1, 3>} : (tensor<4x6xf32>) -> tensor<2x2xf32>
      return %0 : tensor<2x2xf32> })"},
    {"split", R"(func.func @f(%x: tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x4xf32>) {
      %0:2 = tess.split %x {axis = 1 : i64, sizes = array<i64: 2, 4>} : (tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x4xf32>)
      return %0#0, %0#1 : tensor<2x2xf32>, tensor<2x4xf32> })"},
    {"concat", R"(func.func @f(%a: tensor<2x2xf32>, %b: tensor<2x3xf32>) -> tensor<2x5xf32> {
      %0 = tess.concat %a, %b {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x3xf32>) -> tensor<2x5xf32>
      return %0 : tensor<2x5xf32> })"},
    {"reduce_sum", R"(func.func @f(%x: tensor<2x3x4xf32>) -> tensor<2x1x4xf32> {
      %0 = tess.reduce_sum %x {dims = array<i64: 1>, keep_dims} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
      return %0 : tensor<2x1x4xf32> })"},
    {"reduce_mean", R"(func.func @f(%x: tensor<2x3x4xf32>) -> tensor<2xf32> {
      %0 = tess.reduce_mean %x {dims = array<i64: 1, 2>} : (tensor<2x3x4xf32>) -> tensor<2xf32>
      return %0 : tensor<2xf32> })"},
    {"reduce_max", R"(func.func @f(%x: tensor<3x4xf32>) -> tensor<3xf32> {
      %0 = tess.reduce_max %x {dims = array<i64: -1>} : (tensor<3x4xf32>) -> tensor<3xf32>
      return %0 : tensor<3xf32> })"},
    {"cross_entropy", R"(func.func @f(%l: tensor<2x3x6xf32>, %t: tensor<2x3xi64>) -> tensor<f32> {
      %0 = tess.cross_entropy %l, %t : (tensor<2x3x6xf32>, tensor<2x3xi64>) -> tensor<f32>
      return %0 : tensor<f32> })", 6},
};

INSTANTIATE_TEST_SUITE_P(
    AllOps, VjpFiniteDifferenceTest, ::testing::ValuesIn(kCases),
    [](const ::testing::TestParamInfo<VjpCase> &info) {
      return std::string(info.param.name);
    });

} // namespace
