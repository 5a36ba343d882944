#include "model/parallel_mappings.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>

#include "comm/process_group.hpp"

namespace hp::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The group travels through the autograd context as an integer.
std::int64_t handle(comm::ProcessGroup& g) { return static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(&g)); }

comm::ProcessGroup& group_of(AutogradContext* ctx) {
  return *reinterpret_cast<comm::ProcessGroup*>(static_cast<std::intptr_t>(ctx->saved_data["group"].toInt()));
}

at::Tensor summed(const at::Tensor& x, comm::ProcessGroup& g) {
  at::Tensor out = x.clone();
  g.all_reduce(out);
  return out;
}

// Every rank's x concatenated along dim, in rank order.
at::Tensor gathered(const at::Tensor& x, int64_t dim, comm::ProcessGroup& g) {
  const at::Tensor all = g.all_gather(x);  // [size, ...x]
  return at::cat(all.unbind(0), dim);
}

// This rank's piece along dim of x summed over the group.
at::Tensor scattered_sum(const at::Tensor& x, int64_t dim, comm::ProcessGroup& g) {
  const int64_t n = x.size(dim) / g.world_size();
  return summed(x, g).narrow(dim, g.rank() * n, n).contiguous();
}

struct CopyTo : torch::autograd::Function<CopyTo> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, std::int64_t group) {
    ctx->saved_data["group"] = group;
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {summed(grads[0], group_of(ctx)), at::Tensor()};
  }
};

struct ReduceFrom : torch::autograd::Function<ReduceFrom> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, std::int64_t group) {
    ctx->saved_data["group"] = group;
    return summed(x, group_of(ctx));
  }
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0], at::Tensor()}; }
};

struct GatherAlong : torch::autograd::Function<GatherAlong> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, std::int64_t dim, std::int64_t group) {
    ctx->saved_data["group"] = group;
    ctx->saved_data["dim"] = dim;
    return gathered(x, dim, group_of(ctx));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {scattered_sum(grads[0], ctx->saved_data["dim"].toInt(), group_of(ctx)), at::Tensor(), at::Tensor()};
  }
};

struct ReduceScatterAlong : torch::autograd::Function<ReduceScatterAlong> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, std::int64_t dim, std::int64_t group) {
    ctx->saved_data["group"] = group;
    ctx->saved_data["dim"] = dim;
    return scattered_sum(x, dim, group_of(ctx));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {gathered(grads[0], ctx->saved_data["dim"].toInt(), group_of(ctx)), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor copy_to_group(const at::Tensor& x, comm::ProcessGroup& g) { return CopyTo::apply(x, handle(g)); }

at::Tensor reduce_from_group(const at::Tensor& x, comm::ProcessGroup& g) { return ReduceFrom::apply(x, handle(g)); }

at::Tensor all_gather_along(const at::Tensor& x, int64_t dim, comm::ProcessGroup& g) {
  return GatherAlong::apply(x, dim, handle(g));
}

at::Tensor reduce_scatter_along(const at::Tensor& x, int64_t dim, comm::ProcessGroup& g) {
  return ReduceScatterAlong::apply(x, dim, handle(g));
}

}  // namespace hp::model
