// The house rules of src/ that a reviewer should not have to count: files
// split by concept stay small, and every header opens with its contract.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;

TEST(SourceTree, EveryFileIsUnderFiveHundredLinesAndEveryHeaderOpensWithAComment) {
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(HP_SOURCE_DIR) / "src")) {
    const std::string ext = e.path().extension().string();
    if (ext != ".cpp" && ext != ".hpp") continue;
    ++files;
    std::ifstream in(e.path());
    std::string line, first;
    int lines = 0;
    while (std::getline(in, line)) {
      if (lines++ == 0) first = line;
    }
    const std::string where = fs::relative(e.path(), HP_SOURCE_DIR).string();
    EXPECT_LT(lines, 500) << where << " has " << lines << " lines: split it by concept";
    if (ext == ".hpp") {
      EXPECT_EQ(first.rfind("//", 0), 0u) << where << " does not open with its contract";
    }
  }
  EXPECT_GT(files, 200);
}

// The tests mirror src/, one file per concept, and stay as small.
TEST(SourceTree, EveryTestFileIsUnderFiveHundredLines) {
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(HP_SOURCE_DIR) / "tests")) {
    const std::string ext = e.path().extension().string();
    if (ext != ".cpp" && ext != ".hpp") continue;
    ++files;
    std::ifstream in(e.path());
    int lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    EXPECT_LT(lines, 500) << fs::relative(e.path(), HP_SOURCE_DIR).string() << " has " << lines
                          << " lines: split it by concept";
  }
  EXPECT_GT(files, 100);
}

}  // namespace
