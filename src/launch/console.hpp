// Console: where the launcher's default output goes. Every rank's line is
// written, prefixed "[rank R] ", to the stream it came from, as it comes.
//
// On a terminal, a rank's line that starts with '\r' is a progress bar that
// the rank relays (train/progress.hpp, HYPERPIPE_PROGRESS=relay): it is drawn
// in place on the terminal's last line, the other lines are printed above it
// and the bar is redrawn below them; a line of "\r" alone takes the bar away.
// Not on a terminal, such a line is printed without its '\r' (it reaches
// ranks only on a terminal, so this is a rank that chose to send it).
//
// Not thread-safe: the launcher's one thread writes through it. The
// destructor ends a bar still drawn with a newline.
#pragma once

#include <cstdio>
#include <string>

#include "launch/launcher.hpp"

namespace hp::launch {

class Console {
 public:
  Console(std::FILE* out, std::FILE* err, bool terminal);
  ~Console();
  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;

  void write(const LaunchOutput& line);

 private:
  void clear_bar();

  std::FILE* out_;
  std::FILE* err_;
  bool terminal_;
  std::string bar_;  // the bar drawn now, prefixed; empty: none
};

}  // namespace hp::launch
