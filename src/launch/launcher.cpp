#include "launch/launcher.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "launch/group_start.hpp"
#include "launch/node_group.hpp"
#include "launch/signal_guard.hpp"
#include "launch/store_client.hpp"

namespace hp::launch {

std::string LaunchOutput::formatted() const {
  if (rank < 0) return text;
  return "[rank " + std::to_string(rank) + "] " + text;
}

int pick_free_port(const std::string& addr) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("pick_free_port: socket() failed: ") + std::strerror(errno));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = 0;
  if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) sa.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    int e = errno;
    ::close(fd);
    throw std::runtime_error("pick_free_port: bind(" + addr + ":0) failed: " + std::strerror(e));
  }
  socklen_t len = sizeof(sa);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    int e = errno;
    ::close(fd);
    throw std::runtime_error(std::string("pick_free_port: getsockname() failed: ") + std::strerror(e));
  }
  ::close(fd);
  return ntohs(sa.sin_port);
}


void check_launch_options(const LaunchOptions& opts) {
  if (opts.nproc < 1) {
    throw std::invalid_argument("launch.nproc " + std::to_string(opts.nproc) + " must be at least 1");
  }
  if (opts.command.empty() || opts.command[0].empty()) {
    throw std::invalid_argument("launch_local: the command to run is empty");
  }
  if (opts.master_port < 0 || opts.master_port > 65535) {
    throw std::invalid_argument("launch.master_port " + std::to_string(opts.master_port) +
                                " must be in [0, 65535] (0: pick a free one)");
  }
  if (opts.shutdown_grace.count() < 0 || opts.job_timeout.count() < 0) {
    throw std::invalid_argument("launch_local: shutdown_grace and job_timeout must not be negative");
  }
  if (opts.nnodes < 1 || opts.nnodes > 1024)
    throw std::invalid_argument("launch.nnodes " + std::to_string(opts.nnodes) + " must be a number of nodes in 1..1024");
  if (opts.node_rank < 0 || opts.node_rank >= opts.nnodes)
    throw std::invalid_argument("launch.node_rank " + std::to_string(opts.node_rank) + " must be in [0, " +
                                std::to_string(opts.nnodes) + ") (launch.nnodes " + std::to_string(opts.nnodes) + ")");
  if (opts.nnodes > 1 && opts.master_port == 0)
    throw std::invalid_argument("launch.master_port: with launch.nnodes " + std::to_string(opts.nnodes) +
                                " every node's launcher must name the same port of node 0 (launch.master_addr " +
                                opts.master_addr + "); give one, e.g. 29500");
  if (!std::isfinite(opts.rendezvous_timeout_s) || opts.rendezvous_timeout_s <= 0 ||
      opts.rendezvous_timeout_s > 7 * 24 * 3600.0)
    throw std::invalid_argument("launch.rendezvous_timeout_s " + std::to_string(opts.rendezvous_timeout_s) +
                                " must be a number of seconds in (0, 604800]");
  if (opts.max_restarts < 0) {
    throw std::invalid_argument("launch.max_restarts " + std::to_string(opts.max_restarts) +
                                " must be >= 0 (0: a failed rank ends the job)");
  }
}

