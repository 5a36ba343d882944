#include "model/fused_linear.hpp"

#include <torch/csrc/autograd/custom_function.h>

#include <ATen/ATen.h>

#include "runtime/weight_grad_store.hpp"

namespace hp::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Whether the weight's gradient can be added into its .grad in place.
bool accumulates_in_place(const at::Tensor& weight) {
  const at::Tensor& g = weight.grad();
  return g.defined() && g.layout() == at::kStrided && g.scalar_type() == weight.scalar_type() &&
         g.sizes() == weight.sizes() && g.is_contiguous() && !g.requires_grad();
}

// Adds g^T x2 into the weight's .grad outside autograd: the weight backward
// (BWD_W) a zero-bubble schedule runs after the input backward deferred it.
void add_weight_grad(const at::Tensor& weight, const at::Tensor& g, const at::Tensor& x2) {
  const at::NoGradGuard no_grad;  // x2 may be an activation with a graph
  if (accumulates_in_place(weight))
    weight.grad().addmm_(g.t(), x2);
  else if (weight.grad().defined())
    weight.mutable_grad() = weight.grad() + g.t().mm(x2);
  else
    weight.mutable_grad() = g.t().mm(x2);
}

// The gradients of x, the weight (none when added into its .grad, or
// deferred to the weight backward) and, with one, the bias, as at::linear's
// backward makes them: the products of the 2-D views, the bias's as the sum
// over rows.
variable_list linear_backward(AutogradContext* ctx, const at::Tensor& grad, bool with_bias) {
  const at::Tensor x = ctx->get_saved_variables()[0];
  const at::Tensor weight = ctx->saved_data["weight"].toTensor();
  const int64_t out = weight.size(0), in = weight.size(1);
  const at::Tensor g = grad.reshape({-1, out});
  variable_list grads(with_bias ? 3 : 2);
  if (ctx->needs_input_grad(0)) grads[0] = g.mm(weight).view(x.sizes());
  if (ctx->needs_input_grad(1)) {
    const at::Tensor x2 = x.reshape({-1, in});
    if (runtime::defer_weight_grad([weight, g, x2] { add_weight_grad(weight, g, x2); })) {
      // The weight backward adds it; autograd sees none, as in place.
    } else if (accumulates_in_place(weight)) {
      weight.grad().addmm_(g.t(), x2);
    } else {
      grads[1] = g.t().mm(x2);
    }
  }
  if (with_bias && ctx->needs_input_grad(2)) grads[2] = g.sum(0);
  return grads;
}

void save(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight) {
  ctx->save_for_backward({x});
  // The weight itself, not a saved copy: backward adds into its .grad.
  ctx->saved_data["weight"] = weight;
}

// Two functions, as autograd takes no undefined tensor for an input.
struct FusedLinearBias : torch::autograd::Function<FusedLinearBias> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias) {
    save(ctx, x, weight);
    return at::linear(x, weight, bias);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return linear_backward(ctx, grads[0], true);
  }
};

struct FusedLinearNoBias : torch::autograd::Function<FusedLinearNoBias> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight) {
    save(ctx, x, weight);
    return at::linear(x, weight);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return linear_backward(ctx, grads[0], false);
  }
};

}  // namespace

at::Tensor fused_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return bias.defined() ? FusedLinearBias::apply(x, weight, bias) : FusedLinearNoBias::apply(x, weight);
}

}  // namespace hp::model
