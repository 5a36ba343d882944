// A rank's error file: why it exited, in torchelastic's format
// (TORCHELASTIC_ERROR_FILE, which torchrun sets too: {"message": {"message":
// TEXT, "extraInfo": {"timestamp": SECONDS}}}), with hyperpipe's own field
// naming the rank it blames when its failure was a peer's ("culprit": the
// rank its heartbeat found not responding or stuck). The launcher reads it
// when the rank exits non-zero, so that a restart names the rank that
// stopped, not the first of its peers to give up on it.
//
// Contract: write_error_file() replaces the file atomically (a reader sees
// the old one or the new one) and never throws; read_error_file() returns
// nullopt for a missing or unreadable file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace hp::launch {

inline constexpr const char* kErrorFileEnv = "TORCHELASTIC_ERROR_FILE";

struct ErrorRecord {
  std::string message;
  int culprit = -1;            // the rank blamed; -1: this rank's own failure
  std::string culprit_state;   // "is not responding (dead or stopped)", "is alive but stuck"
  std::int64_t timestamp_s = 0;
};

void write_error_file(const std::string& path, const ErrorRecord& record);
std::optional<ErrorRecord> read_error_file(const std::string& path);

}  // namespace hp::launch
