// Which BLAS a process runs on: the library the loader found for LibTorch's
// libblas.so.3, told apart by its own entry points. Each case starts a child
// with LD_LIBRARY_PATH pointing at one library (searched before the
// alternatives' link), so both answers are checked on a machine that has
// both (scripts/setup.sh installs OpenBLAS beside libtorch-dev's libblas3).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <climits>
#include <string>

#include "cli/run_command.hpp"
#include "runtime/blas_library.hpp"

namespace {

// Debian's multiarch library folder, from where libc was loaded.
std::string lib_dir() {
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(&dladdr), &info);
  char buf[PATH_MAX];
  const std::string libc = realpath(info.dli_fname, buf) ? buf : info.dli_fname;
  return libc.substr(0, libc.rfind('/'));
}

std::string resolved(const std::string& file) {
  char buf[PATH_MAX];
  return realpath(file.c_str(), buf) ? buf : file;
}

hp::testing::CommandResult worker_with(const std::string& dir) {
  return hp::testing::run_command("env LD_LIBRARY_PATH=" + dir + " " + std::string(HP_BIN_DIR) + "/blas_worker", 60);
}

TEST(BlasLibrary, TheReferenceBlasIsNamedAndWarnedAbout) {
  const std::string ref = resolved(lib_dir() + "/blas/libblas.so.3");
  const auto r = worker_with(lib_dir() + "/blas");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("BLAS: reference BLAS (netlib) from " + ref + "\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("reference 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("warning: matrix products run on the reference BLAS (" + ref + ")"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("install libopenblas0-openmp"), std::string::npos) << r.output;
}

TEST(BlasLibrary, OpenBlasIsNamedWithItsThreadingAndNotWarnedAbout) {
  const std::string dir = lib_dir() + "/openblas-openmp";
  const auto r = worker_with(dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("BLAS: OpenBLAS "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(OpenMP, "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" from " + resolved(dir + "/libblas.so.3") + "\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("reference 0"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("warning"), std::string::npos) << r.output;
}

// Started with the machine's own choice (no LD_LIBRARY_PATH, no
// LD_PRELOAD): the alternative's link, resolved, is the file detected.
TEST(BlasLibrary, AProcessRunsOnTheAlternativesChoice) {
  const std::string chosen = resolved(lib_dir() + "/libblas.so.3");
  const auto r = hp::testing::run_command("env -u LD_LIBRARY_PATH -u LD_PRELOAD " + std::string(HP_BIN_DIR) +
                                          "/blas_worker", 60);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(" from " + chosen + "\n"), std::string::npos) << r.output;
  const bool reference = chosen.find("/blas/libblas.so.3") != std::string::npos;
  EXPECT_NE(r.output.find(reference ? "reference 1" : "reference 0"), std::string::npos) << r.output;
}

}  // namespace
