// The model-family registry (family/model_family.hpp): lookups, registration,
// and what the built-in families declare of themselves.
#include <gtest/gtest.h>

#include "family/model_family.hpp"
#include "model/hybrid.hpp"
#include "model/vision_config.hpp"
#include "train/lm_data.hpp"
#include "train/task.hpp"

namespace {

using namespace hp;

struct Parsed {
  train::LmDataOptions data;
  model::VisionConfig vision;
  model::HybridConfig hybrid;
  family::FamilyOptions options() {
    family::FamilyOptions o;
    o.model.num_layers = 4;
    o.data = &data;
    o.vision = &vision;
    o.hybrid = &hybrid;
    return o;
  }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(ModelFamily, TheBuiltInFamiliesAreRegisteredAndAnUnknownNameListsThem) {
  const auto names = family::family_names();
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 3), (std::vector<std::string>{"gpt", "hybrid", "vl"}));
  EXPECT_EQ(family::find_family("vl").title, "VL");
  EXPECT_EQ(error_of([] { family::find_family("bert"); }).rfind("model.family bert: allowed: gpt, hybrid, vl", 0), 0u);
}

TEST(ModelFamily, RegisteringANameTwiceReplacesItAndAFamilyNeedsItsFunctions) {
  family::ModelFamily f;
  f.name = "probe";
  EXPECT_NE(error_of([&] { family::register_family(f); }).find("needs a name, make_task and profile"), std::string::npos);
  f.make_task = [](const family::FamilyOptions&) -> std::unique_ptr<train::Task> { return nullptr; };
  f.profile = [](const family::FamilyOptions& o) { return family::emulated_profile(o.model.emulate, 1); };
  family::register_family(f);
  EXPECT_EQ(family::find_family("probe").title, "probe");  // the name where no title is given
  f.profile = [](const family::FamilyOptions& o) { return family::emulated_profile(o.model.emulate, 7); };
  family::register_family(f);
  const auto names = family::family_names();
  EXPECT_EQ(std::count(names.begin(), names.end(), "probe"), 1);
  Parsed p;
  EXPECT_EQ(family::find_family("probe").profile(p.options()).layers, 7);
}

TEST(ModelFamily, ProfilesCountTheFamilysLayersAtTheEmulatedCosts) {
  Parsed p;
  auto o = p.options();
  schedule::ModelProfile gpt = family::find_family("gpt").profile(o);
  EXPECT_EQ(gpt.layers, 4);
  EXPECT_EQ(gpt.layer_f, 1.0);  // no emulation: forward 1, backward 2
  EXPECT_EQ(gpt.layer_b, 2.0);
  EXPECT_EQ(gpt.tower_layers, 0);
  o.model.emulate.forward_ms = 3;
  o.model.emulate.backward_ms = 5;
  p.vision.num_layers = 2;
  p.vision.frozen = true;
  const schedule::ModelProfile vl = family::find_family("vl").profile(o);
  EXPECT_EQ(vl.layers, 4);
  EXPECT_EQ(vl.layer_f, 3.0);
  EXPECT_EQ(vl.layer_b, 5.0);
  EXPECT_EQ(vl.tower_layers, 2);
  EXPECT_EQ(vl.tower_f, 3.0);
  EXPECT_EQ(vl.tower_b, 5.0);
  EXPECT_TRUE(vl.frozen_preprocess);
  EXPECT_EQ(family::find_family("gpt").profile(o).tower_layers, 0);  // the tower is VL's alone
}

TEST(ModelFamily, EachFamilyRefusesTheOptionsItCannotHonourByName) {
  Parsed p;
  p.vision.frozen = true;
  for (const std::string name : {"gpt", "hybrid"})
    EXPECT_EQ(error_of([&] { family::find_family(name).make_task(p.options()); }),
              "vision.frozen needs model.family vl, not " + name);
  p.vision.frozen = false;
  auto o = p.options();
  o.model.tensor_parallel.size = 2;
  EXPECT_NE(error_of([&] { family::find_family("vl").make_task(o); }).find("model.tensor_parallel.size 2: model.family vl"),
            std::string::npos);
  o = p.options();
  o.layers_per_stage = {2, 2};
  EXPECT_NE(error_of([&] { family::find_family("hybrid").make_task(o); }).find("model.layers_per_stage: a Hybrid"),
            std::string::npos);
  p.data.data = "text:/nonexistent";
  EXPECT_NE(error_of([&] { family::find_family("vl").make_task(p.options()); }).find("data.data text:/nonexistent"),
            std::string::npos);
  p.data.data = "embedded";
  const auto task = family::find_family("gpt").make_task(p.options());
  ASSERT_NE(task, nullptr);
  EXPECT_NE(task->describe().find("model.num_layers 4"), std::string::npos) << task->describe();
}

TEST(ModelFamily, ByteTokensRoundTripAndUnprintableBytesAreEscaped) {
  EXPECT_EQ(family::byte_tokens("Hi\n"), (std::vector<std::int64_t>{72, 105, 10}));
  EXPECT_EQ(family::byte_text(family::byte_tokens("a b")), "a b");
  EXPECT_EQ(family::byte_text({104, 10, 1, 300}), "h\\n\\x1<12c>");
}

}  // namespace
