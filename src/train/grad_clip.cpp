#include "train/grad_clip.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace hp::train {

double local_grad_sq_sum(const NamedParams& params, const std::set<std::string>& duplicates) {
  for (const auto& d : duplicates) {
    if (params.find(d) == params.end())
      throw std::invalid_argument("gradient clipping: duplicate " + d + " is not a parameter of this rank");
  }
  at::NoGradGuard no_grad;
  // The grads of one dtype and device are squared and summed in double a
  // chunk at a time: a few operations per step instead of four per parameter,
  // and no transient above 12 MB. A flat double copy of every grad at once
  // (51 MB at hidden 256) is above glibc's largest mmap threshold, so whenever
  // the heap had no free block that large it came from fresh pages: 12,600
  // page faults a step.
  constexpr int64_t kChunk = 1 << 20;  // elements squared per operation
  struct Group {
    at::ScalarType dtype;
    at::Device device;
    at::Tensor sum;                   // double, on the device
    std::vector<at::Tensor> pending;  // flat grads (or pieces) not yet summed
    int64_t numel = 0;
  };
  std::vector<Group> groups;
  auto flush = [](Group& g) {
    if (g.pending.empty()) return;
    const at::Tensor flat = (g.pending.size() == 1 ? g.pending.front() : at::cat(g.pending)).to(at::kDouble);
    g.sum.add_(at::dot(flat, flat));
    g.pending.clear();
    g.numel = 0;
  };
  for (const auto& [name, p] : params) {
    const at::Tensor& grad = p.grad();
    if (!grad.defined() || duplicates.count(name)) continue;
    auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) {
      return x.dtype == grad.scalar_type() && x.device == grad.device();
    });
    if (g == groups.end()) {
      g = groups.insert(groups.end(), Group{grad.scalar_type(), grad.device(),
                                            at::zeros({}, grad.options().dtype(at::kDouble)), {}, 0});
    }
    for (const at::Tensor& piece : grad.reshape({-1}).split(kChunk)) {
      if (g->numel + piece.numel() > kChunk) flush(*g);
      g->pending.push_back(piece);
      g->numel += piece.numel();
    }
  }
  double sum = 0;  // one host read per dtype
  for (Group& g : groups) {
    flush(g);
    sum += g.sum.item<double>();
  }
  return sum;
}

double clip_grad_norm(const NamedParams& params, const GradClipOptions& options,
                      const AllReduceSum& all_reduce_sum, const std::set<std::string>& duplicates) {
  if (!(options.max_norm >= 0.0 && std::isfinite(options.max_norm))) {
    std::ostringstream os;
    os << "train.clip_grad must be a finite number >= 0 (0 disables clipping), got " << options.max_norm;
    throw std::invalid_argument(os.str());
  }
  if (!(options.eps >= 0.0 && std::isfinite(options.eps))) {
    std::ostringstream os;
    os << "gradient clipping: eps must be a finite number >= 0, got " << options.eps;
    throw std::invalid_argument(os.str());
  }
  const double local = local_grad_sq_sum(params, duplicates);
  const double global = all_reduce_sum ? all_reduce_sum(local) : local;
  const double total = std::sqrt(global);
  if (options.max_norm > 0.0 && std::isfinite(total) && total > options.max_norm) {
    const double scale = options.max_norm / (total + options.eps);
    at::NoGradGuard no_grad;
    for (const auto& [name, p] : params) {
      if (p.grad().defined()) p.mutable_grad().mul_(scale);
    }
  }
  return total;
}

}  // namespace hp::train
