#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "train/metrics.hpp"

namespace hp::train {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> lines_of(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

fs::path test_dir() { return fs::temp_directory_path() / ("hp_metrics_test_" + std::to_string(::getpid())); }

fs::path fresh_path(const std::string& name) {
  fs::create_directories(test_dir());
  const fs::path p = test_dir() / name;
  fs::remove(p);
  return p;
}

// Removes this process's scratch directory after the tests.
class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override { fs::remove_all(test_dir()); }
};
const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

TEST(Metrics, LinesParseAsJsonAndAreFlushedPerLine) {
  const fs::path path = fresh_path("m.jsonl");
  MetricsWriter w(path.string());
  for (int s = 1; s <= 3; ++s) {
    StepMetrics m;
    m.step = s;
    m.loss = 4.0 / s;
    m.step_ms = 80.5;
    m.tokens_per_s = 12000.25;
    m.lr = 3e-4 * s;
    m.grad_norm = 0.5;
    m.extra = {{"mfu", 0.4}, {"bubble", 0.125}};
    m.per_rank["peak_bytes"] = {1024.0 * s, 512.0};
    w.write(m);
    // Flushed: readable while the writer is still open.
    EXPECT_EQ(lines_of(path).size(), static_cast<size_t>(s));
  }
  const auto lines = lines_of(path);
  ASSERT_EQ(lines.size(), 3u);
  for (int s = 1; s <= 3; ++s) {
    const auto j = nlohmann::json::parse(lines[s - 1]);
    EXPECT_EQ(j.at("step").get<int>(), s);
    EXPECT_DOUBLE_EQ(j.at("loss").get<double>(), 4.0 / s);
    EXPECT_DOUBLE_EQ(j.at("step_ms").get<double>(), 80.5);
    EXPECT_DOUBLE_EQ(j.at("tokens_per_s").get<double>(), 12000.25);
    EXPECT_DOUBLE_EQ(j.at("lr").get<double>(), 3e-4 * s);
    EXPECT_DOUBLE_EQ(j.at("grad_norm").get<double>(), 0.5);
    EXPECT_DOUBLE_EQ(j.at("mfu").get<double>(), 0.4);
    EXPECT_DOUBLE_EQ(j.at("bubble").get<double>(), 0.125);
    EXPECT_EQ(j.at("peak_bytes"), nlohmann::json::array({1024.0 * s, 512.0}));
  }
  EXPECT_EQ(lines[0].rfind("{\"step\":1,\"loss\":", 0), 0u) << lines[0];  // standard keys first
}

TEST(Metrics, AppendsAndTruncates) {
  const fs::path path = fresh_path("a.jsonl");
  { MetricsWriter(path.string()).write(StepMetrics{}); }
  { MetricsWriter(path.string()).write(StepMetrics{}); }
  EXPECT_EQ(lines_of(path).size(), 2u);
  { MetricsWriter(path.string(), /*append=*/false).write(StepMetrics{}); }
  EXPECT_EQ(lines_of(path).size(), 1u);
}

TEST(Metrics, NonFiniteBecomesNull) {
  StepMetrics m;
  m.loss = std::nan("");
  m.grad_norm = INFINITY;
  const auto j = nlohmann::json::parse(metrics_json_line(m));
  EXPECT_TRUE(j.at("loss").is_null());
  EXPECT_TRUE(j.at("grad_norm").is_null());
  EXPECT_TRUE(j.at("lr").is_number());
}

TEST(Metrics, RejectsBadInput) {
  StepMetrics m;
  m.extra["loss"] = 1.0;
  EXPECT_THROW(metrics_json_line(m), std::invalid_argument);
  m.extra = {{"", 1.0}};
  EXPECT_THROW(metrics_json_line(m), std::invalid_argument);
  m.extra = {{"peak_bytes", 1.0}};
  m.per_rank["peak_bytes"] = {1.0};
  EXPECT_THROW(metrics_json_line(m), std::invalid_argument);
  try {
    MetricsWriter w("/nonexistent_dir_hp/x.jsonl");
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("train.metrics /nonexistent_dir_hp/x.jsonl"), std::string::npos) << e.what();
  }
}

// Issue 15 item 6: a run that died after step 8 and resumes from step 5 keeps steps 1-5 only
// (one line each; a line torn by the crash is dropped), then appends 6, 7, ... once.
TEST(Metrics, AResumedRunKeepsOneLinePerStep) {
  const fs::path p = fresh_path("resume.jsonl");
  {
    MetricsWriter w(p.string(), false);
    for (int s = 1; s <= 8; ++s) {
      StepMetrics m;
      m.step = s;
      w.write(m);
    }
    StepMetrics dup;
    dup.step = 3;
    w.write(dup);  // what an earlier resume wrote twice
  }
  std::ofstream(p, std::ios::app) << "{\"step\":9,\"lo";
  keep_metrics_through(p.string(), 5);
  {
    MetricsWriter w(p.string(), true);
    for (int s = 6; s <= 8; ++s) {
      StepMetrics m;
      m.step = s;
      w.write(m);
    }
  }
  std::vector<std::int64_t> steps;
  for (const auto& l : lines_of(p)) steps.push_back(nlohmann::json::parse(l).at("step").get<std::int64_t>());
  EXPECT_EQ(steps, (std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_FALSE(fs::exists(p.string() + ".tmp"));
  keep_metrics_through(fresh_path("absent.jsonl").string(), 5);  // nothing to keep
  EXPECT_FALSE(fs::exists(test_dir() / "absent.jsonl"));
  EXPECT_THROW(check_metrics_writable((p / "under-a-file.jsonl").string()), std::invalid_argument);
}

}  // namespace
}  // namespace hp::train
