// `hyperpipe train`'s progress: on a terminal one bar redrawn in place (also
// when the ranks write through the launcher), in a pipe plain lines.
#include <gtest/gtest.h>

#include <string>

#include "train_run.hpp"

namespace hp::testing {
namespace {

// Issue 11 part 5: on a terminal (util-linux `script` gives the command one)
// the progress is one bar redrawn in place, with an ETA, also when the ranks
// write to the launcher's pipes; in a pipe or file it is plain lines.
TEST(TrainDist, OnATerminalTheProgressIsABarRedrawnInPlaceAlsoUnderTheLauncher) {
  const std::string train = hyperpipe() + " train" + kModel + " --steps 6 --timeout 30";
  auto on_terminal = [](const std::string& command) {
    return run_command("script -qec \"" + command + "\" /dev/null", 120);
  };
  const auto one = on_terminal("RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=0 " + train);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("\r[#####     "), std::string::npos) << one.output;  // step 1 of 6
  EXPECT_NE(one.output.find("] step 3/6  loss "), std::string::npos) << one.output;
  EXPECT_NE(one.output.find("  ETA "), std::string::npos) << one.output;
  EXPECT_NE(one.output.find("\r[" + std::string(30, '#') + "] step 6/6  loss "), std::string::npos) << one.output;

  const auto two = on_terminal(train + " --nproc 2");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  // The launcher clears the line and draws rank 0's bar in place; the last
  // step stays as a line of its own and the bar goes.
  EXPECT_NE(two.output.find("\r\x1b[K[rank 0] [##########     "), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("\r\x1b[K[rank 0] step 6/6  loss "), std::string::npos) << two.output;
  EXPECT_EQ(two.output.find("[rank 0] \r"), std::string::npos) << two.output;
  EXPECT_EQ(two.output.find("[rank 0] \n"), std::string::npos) << two.output;

  const auto piped = run_command(train + " --nproc 2 | cat", 120);
  ASSERT_EQ(piped.exit_code, 0) << piped.output;
  EXPECT_EQ(piped.output.find('\r'), std::string::npos) << piped.output;
  EXPECT_NE(piped.output.find("[rank 0] step 1/6  loss "), std::string::npos) << piped.output;
  // The first line names the BLAS the products run on (runtime/blas_library.hpp) and the threads each rank has.
  EXPECT_EQ(piped.output.rfind("[rank 0] BLAS: ", 0), 0u) << piped.output;
  EXPECT_NE(piped.output.find(", 1 thread per rank\n"), std::string::npos) << piped.output;
}

}  // namespace
}  // namespace hp::testing
