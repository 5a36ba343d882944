// What a local `hyperpipe train` job listens on: its store is a file and Gloo
// binds loopback, so no rank listens on any other interface.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "train_run.hpp"

namespace hp::testing {
namespace {

// The processes under `root` (itself included), from /proc's parent links.
std::vector<int> process_tree(int root) {
  std::map<int, std::vector<int>> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream status(entry.path() / "status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("PPid:", 0) == 0) children[std::stoi(line.substr(5))].push_back(std::stoi(name));
  }
  std::vector<int> tree{root};
  for (std::size_t i = 0; i < tree.size(); ++i)
    for (int c : children[tree[i]]) tree.push_back(c);
  return tree;
}

// The local addresses ("127.0.0.1", "0.0.0.0", "::", ...) of the TCP sockets
// that `pids` listen on, read from their open files and /proc/net/tcp{,6}.
std::vector<std::string> listening_addresses(const std::vector<int>& pids) {
  std::map<std::string, std::string> listening;  // socket inode -> local address
  for (const std::string table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string slot, local, remote, state, queues, timer, retr, uid, timeout, inode;
      f >> slot >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (state != "0A") continue;  // TCP_LISTEN
      const std::string hex = local.substr(0, local.find(':'));
      char text[INET6_ADDRSTRLEN] = {0};
      if (hex.size() == 8) {
        in_addr a{};
        a.s_addr = static_cast<std::uint32_t>(std::stoul(hex, nullptr, 16));
        inet_ntop(AF_INET, &a, text, sizeof text);
      } else {
        in6_addr a{};
        for (int w = 0; w < 4; ++w) {
          const std::uint32_t word = static_cast<std::uint32_t>(std::stoul(hex.substr(8 * w, 8), nullptr, 16));
          std::memcpy(&a.s6_addr[4 * w], &word, 4);
        }
        inet_ntop(AF_INET6, &a, text, sizeof text);
      }
      listening["socket:[" + inode + "]"] = text;
    }
  }
  std::vector<std::string> out;
  for (int pid : pids) {
    std::error_code ec;
    for (const auto& fd : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
      const auto target = std::filesystem::read_symlink(fd.path(), ec);
      if (!ec && listening.count(target.string())) out.push_back(listening[target.string()]);
    }
  }
  return out;
}

// Issue 15 item 1: a local job's store is a file in a private directory, and
// Gloo listens on loopback; so nothing of the job listens on another interface.
TEST(TrainDist, ALocalJobListensOnNoInterfaceButLoopback) {
  const std::string dir = fresh_dir("listen");
  const auto started = run_command(hyperpipe() + " train" + kModel + " --nproc 2 --steps 30 --timeout 30 > " + dir +
                                   "/log 2>&1 & echo $!");
  const int launcher = std::stoi(started.output);
  std::set<std::string> seen;
  int samples_with_ranks = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (::kill(launcher, 0) == 0 && std::chrono::steady_clock::now() < deadline) {
    const auto tree = process_tree(launcher);
    if (tree.size() >= 3) ++samples_with_ranks;
    for (const auto& a : listening_addresses(tree)) seen.insert(a);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string log = slurp(dir + "/log");
  ASSERT_NE(log.find("step 30/30"), std::string::npos) << log;
  EXPECT_GT(samples_with_ranks, 10) << log;
  for (const auto& a : seen)
    EXPECT_TRUE(a.rfind("127.", 0) == 0 || a == "::1" || a.rfind("::ffff:127.", 0) == 0)
        << "a rank listened on " << a << "\n" << log;
}

}  // namespace
}  // namespace hp::testing
