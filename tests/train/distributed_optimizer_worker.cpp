// One rank of the distributed optimizer's dist test: `distributed_optimizer_worker`,
// started by launch_local (distributed_optimizer_dist_test.cpp) on N ranks, the
// replicas of one set of parameters. Every rank holds the same parameters and
// gets the same gradients; the DistributedOptimizer over the job's group (each
// rank keeping the AdamW state of its shard) must leave them equal to those of
// a plain AdamW that the rank runs on its own copy, step by step, and so must
// its full_state() and a second optimizer that load_state()s AdamW's state
// and goes on. The same runs without a group. Prints
// "rank R: state bytes B" (this rank's shard of the state) and
// "rank R: ok"; any failure "rank R: FAILED: <message>" to stderr, exit 1.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/dist_env.hpp"
#include "comm/process_group.hpp"
#include "rank_program.hpp"
#include "train/adamw.hpp"
#include "train/distributed_optimizer.hpp"

using namespace hp;

namespace {

using hp::testing::check;
using hp::testing::say;

// Shards of uneven size at every group size: in name order
// a 64, b 7, c 30, d 100, e 3 (float64) and f 20 (float32) elements; b and c
// get no weight decay (the bias and norm rule). The same values on every rank.
train::NamedParams make_params() {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1234);
  const auto f64 = at::TensorOptions().dtype(at::kDouble), f32 = at::TensorOptions().dtype(at::kFloat);
  train::NamedParams p;
  p["a.weight"] = at::randn({8, 8}, gen, f64);
  p["b.bias"] = at::randn({7}, gen, f64);
  p["c.norm.weight"] = at::randn({30}, gen, f64);
  p["d.weight"] = at::randn({10, 10}, gen, f64);
  p["e.weight"] = at::randn({3}, gen, f64);
  p["f.weight"] = at::randn({5, 4}, gen, f32);
  for (auto& [n, t] : p) t.requires_grad_(true);
  return p;
}

train::NamedParams copy_of(const train::NamedParams& p) {
  train::NamedParams out;
  for (const auto& [n, t] : p) out[n] = t.detach().clone().requires_grad_(true);
  return out;
}

// Step s's gradients, the same on every rank (the replicas after their
// reduction); e.weight gets none at step 1, so its state starts a step later.
void set_grads(const train::NamedParams& p, int s) {
  int i = 0;
  for (const auto& [n, t] : p) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 + 31 * i++ + s);
    at::Tensor g = at::randn(t.sizes(), gen, t.options().requires_grad(false));
    t.mutable_grad() = n == "e.weight" && s == 1 ? at::Tensor() : g;
  }
}

void expect_equal(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  check(got.defined() && want.defined(), what + ": undefined");
  check(got.sizes() == want.sizes() && got.scalar_type() == want.scalar_type(), what + ": shape or dtype differs");
  if (!at::equal(got, want))
    throw std::runtime_error("check failed: " + what + " differs from AdamW's by up to " +
                             std::to_string((got.to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>()));
}

void expect_same_params(const train::NamedParams& got, const train::NamedParams& want, const std::string& when) {
  for (const auto& [n, t] : want) expect_equal(got.at(n), t, n + " " + when);
}

void expect_same_state(const train::AdamWState& got, const train::AdamWState& want, const std::string& when) {
  check(got.step == want.step, "state step " + when);
  check(got.params.size() == want.params.size(),
        "state of " + std::to_string(got.params.size()) + " parameters, want " + std::to_string(want.params.size()) + " " + when);
  for (const auto& [n, st] : want.params) {
    check(got.params.count(n) > 0, "no state for " + n + " " + when);
    const train::AdamWParamState& g = got.params.at(n);
    check(g.step == st.step, n + "'s step " + std::to_string(g.step) + ", want " + std::to_string(st.step) + " " + when);
    expect_equal(g.exp_avg, st.exp_avg, n + "'s exp_avg " + when);
    expect_equal(g.exp_avg_sq, st.exp_avg_sq, n + "'s exp_avg_sq " + when);
  }
}

std::int64_t state_bytes(const train::AdamWState& s) {
  std::int64_t b = 0;
  for (const auto& [n, st] : s.params) b += 2 * st.exp_avg.numel() * static_cast<std::int64_t>(st.exp_avg.element_size());
  return b;
}

// Four steps at changing learning rates, then the state, then a second
// optimizer loaded from AdamW's state for two more steps. Returns this
// rank's state bytes after the four steps.
std::int64_t run(comm::ProcessGroup* group, const std::string& label) {
  train::AdamWOptions o;
  o.weight_decay = 0.1;
  train::NamedParams ours = make_params(), ref_params = copy_of(ours);
  train::DistributedOptimizer dist(ours, o, group);
  train::AdamW ref(ref_params, o);
  const std::vector<double> lrs = {1e-2, 3e-2, 2e-2, 5e-3, 1e-3, 4e-3};
  for (int s = 1; s <= 4; ++s) {
    set_grads(ours, s);
    set_grads(ref_params, s);
    dist.step(lrs[s - 1]);
    ref.step(lrs[s - 1]);
    expect_same_params(ours, ref_params, "after step " + std::to_string(s) + " " + label);
  }
  const std::int64_t bytes = dist.state_bytes();
  expect_same_state(dist.full_state(), ref.state(), "in full_state() " + label);
  // Each rank's shard of the state, summed over the group, is the whole of it.
  std::int64_t total = bytes;
  if (group) {
    at::Tensor t = at::full({1}, bytes, at::kLong);
    group->all_reduce(t);
    total = t.item<std::int64_t>();
  }
  check(total == state_bytes(ref.state()), "the shards' state bytes add up to " + std::to_string(total) + ", not AdamW's " +
                                               std::to_string(state_bytes(ref.state())) + " " + label);
  // A checkpoint's whole state into a fresh optimizer: it goes on as AdamW does.
  train::DistributedOptimizer loaded(ours, o, group);
  loaded.load_state(ref.state());
  for (int s = 5; s <= 6; ++s) {
    set_grads(ours, s);
    set_grads(ref_params, s);
    loaded.step(lrs[s - 1]);
    ref.step(lrs[s - 1]);
    expect_same_params(ours, ref_params, "after step " + std::to_string(s) + " from load_state() " + label);
  }
  return bytes;
}

}  // namespace

int main() {
  return hp::testing::run_rank([&](int* rank_out) {
    int& rank = *rank_out;
    const comm::DistEnv env = comm::DistEnv::from_environment();
    rank = env.rank;
    at::set_num_threads(1);
    comm::ProcessGroup pg = comm::ProcessGroup::create(env, hp::testing::rank_group_options());
    run(nullptr, "without a group");
    const std::int64_t bytes = run(&pg, "over " + std::to_string(pg.world_size()) + " ranks");
    say(rank, "state bytes " + std::to_string(bytes));
    say(rank, "ok");
    return 0;
  });
}
