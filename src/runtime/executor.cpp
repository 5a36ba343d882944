#include "runtime/executor.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>

#include "comm/heartbeat.hpp"
#include "comm/p2p.hpp"
#include "comm/process_group.hpp"
#include "comm/send_queue.hpp"
#include "runtime/action_trace.hpp"
#include "runtime/stage.hpp"

namespace hp::runtime {

using schedule::Action;
using schedule::ActionType;

namespace {

// Activations are named by the stage that produced them, gradients by the
// stage that sent them, so an activation and a gradient between the same two
// ranks (PP=2: previous and next rank coincide) never match each other.
constexpr auto kAct = comm::MessageKind::Activation;
constexpr auto kGrad = comm::MessageKind::Gradient;

// Forward-direction messages first, then backward, sends before receives.
int batch_order(ActionType t) {
  switch (t) {
    case ActionType::SEND_F: return 0;
    case ActionType::MPIPE_FWD_SEND: return 1;
    case ActionType::MPIPE_GRAPH_SEND: return 2;
    case ActionType::SEND_B: return 3;
    case ActionType::MPIPE_GRAD_SEND: return 4;
    case ActionType::RECV_F: return 5;
    case ActionType::MPIPE_FWD_RECV: return 6;
    case ActionType::MPIPE_GRAPH_RECV: return 7;
    case ActionType::RECV_B: return 8;
    case ActionType::MPIPE_GRAD_RECV_WITH_BACKWARD: return 9;
    default: return 10;  // not reached: a batch holds point-to-point actions only
  }
}

std::string describe(const Action& a) { return schedule::format_action(a); }

// The order run() takes a batch of consecutive communication actions in.
std::vector<size_t> comm_batch_order(const std::vector<Action>& actions, size_t begin, size_t end) {
  std::vector<size_t> order;
  for (size_t i = begin; i < end; ++i) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return batch_order(actions[x].type) < batch_order(actions[y].type); });
  return order;
}

// The end of the batch of communication actions that starts at i.
size_t comm_batch_end(const std::vector<Action>& actions, size_t i) {
  while (i < actions.size() && schedule::is_p2p(actions[i].type)) ++i;
  return i;
}

}  // namespace

Executor::Executor(const schedule::ScheduleOptions& layout, int rank, comm::ProcessGroup* pg,
                   std::map<int, Stage*> stages, LossFn loss, SpecFn output_spec, ExecutorOptions options)
    : layout_(layout),
      rank_(rank),
      pg_(pg),
      stages_(std::move(stages)),
      loss_(std::move(loss)),
      output_spec_(std::move(output_spec)),
      options_(options) {
  if (layout_.pp > 1 && !pg_) throw std::invalid_argument("Executor: a layout with schedule.pp > 1 needs a process group");
  if (pg_) {
    p2p_ = std::make_unique<comm::P2P>(*pg_);
    sends_ = std::make_unique<comm::SendQueue>();
  }
  if (output_spec_) {
    declare_known_shapes(kAct);
    declare_known_shapes(kGrad);
  }
  handlers_[ActionType::FWD] = [this](const Action& a) { forward(a); };
  handlers_[ActionType::BWD] = [this](const Action& a) { backward(a); };
  handlers_[ActionType::BWD_I] = [this](const Action& a) { backward(a); };
  handlers_[ActionType::BWD_W] = [this](const Action& a) { stage(a.stage).backward_weight(a.micro); };
  handlers_[ActionType::SEND_F] = [this](const Action& a) { send_forward(a); };
  handlers_[ActionType::SEND_B] = [this](const Action& a) { send_backward(a); };
  handlers_[ActionType::RECV_F] = [this](const Action& a) { recv_body(a); };
  handlers_[ActionType::RECV_B] = [this](const Action& a) { recv_body(a); };
}

Executor::~Executor() = default;

void Executor::register_handler(ActionType type, Handler handler) { handlers_[type] = std::move(handler); }

Executor::Handler Executor::handler(ActionType type) const {
  auto it = handlers_.find(type);
  return it == handlers_.end() ? Handler() : it->second;
}

Stage& Executor::stage(int index) {
  auto it = stages_.find(index);
  if (it == stages_.end())
    throw std::logic_error("rank " + std::to_string(rank_) + " does not hold stage " + std::to_string(index));
  return *it->second;
}

const MicroBatch& Executor::micro(int m) const {
  if (!micros_ || m < 0 || m >= static_cast<int>(micros_->size()))
    throw std::logic_error("rank " + std::to_string(rank_) + ": no micro-batch " + std::to_string(m));
  return (*micros_)[m];
}

