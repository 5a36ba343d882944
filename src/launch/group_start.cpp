#include "launch/group_start.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "launch/console.hpp"
#include "launch/error_file.hpp"
#include "launch/exec_env.hpp"
#include "launch/node_group.hpp"
#include "launch/signal_guard.hpp"
#include "launch/store_client.hpp"
#include "launch/start_dir.hpp"

namespace hp::launch {

using Clock = std::chrono::steady_clock;

namespace {

std::string signal_name(int sig) {
  switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGSEGV: return "SIGSEGV";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
  }
  const char* d = ::strsignal(sig);
  return d != nullptr ? std::string(d) : "signal " + std::to_string(sig);
}

}  // namespace

class GroupStart::Impl {
  struct Stream {
    int fd = -1;
    bool is_stderr = false;
    std::string pending;
  };

  struct Rank {
    int rank = 0;
    pid_t pid = -1;
    bool running = false;
    int status = 0;  // raw waitpid status once exited
    Stream out;
    Stream err;
  };

 public:
  // restart_env: what a restarted group's ranks get beside the options' environment;
  // group: the launchers of the other nodes (null on one node).
  Impl(const LaunchOptions& o, std::vector<std::pair<std::string, std::string>> restart_env, NodeGroup* group)
      : o_(o), restart_env_(std::move(restart_env)), group_(group) {
    if (o.on_output) {
      sink_ = o.on_output;
    } else {
      console_ = std::make_unique<Console>(stdout, stderr, ::isatty(STDOUT_FILENO) != 0);
      relay_progress_ = ::isatty(STDOUT_FILENO) != 0;
      sink_ = [this](const LaunchOutput& l) { console_->write(l); };
    }
  }

