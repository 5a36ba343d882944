#include "train/verify.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "comm/process_group.hpp"
#include "model/tensor_parallel.hpp"
#include "runtime/pipeline.hpp"
#include "train/place.hpp"

namespace hp::train {
namespace {

double relative(double a, double b) { return std::abs(a - b) / (1 + std::abs(b)); }

}  // namespace

double VerifyReport::worst() const {
  double w = loss_error;
  for (const auto& [name, e] : errors) w = std::max(w, e < 0 ? INFINITY : e);
  return w;
}

VerifyReport verify(const TrainOptions& o, const Task& task, comm::ProcessGroup* pg) {
  o.validate(task);
  const Place at = make_place(pg, o.pipeline.schedule.pp, o.dp, task.tensor_parallel(), task.context_parallel());
  runtime::RankModel model = task.build(o.pipeline.schedule, at.stage_rank, at.parallel);
  const runtime::TensorShards shards = model.tensor_parallel;
  model::TensorParallel sequence_parallel = at.parallel.tensor;
  sequence_parallel.sequence_parallel = model.sequence_parallel;
  runtime::Pipeline pipeline(o.pipeline, at.stage_rank, at.pp, std::move(model), at.average);
  VerifyReport report;
  report.loss = pipeline.step(replica_batch(task, &Task::batch, 0, pipeline, at)).loss;
  pipeline.reduce_tied_grads();
  const auto params = pipeline.named_parameters();
  model::sum_sequence_parallel_grads(params, shards, sequence_parallel);

  // The reference: the whole model in one process over the whole global batch.
  runtime::PipelineOptions whole;
  whole.schedule.kind = schedule::ScheduleKind::NoPipelining;
  whole.schedule.pp = 1;
  whole.schedule.vpp = 1;
  whole.schedule.micro_batches = o.pipeline.schedule.micro_batches * o.dp;
  runtime::Pipeline reference(whole, 0, nullptr, task.build(whole.schedule, 0, {}));
  report.reference_loss = reference.step(task.batch(0, whole.schedule.micro_batches, reference.reads())).loss;
  report.loss_error = relative(report.loss, report.reference_loss);

  // Every name's error where it is held (its shard under tensor parallelism), the maximum over ranks.
  const auto reference_params = reference.named_parameters();
  std::vector<std::string> names;
  for (const auto& [name, p] : reference_params) names.push_back(name);
  at::Tensor errors = at::full({static_cast<std::int64_t>(names.size())}, -1.0, at::kDouble);
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = params.find(names[i]);
    if (it == params.end() || !it->second.grad().defined()) continue;
    at::Tensor want = reference_params.at(names[i]).grad();
    if (!want.defined()) want = at::zeros_like(it->second);
    if (auto s = shards.find(names[i]); s != shards.end())
      want = runtime::shard_of(want, s->second, at.parallel.tensor.rank, at.parallel.tensor.size);
    errors[i] = ((it->second.grad() - want).abs() / (want.abs() + 1)).max().item<double>();
  }
  if (pg && pg->world_size() > 1) pg->all_reduce(errors, comm::ReduceOp::Max);
  for (size_t i = 0; i < names.size(); ++i) report.errors.emplace_back(names[i], errors[i].item<double>());
  std::stable_sort(report.errors.begin(), report.errors.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return report;
}

}  // namespace hp::train
