#include "train/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ostream>
#include <sstream>

namespace hp::train {

ProgressMode progress_mode_of_stdout() {
  if (::isatty(STDOUT_FILENO)) return ProgressMode::Terminal;
  const char* relay = std::getenv("HYPERPIPE_PROGRESS");
  if (relay != nullptr && std::string(relay) == "relay") return ProgressMode::Relay;
  return ProgressMode::Lines;
}

std::string format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(std::llround(seconds));
  std::ostringstream os;
  auto two = [&os](long long v) {
    if (v < 10) os << '0';
    os << v;
  };
  if (s < 60) {
    os << s << "s";
  } else if (s < 3600) {
    os << s / 60 << "m";
    two(s % 60);
    os << "s";
  } else {
    os << s / 3600 << "h";
    two(s % 3600 / 60);
    os << "m";
  }
  return os.str();
}

Progress::Progress(std::int64_t first, std::int64_t last, int interval, ProgressMode mode, std::ostream& out)
    : first_(first),
      last_(last),
      interval_(interval < 1 ? 1 : interval),
      mode_(mode),
      out_(out),
      start_(std::chrono::steady_clock::now()) {}

void Progress::update(std::int64_t done, const std::string& status, bool keep) {
  const bool last = done == last_;
  const double units = static_cast<double>(done - first_ + 1);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::ostringstream line;
  line << "step " << done << "/" << last_ << "  " << status;
  if (last)
    line << "  took " << format_eta(elapsed);
  else
    line << "  ETA " << format_eta(elapsed / units * static_cast<double>(last_ - done));

  auto bar = [&] {
    const int width = 30;
    const double share = units / static_cast<double>(last_ - first_ + 1);
    const int filled = std::max(0, std::min(width, static_cast<int>(share * width)));
    return "[" + std::string(filled, '#') + std::string(width - filled, ' ') + "] " + line.str();
  };
  switch (mode_) {
    case ProgressMode::Terminal:
      // \x1b[K clears what a longer earlier line left to the right.
      out_ << "\r" << bar() << "\x1b[K";
      if (keep || last) out_ << "\n";
      out_ << std::flush;
      break;
    case ProgressMode::Relay:
      // A kept line is a plain line; "\r" alone takes the bar away.
      if (keep || last) out_ << line.str() << "\n";
      out_ << "\r" << (last ? std::string() : bar()) << "\n" << std::flush;
      break;
    case ProgressMode::Lines:
      if (keep || last || done == first_ || (done - first_ + 1) % interval_ == 0) out_ << line.str() << std::endl;
      break;
  }
}

}  // namespace hp::train