  int run(SignalGuard& signals) {
    const int port = o_.master_port != 0 ? o_.master_port : pick_free_port(o_.master_addr);
    dir_ = std::make_unique<StartDir>();
    if (o_.store_file && !group_) store_path_ = dir_->store_path();  // several nodes meet at node 0's launcher
    const char* shm = std::getenv("HYPERPIPE_SHM");
    if (o_.shared_memory && o_.nproc > 1 && !(shm != nullptr && std::string(shm) == "0")) shm_dir_ = dir_->shm_dir();
    ranks_.resize(o_.nproc);
    const auto start = Clock::now();

    for (int r = 0; r < o_.nproc; ++r) {
      // A SIGINT/SIGTERM while starting many ranks stops at once (the loop below stops the
      // ranks already started) instead of after the last one.
      if (signals.received() != 0) break;
      ranks_[r].rank = o_.node_rank * o_.nproc + r;
      std::string error = spawn(ranks_[r], port);
      if (!error.empty()) {
        const std::string what = "cannot start rank " + std::to_string(ranks_[r].rank) + " (" + o_.command[0] + "): " + error;
        say("hyperpipe launch: " + what + (r > 0 ? "; stopping the other ranks" : ""));
        record(what, false);
        result_ = 127;
        begin_stop(SIGTERM);
        break;
      }
    }

    const Clock::time_point job_deadline =
        o_.job_timeout.count() > 0 ? start + o_.job_timeout : Clock::time_point::max();
    Clock::time_point drain_deadline = Clock::time_point::max();
    while (true) {
      const bool any_running = std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; });
      const bool any_open = std::any_of(ranks_.begin(), ranks_.end(),
                                        [](const Rank& r) { return r.out.fd >= 0 || r.err.fd >= 0; });
      if (!any_running) {
        if (!any_open) break;
        // Every rank is gone; a grandchild may still hold a pipe. Drain briefly.
        if (drain_deadline == Clock::time_point::max()) drain_deadline = Clock::now() + o_.shutdown_grace;
        if (Clock::now() >= drain_deadline) {
          for (Rank& r : ranks_) {
            close_stream(r, r.out);
            close_stream(r, r.err);
          }
          break;
        }
      }
      pump(signals);
      if (signals.received() != 0 && !stopping_) {
        interrupted_ = signals.received();
        record("node " + std::to_string(o_.node_rank) + "'s launcher got " + signal_name(interrupted_), false);
        failure_.restartable = false;  // even where another node recorded a restartable one first: told to stop
        begin_stop(signals.received());
      }
      reap();
      const auto now = Clock::now();
      if (!stopping_ && now >= job_deadline) {
        say("hyperpipe launch: the job did not finish within its timeout of " +
            std::to_string(o_.job_timeout.count()) + " ms; stopping all ranks");
        record("the job did not finish within its timeout", false);
        result_ = 124;
        begin_stop(SIGTERM);
      }
      if (group_ && !stopping_ && now >= next_watch_) watch_other_nodes(now);
      if (stopping_ && !killed_ && now >= kill_deadline_) {
        for (Rank& r : ranks_) {
          if (r.running) ::kill(-r.pid, SIGKILL);
        }
        killed_ = true;
      }
    }
    if (result_ >= 0) return result_;
    if (interrupted_ != 0) return 128 + interrupted_;
    return 0;
  }

  const StartFailure& failure() const { return failure_; }

  void say(const std::string& text) { sink_(LaunchOutput{-1, true, text}); }

 private:
  std::string spawn(Rank& rk, int port) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return std::string("pipe2: ") + std::strerror(errno);
    if (::pipe2(err, O_CLOEXEC) != 0) {
      int e = errno;
      ::close(out[0]);
      ::close(out[1]);
      return std::string("pipe2: ") + std::strerror(e);
    }
    EnvBuilder env;
    const bool omp_given = env.has("OMP_NUM_THREADS") ||
                           std::any_of(o_.extra_env.begin(), o_.extra_env.end(),
                                       [](const auto& kv) { return kv.first == "OMP_NUM_THREADS"; });
    if (!omp_given) env.set("OMP_NUM_THREADS", std::to_string(std::max(1, cpu_count() / o_.nproc)));
    for (const auto& kv : o_.extra_env) env.set(kv.first, kv.second);
    for (const auto& kv : restart_env_) env.set(kv.first, kv.second);
    env.set("RANK", std::to_string(rk.rank));
    env.set("LOCAL_RANK", std::to_string(rk.rank - o_.node_rank * o_.nproc));
    env.set("WORLD_SIZE", std::to_string(o_.nnodes * o_.nproc));
    env.set("LOCAL_WORLD_SIZE", std::to_string(o_.nproc));
    env.set("GROUP_RANK", std::to_string(o_.node_rank));
    env.set("GROUP_WORLD_SIZE", std::to_string(o_.nnodes));
    env.set("MASTER_ADDR", o_.master_addr);
    env.set("MASTER_PORT", std::to_string(port));
    if (!store_path_.empty()) env.set("HYPERPIPE_STORE_PATH", store_path_);
    if (!shm_dir_.empty()) env.set("HYPERPIPE_SHM_DIR", shm_dir_);
    env.set(kErrorFileEnv, dir_->error_file(rk.rank));
    if (group_) env.set("HYPERPIPE_LAUNCHER_STORE", NodeGroup::rank_prefix(group_->start()));
    if (relay_progress_) env.set("HYPERPIPE_PROGRESS", "relay");
    std::vector<char*> envp = env.envp();

    std::vector<std::string> args = o_.command;
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    const std::string program = find_program(args[0]);
    int status_pipe[2];  // the child writes exec's errno here; closed by a successful exec
    if (::pipe2(status_pipe, O_CLOEXEC) != 0) {
      const int e = errno;
      for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
      return std::string("pipe2: ") + std::strerror(e);
    }
    // fork + exec rather than posix_spawn: the child must ask for a parent-death signal
    // (prctl), which posix_spawn cannot. The launcher's signals are blocked across fork so that
    // its handler never runs in the child; the child runs only async-signal-safe calls.
    sigset_t all, saved;
    sigfillset(&all);
    ::sigprocmask(SIG_BLOCK, &all, &saved);
    const pid_t launcher = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      // Ranks die with their launcher (like torchrun's agent arranges), even on its kill -9;
      // SIGKILL also reaches a stopped rank. Checked after: the launcher may already be gone.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcher) ::_exit(127);
      const int null_fd = ::open("/dev/null", O_RDONLY);
      if (null_fd >= 0 && null_fd != 0) {
        ::dup2(null_fd, 0);
        ::close(null_fd);
      }
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      for (int sig : {SIGINT, SIGTERM, SIGPIPE}) ::sigaction(sig, &dfl, nullptr);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execve(program.c_str(), argv.data(), envp.data());
      const int e = errno;
      [[maybe_unused]] ssize_t n = ::write(status_pipe[1], &e, sizeof(e));
      ::_exit(127);
    }
    const int fork_errno = errno;
    if (pid > 0) ::setpgid(pid, pid);  // also here: the stop path signals -pid at once
    ::sigprocmask(SIG_SETMASK, &saved, nullptr);
    ::close(status_pipe[1]);
    ::close(out[1]);
    ::close(err[1]);
    int exec_errno = 0;
    if (pid > 0) {
      ssize_t n;
      do n = ::read(status_pipe[0], &exec_errno, sizeof(exec_errno));
      while (n < 0 && errno == EINTR);
      if (n != static_cast<ssize_t>(sizeof(exec_errno))) exec_errno = 0;
      if (exec_errno != 0) ::waitpid(pid, nullptr, 0);
    }
    ::close(status_pipe[0]);
    const int rc = pid < 0 ? fork_errno : exec_errno;
    if (rc != 0) {
      ::close(out[0]);
      ::close(err[0]);
      return std::strerror(rc);
    }
    ::fcntl(out[0], F_SETFL, ::fcntl(out[0], F_GETFL) | O_NONBLOCK);
    ::fcntl(err[0], F_SETFL, ::fcntl(err[0], F_GETFL) | O_NONBLOCK);
    rk.pid = pid;
    rk.running = true;
    rk.out = Stream{out[0], false, {}};
    rk.err = Stream{err[0], true, {}};
    return {};
  }

  void emit(const Rank& rk, const Stream& s, std::string text) {
    // A CRLF line loses its CR; a lone "\r" is a rank taking its progress bar away (console.hpp).
    if (text.size() > 1 && text.back() == '\r') text.pop_back();
    sink_(LaunchOutput{rk.rank, s.is_stderr, std::move(text)});
  }

  void close_stream(Rank& rk, Stream& s) {
    if (s.fd < 0) return;
    if (!s.pending.empty()) emit(rk, s, std::move(s.pending));
    s.pending.clear();
    ::close(s.fd);
    s.fd = -1;
  }

  // Reads whatever is available (waiting at most 50 ms) and emits full lines.
  void pump(const SignalGuard& signals) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Rank*, Stream*>> owners;
    fds.push_back(pollfd{signals.read_fd(), POLLIN, 0});
    owners.emplace_back(nullptr, nullptr);
    for (Rank& r : ranks_) {
      for (Stream* s : {&r.out, &r.err}) {
        if (s->fd >= 0) {
          fds.push_back(pollfd{s->fd, POLLIN, 0});
          owners.emplace_back(&r, s);
        }
      }
    }
    int n = ::poll(fds.data(), fds.size(), 50);
    if (n <= 0) return;
    if (fds[0].revents != 0) signals.drain();
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Rank& rk = *owners[i].first;
      Stream& s = *owners[i].second;
      char buf[65536];
      while (true) {
        ssize_t got = ::read(s.fd, buf, sizeof(buf));
        if (got > 0) {
          s.pending.append(buf, static_cast<std::size_t>(got));
          std::size_t pos;
          while ((pos = s.pending.find('\n')) != std::string::npos) {
            emit(rk, s, s.pending.substr(0, pos));
            s.pending.erase(0, pos + 1);
          }
          if (s.pending.size() > (1u << 16)) {  // a very long line: pass it on in pieces
            emit(rk, s, std::move(s.pending));
            s.pending.clear();
          }
          continue;
        }
        if (got < 0 && (errno == EINTR)) continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        close_stream(rk, s);  // EOF or error
        break;
      }
    }
  }

  void reap() {
    for (Rank& r : ranks_) {
      if (!r.running) continue;
      int st = 0;
      pid_t got = ::waitpid(r.pid, &st, WNOHANG);
      if (got == 0) continue;
      if (got < 0 && errno == EINTR) continue;
      r.running = false;
      r.status = st;
      const bool failed = got < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
      if (!failed || stopping_) continue;
      std::string how;
      int code;
      if (got < 0) {
        how = "an unknown status (waitpid: " + std::string(std::strerror(errno)) + ")";
        code = 1;
      } else if (WIFSIGNALED(st)) {
        how = "signal " + std::to_string(WTERMSIG(st)) + " (" + signal_name(WTERMSIG(st)) + ")";
        code = 128 + WTERMSIG(st);
      } else {
        how = "exit code " + std::to_string(WEXITSTATUS(st));
        code = WEXITSTATUS(st);
      }
      const bool others = std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& x) { return x.running; });
      // The rank's last lines first, so the failure line follows them.
      flush_available(r);
      const std::string what = "rank " + std::to_string(r.rank) + " failed with " + how;
      say("hyperpipe launch: " + what + (others ? "; stopping the other ranks" : ""));
      // A rank that gave up on a stopped or hung peer blames it: the start failed there.
      const auto error = read_error_file(dir_->error_file(r.rank));
      if (error && error->culprit >= 0 && error->culprit != r.rank)
        record("rank " + std::to_string(error->culprit) + " " + error->culprit_state + ", found by rank " +
                   std::to_string(r.rank),
               true);
      else
        record(what, code != kExitNoRestart);
      result_ = code;
      begin_stop(SIGTERM);
    }
  }

  // Emits what the exited rank left in its pipes (it cannot write more).
  void flush_available(Rank& rk) {
    for (Stream* s : {&rk.out, &rk.err}) {
      if (s->fd < 0) continue;
      char buf[65536];
      ssize_t got;
      while ((got = ::read(s->fd, buf, sizeof(buf))) > 0) {
        s->pending.append(buf, static_cast<std::size_t>(got));
        std::size_t pos;
        while ((pos = s->pending.find('\n')) != std::string::npos) {
          emit(rk, *s, s->pending.substr(0, pos));
          s->pending.erase(0, pos + 1);
        }
      }
    }
  }

  // Notes this start's failure; with other nodes, the first one any node
  // recorded is the start's (a rank failing after another node's did is
  // its consequence, not its cause).
  void record(const std::string& what, bool restartable) {
    if (!failure_.reason.empty()) return;
    failure_ = StartFailure{what, restartable, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                   std::chrono::system_clock::now().time_since_epoch())
                                                   .count()};
    if (!group_) return;
    try {
      failure_ = group_->fail(failure_);
    } catch (const StoreError& e) {
      lost_store(e);
    }
  }

  void lost_store(const StoreError& e) {
    failure_.reason = "node 0's launcher was lost (" + std::string(e.what()) + ")";
    failure_.restartable = false;
    if (!stopping_) say("hyperpipe launch: " + failure_.reason + "; stopping this node's ranks");
  }

  // Another node's failure ends this node's ranks too, at once.
  void watch_other_nodes(Clock::time_point now) {
    next_watch_ = now + std::chrono::milliseconds(100);
    try {
      const auto f = group_->failure();
      if (!f) return;
      failure_ = *f;
      say("hyperpipe launch: " + failure_.reason + "; stopping this node's ranks");
    } catch (const StoreError& e) {
      lost_store(e);
    }
    result_ = 1;
    begin_stop(SIGTERM);
  }

  void begin_stop(int sig) {
    if (stopping_) return;
    stopping_ = true;
    for (Rank& r : ranks_) {
      if (r.running) ::kill(-r.pid, sig);
    }
    kill_deadline_ = Clock::now() + o_.shutdown_grace;
  }

  const LaunchOptions& o_;
  const std::vector<std::pair<std::string, std::string>> restart_env_;
  NodeGroup* const group_;
  Clock::time_point next_watch_ = Clock::time_point::min();
  std::function<void(const LaunchOutput&)> sink_;
  std::vector<Rank> ranks_;
  std::unique_ptr<StartDir> dir_;  // this start's store file and error files
  std::string store_path_;  // HYPERPIPE_STORE_PATH for the ranks; empty: none
  std::string shm_dir_;     // HYPERPIPE_SHM_DIR for the ranks; empty: none
  std::unique_ptr<Console> console_;  // the default output; null with on_output
  bool relay_progress_ = false;       // ranks relay their progress bars to console_
  bool stopping_ = false;
  bool killed_ = false;
  Clock::time_point kill_deadline_ = Clock::time_point::max();
  int result_ = -1;
  int interrupted_ = 0;
  StartFailure failure_{"", false, 0};  // reason empty: none yet
};


GroupStart::GroupStart(const LaunchOptions& o, std::vector<std::pair<std::string, std::string>> restart_env,
                       NodeGroup* group)
    : impl_(std::make_unique<Impl>(o, std::move(restart_env), group)) {}
GroupStart::~GroupStart() = default;
int GroupStart::run(SignalGuard& signals) { return impl_->run(signals); }
const StartFailure& GroupStart::failure() const { return impl_->failure(); }
void GroupStart::say(const std::string& text) { impl_->say(text); }

}  // namespace hp::launch
