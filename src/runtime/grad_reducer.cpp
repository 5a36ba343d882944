#include "runtime/grad_reducer.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <map>
#include <stdexcept>
#include <string>

#include "comm/process_group.hpp"
#include "comm/work.hpp"

namespace hp::runtime {

struct GradReducer::Impl {
  struct Param {
    at::Tensor tensor;
    size_t phase = 0;
    size_t bucket = 0;
    bool ready = false;
    std::shared_ptr<torch::autograd::Node> accumulator;  // kept alive, so the hook stays
    std::uintptr_t hook = 0;
  };
  struct Bucket {
    std::vector<size_t> params;
    at::ScalarType dtype = at::kFloat;
    std::int64_t numel = 0;
    size_t ready = 0;
    at::Tensor flat;  // set at launch
    comm::Work work;
    bool in_backward = false;
  };
  struct PhaseState {
    int key = 0;
    std::vector<Bucket> buckets;
    size_t next = 0;  // buckets before it are launched
    bool armed = false;
  };

  comm::ProcessGroup* group = nullptr;
  std::vector<Param> params;
  std::vector<PhaseState> phases;
  std::map<int, size_t> by_key;
  bool in_hook = false;
  int last_in_backward = 0;

  PhaseState& phase(int key) {
    auto it = by_key.find(key);
    if (it == by_key.end()) throw std::invalid_argument("GradReducer: no phase " + std::to_string(key));
    return phases[it->second];
  }

  void launch(PhaseState& ph, Bucket& b) {
    b.flat = at::empty({b.numel}, at::TensorOptions().dtype(b.dtype));
    std::int64_t offset = 0;
    for (size_t i : b.params) {
      const at::Tensor& p = params[i].tensor;
      at::Tensor slot = b.flat.narrow(0, offset, p.numel());
      if (p.grad().defined())
        slot.copy_(p.grad().reshape({-1}));
      else
        slot.zero_();
      offset += p.numel();
    }
    b.in_backward = in_hook;
    b.work = group->iall_reduce(b.flat);
    ++ph.next;
  }

  void launch_ready(PhaseState& ph) {
    while (ph.next < ph.buckets.size() && ph.buckets[ph.next].ready == ph.buckets[ph.next].params.size())
      launch(ph, ph.buckets[ph.next]);
  }

  void mark_ready(size_t i) {
    Param& p = params[i];
    PhaseState& ph = phases[p.phase];
    if (!ph.armed || p.ready) return;
    p.ready = true;
    ++ph.buckets[p.bucket].ready;
    in_hook = true;
    launch_ready(ph);
    in_hook = false;
  }

  void flush(PhaseState& ph) {
    while (ph.next < ph.buckets.size()) launch(ph, ph.buckets[ph.next]);
    ph.armed = false;
  }
};

GradReducer::GradReducer(std::vector<Phase> phases, comm::ProcessGroup* group, std::int64_t bucket_bytes)
    : impl_(std::make_unique<Impl>()) {
  if (!group) throw std::invalid_argument("GradReducer needs a process group");
  if (bucket_bytes < 1) throw std::invalid_argument("GradReducer: bucket_bytes must be positive");
  Impl& im = *impl_;
  im.group = group;
  for (auto& phase : phases) {
    if (im.by_key.count(phase.key)) throw std::invalid_argument("GradReducer: phase " + std::to_string(phase.key) + " given twice");
    im.by_key[phase.key] = im.phases.size();
    Impl::PhaseState ph;
    ph.key = phase.key;
    // Reverse order: the backward reaches the last parameters first.
    for (auto it = phase.params.rbegin(); it != phase.params.rend(); ++it) {
      const at::Tensor& t = it->second;
      if (!t.requires_grad()) continue;
      if (!t.is_leaf()) throw std::invalid_argument("GradReducer: parameter " + it->first + " is not a leaf");
      const std::int64_t bytes = t.numel() * static_cast<std::int64_t>(t.element_size());
      Impl::Bucket* b = ph.buckets.empty() ? nullptr : &ph.buckets.back();
      if (!b || b->dtype != t.scalar_type() || (b->numel * static_cast<std::int64_t>(t.element_size()) + bytes > bucket_bytes && b->numel > 0)) {
        ph.buckets.emplace_back();
        b = &ph.buckets.back();
        b->dtype = t.scalar_type();
      }
      Impl::Param p;
      p.tensor = t;
      p.phase = im.phases.size();
      p.bucket = ph.buckets.size() - 1;
      b->params.push_back(im.params.size());
      b->numel += t.numel();
      im.params.push_back(std::move(p));
    }
    im.phases.push_back(std::move(ph));
  }
  for (size_t i = 0; i < im.params.size(); ++i) {
    Impl::Param& p = im.params[i];
    p.accumulator = torch::autograd::impl::grad_accumulator(p.tensor);
    Impl* self = impl_.get();
    p.hook = p.accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [self, i](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          self->mark_ready(i);
          return outputs;
        }));
  }
}

GradReducer::~GradReducer() {
  for (auto& p : impl_->params)
    if (p.accumulator) p.accumulator->del_post_hook(p.hook);
}

void GradReducer::arm(int key) { impl_->phase(key).armed = true; }

void GradReducer::flush(int key) { impl_->flush(impl_->phase(key)); }

void GradReducer::finish() {
  Impl& im = *impl_;
  for (auto& ph : im.phases) im.flush(ph);
  const double size = im.group->world_size();
  int in_backward = 0;
  for (auto& ph : im.phases) {
    for (auto& b : ph.buckets) {
      b.work.wait();
      b.flat.div_(size);
      std::int64_t offset = 0;
      for (size_t i : b.params) {
        Impl::Param& p = im.params[i];
        at::Tensor avg = b.flat.narrow(0, offset, p.tensor.numel()).view(p.tensor.sizes());
        if (p.tensor.grad().defined())
          p.tensor.mutable_grad().copy_(avg);
        else
          p.tensor.mutable_grad() = avg.clone();
        offset += p.tensor.numel();
        p.ready = false;
      }
      in_backward += b.in_backward;
      b.ready = 0;
      b.flat = at::Tensor();
      b.work = comm::Work();
    }
    ph.next = 0;
  }
  im.last_in_backward = in_backward;
}

int GradReducer::num_buckets() const {
  int n = 0;
  for (const auto& ph : impl_->phases) n += static_cast<int>(ph.buckets.size());
  return n;
}

int GradReducer::launched_in_backward() const { return impl_->last_in_backward; }

}  // namespace hp::runtime
