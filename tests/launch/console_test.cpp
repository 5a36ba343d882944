#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "launch/console.hpp"

using hp::launch::Console;
using hp::launch::LaunchOutput;

namespace {

// What a Console wrote to its stdout and stderr.
struct Written {
  std::string out, err;
};

template <typename F>
Written capture(bool terminal, F lines) {
  char *out_buf = nullptr, *err_buf = nullptr;
  std::size_t out_size = 0, err_size = 0;
  std::FILE* out = open_memstream(&out_buf, &out_size);
  std::FILE* err = open_memstream(&err_buf, &err_size);
  {
    Console console(out, err, terminal);
    lines(console);
  }
  std::fclose(out);
  std::fclose(err);
  Written w{std::string(out_buf, out_size), std::string(err_buf, err_size)};
  std::free(out_buf);
  std::free(err_buf);
  return w;
}

}  // namespace

TEST(Console, LinesArePrefixedOnTheStreamTheyCameFrom) {
  const Written w = capture(false, [](Console& c) {
    c.write({0, false, "hello"});
    c.write({1, true, "oops"});
    c.write({-1, true, "hyperpipe launch: done"});
  });
  EXPECT_EQ(w.out, "[rank 0] hello\n");
  EXPECT_EQ(w.err, "[rank 1] oops\nhyperpipe launch: done\n");
}

TEST(Console, OnATerminalARelayedBarStaysBelowTheOtherLines) {
  const Written w = capture(true, [](Console& c) {
    c.write({0, false, "\r[#  ] step 1/3"});
    c.write({0, false, "a log line"});
    c.write({0, false, "\r[## ] step 2/3"});
    c.write({0, false, "\r"});
    c.write({0, false, "step 3/3 took 1s"});
  });
  EXPECT_EQ(w.out,
            "[rank 0] [#  ] step 1/3"
            "\r\x1b[K[rank 0] a log line\n[rank 0] [#  ] step 1/3"
            "\r\x1b[K[rank 0] [## ] step 2/3"
            "\r\x1b[K"
            "[rank 0] step 3/3 took 1s\n");
}

TEST(Console, ABarStillDrawnAtTheEndGetsItsNewline) {
  const Written w = capture(true, [](Console& c) { c.write({0, false, "\r[#] step 1/9"}); });
  EXPECT_EQ(w.out, "[rank 0] [#] step 1/9\n");
}

TEST(Console, NotOnATerminalABarIsAPlainLine) {
  const Written w = capture(false, [](Console& c) {
    c.write({0, false, "\r[#] step 1/2"});
    c.write({0, false, "\r"});
  });
  EXPECT_EQ(w.out, "[rank 0] [#] step 1/2\n");
}
