// Executor: walks one rank's action list from the schedule engine.
//
// One dispatch table maps each ActionType to a handler; the body handlers
// (FWD, BWD, SEND_*/RECV_*) are built in, and other layers register their own
// (the MPipe handlers, runtime/mpipe_runtime.hpp). A handler runs on the
// rank's thread, in list order, and may use the executor's state accessors.
//
// Communication is asynchronous: a send is posted and waited by a send queue's
// thread, which frees the sent tensor as soon as it has gone (run() drains the
// queue before it returns); a receive is posted where the list has it, or
// earlier (ExecutorOptions::recv_lookahead), and waited where its data is
// consumed (a receive that carries a meta message, for the first step's shape
// learning or variable_seq_len, waits for the meta there too, then for the
// data). Within a run of consecutive communication actions every send is
// posted before any receive (forward messages before backward ones), so a
// schedule that validate() accepts cannot deadlock here; posting a receive
// earlier never blocks, so it cannot add a deadlock.
//
// Shapes. A receiver allocates from a TensorSpec it knows (declare_known_shapes)
// or, for every other kind of message, from what the first run learned: in the
// first run such messages carry a meta message (shape, dtype) and both sides
// remember the shape per (kind, stage, micro); later runs send plain tensors
// and the sender checks that the shape has not changed. With
// ExecutorOptions::variable_seq_len every message carries its meta.
//
// Lifetime: the executor borrows the stages and the process group, which must
// outlive it. Not thread-safe.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "comm/p2p.hpp"
#include "comm/work.hpp"
#include "runtime/executor_options.hpp"
#include "runtime/microbatch.hpp"
#include "runtime/pipeline_stage.hpp"
#include "schedule/schedule.hpp"

namespace hp::runtime {

class Stage;
class ActionTrace;
}  // namespace hp::runtime

namespace hp::comm {
class SendQueue;
}  // namespace hp::comm

namespace hp::runtime {

class Executor {
 public:
  using Handler = std::function<void(const schedule::Action&)>;
  // The loss of one micro on the last stage (before weighting).
  using LossFn = std::function<at::Tensor(const at::Tensor& output, const at::Tensor& target)>;
  // Shape and dtype of stage s's output for micro m (what a receiver allocates).
  using SpecFn = std::function<TensorSpec(int stage, int micro)>;

  // stages: this rank's stages by global index. pg may be null when the
  // layout has one rank. output_spec may be empty: activation and gradient
  // shapes are then learned in the first run.
  Executor(const schedule::ScheduleOptions& layout, int rank, comm::ProcessGroup* pg, std::map<int, Stage*> stages,
           LossFn loss, SpecFn output_spec, ExecutorOptions options = {});
  ~Executor();

  // Records every action (and every wait for received data) into `trace`
  // from now on; null stops recording. The trace must outlive its use.
  void set_trace(ActionTrace* trace) { trace_ = trace; }
  ActionTrace* trace() const { return trace_; }

  // Replaces the handler of one action type.
  void register_handler(schedule::ActionType type, Handler handler);
  // The handler of one action type (empty if none), e.g. to wrap it.
  Handler handler(schedule::ActionType type) const;
  // Receivers of this kind always pass a TensorSpec to post_recv, so its
  // messages never carry meta (unless variable_seq_len). Every rank must
  // declare the same kinds.
  void declare_known_shapes(comm::MessageKind kind) { known_shapes_.insert(kind); }

  // Runs one step's actions over the micro-batches, each weighted by
  // loss_weights[m] (empty: 1). Returns this rank's sum of weighted micro
  // losses (non-zero only on the rank holding the last stage).
  double run(const std::vector<schedule::Action>& actions, const std::vector<MicroBatch>& micros,
             const std::vector<double>& loss_weights = {});
  // Under a forward-only layout (schedule::ScheduleOptions::forward_only)
  // run() frees every stage output once it is sent or consumed, computes the
  // loss only of micros with a target, and keeps the last stage's outputs:
  // this returns them by micro (empty on other ranks) and forgets them.
  std::map<int, at::Tensor> take_outputs() { return std::move(outputs_); }

