#include "launch/node_group.hpp"

#include <chrono>
#include <sstream>
#include <thread>
#include <vector>

#include "launch/launcher.hpp"
#include "launch/store_client.hpp"
#include "launch/store_server.hpp"

namespace hp::launch {

using Ms = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

// A failure as stored: "<restart|final> <ms> <reason>".
std::string encode(const StartFailure& f) {
  return std::string(f.restartable ? "restart " : "final ") + std::to_string(f.failed_at_ms) + " " + f.reason;
}

StartFailure decode(const std::string& v) {
  StartFailure f;
  const auto a = v.find(' '), b = v.find(' ', a + 1);
  if (a == std::string::npos || b == std::string::npos) return StartFailure{v, false, 0};
  f.restartable = v.compare(0, a, "restart") == 0;
  f.failed_at_ms = std::atoll(v.substr(a + 1, b - a - 1).c_str());
  f.reason = v.substr(b + 1);
  return f;
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<Ms>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string seconds(Ms d) {
  std::ostringstream os;
  os << d.count() / 1000.0 << " s";
  return os.str();
}

std::string node_list(const std::vector<int>& nodes) {
  std::string s = nodes.size() == 1 ? "node " : "nodes ";
  for (std::size_t i = 0; i < nodes.size(); ++i) s += (i ? ", " : "") + std::to_string(nodes[i]);
  return s;
}

}  // namespace

NodeGroup::NodeGroup(const LaunchOptions& o)
    : nnodes_(o.nnodes),
      node_(o.node_rank),
      rendezvous_timeout_(static_cast<long long>(o.rendezvous_timeout_s * 1000)) {
  if (node_ == 0) server_ = std::make_unique<StoreServer>(o.master_addr, o.master_port);
  client_ = std::make_unique<StoreClient>(o.master_addr, o.master_port, rendezvous_timeout_, Ms(30000));
  // A launcher started again joins after the start it left (whose failure its lost connection recorded).
  if (auto s = client_->get("launch/start")) {
    next_ = std::atoi(s->c_str());
    if (client_->check({key(next_, "failed")})) ++next_;
  }
}

NodeGroup::~NodeGroup() = default;

std::string NodeGroup::key(int start, const std::string& what) const {
  return "launch/" + std::to_string(start) + "/" + what;
}

std::vector<std::string> NodeGroup::node_keys(const std::string& what) const {
  std::vector<std::string> keys;
  for (int n = 0; n < nnodes_; ++n) keys.push_back(key(start_, what + "/" + std::to_string(n)));
  return keys;
}

std::vector<int> NodeGroup::missing(const std::vector<std::string>& keys) {
  std::vector<int> nodes;
  for (int n = 0; n < nnodes_; ++n)
    if (!client_->check({keys[n]})) nodes.push_back(n);
  return nodes;
}

std::optional<int> NodeGroup::begin(const std::function<bool()>& interrupted) {
  start_ = next_++;
  // When it is seen is unknown here: the launchers that notice it say when (failed_at_ms 0).
  client_->will(key(start_, "failed"),
                encode(StartFailure{"node " + std::to_string(node_) + "'s launcher was lost (its connection to the store closed)",
                                   true, 0}));
  const std::vector<std::string> ready = node_keys("ready");
  client_->set(ready[node_], "1");
  client_->set("launch/start", std::to_string(start_));
  const auto deadline = Clock::now() + rendezvous_timeout_;
  while (!client_->wait(ready, Ms(100))) {
    if (interrupted()) return std::nullopt;
    if (client_->check({key(start_, "failed")})) return start_;
    if (Clock::now() >= deadline) {
      const std::vector<int> absent = missing(ready);
      const std::string what = start_ == 0 ? "the job's start" : "restart " + std::to_string(start_);
      throw NodeGroupTimeout(node_list(absent) + (absent.size() == 1 ? "'s launcher" : "' launchers") +
                             " did not join " + what + " within the rendezvous timeout of " + seconds(rendezvous_timeout_));
    }
  }
  return start_;
}

std::optional<StartFailure> NodeGroup::failure_of(int start) {
  auto v = client_->get(key(start, "failed"));
  if (!v) return std::nullopt;
  StartFailure f = decode(*v);
  if (f.failed_at_ms == 0) f.failed_at_ms = now_ms();  // a lost launcher's will: seen now
  return f;
}

std::optional<StartFailure> NodeGroup::failure() { return failure_of(start_); }

std::optional<StartFailure> NodeGroup::previous_failure() {
  if (start_ <= 0) return std::nullopt;
  return failure_of(start_ - 1);
}

StartFailure NodeGroup::fail(const StartFailure& f) {
  StartFailure recorded = decode(client_->compare_set(key(start_, "failed"), "", encode(f)));
  if (recorded.failed_at_ms == 0) recorded.failed_at_ms = f.failed_at_ms;
  return recorded;
}

bool NodeGroup::finish(const std::function<bool()>& interrupted) {
  const std::vector<std::string> done = node_keys("done");
  client_->set(done[node_], "1");
  const auto deadline = Clock::now() + rendezvous_timeout_;
  while (!client_->wait(done, Ms(100))) {
    if (client_->check({key(start_, "failed")}) || interrupted()) return false;
    if (Clock::now() >= deadline) {
      fail(StartFailure{node_list(missing(done)) + " did not finish within the rendezvous timeout of " +
                           seconds(rendezvous_timeout_) + " of node " + std::to_string(node_) + "'s end",
                       false, now_ms()});
      return false;
    }
  }
  return true;
}

void NodeGroup::leave(Ms limit) {
  client_->goodbye();
  client_.reset();
  if (!server_) return;
  const auto deadline = Clock::now() + limit;
  while (server_->connections() > 0 && Clock::now() < deadline) std::this_thread::sleep_for(Ms(20));
}

}  // namespace hp::launch
