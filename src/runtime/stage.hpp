// Stage: one global pipeline stage on this rank during one step.
//
// It owns, per micro-batch, the stage's input (a detached leaf that collects
// the gradient to send upstream) and its output (kept with its graph until the
// backward). Contract: forward(m) before backward(m); each at most once per
// micro per step; reset() between steps. Single-threaded (the executor's).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>

#include "runtime/microbatch.hpp"
#include "runtime/weight_grad_store.hpp"

namespace hp::runtime {

class Stage {
 public:
  // The stage's module (PipelineStage::forward): input and this rank's view
  // of the micro-batch -> output.
  using Forward = std::function<at::Tensor(const at::Tensor& input, const MicroBatch& micro)>;

  // last: backward starts from the loss.
  Stage(int index, bool last, Forward forward);

  // Whether a floating-point input becomes a leaf that collects its gradient
  // (default true). Off for stage 0 unless something consumes dL/dinput
  // there (MPipe's trainable preprocess): its input is data.
  void set_input_requires_grad(bool on) { input_requires_grad_ = on; }

  int index() const { return index_; }
  bool is_last() const { return last_; }

  // Runs the module on micro m. A floating-point input becomes the stage
  // boundary: x.detach().requires_grad_(true) (it shares storage with the
  // received buffer, which the executor never reuses). Returns the output.
  at::Tensor forward(int micro, const MicroBatch& data, const at::Tensor& input);
  // The last stage's scaled loss of micro m, kept until backward(m).
  void set_loss(int micro, const at::Tensor& loss);

  // Backward of micro m: from the loss on the last stage, else from the
  // gradient of the output. Frees the micro's graph and output.
  void backward(int micro, const at::Tensor& grad_output = {});
  // The same backward split in two (BWD_I, BWD_W): backward_input(m) gives
  // the input's gradient and frees the graph, deferring the weight products
  // its layers defer (weight_grad_store.hpp); backward_weight(m), later, runs
  // them. Each once per micro and step, in that order.
  void backward_input(int micro, const at::Tensor& grad_output = {});
  void backward_weight(int micro);
  // Gradient of the input of micro m, valid after backward(m) for an input
  // that requires grad; the stage forgets it (it is sent or consumed once).
  at::Tensor take_input_grad(int micro);
  at::Tensor input(int micro) const;
  at::Tensor output(int micro) const;

  // Megatron's deallocate_output_tensor: after the output of micro m was sent,
  // replace its storage by one element; the graph (and so backward) is kept.
  // Only legal when the output is not a view of the input (the model guarantees it).
  void pseudo_deallocate(int micro);
  // Forward-only runs: drops micro m's input and output once the output has
  // been sent or consumed (nothing will backpropagate through them).
  void release(int micro);

  void reset();

 private:
  int index_;
  bool last_;
  Forward forward_;
  bool input_requires_grad_ = true;
  std::map<int, at::Tensor> inputs_, outputs_, losses_, input_grads_;
  std::map<int, WeightGradWork> deferred_;  // by micro, from backward_input to backward_weight
};

}  // namespace hp::runtime