namespace {

// The launcher's own line outside a start of the group.
void say(const LaunchOptions& o, const std::string& text) {
  if (o.on_output) {
    o.on_output(LaunchOutput{-1, true, text});
  } else {
    std::fprintf(stderr, "%s\n", text.c_str());
    std::fflush(stderr);
  }
}

// What one start of the group ended with.
struct Outcome {
  int rc = 0;
  StartFailure failure{"", false, 0};
};

std::vector<std::pair<std::string, std::string>> restart_env(int restart, const Outcome& last) {
  const std::string count = std::to_string(restart);
  std::vector<std::pair<std::string, std::string>> env = {{kRestartCountEnv, count},
                                                          {"TORCHELASTIC_RESTART_COUNT", count}};
  if (restart > 0) {
    env.emplace_back(kRestartReasonEnv, last.failure.reason);
    if (last.failure.failed_at_ms > 0) env.emplace_back(kFailedAtMsEnv, std::to_string(last.failure.failed_at_ms));
  }
  return env;
}

// One start: its ranks from start to exit, and on several nodes the wait for
// every node's end.
Outcome run_start(const LaunchOptions& o, int restart, const Outcome& last, NodeGroup* group, SignalGuard& signals) {
  GroupStart launch(o, restart_env(restart, last), group);
  Outcome out{launch.run(signals), launch.failure()};
  if (out.rc != 0 || !group) return out;
  if (group->finish([&] { return signals.received() != 0; })) return out;
  if (signals.received() != 0) return Outcome{128 + signals.received()};
  const auto f = group->failure();
  if (!f) return Outcome{1, {"the other nodes did not finish", false, 0}};
  launch.say("hyperpipe launch: " + f->reason + " after this node's ranks finished");
  return Outcome{1, *f};
}

// On several nodes: enters the next start with every node's launcher. The
// start's number, or an outcome that ends the job (or, for a start that
// failed at the barrier, counts as that start's failure).
std::optional<int> begin_start(const LaunchOptions& o, NodeGroup& group, SignalGuard& signals, Outcome& ended) {
  try {
    const auto start = group.begin([&] { return signals.received() != 0; });
    if (!start) {
      ended = Outcome{128 + signals.received()};
      return std::nullopt;
    }
    if (const auto f = group.failure()) {  // a launcher was lost at the barrier
      say(o, "hyperpipe launch: " + f->reason + " before start " + std::to_string(*start) + " began");
      ended = Outcome{1, *f};
    }
    return start;
  } catch (const NodeGroupTimeout& e) {
    say(o, "hyperpipe launch: " + std::string(e.what()) + "; ending the job");
  } catch (const StoreError& e) {
    say(o, "hyperpipe launch: node 0's launcher was lost (" + std::string(e.what()) + "); ending the job");
  }
  ended = Outcome{1};
  return std::nullopt;
}

}  // namespace

int launch_local(const LaunchOptions& opts) {
  check_launch_options(opts);
  SignalGuard signals(opts.forward_signals);
  std::unique_ptr<NodeGroup> group;
  if (opts.nnodes > 1) {
    try {
      group = std::make_unique<NodeGroup>(opts);
    } catch (const std::exception& e) {
      say(opts, "hyperpipe launch: node " + std::to_string(opts.node_rank) + " cannot join the job: " + e.what());
      return 1;
    }
  }
  // Node 0 hosts the store: it lets the other launchers read the end first.
  auto leave = [&](int rc) {
    if (group) {
      try {
        group->leave(std::chrono::seconds(5));
      } catch (const StoreError&) {
      }
    }
    return rc;
  };
  Outcome last;
  for (int restart = 0;; ++restart) {
    Outcome out;
    if (group) {
      const auto start = begin_start(opts, *group, signals, out);
      if (!start) return leave(out.rc);
      restart = *start;  // a launcher started again joins the others' start
      if (restart > 0 && last.failure.reason.empty()) {
        if (const auto f = group->previous_failure()) last = Outcome{1, *f};
      }
    }
    if (out.rc == 0) out = run_start(opts, restart, last, group.get(), signals);
    if (out.rc == 0 || !out.failure.restartable) return leave(out.rc);
    if (restart >= opts.max_restarts) {
      if (restart > 0)
        say(opts, "hyperpipe launch: giving up after " + std::to_string(restart) + " restart" +
                      (restart > 1 ? "s" : "") + "; the last: " + out.failure.reason);
      return leave(out.rc);
    }
    say(opts, "hyperpipe launch: restart " + std::to_string(restart + 1) + " of " + std::to_string(opts.max_restarts) +
                  " after " + out.failure.reason + ": starting every rank again");
    last = out;
  }
}

}  // namespace hp::launch
