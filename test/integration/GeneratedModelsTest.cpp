//===- GeneratedModelsTest.cpp - the generated family against PyTorch ----===//
//
// Every model test/models/generated/make_generated_models.py exports (other
// depths, widths, head counts, vocabularies, MQA/GQA, rotary bases, tied
// embeddings, q/k/v biases, sliding windows, parallel residuals) must give
// PyTorch's numbers, like the bundled tiny models: the forward logits, and
// one fp32 training step with the same tolerances as TrainingFixtureTest.
// The models are found on disk, so a newly generated one is tested without
// editing this file.
//
//===----------------------------------------------------------------------===//

#include "FixtureChecks.h"
#include "FixtureSupport.h"

#include "llvm/ADT/StringRef.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

using namespace tessera;

namespace {

constexpr const char *kModelSuffix = ".raw.dyn.onnx";

/// The names of the generated models: each <name>.raw.dyn.onnx beside its
/// <name>.reference.json.
std::vector<std::string> generatedModels() {
  std::vector<std::string> names;
  std::error_code error;
  std::filesystem::directory_iterator entries(
      fixtures::testDirectory() + "/models/generated", error);
  if (error)
    return names;
  for (const std::filesystem::directory_entry &entry : entries) {
    std::string file = entry.path().filename().string();
    llvm::StringRef name = file;
    if (name.consume_back(kModelSuffix) && !name.empty())
      names.push_back(name.str());
  }
  std::sort(names.begin(), names.end());
  return names;
}

llvm::json::Object loadGeneratedFixture(const std::string &name) {
  return fixtures::loadFixtureFile(fixtures::testDirectory() +
                                   "/models/generated/" + name +
                                   ".reference.json");
}

class GeneratedModelTest : public testing::TestWithParam<std::string> {
protected:
  std::string file() const { return "generated/" + GetParam() + kModelSuffix; }
};

TEST(GeneratedModelsTest, FamilyIsPresent) {
  // An empty family would make the parameterized tests vanish silently.
  EXPECT_GE(generatedModels().size(), 10u)
      << "test/models/generated holds too few models; run "
         "make_generated_models.py";
}

TEST_P(GeneratedModelTest, ForwardLogits) {
  llvm::json::Object fixture = loadGeneratedFixture(GetParam());
  fixtures::checkForward(fixture, file(), {{"batch", 2}, {"seq", 32}});
}

TEST_P(GeneratedModelTest, TrainingStep) {
  llvm::json::Object fixture = loadGeneratedFixture(GetParam());
  std::optional<llvm::StringRef> loss = fixture.getString("loss_kind");
  ASSERT_TRUE(loss && (*loss == "causal-lm" || *loss == "mlm"))
      << GetParam() << ": the fixture's loss_kind is not causal-lm or mlm";
  // Causal LM: 31 tokens predict the next ones; MLM: 32 tokens, themselves.
  bool causal = *loss == "causal-lm";
  fixtures::checkTrainingStep(fixture, {file(), loss->str(), causal ? 31 : 32,
                                        /*shiftTargets=*/causal});
}

INSTANTIATE_TEST_SUITE_P(
    Generated, GeneratedModelTest, testing::ValuesIn(generatedModels()),
    [](const testing::TestParamInfo<std::string> &info) {
      // GoogleTest names allow only letters, digits and underscores.
      std::string name = info.param;
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

} // namespace
