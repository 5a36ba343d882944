#include "comm/heartbeat.hpp"

#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <iomanip>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "comm/process_group.hpp"
#include "comm/rendezvous.hpp"

namespace hp::comm {
namespace {

using Ms = std::chrono::milliseconds;
using Json = nlohmann::json;

std::int64_t wall_ms() {
  return std::chrono::duration_cast<Ms>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// What the rank is doing, written by its main thread, read by the beat.
struct Board {
  std::mutex mu;
  std::int64_t step = 0;
  int action = -1, actions = 0;
  NoteText doing;  // empty: none
  NoteText waiting;
  std::int64_t waiting_since = 0;
  std::int64_t moved = 0;  // when step or action last changed
  std::thread::id owner;
  std::atomic<bool> active{false};
  std::function<void()> wake;  // asks the beat to publish now (set while a Heartbeat exists)
};
// Never destroyed: a detached beat or survey thread may still read it while
// the process exits.
Board& board = *new Board;

// A rank that beats, waits for no message and has not moved for this long is
// stuck in its own code (a step's compute takes well under it).
std::int64_t stuck_after_ms(Ms interval) { return std::max<std::int64_t>(5000, 5 * interval.count()); }

// How long one store operation of the heartbeat's connection may take.
Ms store_timeout(Ms interval) { return std::max(Ms(2000), 2 * interval); }

std::string key_of(int rank) { return "hp/heartbeat/" + std::to_string(rank); }

std::string seconds(std::int64_t ms) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << static_cast<double>(ms) / 1000.0 << " s";
  return os.str();
}

}  // namespace

bool positions_noted() { return board.active; }

void note_step(std::int64_t step) {
  if (!board.active) return;
  std::lock_guard<std::mutex> lock(board.mu);
  board.step = step;
  board.action = -1;
  board.doing = nullptr;
  board.moved = wall_ms();
  if (board.wake) board.wake();
}

void note_action(int index, int count, NoteText what) {
  if (!board.active) return;
  std::lock_guard<std::mutex> lock(board.mu);
  board.action = index;
  board.actions = count;
  board.doing = std::move(what);
  board.moved = wall_ms();
}

namespace detail {

bool WaitNote::wanted() { return board.active && std::this_thread::get_id() == board.owner; }

WaitNote::WaitNote(NoteText what) {
  if (!wanted()) return;
  std::lock_guard<std::mutex> lock(board.mu);
  board.waiting = std::move(what);
  board.waiting_since = wall_ms();
  noted_ = true;
}

WaitNote::~WaitNote() {
  if (!noted_) return;
  std::lock_guard<std::mutex> lock(board.mu);
  board.waiting = nullptr;
}

}  // namespace detail

struct Heartbeat::State {
  int rank = 0;
  int world = 1;
  Ms interval{1000};
  // "the job's store, hosted by rank 0, " or "the job's store file PATH ".
  std::string store_name;
  bool store_hosted = false;  // rank 0 serves it: it goes when rank 0 goes

  std::mutex store_mu;  // one store operation at a time on this connection
  c10::intrusive_ptr<c10d::Store> store;

  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::int64_t beats = 0;
  std::string failure;
  bool surveyed = false;  // its diagnose() is done: it needs the store no more
  std::optional<Heartbeat::Culprit> culprit;  // what the last survey blamed

  Json record() {
    Json j;
    {
      std::lock_guard<std::mutex> lock(board.mu);
      j["step"] = board.step;
      j["action"] = board.action;
      j["actions"] = board.actions;
      j["doing"] = board.doing ? board.doing() : "";
      j["waiting"] = board.waiting ? board.waiting() : "";
      j["waiting_since"] = board.waiting_since;
      j["moved"] = board.moved;
    }
    std::lock_guard<std::mutex> lock(mu);
    j["beat"] = ++beats;
    j["wall_ms"] = wall_ms();
    if (!failure.empty()) j["failed"] = failure;
    if (surveyed) j["surveyed"] = true;
    return j;
  }

  // The record is taken under the store's lock, so a beat taken before a
  // failure never lands after the failure's record.
  void publish() {
    std::lock_guard<std::mutex> lock(store_mu);
    const std::string text = record().dump();
    store->set(key_of(rank), std::vector<std::uint8_t>(text.begin(), text.end()));
  }

  // publish() for a rank on its way out: a store that is gone is the
  // survey's to report, not this rank's error.
  void try_publish() {
    try {
      publish();
    } catch (const std::exception&) {
    }
  }

  // Every rank's record (absent: it never beat). Throws when the store fails.
  std::map<int, Json> read_all() {
    std::lock_guard<std::mutex> lock(store_mu);
    std::map<int, Json> out;
    for (int r = 0; r < world; ++r) {
      if (!store->check({key_of(r)})) continue;
      const auto bytes = store->get(key_of(r));
      out[r] = Json::parse(std::string(bytes.begin(), bytes.end()), nullptr, false);
    }
    return out;
  }

