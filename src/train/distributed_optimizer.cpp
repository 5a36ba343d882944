#include "train/distributed_optimizer.hpp"

#include <ATen/ATen.h>

#include <algorithm>

#include "comm/process_group.hpp"

namespace hp::train {
namespace {

int members(comm::ProcessGroup* g) { return g ? g->world_size() : 1; }

std::vector<std::vector<std::string>> deal(const NamedParams& params, int n) {
  std::vector<std::vector<std::string>> owned(n);
  std::vector<std::int64_t> load(n, 0);
  for (const auto& [name, p] : params) {  // name order
    const int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owned[r].push_back(name);
    load[r] += p.numel();
  }
  return owned;
}

NamedParams mine(const NamedParams& params, const std::vector<std::string>& names) {
  NamedParams out;
  for (const auto& n : names) out.emplace(n, params.at(n));
  return out;
}

}  // namespace

DistributedOptimizer::DistributedOptimizer(const NamedParams& params, const AdamWOptions& options,
                                           comm::ProcessGroup* group)
    : group_(group && group->world_size() > 1 ? group : nullptr),
      params_(params),
      owned_(deal(params, members(group_))),
      adam_(mine(params, owned_[group_ ? group_->rank() : 0]), options) {}

void DistributedOptimizer::step(double lr) {
  adam_.step(lr);
  if (!group_) return;
  at::NoGradGuard no_grad;
  for (int r = 0; r < group_->world_size(); ++r) {
    std::vector<at::Tensor> values;
    for (const auto& n : owned_[r]) values.push_back(params_.at(n));
    if (!values.empty()) group_->broadcast(values, r);
  }
}

AdamWState DistributedOptimizer::full_state() {
  AdamWState whole = adam_.state();
  if (!group_) return whole;
  for (int r = 0; r < group_->world_size(); ++r) {
    const auto& names = owned_[r];
    if (names.empty()) continue;
    // Which of r's parameters have a state, and their steps; then the tensors.
    at::Tensor steps = at::zeros({static_cast<std::int64_t>(names.size())}, at::kLong);
    if (r == group_->rank())
      for (size_t i = 0; i < names.size(); ++i)
        if (auto it = whole.params.find(names[i]); it != whole.params.end()) steps[i] = it->second.step;
    group_->broadcast({steps}, r);
    std::vector<at::Tensor> tensors;
    for (size_t i = 0; i < names.size(); ++i) {
      const std::int64_t step = steps[i].item<std::int64_t>();
      if (step == 0) continue;
      AdamWParamState& st = whole.params[names[i]];
      if (r != group_->rank()) {
        st.step = step;
        st.exp_avg = at::zeros_like(params_.at(names[i]));
        st.exp_avg_sq = at::zeros_like(params_.at(names[i]));
      }
      tensors.push_back(st.exp_avg);
      tensors.push_back(st.exp_avg_sq);
    }
    if (!tensors.empty()) group_->broadcast(tensors, r);
  }
  return whole;
}

void DistributedOptimizer::load_state(const AdamWState& whole) {
  AdamWState own;
  own.step = whole.step;
  for (const auto& n : owned_[group_ ? group_->rank() : 0])
    if (auto it = whole.params.find(n); it != whole.params.end()) own.params.emplace(n, it->second);
  adam_.load_state(own);
}

std::int64_t DistributedOptimizer::state_bytes() const {
  std::int64_t bytes = 0;
  for (const auto& [name, st] : adam_.state().params)
    bytes += (st.exp_avg.numel() + st.exp_avg_sq.numel()) * static_cast<std::int64_t>(st.exp_avg.element_size());
  return bytes;
}

}  // namespace hp::train
