// GroupStart: one start of this node's ranks (launcher.hpp's contract, for
// one start): spawns them with torchrun's environment and restart_env, pumps
// their output line by line, and stops them all when one fails, the launcher
// gets SIGINT/SIGTERM, the job's timeout passes, or (with a NodeGroup)
// another node records a failure of this start.
//
// Contract: run() once, on the launcher's thread; it returns when every rank
// has exited (their pipes drained): 0 when all exited 0, else the status
// launcher.hpp describes. Afterwards failure() says what ended the start (on
// several nodes the first failure any node recorded) and whether a restart
// may get past it; its reason is empty when nothing failed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "launch/launcher.hpp"
#include "launch/start_failure.hpp"

namespace hp::launch {

class NodeGroup;
class SignalGuard;

class GroupStart {
 public:
  // restart_env: what this start's ranks get beside the options' environment;
  // group: the launchers of the other nodes (null on one node).
  GroupStart(const LaunchOptions& o, std::vector<std::pair<std::string, std::string>> restart_env, NodeGroup* group);
  ~GroupStart();
  GroupStart(const GroupStart&) = delete;
  GroupStart& operator=(const GroupStart&) = delete;

  int run(SignalGuard& signals);
  const StartFailure& failure() const;
  // A line of the launcher's own, through this start's output.
  void say(const std::string& text);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hp::launch
