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
  // One flat copy per dtype and device, squared and summed in double: a few
  // operations per step instead of four per parameter.
  std::vector<std::vector<at::Tensor>> groups;
  for (const auto& [name, p] : params) {
    const at::Tensor& g = p.grad();
    if (!g.defined() || duplicates.count(name)) continue;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const std::vector<at::Tensor>& x) {
      return x.front().scalar_type() == g.scalar_type() && x.front().device() == g.device();
    });
    if (it == groups.end()) it = groups.insert(groups.end(), std::vector<at::Tensor>{});
    it->push_back(g.reshape({-1}));
  }
  double sum = 0;  // one host read per dtype
  for (const auto& group : groups) {
    const at::Tensor flat = at::cat(group).to(at::kDouble);
    sum += at::dot(flat, flat).item<double>();
  }
  return sum;
}

double clip_grad_norm(const NamedParams& params, const GradClipOptions& options,
                      const AllReduceSum& all_reduce_sum, const std::set<std::string>& duplicates) {
  if (!(options.max_norm >= 0.0 && std::isfinite(options.max_norm))) {
    std::ostringstream os;
    os << "--clip-grad must be a finite number >= 0 (0 disables clipping), got " << options.max_norm;
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
