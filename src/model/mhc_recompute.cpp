#include "model/mhc_recompute.hpp"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>

#include <cstring>
#include <stdexcept>

namespace hp::model {
namespace {

thread_local MhcRecomputeGroup* g_current = nullptr;

}  // namespace

MhcRecomputeGroup* current_mhc_recompute_group() { return at::GradMode::is_enabled() ? g_current : nullptr; }

MhcRecomputeScope::MhcRecomputeScope(int layers_per_group, bool active)
    : layers_per_group_(layers_per_group), previous_(g_current) {
  if (active && at::GradMode::is_enabled()) group_ = std::make_shared<MhcRecomputeGroup>();
  g_current = group_.get();
}

MhcRecomputeScope::~MhcRecomputeScope() { g_current = previous_; }

void MhcRecomputeScope::layer_done(const at::Tensor& output, bool last) {
  if (!group_) return;
  ++in_group_;
  if (!last && (layers_per_group_ == 0 || in_group_ < layers_per_group_)) return;
  group_->close(output);
  in_group_ = 0;
  group_ = last ? nullptr : std::make_shared<MhcRecomputeGroup>();
  g_current = group_.get();
}

void MhcRecomputeGroup::release_later(const at::Tensor& output, std::function<at::Tensor()> recompute) {
  if (output.device().type() != c10::DeviceType::CPU)
    throw std::logic_error("mHC recompute groups release CPU storage only");
  Entry e;
  e.output = output;
  e.recompute = std::move(recompute);
  entries_.push_back(std::move(e));
}

void MhcRecomputeGroup::close(const at::Tensor& boundary) {
  std::vector<Entry> released;
  for (auto& e : entries_) {
    if (e.output.is_same(boundary)) continue;  // the boundary stays
    e.storage = e.output.storage();
    e.output = at::Tensor();  // the storage, not the graph behind the tensor
    e.bytes = e.storage.nbytes();
    e.storage.unsafeGetStorageImpl()->set_data_ptr_noswap(at::DataPtr(nullptr, e.storage.device()));
    e.storage.unsafeGetStorageImpl()->set_nbytes(0);
    released_bytes_ += e.bytes;
    released.push_back(std::move(e));
  }
  entries_.clear();
  if (released.empty() || !boundary.requires_grad()) return;
  auto pending = std::make_shared<std::vector<Entry>>(std::move(released));
  at::Tensor hooked = boundary;
  hooked.register_hook([pending](const at::Tensor&) {
    // In forward order: each recompute reads outputs refilled before it.
    at::NoGradGuard no_grad;
    for (auto& e : *pending) {
      const at::Tensor value = e.recompute().contiguous();
      if (value.nbytes() != e.bytes) throw std::logic_error("mHC recompute: a recomputed output changed size");
      at::DataPtr data = c10::GetCPUAllocator()->allocate(e.bytes);
      std::memcpy(data.get(), value.data_ptr(), e.bytes);
      e.storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(data));
      e.storage.unsafeGetStorageImpl()->set_nbytes(e.bytes);
    }
    pending->clear();
  });
}

}  // namespace hp::model
