#include "bench/step_breakdown.hpp"

#include "bench/timing.hpp"
#include "comm/process_group.hpp"
#include "runtime/action_trace.hpp"
#include "runtime/executor.hpp"
#include "train/adamw.hpp"

namespace hp::bench {

StepBreakdown break_down_step(runtime::Pipeline& p, const std::vector<runtime::MicroBatch>& micros,
                              comm::ProcessGroup* pg) {
  runtime::ActionTrace trace;
  train::AdamW optimizer(p.named_parameters());
  p.step(micros);
  optimizer.step(1e-4);
  p.zero_grad();
  p.executor().set_trace(&trace);
  if (pg) pg->barrier();
  auto t0 = Clock::now();
  p.step(micros);
  StepBreakdown out;
  out.step = ms_since(t0);
  p.executor().set_trace(nullptr);
  t0 = Clock::now();
  optimizer.step(1e-4);
  out.optimizer = ms_since(t0);
  p.zero_grad();
  for (const auto& e : trace.events()) {
    // An action's waits are wait events too: its own work is busy_us().
    if (e.category == "wait") {
      out.wait += (e.end_us - e.start_us) / 1000.0;
      continue;
    }
    (e.category == "post" ? out.post : out.compute) += e.busy_us() / 1000.0;
    out.actions += 1;
  }
  out.rest = out.step - out.compute - out.wait - out.post;
  return out;
}

MPipeWork mpipe_work(runtime::Pipeline& p, const std::vector<runtime::MicroBatch>& micros) {
  runtime::ActionTrace trace;
  p.executor().set_trace(&trace);
  p.step(micros);
  p.executor().set_trace(nullptr);
  p.zero_grad();
  MPipeWork w;
  for (const auto& e : trace.events()) {
    if (e.category == "wait") continue;
    if (e.action.type == schedule::ActionType::MPIPE_PARAM_BROADCAST) w.broadcast += (e.end_us - e.start_us) / 1000;
    if (e.action.type == schedule::ActionType::MPIPE_TRANSPOSE_BWD) w.preprocess_backward += (e.end_us - e.start_us) / 1000;
  }
  return w;
}

std::vector<train::OpTime> profile_step_ops(runtime::Pipeline& p, const std::vector<runtime::MicroBatch>& micros) {
  train::OpProfile profile;
  p.step(micros);
  p.zero_grad();
  return profile.stop();
}

}  // namespace hp::bench
