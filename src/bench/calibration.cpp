#include "bench/calibration.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>

#include "bench/spread.hpp"
#include "bench/timing.hpp"
#include "comm/process_group.hpp"
#include "runtime/weight_grad_store.hpp"

namespace hp::bench {
namespace {

// The backward of `root` (a loss, or an output seeded with ones); nothing
// when it has no graph (a frozen preprocess).
void backward_from(const at::Tensor& root) {
  if (!root.requires_grad()) return;
  if (root.dim() == 0)
    torch::autograd::backward({root});
  else
    torch::autograd::backward({root}, {at::ones_like(root)});
}

std::pair<Pass, Pass> time_forward_backward(const std::function<at::Tensor()>& forward, comm::ProcessGroup* tp) {
  at::Tensor root;
  const Pass f = timed_pass(tp, [&] { root = forward(); });
  const Pass b = timed_pass(tp, [&] { backward_from(root); });
  return {f, b};
}

// The backward split as a zero-bubble schedule runs it: the input part
// inside a deferral scope, then the weight products it deferred.
std::pair<Pass, Pass> time_split_backward(const std::function<at::Tensor()>& forward, comm::ProcessGroup* tp) {
  const at::Tensor root = forward();
  runtime::WeightGradWork work;
  const Pass i = timed_pass(tp, [&] {
    const runtime::DeferWeightGrads scope(&work);
    backward_from(root);
  });
  const Pass w = timed_pass(tp, [&] {
    for (auto& product : work) product();
  });
  return {i, w};
}

double grad_bytes(const runtime::NamedTensors& params) {
  double bytes = 0;
  for (const auto& [name, w] : params)
    if (w.requires_grad()) bytes += static_cast<double>(w.nbytes());
  return bytes;
}

// One row of doubles per rank, for the group's sum: per stage f, b, tp_f
// calls and bytes, tp_b calls and bytes, grad bytes, i, w; then the preprocess.
constexpr int kStageFields = 9;

std::vector<double> pack(const Calibration& c) {
  std::vector<double> row;
  for (const StageCalibration& s : c.stages)
    row.insert(row.end(), {s.f, s.b, static_cast<double>(s.tp_f.calls), s.tp_f.bytes, static_cast<double>(s.tp_b.calls),
                           s.tp_b.bytes, s.grad_bytes, s.i, s.w});
  row.insert(row.end(), {c.pre_f, c.pre_b, c.pre_grad_bytes});
  return row;
}

Calibration unpack(const double* row, int stages) {
  Calibration c;
  for (int s = 0; s < stages; ++s, row += kStageFields)
    c.stages.push_back({row[0], row[1], {static_cast<int>(row[2]), row[3]}, {static_cast<int>(row[4]), row[5]}, row[6],
                        row[7], row[8]});
  c.pre_f = row[0], c.pre_b = row[1], c.pre_grad_bytes = row[2];
  return c;
}

}  // namespace

Calibration calibrate_rank(const runtime::RankModel& model, const runtime::MicroBatch& micro, int stages, int reps,
                           comm::ProcessGroup* tp, bool split) {
  Calibration out;
  out.stages.resize(stages);
  const bool has_stage0 = std::any_of(model.stages.begin(), model.stages.end(), [](const auto& st) { return st.index == 0; });
  if (model.preprocess && has_stage0) {
    std::vector<double> fs, bs;
    for (int r = 0; r < reps + 1; ++r) {
      const auto [f, b] = time_forward_backward([&] { return model.preprocess->forward(micro.input); }, nullptr);
      if (r > 0) fs.push_back(f.ms), bs.push_back(b.ms);
    }
    out.pre_f = median(fs), out.pre_b = median(bs);
    out.pre_grad_bytes = grad_bytes(model.preprocess->parameters);
  }
  for (const auto& st : model.stages) {
    const bool last = st.index == stages - 1;
    at::Tensor input = micro.input;
    if (st.index == 0 && model.preprocess) {
      at::NoGradGuard no_grad;
      input = model.preprocess->forward(micro.input).requires_grad_(true);
    }
    if (st.index > 0) {
      const runtime::TensorSpec spec = model.output_spec(st.index - 1, 0);
      input = at::randn(spec.shape, at::TensorOptions().dtype(spec.dtype)).requires_grad_(true);
    }
    StageCalibration& out_stage = out.stages[st.index];
    const auto forward = [&] {
      at::Tensor y = st.forward(input, micro);
      return last ? model.loss(y, micro.target) : y;
    };
    std::vector<double> fs, bs;
    for (int r = 0; r < reps + 1; ++r) {
      const auto [f, b] = time_forward_backward(forward, tp);
      if (r == 0) continue;  // the first run warms caches and allocators
      fs.push_back(f.ms - f.tp_ms), bs.push_back(b.ms - b.tp_ms);
      out_stage.tp_f = f.tp, out_stage.tp_b = b.tp;
    }
    out_stage.f = median(fs), out_stage.b = median(bs);
    out_stage.grad_bytes = grad_bytes(st.parameters);
    if (!split) continue;
    std::vector<double> is, ws;
    for (int r = 0; r < reps + 1; ++r) {
      const auto [i, w] = time_split_backward(forward, tp);
      if (r > 0) is.push_back(i.ms - i.tp_ms), ws.push_back(w.ms);
    }
    out_stage.i = median(is), out_stage.w = median(ws);
  }
  return out;
}

Calibration sum_over(const Calibration& mine, comm::ProcessGroup* group) {
  if (!group) return mine;
  at::Tensor t = at::tensor(pack(mine), at::kDouble);
  group->all_reduce(t);
  return unpack(t.data_ptr<double>(), static_cast<int>(mine.stages.size()));
}

schedule::CostModel cost_model(const Calibration& c, bool split) {
  schedule::CostModel cm;
  for (std::size_t s = 0; s < c.stages.size(); ++s) {
    const StageCalibration& m = c.stages[s];
    schedule::StageCost& sc = cm.per_stage[static_cast<int>(s)];
    sc = schedule::StageCost{m.f, m.b};
    if (split) sc.i = m.i, sc.w = m.w;
    sc.tp_f = m.tp_f;
    sc.tp_b = m.tp_b;
    sc.grad_bytes = m.grad_bytes;
  }
  cm.pre_f = c.pre_f;
  cm.pre_b = c.pre_b;
  cm.pre_grad_bytes = c.pre_grad_bytes;
  return cm;
}

}  // namespace hp::bench