  bool woken = false;
  bool exited = false;  // the beat thread has left its loop

  void beat_loop() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stop) {
      woken = false;
      lock.unlock();
      try_publish();  // a store that is gone (rank 0 exited): a failing peer's survey says so
      lock.lock();
      cv.wait_for(lock, interval, [this] { return stop || woken; });
    }
    exited = true;
    cv.notify_all();
  }
};

namespace {

// Runs f (which must not throw) on a detached thread and returns its result,
// or nothing when it did not finish within `limit` (a store that no longer
// answers must not hang a failing rank on its way out).
template <class F>
std::optional<std::string> bounded(Ms limit, F f) {
  auto promise = std::make_shared<std::promise<std::string>>();
  auto result = promise->get_future();
  std::thread([promise, f]() mutable { promise->set_value(f()); }).detach();
  if (result.wait_for(limit) != std::future_status::ready) return std::nullopt;
  return result.get();
}

std::string position_of(const Json& j) {
  std::ostringstream os;
  os << "step " << j.value("step", 0);
  const int action = j.value("action", -1), actions = j.value("actions", 0);
  if (action >= actions)
    os << ", after its " << actions << " actions (" << j.value("doing", "") << ")";
  else if (action >= 0)
    os << ", action " << action + 1 << " of " << actions << " (" << j.value("doing", "") << ")";
  return os.str();
}

}  // namespace

Heartbeat::Heartbeat(const ProcessGroup& job, HeartbeatOptions options) : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.rank = job.env().rank;
  s.world = job.env().world_size;
  s.interval = options.interval;
  s.store = connect_to_store(job.env(), job.store_port(), store_timeout(options.interval));
  const DistEnv& env = job.env();
  s.store_hosted = env.rank0_hosts_store();
  s.store_name = s.store_hosted     ? "the job's store, hosted by rank 0, "
                 : env.launcher_store ? "the job's store, hosted by node 0's launcher, "
                                      : "the job's store file " + env.store_path + " ";
  {
    std::lock_guard<std::mutex> lock(board.mu);
    board.owner = std::this_thread::get_id();
    board.step = 0;
    board.action = -1;
    board.doing = [] { return std::string("starting"); };
    board.waiting = nullptr;
    board.moved = wall_ms();
  }
  board.wake = [st = std::weak_ptr<State>(state_)] {
    if (auto s = st.lock()) {
      {
        std::lock_guard<std::mutex> lock(s->mu);
        s->woken = true;
      }
      s->cv.notify_all();
    }
  };
  board.active = true;
  s.try_publish();
  std::thread([st = state_] { st->beat_loop(); }).detach();
}

Heartbeat::~Heartbeat() {
  board.active = false;
  {
    std::lock_guard<std::mutex> lock(board.mu);
    board.wake = nullptr;
  }
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->stop = true;
  state_->cv.notify_all();
  // A beat in progress ends before the process goes on to exit, unless the
  // store no longer answers it.
  state_->cv.wait_for(lock, state_->interval + Ms(1000), [this] { return state_->exited; });
}

void Heartbeat::report_failure(const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->failure = error.substr(0, 400);
    state_->stop = true;
  }
  state_->cv.notify_all();
  auto st = state_;
  bounded(2 * state_->interval + Ms(1000), [st] {
    st->try_publish();
    return std::string();
  });
}