void Executor::set_first_stage_input(int micro, at::Tensor input) { first_inputs_[micro] = std::move(input); }

void Executor::set_first_stage_input_recv(int micro, comm::MessageKind kind, int stage) {
  first_input_recvs_[micro] = {kind, stage};
}

bool Executor::carries_meta(comm::MessageKind kind) const {
  return options_.variable_seq_len || (runs_ == 0 && !known_shapes_.count(kind));
}

void Executor::post_send(const at::Tensor& tensor, int peer, comm::MessageKind kind, int stage, int micro) {
  const int tag = comm::make_tag(kind, stage, micro);
  posted_bytes_ = static_cast<std::int64_t>(tensor.nbytes());
  if (carries_meta(kind)) {
    if (!options_.variable_seq_len) learned_[tag] = {tensor.sizes().vec(), tensor.scalar_type()};
    sends_->push(p2p_->isend_with_meta(tensor, peer, kind, stage, micro));
    return;
  }
  if (!options_.variable_seq_len && !known_shapes_.count(kind)) {
    // The receiver allocates what the first run learned: a changed shape
    // would be cut short or overrun by Gloo, so refuse it here.
    auto it = learned_.find(tag);
    if (it == learned_.end() || it->second.shape != tensor.sizes().vec() ||
        it->second.dtype != tensor.scalar_type()) {
      std::ostringstream os;
      os << "rank " << rank_ << ": " << comm::describe_tag(tag) << " is " << tensor.sizes() << " "
         << tensor.scalar_type() << " but ";
      if (it == learned_.end())
        os << "the first step sent no such message";
      else
        os << "the first step sent " << at::IntArrayRef(it->second.shape) << " " << it->second.dtype;
      os << "; shapes are learned on the first step: give the stages' output shapes "
            "(RankModel::output_spec) or enable variable_seq_len when they change";
      throw std::invalid_argument(os.str());
    }
  }
  sends_->push(p2p_->isend(tensor, peer, kind, stage, micro));
}

void Executor::post_recv(int peer, comm::MessageKind kind, int stage, int micro, std::optional<TensorSpec> spec) {
  const int tag = comm::make_tag(kind, stage, micro);
  if (recvs_.count(tag))
    throw std::logic_error("rank " + std::to_string(rank_) + ": " + comm::describe_tag(tag) +
                           " received twice in one step");
  if (carries_meta(kind)) {
    if (!options_.variable_seq_len) learning_.insert(tag);
    recvs_.emplace(tag, p2p_->irecv_with_meta(peer, kind, stage, micro));
    return;
  }
  if (!spec) {
    if (known_shapes_.count(kind))
      throw std::logic_error("rank " + std::to_string(rank_) + ": " + comm::describe_tag(tag) +
                             " is of a kind with known shapes but its receive gave none");
    auto it = learned_.find(tag);
    if (it == learned_.end())
      throw std::logic_error("rank " + std::to_string(rank_) + ": " + comm::describe_tag(tag) +
                             " was not received in the first step, so its shape is unknown");
    spec = it->second;
  }
  at::Tensor into = at::empty(spec->shape, at::TensorOptions().dtype(spec->dtype));
  posted_bytes_ = static_cast<std::int64_t>(into.nbytes());
  recvs_.emplace(tag, p2p_->irecv(into, peer, kind, stage, micro));
}

at::Tensor Executor::take_recv(comm::MessageKind kind, int stage, int micro) {
  const int tag = comm::make_tag(kind, stage, micro);
  auto it = recvs_.find(tag);
  if (it == recvs_.end())
    throw std::logic_error("rank " + std::to_string(rank_) + ": a step needs " + comm::describe_tag(tag) +
                           ", which no earlier receive posted");
  const double start = trace_ ? trace_->now_us() : 0;
  it->second.wait();
  at::Tensor t = it->second.tensor();
  if (trace_) {
    ready_us_ = trace_->now_us();
    waited_us_ += ready_us_ - start;
    trace_->add({"wait " + comm::describe_tag(tag), "wait", current_ ? *current_ : schedule::Action{}, start,
                 ready_us_, static_cast<std::int64_t>(t.nbytes())});
  }
  recvs_.erase(it);
  if (learning_.erase(tag)) learned_[tag] = {t.sizes().vec(), t.scalar_type()};
  return t;
}

