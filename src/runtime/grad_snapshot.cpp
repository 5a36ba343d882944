#include "runtime/grad_snapshot.hpp"

#include <ATen/ATen.h>

#include <sstream>
#include <stdexcept>

namespace hp::runtime {

GradSnapshot take_grad_snapshot(const NamedParams& params) {
  at::NoGradGuard no_grad;
  GradSnapshot snap;
  for (const auto& [name, p] : params) {
    if (!p.grad().defined()) continue;
    snap.emplace(name, p.grad().clone());
    p.mutable_grad().zero_();
  }
  return snap;
}

void add_grad_snapshot(const NamedParams& params, const GradSnapshot& snapshot) {
  for (const auto& [name, g] : snapshot) {
    auto it = params.find(name);
    if (it == params.end())
      throw std::invalid_argument("gradient snapshot: " + name + " is not a parameter of this rank");
    if (!g.sizes().equals(it->second.sizes())) {
      std::ostringstream os;
      os << "gradient snapshot: " << name << " has shape " << g.sizes() << " but the parameter is "
         << it->second.sizes();
      throw std::invalid_argument(os.str());
    }
  }
  at::NoGradGuard no_grad;
  for (const auto& [name, g] : snapshot) {
    at::Tensor p = params.at(name);
    if (p.grad().defined()) {
      p.mutable_grad().add_(g);
    } else {
      p.mutable_grad() = g.clone();
    }
  }
}

}  // namespace hp::runtime
