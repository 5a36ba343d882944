#include "launch/console.hpp"

namespace hp::launch {

namespace {

void put(std::FILE* f, const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), f);
  std::fflush(f);
}

}  // namespace

Console::Console(std::FILE* out, std::FILE* err, bool terminal) : out_(out), err_(err), terminal_(terminal) {}

Console::~Console() {
  if (!bar_.empty()) put(out_, "\n");
}

void Console::clear_bar() {
  if (!bar_.empty()) put(out_, "\r\x1b[K");
}

void Console::write(const LaunchOutput& line) {
  const bool is_bar = line.rank >= 0 && !line.text.empty() && line.text[0] == '\r';
  if (is_bar && !terminal_) {
    if (line.text.size() > 1) put(out_, LaunchOutput{line.rank, false, line.text.substr(1)}.formatted() + "\n");
    return;
  }
  clear_bar();
  if (is_bar) {
    bar_ = line.text.size() > 1 ? LaunchOutput{line.rank, false, line.text.substr(1)}.formatted() : std::string();
  } else {
    put(line.is_stderr ? err_ : out_, line.formatted() + "\n");
  }
  if (!bar_.empty()) put(out_, bar_);
}

}  // namespace hp::launch
