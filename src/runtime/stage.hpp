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

namespace hp::runtime {

class Stage {
 public:
  using Forward = std::function<at::Tensor(const at::Tensor&)>;
  // A chunk that also reads per-micro data besides its input (a VL model's
  // stage 0 takes the caption tokens of micro m from the local batch).
  using MicroForward = std::function<at::Tensor(int micro, const at::Tensor&)>;

  // first: the input is data (token ids), not a received activation, and
  // needs no gradient. last: backward starts from the loss.
  Stage(int index, bool first, bool last, Forward forward);
  Stage(int index, bool first, bool last, MicroForward forward);

  // Whether a floating-point input becomes a leaf that collects its gradient
  // (default true). Off for MPipe's body0 behind a frozen preprocess: nobody
  // consumes dL/dfeatures there, so autograd need not compute it.
  void set_input_requires_grad(bool on) { input_requires_grad_ = on; }

  int index() const { return index_; }
  bool is_first() const { return first_; }
  bool is_last() const { return last_; }

  // Runs the chunk on micro m. A floating-point input becomes the stage
  // boundary: x.detach().requires_grad_(true) (it shares storage with the
  // received buffer, which the executor never reuses). Returns the output.
  at::Tensor forward(int micro, const at::Tensor& input);
  // The last stage's scaled loss of micro m, kept until backward(m).
  void set_loss(int micro, const at::Tensor& loss);

  // Backward of micro m: from the loss on the last stage, else from the
  // gradient of the output. Frees the micro's graph and output.
  void backward(int micro, const at::Tensor& grad_output = {});
  // Gradient of the input of micro m (undefined for a data input); valid after backward(m).
  at::Tensor input_grad(int micro) const;
  at::Tensor input(int micro) const;
  at::Tensor output(int micro) const;

  // Megatron's deallocate_output_tensor: after the output of micro m was sent,
  // replace its storage by one element; the graph (and so backward) is kept.
  // Only legal when the output is not a view of the input (the model guarantees it).
  void pseudo_deallocate(int micro);

  void reset();

 private:
  int index_;
  bool first_;
  bool last_;
  MicroForward forward_;
  bool input_requires_grad_ = true;
  std::map<int, at::Tensor> inputs_, outputs_, losses_, input_grads_;
};

}  // namespace hp::runtime
