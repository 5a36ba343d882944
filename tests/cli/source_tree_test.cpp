// The house rules of src/ that a reviewer should not have to count: files
// split by concept stay small, and every header opens with its contract.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct SourceFile {
  std::string where;  // relative to the source tree
  bool header = false;
  int lines = 0;
  std::string first;  // its first line
};

// Every .cpp and .hpp below the source tree's `folder`.
std::vector<SourceFile> sources_in(const std::string& folder) {
  std::vector<SourceFile> out;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(HP_SOURCE_DIR) / folder)) {
    const std::string ext = e.path().extension().string();
    if (ext != ".cpp" && ext != ".hpp") continue;
    SourceFile f;
    f.where = fs::relative(e.path(), HP_SOURCE_DIR).string();
    f.header = ext == ".hpp";
    std::ifstream in(e.path());
    for (std::string line; std::getline(in, line);)
      if (f.lines++ == 0) f.first = line;
    out.push_back(f);
  }
  return out;
}

TEST(SourceTree, EveryFileIsUnderFiveHundredLinesAndEveryHeaderOpensWithAComment) {
  const auto files = sources_in("src");
  for (const SourceFile& f : files) {
    EXPECT_LT(f.lines, 500) << f.where << " has " << f.lines << " lines: split it by concept";
    if (f.header) EXPECT_EQ(f.first.rfind("//", 0), 0u) << f.where << " does not open with its contract";
  }
  EXPECT_GT(files.size(), 200u);
}

// The tests mirror src/, one file per concept, and stay as small.
TEST(SourceTree, EveryTestFileIsUnderFiveHundredLines) {
  const auto files = sources_in("tests");
  for (const SourceFile& f : files)
    EXPECT_LT(f.lines, 500) << f.where << " has " << f.lines << " lines: split it by concept";
  EXPECT_GT(files.size(), 100u);
}

}  // namespace
