// Progress: how far a long command (train, bench) has come, for whoever
// watches it: step, ETA and the command's own status (loss, tokens/s).
//
// Three ways to show it, chosen once from where stdout goes:
// - Terminal: stdout is a terminal; one bar, redrawn in place.
// - Relay: stdout is the pipe of `hyperpipe launch` (or `train --nproc`),
//   whose own stdout is a terminal (HYPERPIPE_PROGRESS=relay); each redraw is
//   one line that starts with '\r', which the launcher draws in place below
//   the ranks' other lines (launch/console.hpp).
// - Lines: a plain line every `interval` units, and at the first and last
//   (logs, files, CI).
// In every mode a kept update (an evaluation, the last unit) stays on screen
// as a line of its own. Not thread-safe; one Progress per command, on the
// rank that reports.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>

namespace hp::train {

enum class ProgressMode { Terminal, Relay, Lines };

// Terminal when stdout is one, Relay when HYPERPIPE_PROGRESS=relay, else Lines.
ProgressMode progress_mode_of_stdout();

// "45s", "3m05s", "2h01m"; "?" for a negative or non-finite count.
std::string format_eta(double seconds);

class Progress {
 public:
  // Units first..last (a resumed run starts past 1).
  Progress(std::int64_t first, std::int64_t last, int interval, ProgressMode mode, std::ostream& out);

  // Unit `done` has finished; `status` says how it went. `keep`: also show
  // this update as a line of its own in every mode.
  void update(std::int64_t done, const std::string& status, bool keep = false);

 private:
  std::int64_t first_, last_;
  int interval_;
  ProgressMode mode_;
  std::ostream& out_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace hp::train
