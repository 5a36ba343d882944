// Pieces of CommError messages (comm_error.hpp) shared by the process group and
// its rendezvous: the transport's own words without noise, whether they read
// like a timeout or a vanished peer, and durations as people write them.
// Internal to src/comm; pure functions.
#pragma once

#include <chrono>
#include <exception>
#include <string>

namespace hp::comm {

// "30 s", "1.5 s", "250 ms".
std::string format_duration(std::chrono::milliseconds d);

// The message of an exception from c10d or Gloo without C++ backtraces and
// without Gloo's "[/path/to/file.cc:123] " source prefix.
std::string clean_message(const std::exception& e);

// Gloo and c10d report these conditions only in their message text.
bool looks_like_timeout(const std::string& message);
bool looks_like_peer_gone(const std::string& message);

}  // namespace hp::comm
