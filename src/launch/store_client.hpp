// StoreClient: one connection to a StoreServer (store_server.hpp), as the
// launchers of the other nodes and, through comm/launcher_store, the ranks
// hold it.
//
// Contract:
// - The constructor connects, retrying until connect_timeout passes (node 0's
//   launcher may start after this one); it throws StoreError naming host:port
//   and the last error when none accepted.
// - Every call is one request and its reply; a reply that does not come within
//   op_timeout (wait(): its own timeout and then op_timeout) throws StoreError
//   with timed_out() set, and a server that closed the connection throws one
//   saying so. After either the connection is unusable: later calls throw.
// - Not shared across threads (make one per thread, as c10d's TCPStore).
// - Destroying it closes the connection as lost (its wills take effect);
//   goodbye() first ends it on purpose.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace hp::launch {

class StoreError : public std::runtime_error {
 public:
  StoreError(const std::string& what, bool timed_out) : std::runtime_error(what), timed_out_(timed_out) {}
  bool timed_out() const { return timed_out_; }

 private:
  bool timed_out_;
};

class StoreClient {
 public:
  StoreClient(std::string host, int port, std::chrono::milliseconds connect_timeout,
              std::chrono::milliseconds op_timeout);
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  void set(const std::string& key, const std::string& value);
  std::optional<std::string> get(const std::string& key);
  std::int64_t add(const std::string& key, std::int64_t delta);
  // c10d's compareSet: sets `desired` when the value is `expected` (absent
  // counts as ""); returns the value after.
  std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired);
  bool remove(const std::string& key);
  bool check(const std::vector<std::string>& keys);
  std::int64_t num_keys();
  // True once every key exists; false when `timeout` passed first.
  bool wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  // When this connection is lost without goodbye(), the server sets `key` to
  // `value` unless it exists. A later will of the same key replaces it.
  void will(const std::string& key, const std::string& value);
  void goodbye();

  void set_op_timeout(std::chrono::milliseconds t) { op_timeout_ = t; }
  // "host:port", for messages.
  const std::string& where() const { return where_; }

 private:
  // Sends one request; returns the reply's status and parts.
  std::vector<std::string> call(std::uint8_t op, const std::vector<std::string>& parts, std::uint8_t* status,
                                std::chrono::milliseconds reply_within);
  std::string ok_value(std::uint8_t op, const std::vector<std::string>& parts);
  [[noreturn]] void fail(const std::string& what, bool timed_out);

  std::string where_;
  int fd_ = -1;
  std::chrono::milliseconds op_timeout_;
  std::string in_;
};

}  // namespace hp::launch