at::Tensor Executor::stage_input(int s, int m) {
  if (s == 0) {
    auto it = first_inputs_.find(m);
    if (it != first_inputs_.end()) {
      at::Tensor x = it->second;
      first_inputs_.erase(it);
      return x;
    }
    auto r = first_input_recvs_.find(m);
    if (r != first_input_recvs_.end()) {
      const auto [kind, from_stage] = r->second;
      first_input_recvs_.erase(r);
      return take_recv(kind, from_stage, m);
    }
    if (!micro(m).input.defined())
      throw std::logic_error("rank " + std::to_string(rank_) + ": FWD(0, " + std::to_string(m) +
                             ") has no input: the micro-batch's data was not read on this rank");
    return micro(m).input;
  }
  if (layout_.rank_of(s - 1) == rank_) {  // both stages live on this rank (pp 1, V's turn)
    at::Tensor x = stage(s - 1).output(m);
    if (layout_.forward_only) stage(s - 1).release(m);
    return x;
  }
  return take_recv(kAct, s - 1, m);
}

void Executor::forward(const Action& a) {
  Stage& st = stage(a.stage);
  at::Tensor out = st.forward(a.micro, micro(a.micro), stage_input(a.stage, a.micro));
  if (!st.is_last()) return;
  const MicroBatch& mb = micro(a.micro);
  if (layout_.forward_only) {
    outputs_[a.micro] = out;
    st.release(a.micro);
    if (!mb.target.defined()) return;
  }
  const double weight = loss_weights_->empty() ? 1.0 : loss_weights_->at(a.micro);
  at::Tensor loss = loss_(out, mb.target) * weight;
  if (!layout_.forward_only) st.set_loss(a.micro, loss);
  const at::Tensor sum = loss.detach().to(at::kDouble);
  loss_sum_ = loss_sum_.defined() ? loss_sum_ + sum : sum;
}

// BWD and BWD_I: both consume the output's gradient and make the input's.
void Executor::backward(const Action& a) {
  Stage& st = stage(a.stage);
  at::Tensor grad;
  if (!st.is_last()) {
    grad = layout_.rank_of(a.stage + 1) == rank_ ? stage(a.stage + 1).take_input_grad(a.micro)
                                                 : take_recv(kGrad, a.stage + 1, a.micro);
  }
  if (a.type == ActionType::BWD_I)
    st.backward_input(a.micro, grad);
  else
    st.backward(a.micro, grad);
}

void Executor::check_output_spec(const at::Tensor& t, int stage, int micro) const {
  if (!output_spec_ || options_.variable_seq_len) return;
  const TensorSpec want = output_spec_(stage, micro);
  if (t.sizes().vec() == want.shape && t.scalar_type() == want.dtype) return;
  std::ostringstream os;
  os << "rank " << rank_ << ": stage " << stage << "'s output for micro " << micro << " is " << t.sizes() << " "
     << t.scalar_type() << " but the model's output_spec says " << at::IntArrayRef(want.shape) << " " << want.dtype
     << ", which the receiver allocates";
  throw std::invalid_argument(os.str());
}

void Executor::send_forward(const Action& a) {
  Stage& st = stage(a.stage);
  check_output_spec(st.output(a.micro), a.stage, a.micro);
  // detach(): the message holds the values; the stage keeps the graph.
  post_send(st.output(a.micro).detach(), a.peer, kAct, a.stage, a.micro);
  // The pending send keeps the values alive until it completes; then the
  // send queue drops them, and with pseudo-deallocation nothing else holds them.
  if (layout_.forward_only)
    st.release(a.micro);
  else if (options_.pseudo_deallocate)
    st.pseudo_deallocate(a.micro);
}

void Executor::send_backward(const Action& a) {
  // The gradient of this stage's input: the previous stage's output shape.
  const at::Tensor g = stage(a.stage).take_input_grad(a.micro);
  check_output_spec(g, a.stage - 1, a.micro);
  post_send(g, a.peer, kGrad, a.stage, a.micro);
}

void Executor::post_body_recv(const Action& a) {
  // An activation comes from the stage before and has its output's shape; a
  // gradient comes from the stage after and has this stage's output's shape.
  const bool forward = a.type == ActionType::RECV_F;
  std::optional<TensorSpec> spec;
  if (output_spec_) spec = output_spec_(forward ? a.stage - 1 : a.stage, a.micro);
  post_recv(a.peer, forward ? kAct : kGrad, forward ? a.stage - 1 : a.stage + 1, a.micro, spec);
}

