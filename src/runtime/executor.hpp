// Executor: walks one rank's action list from the schedule engine.
//
// One dispatch table maps each ActionType to a handler; the body handlers
// (FWD, BWD, SEND_*/RECV_*) are built in, and other layers register their own
// (the MPipe handlers, runtime/mpipe_handlers.hpp). A handler runs on the
// rank's thread, in list order, and may use the executor's state accessors.
//
// Communication is asynchronous: a send is posted and waited at the end of
// the step (run() drains every send before it returns); a receive is posted
// where the list has it and waited where its data is consumed. Within a run of
// consecutive communication actions every send is posted before any receive
// (forward messages before backward ones), so a schedule that validate()
// accepts cannot deadlock here.
//
// Lifetime: the executor borrows the stages and the process group, which must
// outlive it. Not thread-safe.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "comm/p2p.hpp"
#include "comm/work.hpp"
#include "schedule/schedule.hpp"

namespace hp::runtime {

class Stage;

struct ExecutorOptions {
  // Megatron's deallocate_output_tensor: replace a sent output's storage by
  // one element (the graph stays usable for backward).
  bool pseudo_deallocate = false;
  // Ship every activation and gradient with a shape/dtype meta message, for
  // micro-batches whose sequence lengths differ (otherwise shapes come from
  // ExecutorOptions::activation_shape).
  bool variable_seq_len = false;
};

// One micro-batch as every rank sees it: the first stage's input, the last
// stage's labels and its loss weight (its share of the step's tokens).
// Under MPipe, input may be undefined on a rank that never reads it (it is
// needed only by the micro's owner: spec section 5.5).
struct MicroBatch {
  at::Tensor input;
  at::Tensor labels;
  double loss_weight = 1.0;
  // Data the first stage's chunk reads from the local batch besides its input,
  // never transported (a VL model's caption tokens); undefined for GPT.
  at::Tensor extra;
};

class Executor {
 public:
  using Handler = std::function<void(const schedule::Action&)>;
  // The loss of one micro on the last stage (before weighting).
  using LossFn = std::function<at::Tensor(const at::Tensor& output, const at::Tensor& labels)>;
  // Shape and options of stage s's output for micro m (what a receiver allocates).
  using ShapeFn = std::function<std::vector<int64_t>(int stage, int micro)>;

  // stages: this rank's stages by global index. pg may be null when the
  // layout has one rank.
  Executor(const schedule::ScheduleOptions& layout, int rank, comm::ProcessGroup* pg, std::map<int, Stage*> stages,
           LossFn loss, ShapeFn shape, at::TensorOptions activation_options, ExecutorOptions options = {});
  ~Executor();

  // Replaces the handler of one action type.
  void register_handler(schedule::ActionType type, Handler handler);

  // Runs one step's actions over the micro-batches. Returns this rank's sum of
  // weighted micro losses (non-zero only on the rank holding the last stage).
  double run(const std::vector<schedule::Action>& actions, const std::vector<MicroBatch>& micros);

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
  // Posts a send now (waited at the end of the step).
  void post_send(const at::Tensor& tensor, int peer, comm::MessageKind kind, int stage, int micro);
  // Posts a receive of a tensor of `shape` (ignored with variable_seq_len,
  // where the shape travels with the data); take_recv later waits for it.
  void post_recv(std::vector<int64_t> shape, at::TensorOptions options, int peer, comm::MessageKind kind, int stage,
                 int micro);
  at::Tensor take_recv(comm::MessageKind kind, int stage, int micro);

 private:
  void run_comm_batch(const std::vector<schedule::Action>& actions, size_t begin, size_t end);
  void forward(const schedule::Action& a);
  void backward(const schedule::Action& a);
  void send_forward(const schedule::Action& a);
  void send_backward(const schedule::Action& a);
  void recv_forward(const schedule::Action& a);
  void recv_backward(const schedule::Action& a);
  at::Tensor stage_input(int stage, int micro);

  schedule::ScheduleOptions layout_;
  int rank_;
  comm::ProcessGroup* pg_;
  std::map<int, Stage*> stages_;
  LossFn loss_;
  ShapeFn shape_;
  at::TensorOptions activation_options_;
  ExecutorOptions options_;
  std::map<schedule::ActionType, Handler> handlers_;

  const std::vector<MicroBatch>* micros_ = nullptr;
  std::map<int, at::Tensor> first_inputs_;
  std::map<int, std::pair<comm::MessageKind, int>> first_input_recvs_;
  std::unique_ptr<comm::P2P> p2p_;
  std::vector<comm::Work> sends_;
  std::map<int, comm::Work> recvs_;
  double loss_sum_ = 0;
};

}  // namespace hp::runtime
