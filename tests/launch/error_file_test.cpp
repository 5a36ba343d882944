// A rank's error file: what a hyperpipe rank writes reads back, with the rank
// it blames; torchelastic's own form (no culprit, a string timestamp or a bare
// message) reads as well; a missing or broken file is nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "launch/error_file.hpp"

using namespace hp::launch;

namespace {

std::string temp_file(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / ("hp_error_" + name)).string();
}

TEST(ErrorFile, ARecordReadsBackWithTheRankItBlames) {
  const std::string path = temp_file("ours.json");
  write_error_file(path, ErrorRecord{"rank 0: recv timed out", 1, "is not responding (dead or stopped)", 1234});
  const auto r = read_error_file(path);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->message, "rank 0: recv timed out");
  EXPECT_EQ(r->culprit, 1);
  EXPECT_EQ(r->culprit_state, "is not responding (dead or stopped)");
  EXPECT_EQ(r->timestamp_s, 1234);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  ErrorRecord own;
  own.message = "its own failure";
  write_error_file(path, own);
  EXPECT_EQ(read_error_file(path)->culprit, -1) << "replaced whole";
}

TEST(ErrorFile, TorchelasticsFormReadsAndABrokenFileIsNothing) {
  const std::string path = temp_file("theirs.json");
  std::ofstream(path) << R"({"message": {"message": "RuntimeError: boom", "extraInfo": {"py_callstack": "...", "timestamp": "1700000000"}}})";
  const auto r = read_error_file(path);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->message, "RuntimeError: boom");
  EXPECT_EQ(r->timestamp_s, 1700000000);
  EXPECT_EQ(r->culprit, -1);
  std::ofstream(path) << R"({"message": "plain"})";
  EXPECT_EQ(read_error_file(path)->message, "plain");
  std::ofstream(path) << "{not json";
  EXPECT_FALSE(read_error_file(path));
  EXPECT_FALSE(read_error_file(temp_file("missing.json")));
}

}  // namespace