void Executor::recv_body(const Action& a) {
  // The list reaches its receives in body_recvs_'s order: this one, unless already posted ahead.
  if (recvs_reached_++ < recvs_posted_) {
    untraced_ = true;  // the trace has its post, ahead
    return;
  }
  post_body_recv(a);
  recvs_posted_ = recvs_reached_;
}

void Executor::post_recvs_ahead() {
  while (recvs_posted_ < body_recvs_.size() && recvs_.size() < static_cast<size_t>(options_.recv_lookahead)) {
    const Action& a = body_recvs_[recvs_posted_++];
    if (!trace_) {
      post_body_recv(a);
      continue;
    }
    posted_bytes_ = 0;
    const double start = trace_->now_us();
    post_body_recv(a);
    const double end = trace_->now_us();
    trace_->add({describe(a) + " (ahead)", "post", a, start, end, posted_bytes_, 0, end});
  }
}

void Executor::run_comm_batch(const std::vector<Action>& actions, size_t begin, size_t end) {
  for (size_t i : comm_batch_order(actions, begin, end)) run_action(actions[i]);
}

void Executor::run_action(const Action& a) {
  if (!trace_) {
    handlers_.at(a.type)(a);
    return;
  }
  current_ = &a;
  posted_bytes_ = 0;
  untraced_ = false;
  const double start = trace_->now_us();
  waited_us_ = 0;
  ready_us_ = start;
  try {
    handlers_.at(a.type)(a);
  } catch (...) {
    current_ = nullptr;
    throw;
  }
  // MPipe's gradient receive runs the preprocess backward: compute.
  const bool post = schedule::is_p2p(a.type) && a.type != ActionType::MPIPE_GRAD_RECV_WITH_BACKWARD;
  if (!untraced_)
    trace_->add({describe(a), post ? "post" : "compute", a, start, trace_->now_us(), post ? posted_bytes_ : 0,
                 waited_us_, ready_us_});
  current_ = nullptr;
}

double Executor::run(const std::vector<Action>& actions, const std::vector<MicroBatch>& micros,
                     const std::vector<double>& loss_weights) {
  if (!loss_weights.empty() && loss_weights.size() != micros.size())
    throw std::invalid_argument("Executor::run: " + std::to_string(loss_weights.size()) + " loss weights for " +
                                std::to_string(micros.size()) + " micro-batches");
  micros_ = &micros;
  loss_weights_ = &loss_weights;
  loss_sum_ = at::Tensor();
  outputs_.clear();
  for (auto& [index, st] : stages_) st->reset();
  body_recvs_.clear();
  recvs_posted_ = recvs_reached_ = 0;
  for (size_t b = 0; b < actions.size();) {
    if (!schedule::is_p2p(actions[b].type)) {
      ++b;
      continue;
    }
    const size_t e = comm_batch_end(actions, b);
    for (size_t k : comm_batch_order(actions, b, e))
      if (actions[k].type == ActionType::RECV_F || actions[k].type == ActionType::RECV_B)
        body_recvs_.push_back(actions[k]);
    b = e;
  }
  size_t i = 0;
  const bool noted = comm::positions_noted();
  const int count = static_cast<int>(actions.size());
  while (i < actions.size()) {
    const Action& a = actions[i];
    if (noted) comm::note_action(static_cast<int>(i), count, [a] { return describe(a); });
    if (!handlers_.count(a.type))
      throw std::invalid_argument("rank " + std::to_string(rank_) + " position " + std::to_string(i) + " (" +
                                  describe(a) + "): no handler is registered for " +
                                  std::string(schedule::type_name(a.type)));
    if (schedule::is_p2p(a.type)) {
      const size_t j = comm_batch_end(actions, i);
      run_comm_batch(actions, i, j);
      i = j;
      continue;
    }
    // Before the compute: what arrives while it runs is then already on its way.
    post_recvs_ahead();
    run_action(a);
    ++i;
  }
  if (noted) comm::note_action(count, count, [] { return std::string("the step's last sends"); });
  if (sends_) {
    const double start = trace_ ? trace_->now_us() : 0;
    sends_->drain();
    if (trace_) trace_->add({"the step's last sends", "wait", Action{}, start, trace_->now_us(), 0});
  }
  if (!recvs_.empty())
    throw std::logic_error("rank " + std::to_string(rank_) + ": " + std::to_string(recvs_.size()) +
                           " received message(s) were never consumed by the schedule");
  first_inputs_.clear();
  first_input_recvs_.clear();
  micros_ = nullptr;
  loss_weights_ = nullptr;
  ++runs_;
  return loss_sum_.defined() ? loss_sum_.item<double>() : 0.0;
}

}  // namespace hp::runtime