std::string Heartbeat::diagnose() {
  auto st = state_;
  const std::string me = "rank " + std::to_string(st->rank) + ": ";
  const Ms gap = 5 * st->interval / 2;
  const std::string unreachable = me + st->store_name;
  const bool hosted = st->store_hosted;
  auto survey = [st, me, gap, unreachable, hosted]() -> std::string {
    std::map<int, Json> first, second;
    try {
      first = st->read_all();
      std::this_thread::sleep_for(gap);
      second = st->read_all();
    } catch (const std::exception& e) {
      return unreachable + "cannot be read (" + std::string(e.what()).substr(0, 200) + ")" +
             (hosted ? ": rank 0 has died, stopped or already exited after a failure of its own" : "") + "\n";
    }
    const std::int64_t now = wall_ms();
    std::ostringstream head, table;
    std::vector<int> silent;
    std::vector<std::pair<int, std::int64_t>> stuck;  // alive, not waiting, not moving: by how long
    const Json* longest_wait = nullptr;
    int waiter = -1;
    const Json* first_failure = nullptr;
    int failed_rank = -1;
    for (int r = 0; r < st->world; ++r) {
      table << "  rank " << std::setw(3) << std::left << r << std::right << " ";
      auto it = second.find(r);
      if (it == second.end() || it->second.is_discarded()) {
        table << "no heartbeat ever (it never got past the rendezvous)\n";
        if (r != st->rank) silent.push_back(r);
        continue;
      }
      const Json& j = it->second;
      const std::string where = position_of(j);
      const std::string waiting = j.value("waiting", "");
      const std::int64_t since = j.value("waiting_since", std::int64_t{0});
      if (r == st->rank) {
        table << "this rank        ";
      } else if (j.contains("failed")) {
        table << "failed           ";
        if (!first_failure || j.value("wall_ms", std::int64_t{0}) < first_failure->value("wall_ms", std::int64_t{0}))
          first_failure = &j, failed_rank = r;
      } else if (first.count(r) && first.at(r).value("beat", 0) == j.value("beat", 0)) {
        table << "NOT RESPONDING   ";
        silent.push_back(r);
      } else if (const std::int64_t still = now - j.value("moved", now);
                 waiting.empty() && still > stuck_after_ms(st->interval)) {
        table << "STUCK            ";
        stuck.emplace_back(r, still);
      } else {
        table << "alive            ";
      }
      table << where;
      const bool responding = std::find(silent.begin(), silent.end(), r) == silent.end();
      if (!waiting.empty()) {
        table << ", waiting " << seconds(now - since) << " for " << waiting;
        if (responding && waiting.rfind("recv", 0) == 0 &&
            (!longest_wait || since < longest_wait->value("waiting_since", std::int64_t{0})))
          longest_wait = &j, waiter = r;
      }
      if (!responding) table << "; last heartbeat " << seconds(now - j.value("wall_ms", now)) << " ago";
      if (j.contains("failed")) table << "; failed: " << j.value("failed", "");
      table << "\n";
    }
    {
      std::lock_guard<std::mutex> lock(st->mu);
      if (!silent.empty()) {
        st->culprit = Heartbeat::Culprit{silent.front(), "is not responding (dead or stopped)"};
      } else if (!stuck.empty()) {
        st->culprit = Heartbeat::Culprit{stuck.front().first, "is alive but stuck"};
      }
    }
    for (const auto& [r, still] : stuck)
      head << me << "rank " << r << " is alive but stuck: it has not advanced for " << seconds(still)
           << " and waits for no message, at " << position_of(second.at(r)) << "\n";
    if (silent.empty() && stuck.empty()) {
      head << me << "every rank still beats";
      if (first_failure)
        head << "; rank " << failed_rank << " failed first: " << first_failure->value("failed", "");
      head << "\n";
    } else {
      for (int r : silent) {
        head << me << "rank " << r << " is not responding (dead or stopped): ";
        auto it = second.find(r);
        if (it == second.end() || it->second.is_discarded())
          head << "it never sent a heartbeat\n";
        else
          head << "no heartbeat for " << seconds(now - it->second.value("wall_ms", now)) << ", last at "
               << position_of(it->second) << "\n";
      }
    }
    if (longest_wait)
      head << me << "longest unmatched receive: rank " << waiter << " at " << position_of(*longest_wait)
           << " has waited " << seconds(now - longest_wait->value("waiting_since", now)) << " for "
           << longest_wait->value("waiting", "") << "\n";
    return head.str() + me + "where every rank was (as of its last heartbeat; one every " +
           seconds(st->interval.count()) + "):\n" +
           table.str();
  };
  const Ms limit = gap + 4 * store_timeout(st->interval);
  auto text = bounded(limit, [st, survey] {
    std::string t = survey();
    {
      std::lock_guard<std::mutex> lock(st->mu);
      st->surveyed = true;
    }
    st->try_publish();
    return t;
  });
  if (!text)
    return unreachable + "did not answer within " + seconds(limit.count()) +
           (hosted ? ": rank 0 is stopped or stuck\n" : "\n");
  return *text;
}

std::optional<Heartbeat::Culprit> Heartbeat::culprit() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->culprit;
}

void Heartbeat::wait_for_peers(Ms limit) {
  auto st = state_;
  bounded(limit, [st, limit] {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    std::map<int, std::pair<std::int64_t, std::chrono::steady_clock::time_point>> last_beat;
    while (std::chrono::steady_clock::now() < deadline) {
      std::map<int, Json> now;
      try {
        now = st->read_all();
      } catch (const std::exception&) {
        break;
      }
      bool settled = true;
      for (int r = 0; r < st->world; ++r) {
        if (r == st->rank || !now.count(r) || now[r].is_discarded() || now[r].value("surveyed", false)) continue;
        const std::int64_t still = wall_ms() - now[r].value("moved", wall_ms());
        if (!now[r].contains("failed") && now[r].value("waiting", "").empty() && still > stuck_after_ms(st->interval))
          continue;
        const std::int64_t beat = now[r].value("beat", std::int64_t{0});
        auto& [seen, since] = last_beat[r];
        if (beat != seen) seen = beat, since = std::chrono::steady_clock::now();
        // A failed rank beats no more, so this also waits for one still surveying.
        if (std::chrono::steady_clock::now() - since < 5 * st->interval / 2 + Ms(2000)) settled = false;
      }
      if (settled) break;
      std::this_thread::sleep_for(st->interval / 2);
    }
    return std::string();
  });
}

}  // namespace hp::comm
