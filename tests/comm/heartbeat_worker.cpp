// One rank of the heartbeat dist tests: `heartbeat_worker SCENARIO`, started
// by launch_local (heartbeat_dist_test.cpp). It reads the torchrun
// environment, forms the job's group with the timeout HP_TIMEOUT_S (seconds,
// default 20), starts this rank's Heartbeat (its default interval, 1 s, as
// jobs run it), runs the scenario, prints every survey (diagnose()) as it
// came, and "rank R: SCENARIO ok" at the end. Any failure prints
// "rank R: FAILED: <message>" to stderr and exits 1.
//
// A rank that stops itself (SIGSTOP) is resumed by a peer (SIGCONT) once the
// surveys that must see it stopped are done, so every job ends by itself.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/dist_env.hpp"
#include "comm/heartbeat.hpp"
#include "comm/process_group.hpp"
#include "rank_program.hpp"

using namespace hp::comm;
using hp::testing::check;
using hp::testing::say;

namespace {

// A survey's text as it came (its lines start "rank R: " or "  rank R ").
void print_survey(const std::string& text) {
  std::printf("%s", text.c_str());
  std::fflush(stdout);
}

// Every rank's process id, by rank.
std::vector<pid_t> pids(ProcessGroup& pg) {
  const at::Tensor all = pg.all_gather(at::full({1}, static_cast<std::int64_t>(::getpid()), at::kLong));
  std::vector<pid_t> out;
  for (int r = 0; r < pg.world_size(); ++r) out.push_back(static_cast<pid_t>(all[r][0].item<std::int64_t>()));
  return out;
}

// Returns once `pid` is stopped (state T in /proc/PID/stat): the event the
// surveys wait for, polled; the job's timeout bounds it.
void wait_until_stopped(pid_t pid) {
  for (;;) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'T') return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void send_one(ProcessGroup& pg, int to, int tag) { pg.isend(at::ones({1}), to, tag, "go").wait(); }
void recv_one(ProcessGroup& pg, int from, int tag) { pg.irecv(at::zeros({1}), from, tag, "go").wait(); }

// 3 ranks, all healthy. Rank 1 waits for a message from rank 0 while rank 0
// surveys (again until its survey shows that wait) and rank 2 surveys too;
// then rank 0 releases both. Notes exist only while the Heartbeat does, and
// only the thread that made it has its waits noted.
void healthy(ProcessGroup& pg) {
  const int r = pg.rank();
  check(!positions_noted() && !hp::comm::detail::WaitNote::wanted(), "nothing is noted before a Heartbeat exists");
  auto hb = std::make_unique<Heartbeat>(pg);
  check(positions_noted(), "positions are noted while a Heartbeat exists");
  check(hp::comm::detail::WaitNote::wanted(), "the waits of the thread that made the Heartbeat are noted");
  bool other_thread_noted = true;
  std::thread([&] { other_thread_noted = hp::comm::detail::WaitNote::wanted(); }).join();
  check(!other_thread_noted, "another thread's waits are not noted");
  note_step(7);
  note_action(r, 5, [r] { return "work of rank " + std::to_string(r); });
  pg.barrier();
  if (r == 0) {
    std::string survey;
    for (int tries = 0; tries < 5 && survey.find("longest unmatched receive") == std::string::npos; ++tries)
      survey = hb->diagnose();
    print_survey(survey);
    send_one(pg, 1, 1);
    send_one(pg, 2, 2);
  } else if (r == 1) {
    recv_one(pg, 0, 1);
  } else {
    print_survey(hb->diagnose());
    recv_one(pg, 0, 2);
  }
  pg.barrier();  // nobody stops beating while another surveys
  hb.reset();
  check(!positions_noted() && !hp::comm::detail::WaitNote::wanted(), "nothing is noted once the Heartbeat is gone");
}

// 3 ranks: rank 2 stops (SIGSTOP, its heartbeat's thread with it); rank 1
// fails (report_failure), as a rank whose receive failed does, and both it and
// rank 0 survey the job; then rank 0 resumes rank 2.
void stopped_peer(ProcessGroup& pg) {
  const int r = pg.rank();
  Heartbeat hb(pg);
  note_step(4);
  note_action(1, 4, [r] { return "work of rank " + std::to_string(r); });
  const std::vector<pid_t> pid = pids(pg);
  pg.barrier();
  if (r == 2) {
    say(r, "stopping");
    ::raise(SIGSTOP);
  } else {
    if (r == 0) {
      wait_until_stopped(pid[2]);
      send_one(pg, 1, 3);
    } else {
      recv_one(pg, 0, 3);
      hb.report_failure("injected failure on rank 1");
    }
    print_survey(hb.diagnose());
    if (r == 1) {
      send_one(pg, 0, 4);
    } else {
      recv_one(pg, 1, 4);  // both surveys are done
      ::kill(pid[2], SIGCONT);
    }
  }
  pg.barrier();
}

// 2 ranks on a TCP store that rank 0 hosts: rank 0 fails and then waits for
// its peers before it exits (taking the store with it); rank 1 surveys the job
// once it knows of the failure, and its survey must still read the store.
void rank0_waits_for_peers(ProcessGroup& pg) {
  check(pg.env().store_path.empty(), "rank0_waits_for_peers needs the TCP store rank 0 hosts");
  const int r = pg.rank();
  Heartbeat hb(pg);
  note_step(2);
  pg.barrier();
  if (r == 0) {
    hb.report_failure("injected failure on rank 0");
    pg.barrier();
    hb.wait_for_peers(std::chrono::minutes(10));
    say(r, "its peers are done with the store");
  } else {
    pg.barrier();
    note_action(0, 1, [] { return std::string("surveying"); });
    print_survey(hb.diagnose());
  }
}

// 2 ranks on a TCP store that rank 0 hosts: rank 0 stops; rank 1's
// report_failure() and diagnose() return, saying that the store does not
// answer; then rank 1 resumes rank 0.
void store_stopped(ProcessGroup& pg) {
  check(pg.env().store_path.empty(), "store_stopped needs the TCP store rank 0 hosts");
  const int r = pg.rank();
  Heartbeat hb(pg);
  note_step(5);
  const std::vector<pid_t> pid = pids(pg);
  pg.barrier();
  if (r == 0) {
    say(r, "stopping");
    ::raise(SIGSTOP);
  } else {
    wait_until_stopped(pid[0]);
    hb.report_failure("injected failure on rank 1");
    print_survey(hb.diagnose());
    ::kill(pid[0], SIGCONT);
  }
  pg.barrier();
}

const std::map<std::string, std::function<void(ProcessGroup&)>>& scenarios() {
  static const std::map<std::string, std::function<void(ProcessGroup&)>> s = {
      {"healthy", healthy},
      {"stopped_peer", stopped_peer},
      {"rank0_waits_for_peers", rank0_waits_for_peers},
      {"store_stopped", store_stopped},
  };
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || !scenarios().count(argv[1])) {
    std::fprintf(stderr, "usage: heartbeat_worker SCENARIO (scenarios:");
    for (auto& [name, f] : scenarios()) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, ")\n");
    return 2;
  }
  const std::string name = argv[1];
  return hp::testing::run_rank([&](int* rank_out) {
    int& rank = *rank_out;
    DistEnv env = DistEnv::from_environment();
    rank = env.rank;
    at::set_num_threads(1);
    ProcessGroup pg = ProcessGroup::create(env, hp::testing::rank_group_options());
    scenarios().at(name)(pg);
    say(rank, name + " ok");
    return 0;
  });
}