  // --- state for handlers (valid during run()) ---
  int rank() const { return rank_; }
  const schedule::ScheduleOptions& layout() const { return layout_; }
  comm::ProcessGroup* process_group() const { return pg_; }
  Stage& stage(int index);
  const MicroBatch& micro(int m) const;
  // Overrides stage 0's input of micro m for this step (MPipe puts the
  // preprocess output here); FWD(0, m) consumes it instead of micro(m).input.
  void set_first_stage_input(int micro, at::Tensor input);
  // Stage 0's input of micro m is the message (kind, stage, micro) that a
  // handler has posted (post_recv); FWD(0, m) waits for it only then, so the
  // receive overlaps whatever runs before.
  void set_first_stage_input_recv(int micro, comm::MessageKind kind, int stage);
  // Messages are named by (kind, stage, micro); see comm/p2p.hpp for the tags.
  // Posts a send now (waited by the send queue, drained at the end of the step).
  void post_send(const at::Tensor& tensor, int peer, comm::MessageKind kind, int stage, int micro);
  // Posts a receive; `spec` is required for kinds declared known (and used
  // when given), otherwise the shape comes from the meta message or from the
  // first run. take_recv later waits for it.
  void post_recv(int peer, comm::MessageKind kind, int stage, int micro, std::optional<TensorSpec> spec = {});
  at::Tensor take_recv(comm::MessageKind kind, int stage, int micro);

 private:
  bool carries_meta(comm::MessageKind kind) const;
  // A sent activation or gradient must be what output_spec promised the receiver.
  void check_output_spec(const at::Tensor& t, int stage, int micro) const;
  void run_comm_batch(const std::vector<schedule::Action>& actions, size_t begin, size_t end);
  // Runs one action's handler, recorded when tracing.
  void run_action(const schedule::Action& a);
  void forward(const schedule::Action& a);
  void backward(const schedule::Action& a);
  void send_forward(const schedule::Action& a);
  void send_backward(const schedule::Action& a);
  // RECV_F and RECV_B, where the list has them or ahead (recv_lookahead).
  void recv_body(const schedule::Action& a);
  void post_body_recv(const schedule::Action& a);
  void post_recvs_ahead();
  at::Tensor stage_input(int stage, int micro);

  schedule::ScheduleOptions layout_;
  int rank_;
  comm::ProcessGroup* pg_;
  std::map<int, Stage*> stages_;
  LossFn loss_;
  SpecFn output_spec_;
  ExecutorOptions options_;
  std::map<schedule::ActionType, Handler> handlers_;
  std::set<comm::MessageKind> known_shapes_;
  int runs_ = 0;                              // completed run() calls
  std::map<int, TensorSpec> learned_;         // by tag: shapes seen in the first run
  std::set<int> learning_;                    // tags of this run's meta receives to remember

  const std::vector<MicroBatch>* micros_ = nullptr;
  const std::vector<double>* loss_weights_ = nullptr;
  std::map<int, at::Tensor> first_inputs_;
  std::map<int, std::pair<comm::MessageKind, int>> first_input_recvs_;
  std::unique_ptr<comm::P2P> p2p_;
  std::unique_ptr<comm::SendQueue> sends_;  // with p2p_
  std::map<int, comm::Work> recvs_;
  // This run's RECV_F and RECV_B in the order the list runs them; the first
  // recvs_posted_ are posted, the first recvs_reached_ reached by the list.
  std::vector<schedule::Action> body_recvs_;
  size_t recvs_posted_ = 0, recvs_reached_ = 0;
  bool untraced_ = false;  // the running action asks not to be recorded
  // The weighted losses of the step, summed in double on the loss's device:
  // read once at the end of run(), not once per micro-batch (on a GPU each
  // read would wait for the device).
  at::Tensor loss_sum_;
  ActionTrace* trace_ = nullptr;
  const schedule::Action* current_ = nullptr;  // the action running (for traced waits)
  std::int64_t posted_bytes_ = 0;               // by the last post_send / post_recv (traced posts)
  double waited_us_ = 0, ready_us_ = 0;         // the running action's waits (traced)
  std::map<int, at::Tensor> outputs_;  // forward-only: the last stage's outputs of this run
};

}  // namespace hp::runtime
