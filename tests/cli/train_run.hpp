// What the `hyperpipe train` dist tests share (train_*_dist_test.cpp): a tiny
// float64 model, a run of it that returns its loss curve, and comparisons of
// curves and of --metrics fields.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_command.hpp"

namespace hp::testing {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A tiny double-precision model so curves can be compared to 1e-9.
inline const std::string kModel =
    " --layers 8 --hidden 32 --heads 2 --seq-len 16 --micro-batch-size 1 --mb 4 --dtype float64 --lr 1e-3"
    " --warmup-steps 2 --log-interval 1";

inline std::vector<std::pair<long, double>> train(const std::string& args, const std::string& metrics) {
  const auto r = run_command(hyperpipe() + " train" + kModel + " --timeout 30 --metrics " + metrics + " " + args, 300);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
  return read_losses(metrics);
}

inline void expect_same_curve(const std::vector<std::pair<long, double>>& a,
                              const std::vector<std::pair<long, double>>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_NEAR(a[i].second, b[i].second, 1e-9 * std::abs(b[i].second)) << "step " << a[i].first;
  }
}

// A per-rank field of the last line of a --metrics file.
inline std::vector<double> last_per_rank(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) last = line;
  return nlohmann::json::parse(last).at(key).get<std::vector<double>>();
}

// Every file of two checkpoint step directories, byte for byte.
inline void expect_same_checkpoint(const std::filesystem::path& a, const std::filesystem::path& b) {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(a)) {
    ++files;
    const auto other = b / e.path().filename();
    ASSERT_TRUE(std::filesystem::exists(other)) << other;
    EXPECT_EQ(slurp(e.path().string()), slurp(other.string())) << e.path().filename() << " differs";
  }
  EXPECT_GT(files, 0) << a;
}

inline double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

}  // namespace hp::testing
