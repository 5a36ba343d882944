#include "comm/error_text.hpp"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <sstream>

namespace hp::comm {
namespace {

bool contains_ci(const std::string& hay, const std::string& needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                        [](char a, char b) { return std::tolower(a) == std::tolower(b); });
  return it != hay.end();
}

}  // namespace

std::string format_duration(std::chrono::milliseconds d) {
  std::ostringstream os;
  if (d.count() % 1000 == 0) {
    os << d.count() / 1000 << " s";
  } else if (d.count() > 1000) {
    os << static_cast<double>(d.count()) / 1000.0 << " s";
  } else {
    os << d.count() << " ms";
  }
  return os.str();
}

std::string clean_message(const std::exception& e) {
  std::string m;
  if (auto* ce = dynamic_cast<const c10::Error*>(&e)) {
    m = ce->what_without_backtrace();
  } else {
    m = e.what();
  }
  // Gloo prefixes "[file:line] " (possibly several times when rethrown).
  while (m.size() > 2 && m[0] == '[') {
    std::size_t close = m.find("] ");
    if (close == std::string::npos) break;
    std::string inside = m.substr(1, close - 1);
    if (inside.find(':') == std::string::npos || inside.find(' ') != std::string::npos) break;
    m.erase(0, close + 2);
  }
  while (!m.empty() && std::isspace(static_cast<unsigned char>(m.back()))) m.pop_back();
  return m;
}

bool looks_like_timeout(const std::string& m) { return contains_ci(m, "timed out") || contains_ci(m, "timeout"); }

bool looks_like_peer_gone(const std::string& m) {
  return contains_ci(m, "closed by peer") || contains_ci(m, "connection reset") ||
         contains_ci(m, "broken pipe") || contains_ci(m, "connection refused");
}

}  // namespace hp::comm
