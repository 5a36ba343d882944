#include "launch/signal_guard.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>
#include <string>

namespace hp::launch {
namespace {

volatile std::sig_atomic_t g_signal = 0;
int g_wake_fd = -1;  // write end of the self-pipe

extern "C" void launcher_on_signal(int sig) {
  g_signal = sig;
  if (g_wake_fd >= 0) {
    int saved = errno;
    char c = 1;
    [[maybe_unused]] ssize_t n = ::write(g_wake_fd, &c, 1);
    errno = saved;
  }
}

}  // namespace

SignalGuard::SignalGuard(bool enable) : enabled_(enable) {
  if (::pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::runtime_error(std::string("hyperpipe launch: pipe2() failed: ") + std::strerror(errno));
  }
  g_signal = 0;
  g_wake_fd = pipe_[1];
  if (!enabled_) return;
  struct sigaction sa {};
  sa.sa_handler = launcher_on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, &old_int_);
  ::sigaction(SIGTERM, &sa, &old_term_);
}

SignalGuard::~SignalGuard() {
  if (enabled_) {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }
  g_wake_fd = -1;
  ::close(pipe_[0]);
  ::close(pipe_[1]);
}

int SignalGuard::received() const { return g_signal; }

void SignalGuard::drain() const {
  char buf[64];
  while (::read(pipe_[0], buf, sizeof(buf)) > 0) {
  }
}

}  // namespace hp::launch
