#include "runtime/mpipe_runtime.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <sstream>
#include <stdexcept>

#include "comm/p2p.hpp"
#include "comm/process_group.hpp"
#include "runtime/executor.hpp"
#include "runtime/fnv1a.hpp"
#include "runtime/stage.hpp"

namespace hp::runtime {

using schedule::Action;
using schedule::ActionType;

namespace {

constexpr auto kFeature = comm::MessageKind::MPipeFeature;
constexpr auto kInput = comm::MessageKind::MPipeInput;
constexpr auto kMPipeGrad = comm::MessageKind::MPipeGrad;

// Names, dtypes and shapes in order: two ranks whose descriptions hash alike
// can exchange the parameters with one coalesced broadcast.
std::string describe_structure(const NamedTensors& params) {
  std::ostringstream os;
  for (const auto& [name, t] : params) os << name << ':' << c10::toString(t.scalar_type()) << t.sizes() << ';';
  return os.str();
}

}  // namespace

MPipeRuntime::MPipeRuntime(const schedule::ScheduleOptions& layout, int rank, comm::ProcessGroup* pg,
                           std::shared_ptr<Preprocess> preprocess)
    : layout_(layout), rank_(rank), pg_(pg), preprocess_(std::move(preprocess)) {
  if (layout_.kind != schedule::ScheduleKind::MPipe)
    throw std::invalid_argument("MPipeRuntime needs schedule.kind mpipe");
  if (!pg_) throw std::invalid_argument("MPipe Transpose needs a process group (schedule.pp >= 2)");
  const int t = layout_.mpipe.transpose_layers;
  if (t == 0 && preprocess_)
    throw std::invalid_argument("schedule.mpipe.transpose_layers 0 transposes only the data load, but a preprocess module "
                                "was given");
  if (t > 0 && !preprocess_)
    throw std::invalid_argument("schedule.mpipe.transpose_layers " + std::to_string(t) + " needs a preprocess module on every rank");
  if (preprocess_ && !preprocess_->forward) throw std::invalid_argument("the MPipe preprocess has no forward");
  for (const auto& [name, p] : parameters()) trainable_ = trainable_ || p.requires_grad();
  if (preprocess_ && trainable_ == layout_.mpipe.frozen_preprocess)
    throw std::invalid_argument(std::string("the MPipe schedule was built for a ") +
                                (layout_.mpipe.frozen_preprocess ? "frozen" : "trainable") +
                                " preprocess but the module's parameters " +
                                (trainable_ ? "require" : "do not require") + " gradients");
}

MPipeRuntime::~MPipeRuntime() = default;

const NamedTensors& MPipeRuntime::parameters() const {
  static const NamedTensors none;
  return preprocess_ ? preprocess_->parameters : none;
}

void MPipeRuntime::install(Executor& ex) {
  executor_ = &ex;
  // The owner-backward gradient has the shape of the retained graph's output.
  ex.declare_known_shapes(kMPipeGrad);
  if (preprocess_ && preprocess_->output_spec) ex.declare_known_shapes(kFeature);
  if (preprocess_ && preprocess_->input_spec) ex.declare_known_shapes(kInput);
  ex.register_handler(ActionType::MPIPE_PARAM_BROADCAST, [this](const Action&) { broadcast(); });
  ex.register_handler(ActionType::MPIPE_TRANSPOSE_FWD, [this](const Action& a) { transpose_forward(a.micro); });
  ex.register_handler(ActionType::MPIPE_FWD_SEND, [this](const Action& a) {
    auto it = features_.find(a.micro);
    if (it == features_.end())
      throw std::logic_error("rank " + std::to_string(rank_) + ": MPIPE_FWD_SEND of micro " + std::to_string(a.micro) +
                             " before its MPIPE_TRANSPOSE_FWD");
    // The send holds the storage until it completes.
    executor_->post_send(it->second, a.peer, kFeature, 0, a.micro);
    features_.erase(it);
  });
  ex.register_handler(ActionType::MPIPE_FWD_RECV, [this](const Action& a) {
    std::optional<TensorSpec> spec;
    if (preprocess_ && preprocess_->output_spec) spec = preprocess_->output_spec(a.micro);
    executor_->post_recv(a.peer, kFeature, 0, a.micro, spec);
    executor_->set_first_stage_input_recv(a.micro, kFeature, 0);
  });
  ex.register_handler(ActionType::MPIPE_GRAPH_SEND, [this](const Action& a) {
    executor_->post_send(micro_input(a.micro), a.peer, kInput, 0, a.micro);
  });
  ex.register_handler(ActionType::MPIPE_GRAPH_RECV, [this](const Action& a) {
    std::optional<TensorSpec> spec;
    if (preprocess_ && preprocess_->input_spec) spec = preprocess_->input_spec(a.micro);
    executor_->post_recv(a.peer, kInput, 0, a.micro, spec);
  });
  ex.register_handler(ActionType::MPIPE_TRANSPOSE_BWD, [this](const Action& a) { transpose_backward(a.micro); });
  ex.register_handler(ActionType::MPIPE_GRAD_SEND, [this](const Action& a) {
    executor_->post_send(executor_->stage(0).take_input_grad(a.micro), a.peer, kMPipeGrad, 0, a.micro);
  });
  ex.register_handler(ActionType::MPIPE_GRAD_RECV_WITH_BACKWARD,
                      [this](const Action& a) { grad_recv_with_backward(a.micro, a.peer); });
  ex.register_handler(ActionType::MPIPE_GRAD_REDUCE, [this](const Action&) { grad_reduce(); });
}

void MPipeRuntime::begin_step() {
  features_.clear();
  graphs_.clear();
  snapshot_.clear();
  stats_.step_bytes = 0;
  if (!layout_.mpipe.owner_backward || !trainable_ || layout_.forward_only) return;
  snapshot_ = take_grad_snapshot(trainable_parameters());
}

void MPipeRuntime::end_step() {
  features_.clear();
  if (!graphs_.empty())
    throw std::logic_error("rank " + std::to_string(rank_) + ": " + std::to_string(static_cast<int>(graphs_.size())) +
                           " preprocess graph(s) were never backpropagated by the schedule");
  snapshot_.clear();
}

at::Tensor MPipeRuntime::micro_input(int micro) const {
  at::Tensor x = executor_->micro(micro).input;
  if (!x.defined())
    throw std::logic_error("rank " + std::to_string(rank_) + " owns micro " + std::to_string(micro) +
                           " under MPipe but its data was not read on this rank");
  return x;
}

NamedParams MPipeRuntime::trainable_parameters() const {
  NamedParams out;
  for (const auto& [name, p] : parameters())
    if (p.requires_grad()) out.emplace(name, p);
  return out;
}

void MPipeRuntime::broadcast() {
  if (!preprocess_) return;
  // A frozen block cannot change between steps: its first broadcast suffices.
  if (!trainable_ && broadcast_once_) return;
  std::vector<at::Tensor> tensors;
  std::uint64_t bytes = 0;
  for (const auto& [name, p] : parameters()) {
    tensors.push_back(p.detach());  // shares storage: the replica is overwritten in place
    bytes += p.numel() * p.element_size();
  }
  {
    at::NoGradGuard no_grad;
    pg_->broadcast(tensors, 0);
  }
  const std::uint64_t moved = bytes * static_cast<std::uint64_t>(layout_.pp - 1);
  stats_.step_bytes += moved;
  stats_.total_bytes += moved;
  ++stats_.broadcasts;
  broadcast_once_ = true;
}

void MPipeRuntime::transpose_forward(int micro) {
  const at::Tensor input = micro_input(micro);
  at::Tensor features;
  if (!preprocess_) {
    features = input;  // T = 0: the transposed step is the data load
  } else {
    // Rank 0 backprops its own micros' graphs (MPIPE_TRANSPOSE_BWD); other
    // owners keep theirs only when they run the backward themselves.
    const bool keep_graph =
        trainable_ && !layout_.forward_only && (rank_ == 0 || layout_.mpipe.owner_backward);
    at::AutoGradMode grad_mode(keep_graph);
    at::Tensor out = preprocess_->forward(input);
    if (keep_graph) graphs_[micro] = out;
    features = out.detach();
  }
  if (rank_ == 0)
    executor_->set_first_stage_input(micro, features);
  else
    features_[micro] = features;
}

void MPipeRuntime::transpose_backward(int micro) {
  const at::Tensor grad = executor_->stage(0).take_input_grad(micro);
  auto it = graphs_.find(micro);
  if (it != graphs_.end()) {
    torch::autograd::backward({it->second}, {grad});
    graphs_.erase(it);
    return;
  }
  // D1: a graph cannot cross ranks, so recompute from the shipped input.
  const at::Tensor input = executor_->take_recv(kInput, 0, micro);
  at::AutoGradMode grad_mode(true);
  at::Tensor out = preprocess_->forward(input);
  torch::autograd::backward({out}, {grad});
}

void MPipeRuntime::grad_recv_with_backward(int micro, int peer) {
  auto it = graphs_.find(micro);
  if (it == graphs_.end())
    throw std::logic_error("rank " + std::to_string(rank_) + ": MPIPE_GRAD_RECV_WITH_BACKWARD of micro " + std::to_string(micro) +
                           " has no retained preprocess graph");
  const at::Tensor out = it->second;
  executor_->post_recv(peer, kMPipeGrad, 0, micro, TensorSpec{out.sizes().vec(), out.scalar_type()});
  const at::Tensor grad = executor_->take_recv(kMPipeGrad, 0, micro);
  torch::autograd::backward({out}, {grad});
  graphs_.erase(it);
}

void MPipeRuntime::grad_reduce() {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (auto& [name, p] : parameters()) {
    if (!p.requires_grad()) continue;
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
    grads.push_back(p.grad());
  }
  if (grads.empty()) return;
  // One collective per dtype instead of one per parameter.
  std::map<c10::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (auto& g : grads) by_dtype[g.scalar_type()].push_back(g);
  for (auto& [dtype, gs] : by_dtype) {
    std::vector<at::Tensor> flat;
    for (auto& g : gs) flat.push_back(g.reshape({-1}));
    at::Tensor buffer = at::cat(flat);
    pg_->all_reduce(buffer);
    std::int64_t offset = 0;
    for (auto& g : gs) {
      g.copy_(buffer.narrow(0, offset, g.numel()).view(g.sizes()));
      offset += g.numel();
    }
  }
  add_grad_snapshot(trainable_parameters(), snapshot_);
  snapshot_.clear();
}

void MPipeRuntime::check_structure() {
  if (!preprocess_) return;
  const auto params = parameters();
  const int world = pg_->world_size();
  at::Tensor info = at::zeros({2, world}, at::kLong);
  info[0][rank_] = static_cast<std::int64_t>(fnv1a64(describe_structure(params)));
  info[1][rank_] = static_cast<std::int64_t>(params.size());
  pg_->all_reduce(info);
  std::string bad;
  for (int r = 1; r < world; ++r) {
    if (info[0][r].item<std::int64_t>() == info[0][0].item<std::int64_t>()) continue;
    bad += (bad.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " (" +
           std::to_string(static_cast<int>(info[1][r].item<std::int64_t>())) + " parameters)";
  }
  if (!bad.empty())
    throw std::invalid_argument("the MPipe preprocess module differs between ranks: " + bad +
                                " differ from rank 0 (" + std::to_string(static_cast<int>(info[1][0].item<std::int64_t>())) +
                                " parameters) in parameter names, shapes or dtypes; every rank must build the "
                                "same preprocess (same schedule.mpipe.transpose_layers and model)");
}

}  // namespace hp::runtime
