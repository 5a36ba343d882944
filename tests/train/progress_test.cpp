#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <vector>
#include <string>

#include "train/progress.hpp"

using hp::train::format_eta;
using hp::train::Progress;
using hp::train::ProgressMode;

TEST(Progress, EtaReadsAsMinutesAndHours) {
  EXPECT_EQ(format_eta(0), "0s");
  EXPECT_EQ(format_eta(44.6), "45s");
  EXPECT_EQ(format_eta(185), "3m05s");
  EXPECT_EQ(format_eta(7260), "2h01m");
  EXPECT_EQ(format_eta(-1), "?");
  EXPECT_EQ(format_eta(1.0 / 0.0), "?");
}

TEST(Progress, LinesAtTheIntervalTheFirstTheLastAndKeptOnes) {
  std::ostringstream out;
  Progress p(3, 10, 4, ProgressMode::Lines, out);  // a run resumed after step 2
  for (int step = 3; step <= 10; ++step) p.update(step, "loss 1", step == 4);
  std::istringstream in(out.str());
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 4u) << out.str();  // 3 (first), 4 (kept), 6 (4th unit), 10 (last)
  EXPECT_EQ(lines[0].rfind("step 3/10  loss 1  ETA ", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("step 4/10  loss 1  ETA ", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("step 6/10  loss 1  ETA ", 0), 0u) << lines[2];
  EXPECT_EQ(lines[3].rfind("step 10/10  loss 1  took ", 0), 0u) << lines[3];
  EXPECT_EQ(out.str().find('\r'), std::string::npos);
}

TEST(Progress, OnATerminalOneBarIsRedrawnInPlace) {
  std::ostringstream out;
  Progress p(1, 4, 1, ProgressMode::Terminal, out);
  p.update(1, "a");
  p.update(2, "b", true);
  p.update(3, "c");
  p.update(4, "d");
  const std::string text = out.str();
  const std::string bar = std::string(7, '#') + std::string(23, ' ');
  EXPECT_EQ(text.rfind("\r[" + bar + "] step 1/4  a  ETA ", 0), 0u) << text;
  // Only the kept and the last update end a line.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;
  EXPECT_NE(text.find("\r[" + std::string(30, '#') + "] step 4/4  d  took "), std::string::npos) << text;
  EXPECT_NE(text.find("\x1b[K"), std::string::npos);
}

TEST(Progress, UnderTheLauncherEveryRedrawIsALineThatStartsWithCarriageReturn) {
  std::ostringstream out;
  Progress p(1, 2, 1, ProgressMode::Relay, out);
  p.update(1, "a");
  p.update(2, "b");
  std::istringstream in(out.str());
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 3u) << out.str();
  EXPECT_EQ(lines[0].rfind("\r[" + std::string(15, '#'), 0), 0u) << lines[0];  // the bar
  EXPECT_EQ(lines[1].rfind("step 2/2  b  took ", 0), 0u) << lines[1];         // the last, kept
  EXPECT_EQ(lines[2], "\r");                                                 // the bar taken away
}
