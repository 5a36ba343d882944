#include "model/emulated_device.hpp"

#include <torch/csrc/autograd/custom_function.h>

#include <chrono>
#include <thread>

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
    sleep_ms(ctx->saved_data["backward_ms"].toDouble());
    return {grads[0], at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor emulated_delay(const at::Tensor& x, double forward_ms, double backward_ms) {
  return Delay::apply(x, forward_ms, backward_ms);
}

}  // namespace hp::model
