#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "launch/launcher.hpp"

using namespace hp::launch;
using Clock = std::chrono::steady_clock;

namespace {

struct Result {
  int code = -1;
  std::vector<LaunchOutput> lines;
  double seconds = 0;

  std::vector<std::string> formatted(bool is_stderr) const {
    std::vector<std::string> v;
    for (auto& l : lines) {
      if (l.is_stderr == is_stderr) v.push_back(l.formatted());
    }
    return v;
  }
  std::string all() const {
    std::string s;
    for (auto& l : lines) s += l.formatted() + "\n";
    return s;
  }
  bool has_line(const std::string& line) const {
    return std::any_of(lines.begin(), lines.end(), [&](const LaunchOutput& l) { return l.formatted() == line; });
  }
};

Result run_sh(int nproc, const std::string& script, LaunchOptions base = {}) {
  base.nproc = nproc;
  base.command = {"/bin/sh", "-c", script};
  Result r;
  base.on_output = [&](const LaunchOutput& l) { r.lines.push_back(l); };
  auto t0 = Clock::now();
  r.code = launch_local(base);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

}  // namespace

TEST(Launcher, AllRanksSucceedAndOutputIsPrefixedLineByLine) {
  Result r = run_sh(3, "echo \"hello from $RANK\"; echo \"second $RANK\"; echo \"err $RANK\" >&2");
  EXPECT_EQ(r.code, 0) << r.all();
  for (int k = 0; k < 3; ++k) {
    const std::string R = std::to_string(k);
    EXPECT_TRUE(r.has_line("[rank " + R + "] hello from " + R)) << r.all();
    EXPECT_TRUE(r.has_line("[rank " + R + "] second " + R)) << r.all();
    EXPECT_TRUE(r.has_line("[rank " + R + "] err " + R)) << r.all();
  }
  // Each rank's lines keep their order; stderr lines are marked as such.
  for (auto& l : r.lines) {
    if (l.text.rfind("err ", 0) == 0) {
      EXPECT_TRUE(l.is_stderr);
    }
    if (l.text.rfind("hello", 0) == 0) {
      EXPECT_FALSE(l.is_stderr);
    }
  }
  for (int k = 0; k < 3; ++k) {
    int first = -1, second = -1;
    for (std::size_t i = 0; i < r.lines.size(); ++i) {
      if (r.lines[i].rank != k) continue;
      if (r.lines[i].text.rfind("hello", 0) == 0) first = static_cast<int>(i);
      if (r.lines[i].text.rfind("second", 0) == 0) second = static_cast<int>(i);
    }
    EXPECT_LT(first, second);
  }
  EXPECT_EQ(r.formatted(true).size(), 3u);  // no launcher message on success
}

TEST(Launcher, PartialLastLineAndLongOutputArrive) {
  Result r = run_sh(2, "i=0; while [ $i -lt 200 ]; do echo \"line $i of $RANK\"; i=$((i+1)); done; printf \"tail-$RANK\"");
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(r.has_line("[rank 0] line 199 of 0"));
  EXPECT_TRUE(r.has_line("[rank 1] tail-1"));
  EXPECT_EQ(r.lines.size(), 2u * 201u);
}

TEST(Launcher, SetsTheRendezvousEnvironment) {
  LaunchOptions o;
  o.extra_env = {{"HP_EXTRA", "x y"}};
  Result r = run_sh(2,
                    "echo \"R=$RANK W=$WORLD_SIZE L=$LOCAL_RANK LW=$LOCAL_WORLD_SIZE A=$MASTER_ADDR P=$MASTER_PORT "
                    "OMP=$OMP_NUM_THREADS X=$HP_EXTRA\"",
                    o);
  ASSERT_EQ(r.code, 0) << r.all();
  ASSERT_EQ(r.lines.size(), 2u);
  std::set<std::string> ports;
  for (auto& l : r.lines) {
    const std::string R = std::to_string(l.rank);
    EXPECT_NE(l.text.find("R=" + R + " W=2 L=" + R + " LW=2 A=127.0.0.1 P="), std::string::npos) << l.text;
    EXPECT_NE(l.text.find("X=x y"), std::string::npos) << l.text;
    auto p = l.text.find("P=");
    std::string port = l.text.substr(p + 2, l.text.find(' ', p) - p - 2);
    EXPECT_GT(std::stoi(port), 0);
    ports.insert(port);
    auto o = l.text.find("OMP=");
    EXPECT_GE(std::stoi(l.text.substr(o + 4)), 1);
  }
  EXPECT_EQ(ports.size(), 1u);  // every rank got the same picked port
}

TEST(Launcher, RanksShareAPrivateStoreFileThatIsRemovedAfterThem) {
  // Each rank also leaves a file of its own there: the directory goes with everything in it.
  Result r = run_sh(2,
                    "d=$(dirname \"$HYPERPIPE_STORE_PATH\"); touch \"$d/left-by-$RANK\";"
                    " echo \"$HYPERPIPE_STORE_PATH $(stat -c %a \"$d\")\"");
  ASSERT_EQ(r.code, 0) << r.all();
  ASSERT_EQ(r.lines.size(), 2u) << r.all();
  std::set<std::string> paths;
  for (auto& l : r.lines) {
    const auto space = l.text.find(' ');
    paths.insert(l.text.substr(0, space));
    EXPECT_EQ(l.text.substr(space + 1), "700") << "only the job's user may enter the store's directory";
  }
  ASSERT_EQ(paths.size(), 1u) << r.all();
  const std::filesystem::path path = *paths.begin();
  EXPECT_EQ(path.filename(), "store");
  EXPECT_FALSE(std::filesystem::exists(path.parent_path())) << "left behind: " << path.parent_path();

  LaunchOptions o;
  o.store_file = false;
  Result without = run_sh(1, "echo \"[${HYPERPIPE_STORE_PATH-unset}]\"", o);
  EXPECT_TRUE(without.has_line("[rank 0] [unset]")) << without.all();
}

TEST(Launcher, RespectsAGivenPortAndOmpThreads) {
  LaunchOptions o;
  o.master_port = 23456;
  o.extra_env = {{"OMP_NUM_THREADS", "7"}};
  Result r = run_sh(1, "echo \"$MASTER_PORT $OMP_NUM_THREADS $RANK\"", o);
  ASSERT_EQ(r.code, 0);
  EXPECT_TRUE(r.has_line("[rank 0] 23456 7 0")) << r.all();
}

TEST(Launcher, AFailingRankStopsTheOthersAndItsCodeIsReturned) {
  LaunchOptions o;
  o.shutdown_grace = std::chrono::seconds(2);
  Result r = run_sh(3, "if [ \"$RANK\" = 1 ]; then echo dying >&2; exit 3; fi; sleep 1000", o);
  EXPECT_EQ(r.code, 3) << r.all();
  EXPECT_LT(r.seconds, 4.0) << "the sleeping ranks were not stopped by SIGTERM";
  EXPECT_TRUE(r.has_line("hyperpipe launch: rank 1 failed with exit code 3; stopping the other ranks")) << r.all();
  EXPECT_TRUE(r.has_line("[rank 1] dying"));
  int launcher_lines = 0;
  for (auto& l : r.lines) launcher_lines += l.rank < 0;
  EXPECT_EQ(launcher_lines, 1) << r.all();  // the killed ranks are not reported as failures
  // The failing rank's own output comes before the failure line.
  auto dying = std::find_if(r.lines.begin(), r.lines.end(), [](auto& l) { return l.text == "dying"; });
  auto fail = std::find_if(r.lines.begin(), r.lines.end(), [](auto& l) { return l.rank < 0; });
  EXPECT_LT(dying, fail);
}

TEST(Launcher, RanksIgnoringSigtermAreKilledAfterTheGracePeriod) {
  LaunchOptions o;
  o.shutdown_grace = std::chrono::milliseconds(500);
  // Rank 0 fails once rank 1 ignores SIGTERM (a file in the job's own store folder says so), not
  // after a guess at how long a loaded machine takes to start a shell.
  Result r = run_sh(2,
                    "ready=$(dirname \"$HYPERPIPE_STORE_PATH\")/ignoring-term;"
                    " if [ \"$RANK\" = 0 ]; then while [ ! -e \"$ready\" ]; do sleep 0.02; done; exit 5; fi;"
                    " trap '' TERM; touch \"$ready\"; sleep 1000",
                    o);
  EXPECT_EQ(r.code, 5) << r.all();
  EXPECT_GE(r.seconds, 0.5);  // the grace period, waited out in full
  EXPECT_LT(r.seconds, 4.0);
}

TEST(Launcher, ARankKilledBySignalReturns128PlusSignal) {
  Result r = run_sh(2, "if [ \"$RANK\" = 1 ]; then kill -9 $$; fi; sleep 1000");
  EXPECT_EQ(r.code, 128 + 9) << r.all();
  EXPECT_TRUE(r.has_line("hyperpipe launch: rank 1 failed with signal 9 (SIGKILL); stopping the other ranks"))
      << r.all();
  EXPECT_LT(r.seconds, 4.0);
}

TEST(Launcher, TheLastRankFailingNamesOnlyItself) {
  Result r = run_sh(2, "if [ \"$RANK\" = 0 ]; then exit 0; fi; sleep 0.3; exit 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.has_line("hyperpipe launch: rank 1 failed with exit code 2")) << r.all();
}

TEST(Launcher, ForwardsSigtermToTheRanks) {
  // Rank 0 sends SIGTERM to the launcher (this process); the launcher must
  // survive, stop both ranks and report 128 + SIGTERM.
  Result r = run_sh(2, "if [ \"$RANK\" = 0 ]; then kill -TERM $PPID; fi; sleep 1000");
  EXPECT_EQ(r.code, 128 + 15) << r.all();
  EXPECT_LT(r.seconds, 4.0);
}

// Issue 15 item 2: a SIGTERM while the launcher is still starting ranks starts no more of them.
TEST(Launcher, SigtermWhileStartingStopsAtOnce) {
  Result r = run_sh(500, "if [ \"$RANK\" = 0 ]; then kill -TERM $PPID; fi; echo started; sleep 1000");
  EXPECT_EQ(r.code, 128 + 15) << r.all();
  const auto started = std::count_if(r.lines.begin(), r.lines.end(), [](const LaunchOutput& l) { return l.text == "started"; });
  EXPECT_LT(started, 500);
  EXPECT_LT(r.seconds, 8.0);
}

namespace {
// Whether pid is a live process (a zombie waiting for its reaper counts as dead).
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}
}  // namespace

// Issue 15 item 2: kill -9 of the launcher leaves no rank alive after 5 s.
TEST(Launcher, KillingTheLauncherLeavesNoRankAlive) {
  const std::string dir = ::testing::TempDir() + "hp_orphans_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const pid_t launcher = ::fork();  // this test binary has no threads and no LibTorch
  if (launcher == 0) {
    LaunchOptions o;
    o.nproc = 3;
    o.command = {"/bin/sh", "-c", "echo $$ > " + dir + "/tmp.$RANK && mv " + dir + "/tmp.$RANK " + dir + "/pid.$RANK; exec sleep 1000"};
    o.on_output = [](const LaunchOutput&) {};
    ::_exit(launch_local(o));
  }
  ASSERT_GT(launcher, 0);
  std::vector<pid_t> ranks;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (ranks.size() < 3 && Clock::now() < deadline) {
    ranks.clear();
    for (int r = 0; r < 3; ++r) {
      std::ifstream in(dir + "/pid." + std::to_string(r));
      pid_t pid = 0;
      if (in >> pid) ranks.push_back(pid);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(ranks.size(), 3u);
  for (pid_t pid : ranks) EXPECT_TRUE(alive(pid)) << pid;
  ::kill(launcher, SIGKILL);
  ::waitpid(launcher, nullptr, 0);
  const auto t0 = Clock::now();
  while (Clock::now() - t0 < std::chrono::seconds(5) && std::any_of(ranks.begin(), ranks.end(), alive))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (pid_t pid : ranks) {
    EXPECT_FALSE(alive(pid)) << "rank pid " << pid << " outlived its launcher by 5 s";
    if (alive(pid)) ::kill(pid, SIGKILL);
  }
  std::filesystem::remove_all(dir);
}

TEST(Launcher, JobTimeoutStopsEverything) {
  LaunchOptions o;
  o.job_timeout = std::chrono::milliseconds(500);
  o.shutdown_grace = std::chrono::milliseconds(500);
  Result r = run_sh(2, "sleep 1000", o);
  EXPECT_EQ(r.code, 124);
  EXPECT_LT(r.seconds, 4.0);
  EXPECT_NE(r.all().find("did not finish within its timeout of 500 ms"), std::string::npos) << r.all();
}

TEST(Launcher, UnknownProgramIs127) {
  LaunchOptions o;
  o.nproc = 2;
  o.command = {"/nonexistent/hyperpipe-worker"};
  std::vector<LaunchOutput> lines;
  o.on_output = [&](const LaunchOutput& l) { lines.push_back(l); };
  EXPECT_EQ(launch_local(o), 127);
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].text.find("cannot start rank 0 (/nonexistent/hyperpipe-worker)"), std::string::npos)
      << lines[0].text;
}

TEST(Launcher, RejectsBadOptions) {
  LaunchOptions o;
  o.command = {"/bin/true"};
  o.nproc = 0;
  EXPECT_THROW(launch_local(o), std::invalid_argument);
  o.nproc = 1;
  o.command.clear();
  EXPECT_THROW(launch_local(o), std::invalid_argument);
  o.command = {"/bin/true"};
  o.master_port = 70000;
  EXPECT_THROW(launch_local(o), std::invalid_argument);
}

TEST(Launcher, PicksAFreePort) {
  int a = pick_free_port();
  EXPECT_GT(a, 0);
  EXPECT_LE(a, 65535);
}
