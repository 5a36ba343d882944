#include "model/emulated_device.hpp"

#include <torch/csrc/autograd/custom_function.h>

#include <chrono>
#include <thread>

#include "runtime/weight_grad_store.hpp"

namespace hp::model {
namespace {

void sleep_ms(double ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
}

struct Delay : public torch::autograd::Function<Delay> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, double forward_ms,
                            double backward_ms) {
    ctx->saved_data["backward_ms"] = backward_ms;
    sleep_ms(forward_ms);
    return x.clone();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    // Half the backward is the input's gradient, half the weights': a
    // zero-bubble schedule's input backward defers that half to its W.
    const double half = ctx->saved_data["backward_ms"].toDouble() / 2;
    sleep_ms(half);
    auto weights = [half] { sleep_ms(half); };
    if (!runtime::defer_weight_grad(weights)) weights();
    return {grads[0], at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor emulated_delay(const at::Tensor& x, double forward_ms, double backward_ms) {
  return Delay::apply(x, forward_ms, backward_ms);
}

}  // namespace hp::model
