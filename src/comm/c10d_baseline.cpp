#include "comm/c10d_baseline.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <stdexcept>
#include <vector>

#include "comm/rendezvous.hpp"

namespace hp::comm {

struct C10dBaseline::Impl {
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
};

C10dBaseline::C10dBaseline(const ProcessGroup& group, const std::string& name) : impl_(std::make_unique<Impl>()) {
  const DistEnv& env = group.env();
  if (env.world_size < 2) throw std::invalid_argument("the c10d baseline needs at least two ranks");
  // Its own store connection and Gloo mesh, as a separate torch.distributed program would make them.
  auto store = c10::make_intrusive<c10d::PrefixStore>(
      "hyperpipe/" + name, connect_to_store(env, group.store_port(), group.timeout()));
  const std::string address = local_address_towards(env.master_addr, env.master_port);
  auto options = c10d::ProcessGroupGloo::Options::create(group.timeout());
  options->devices.push_back(address.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                                             : c10d::ProcessGroupGloo::createDeviceForHostname(address));
  impl_->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, options);
}

C10dBaseline::~C10dBaseline() = default;

void C10dBaseline::send(const at::Tensor& tensor, int dst, int tag) {
  std::vector<at::Tensor> list{tensor};
  impl_->gloo->send(list, dst, tag)->wait();
}

void C10dBaseline::recv(const at::Tensor& tensor, int src, int tag) {
  std::vector<at::Tensor> list{tensor};
  impl_->gloo->recv(list, src, tag)->wait();
}

void C10dBaseline::broadcast(const at::Tensor& tensor, int root) {
  std::vector<at::Tensor> list{tensor};
  c10d::BroadcastOptions o;
  o.rootRank = root;
  impl_->gloo->broadcast(list, o)->wait();
}

}  // namespace hp::comm
