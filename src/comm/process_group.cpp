#include "comm/process_group.hpp"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>

#include "comm/error_text.hpp"
#include "comm/gloo_work.hpp"
#include "comm/group_state.hpp"
#include "comm/op_error.hpp"
#include "comm/rendezvous.hpp"
#include "comm/shm_links.hpp"

namespace hp::comm {
namespace {

std::string dtype_name(const at::Tensor& t) { return std::string(c10::toString(t.scalar_type())); }

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return c10d::ReduceOp(c10d::ReduceOp::SUM);
    case ReduceOp::Product: return c10d::ReduceOp(c10d::ReduceOp::PRODUCT);
    case ReduceOp::Min: return c10d::ReduceOp(c10d::ReduceOp::MIN);
    case ReduceOp::Max: return c10d::ReduceOp(c10d::ReduceOp::MAX);
  }
  throw std::invalid_argument("unknown ReduceOp");
}

}  // namespace

std::string reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Product: return "product";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
  }
  return "?";
}

struct ProcessGroup::Impl {
  std::shared_ptr<Shared> sh;

  std::string prefix() const { return "rank " + std::to_string(global_of(*sh, sh->env.rank)) + ": "; }

  void check_tensor(const char* op, const at::Tensor& t) const {
    if (!t.defined()) throw std::invalid_argument(prefix() + op + ": the tensor is undefined");
    if (t.layout() != at::kStrided) {
      throw std::invalid_argument(prefix() + op + ": only dense (strided) tensors can be communicated, got layout " +
                                  std::string(c10::toString(t.layout())));
    }
    if (!t.device().is_cpu()) {
      throw std::invalid_argument(prefix() + op + ": Gloo transports CPU tensors only, got a tensor on " +
                                  t.device().str());
    }
  }

  void check_peer(const char* op, int peer) const {
    if (peer < 0 || peer >= sh->env.world_size) {
      throw std::invalid_argument(prefix() + op + ": peer rank " + std::to_string(peer) + " must be in [0, " +
                                  std::to_string(sh->env.world_size) + ")");
    }
    if (peer == sh->env.rank) {
      throw std::invalid_argument(prefix() + op + ": peer rank " + std::to_string(peer) +
                                  " is this rank; a rank cannot send to itself");
    }
  }

  void check_tag(const char* op, int tag) const {
    if (tag < 0) throw std::invalid_argument(prefix() + op + ": tag " + std::to_string(tag) + " must be >= 0");
  }

  // Runs a posting call, turning synchronous transport errors into CommError.
  template <typename F>
  c10::intrusive_ptr<C10dWork> post(const OpInfo& info, F&& f) {
    try {
      return f();
    } catch (const std::exception& e) {
      std::string m = clean_message(e);
      throw make_error(*sh, info, m, looks_like_timeout(m));
    }
  }
};

// ---------------------------------------------------------------------------
// Creation

ProcessGroup ProcessGroup::create(const DistEnv& env, const ProcessGroupOptions& options) {
  const std::string who = "rank " + std::to_string(env.rank) + ": ";
  if (env.world_size < 1 || env.rank < 0 || env.rank >= env.world_size) {
    throw std::invalid_argument(who + "invalid DistEnv " + env.to_string() + ": rank must be in [0, world_size)");
  }
  if (env.master_port < 0 || env.master_port > 65535 || (env.master_port == 0 && env.world_size > 1)) {
    throw std::invalid_argument(who + "invalid master_port " + std::to_string(env.master_port) +
                                " (1..65535; 0 only for a single process)");
  }
  if (options.timeout.count() <= 0) {
    throw std::invalid_argument(who + "ProcessGroupOptions::timeout must be positive");
  }
  if (options.gloo_threads < 1) {
    throw std::invalid_argument(who + "ProcessGroupOptions::gloo_threads must be at least 1");
  }

  Rendezvous rendezvous(env, options);
  auto sh = std::make_shared<Shared>();
  sh->env = env;
  sh->timeout = options.timeout;
  sh->store = rendezvous.store();
  sh->store_port = rendezvous.port();

  // Gloo's full mesh.
  std::shared_ptr<::gloo::transport::Device> device;
  std::string address = options.gloo_address;
  try {
    if (!address.empty()) {
      device = c10d::ProcessGroupGloo::createDeviceForHostname(address);
    } else if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname != '\0') {
      address = std::string("interface ") + ifname;
      device = c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
    } else {
      address = local_address_towards(env.master_addr, env.master_port);
      device = address.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                               : c10d::ProcessGroupGloo::createDeviceForHostname(address);
      if (address.empty()) address = "the default device";
    }
  } catch (const std::exception& e) {
    rendezvous.fail("creating the Gloo device on " + (address.empty() ? std::string("?") : address) + " failed",
                    clean_message(e) + " (set GLOO_SOCKET_IFNAME or ProcessGroupOptions::gloo_address)");
  }
  auto gopts = c10d::ProcessGroupGloo::Options::create(options.timeout);
  gopts->devices.push_back(device);
  gopts->threads = options.gloo_threads;
  try {
    auto gloo_store = c10::make_intrusive<c10d::PrefixStore>("gloo", rendezvous.group_store());
    sh->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(gloo_store, env.rank, env.world_size, gopts);
  } catch (const std::exception& e) {
    rendezvous.fail("connecting the Gloo full mesh of " + std::to_string(env.world_size) + " ranks (bound to " +
                        address + ") failed",
                    clean_message(e));
  }
  rendezvous.finish();
  sh->device = std::move(device);
  sh->gloo_threads = options.gloo_threads;
  if (!env.shm_dir.empty()) {
    // Peers read it to tell a rank that is gone from one that is slow; renamed
    // into place, so that nobody reads half a pid.
    const std::string pid_file = shm_pid_path(env.shm_dir, env.rank);
    std::ofstream(pid_file + ".new") << ::getpid() << "\n";
    std::rename((pid_file + ".new").c_str(), pid_file.c_str());
    sh->shm = std::make_shared<ShmLinks>(env.shm_dir, "job", env.rank - env.local_rank, env.local_world_size);
  }

  auto impl = std::make_unique<Impl>();
  impl->sh = std::move(sh);
  return ProcessGroup(std::move(impl));
}

ProcessGroup ProcessGroup::new_group(const std::vector<int>& ranks, const std::string& name) const {
  const Shared& parent = *impl_->sh;
  const int me = global_of(parent, parent.env.rank);
  std::ostringstream list;
  for (size_t i = 0; i < ranks.size(); ++i) list << (i ? ", " : "") << ranks[i];
  const std::string what = "the " + name + " group [" + list.str() + "]";
  const std::string who = "rank " + std::to_string(me) + ": ";
  if (!parent.members.empty()) throw std::invalid_argument(who + what + ": subgroups are made from the job's group");
  if (ranks.empty() || name.empty() || name.find('/') != std::string::npos)
    throw std::invalid_argument(who + what + ": a subgroup needs members and a name without '/'");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end() || sorted.front() < 0 ||
      sorted.back() >= parent.env.world_size)
    throw std::invalid_argument(who + what + ": members must be distinct ranks in [0, " +
                                std::to_string(parent.env.world_size) + ")");
  const auto at = std::find(ranks.begin(), ranks.end(), me);
  if (at == ranks.end()) throw std::invalid_argument(who + what + ": this rank is not a member");

  auto sh = std::make_shared<Shared>();
  sh->env = parent.env;
  sh->env.rank = static_cast<int>(at - ranks.begin());
  sh->env.world_size = static_cast<int>(ranks.size());
  sh->members = ranks;
  sh->name = name;
  sh->timeout = parent.timeout;
  sh->store_port = parent.store_port;
  sh->store = parent.store;
  sh->device = parent.device;
  // Every member announces itself first, so a member that never comes is
  // named (Gloo's own connect would only time out).
  const std::string key = "hyperpipe/subgroup/" + name + "/" + list.str() + "/";
  auto store = c10::make_intrusive<c10d::PrefixStore>(key, parent.store);
  try {
    store->set("joined/" + std::to_string(me), std::vector<uint8_t>{1});
    std::vector<std::string> keys;
    for (int r : ranks) keys.push_back("joined/" + std::to_string(r));
    try {
      store->wait(keys, parent.timeout);
    } catch (const std::exception&) {
      std::string missing;
      for (int r : ranks)
        if (!store->check({"joined/" + std::to_string(r)})) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      throw CommError(who + "forming " + what + " timed out after " + format_duration(parent.timeout) +
                          "; rank(s) " + missing + " did not join (alive? creating the job's groups in the same order?)",
                      me, -1, "rendezvous", -1, true);
    }
    auto gopts = c10d::ProcessGroupGloo::Options::create(parent.timeout);
    gopts->devices.push_back(parent.device);
    gopts->threads = parent.gloo_threads;
    sh->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::PrefixStore>("gloo", store),
                                                           sh->env.rank, sh->env.world_size, gopts);
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError(who + "connecting " + what + " failed: " + clean_message(e), me, -1, "rendezvous", -1, false);
  }
  if (parent.shm) {
    std::string members = list.str();
    std::replace(members.begin(), members.end(), ',', '.');
    members.erase(std::remove(members.begin(), members.end(), ' '), members.end());
    // The rings' file names must stay short: a long member list is hashed (alike on every rank: one binary).
    if (members.size() > 100) members = std::to_string(std::hash<std::string>{}(members));
    sh->shm = std::make_shared<ShmLinks>(parent.env.shm_dir, name + "." + members, me - parent.env.local_rank,
                                         parent.env.local_world_size);
  }
  auto impl = std::make_unique<Impl>();
  impl->sh = std::move(sh);
  return ProcessGroup(std::move(impl));
}

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProcessGroup::ProcessGroup(ProcessGroup&&) noexcept = default;
ProcessGroup& ProcessGroup::operator=(ProcessGroup&&) noexcept = default;
ProcessGroup::~ProcessGroup() = default;

int ProcessGroup::rank() const { return impl_->sh->env.rank; }
int ProcessGroup::global_rank(int rank) const { return global_of(*impl_->sh, rank); }
int ProcessGroup::world_size() const { return impl_->sh->env.world_size; }
const DistEnv& ProcessGroup::env() const { return impl_->sh->env; }
std::chrono::milliseconds ProcessGroup::timeout() const { return impl_->sh->timeout; }
int ProcessGroup::store_port() const { return impl_->sh->store_port; }
std::shared_ptr<void> ProcessGroup::store_keepalive() const {
  return std::make_shared<c10::intrusive_ptr<c10d::Store>>(impl_->sh->store);
}

// ---------------------------------------------------------------------------
// Point-to-point

Work ProcessGroup::isend(const at::Tensor& tensor, int dst, int tag, const std::string& label) {
  impl_->check_tensor("send", tensor);
  impl_->check_peer("send", dst);
  impl_->check_tag("send", tag);
  // detach(): a new tensor object sharing the storage, so the caller may swap
  // the original's data (pseudo-deallocation) while the send is in flight.
  at::Tensor payload = tensor.detach();
  if (!payload.is_contiguous()) payload = payload.contiguous();
  const auto nbytes = static_cast<std::uint64_t>(payload.numel()) * payload.element_size();
  if (nbytes == 0) return Work();
  OpInfo info{"send", dst, tag, label};
  auto& sh = impl_->sh;
  if (sh->shm && sh->shm->reaches(*sh, dst)) return sh->shm->send(sh, std::move(info), std::move(payload));
  std::vector<at::Tensor> list{payload};
  auto w = impl_->post(info, [&] { return sh->gloo->send(list, dst, tag); });
  return Work(std::make_unique<GlooWork>(sh, std::move(w), std::move(info), std::vector<at::Tensor>{payload},
                                         nullptr, at::Tensor(), nbytes, GlooWork::Count::Sent));
}

Work ProcessGroup::irecv(const at::Tensor& tensor, int src, int tag, const std::string& label) {
  impl_->check_tensor("recv", tensor);
  impl_->check_peer("recv", src);
  impl_->check_tag("recv", tag);
  at::Tensor target = tensor.detach();
  const auto nbytes = static_cast<std::uint64_t>(target.numel()) * target.element_size();
  if (nbytes == 0) return Work();
  at::Tensor buffer = target.is_contiguous() ? target : at::empty(target.sizes(), target.options());
  std::function<void()> copy_back;
  if (!target.is_contiguous()) copy_back = [target, buffer]() mutable { target.copy_(buffer); };
  OpInfo info{"recv", src, tag, label};
  auto& sh = impl_->sh;
  if (sh->shm && sh->shm->reaches(*sh, src))
    return sh->shm->recv(sh, std::move(info), std::move(buffer), std::move(copy_back), tensor);
  std::vector<at::Tensor> list{buffer};
  auto w = impl_->post(info, [&] { return sh->gloo->recv(list, src, tag); });
  return Work(std::make_unique<GlooWork>(sh, std::move(w), std::move(info), std::vector<at::Tensor>{buffer, target},
                                         std::move(copy_back), tensor, nbytes, GlooWork::Count::Received));
}

// ---------------------------------------------------------------------------
// Collectives

Work ProcessGroup::ibroadcast(const std::vector<at::Tensor>& tensors, int root) {
  auto& sh = impl_->sh;
  if (root < 0 || root >= sh->env.world_size) {
    throw std::invalid_argument(impl_->prefix() + "broadcast: root rank " + std::to_string(root) +
                                " must be in [0, " + std::to_string(sh->env.world_size) + ")");
  }
  for (const at::Tensor& t : tensors) impl_->check_tensor("broadcast", t);
  // Group by dtype, in order of first appearance: one message per dtype.
  std::vector<std::vector<at::Tensor>> groups;
  for (const at::Tensor& t : tensors) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const std::vector<at::Tensor>& g) { return g[0].scalar_type() == t.scalar_type(); });
    if (it == groups.end()) {
      groups.push_back({t.detach()});
    } else {
      it->push_back(t.detach());
    }
  }
  const bool is_root = sh->env.rank == root;
  std::vector<Work> parts;
  for (auto& group : groups) {
    std::int64_t total = 0;
    for (auto& t : group) total += t.numel();
    if (total == 0) continue;
    at::Tensor flat;
    std::function<void()> copy_back;
    if (group.size() == 1 && group[0].is_contiguous()) {
      flat = group[0];
    } else if (is_root) {
      std::vector<at::Tensor> pieces;
      for (auto& t : group) pieces.push_back(t.reshape({-1}));
      flat = at::cat(pieces);
    } else {
      flat = at::empty({total}, group[0].options());
      copy_back = [group, flat]() mutable {
        std::int64_t off = 0;
        for (auto& t : group) {
          t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
          off += t.numel();
        }
      };
    }
    std::ostringstream what;
    what << "broadcast from rank " << root << " of " << group.size() << " " << dtype_name(group[0])
         << " tensor(s) (" << total << " elements) over " << sh->env.world_size << " ranks";
    OpInfo info{"broadcast", -1, -1, what.str()};
    c10d::BroadcastOptions bo;
    bo.rootRank = root;
    bo.rootTensor = 0;
    bo.timeout = sh->timeout;
    std::vector<at::Tensor> list{flat};
    auto w = impl_->post(info, [&] { return sh->gloo->broadcast(list, bo); });
    std::vector<at::Tensor> keep = group;
    keep.push_back(flat);
    parts.emplace_back(std::make_unique<GlooWork>(sh, std::move(w), std::move(info), std::move(keep),
                                                  std::move(copy_back), at::Tensor(), 0, GlooWork::Count::None));
  }
  if (parts.empty()) return Work();
  if (parts.size() == 1) return std::move(parts[0]);
  return Work::all_of(std::move(parts));
}

void ProcessGroup::broadcast(const std::vector<at::Tensor>& tensors, int root) { ibroadcast(tensors, root).wait(); }

Work ProcessGroup::iall_reduce(const at::Tensor& tensor, ReduceOp op) {
  impl_->check_tensor("all_reduce", tensor);
  auto& sh = impl_->sh;
  at::Tensor target = tensor.detach();
  if (target.numel() == 0) return Work();
  at::Tensor buffer = target.is_contiguous() ? target : target.contiguous();
  std::function<void()> copy_back;
  if (!target.is_contiguous()) copy_back = [target, buffer]() mutable { target.copy_(buffer); };
  std::ostringstream what;
  what << "all_reduce (" << reduce_op_name(op) << ") of " << target.numel() << " " << dtype_name(target)
       << " elements over " << sh->env.world_size << " ranks";
  OpInfo info{"all_reduce", -1, -1, what.str()};
  c10d::AllreduceOptions ao;
  ao.reduceOp = to_c10d(op);
  ao.timeout = sh->timeout;
  std::vector<at::Tensor> list{buffer};
  auto w = impl_->post(info, [&] { return sh->gloo->allreduce(list, ao); });
  return Work(std::make_unique<GlooWork>(sh, std::move(w), std::move(info), std::vector<at::Tensor>{buffer, target},
                                         std::move(copy_back), tensor, 0, GlooWork::Count::None));
}

void ProcessGroup::all_reduce(const at::Tensor& tensor, ReduceOp op) {
  const auto t0 = std::chrono::steady_clock::now();
  iall_reduce(tensor, op).wait();
  Shared& sh = *impl_->sh;
  sh.all_reduce_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  sh.all_reduce_bytes += tensor.nbytes();
  ++sh.all_reduces;
}

at::Tensor ProcessGroup::all_gather(const at::Tensor& tensor) {
  impl_->check_tensor("all_gather", tensor);
  auto& sh = impl_->sh;
  at::Tensor input = tensor.detach().contiguous();
  std::vector<int64_t> shape{sh->env.world_size};
  shape.insert(shape.end(), input.sizes().begin(), input.sizes().end());
  at::Tensor out = at::empty(shape, input.options());
  if (input.numel() == 0) return out;
  std::ostringstream what;
  what << "all_gather of " << input.numel() << " " << dtype_name(input) << " elements over " << sh->env.world_size
       << " ranks";
  OpInfo info{"all_gather", -1, -1, what.str()};
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < sh->env.world_size; ++r) outputs[0].push_back(out[r]);
  std::vector<at::Tensor> inputs{input};
  c10d::AllgatherOptions ao;
  ao.timeout = sh->timeout;
  auto w = impl_->post(info, [&] { return sh->gloo->allgather(outputs, inputs, ao); });
  GlooWork(sh, std::move(w), std::move(info), {input, out}, nullptr, at::Tensor(), 0, GlooWork::Count::None).wait();
  return out;
}

void ProcessGroup::barrier() {
  auto& sh = impl_->sh;
  OpInfo info{"barrier", -1, -1, "barrier over " + std::to_string(sh->env.world_size) + " ranks"};
  c10d::BarrierOptions bo;
  bo.timeout = sh->timeout;
  auto w = impl_->post(info, [&] { return sh->gloo->barrier(bo); });
  GlooWork(sh, std::move(w), std::move(info), {}, nullptr, at::Tensor(), 0, GlooWork::Count::None).wait();
}

// ---------------------------------------------------------------------------
// Counters

CommCounters ProcessGroup::counters() const {
  const Shared& sh = *impl_->sh;
  CommCounters c;
  c.bytes_sent = sh.bytes_sent.load();
  c.bytes_received = sh.bytes_received.load();
  c.messages_sent = sh.messages_sent.load();
  c.messages_received = sh.messages_received.load();
  c.all_reduces = sh.all_reduces.load();
  c.all_reduce_bytes = sh.all_reduce_bytes.load();
  c.all_reduce_us = static_cast<double>(sh.all_reduce_ns.load()) / 1000.0;
  return c;
}
std::uint64_t ProcessGroup::bytes_sent() const { return impl_->sh->bytes_sent.load(); }
std::uint64_t ProcessGroup::bytes_received() const { return impl_->sh->bytes_received.load(); }
void ProcessGroup::reset_counters() {
  impl_->sh->bytes_sent = 0;
  impl_->sh->bytes_received = 0;
  impl_->sh->messages_sent = 0;
  impl_->sh->messages_received = 0;
  impl_->sh->all_reduces = 0;
  impl_->sh->all_reduce_bytes = 0;
  impl_->sh->all_reduce_ns = 0;
}

std::vector<std::vector<double>> all_gather_rows(ProcessGroup* group, const std::vector<double>& row) {
  if (!group || group->world_size() == 1) return {row};
  const at::Tensor all = group->all_gather(at::tensor(row, at::kDouble)).contiguous();
  std::vector<std::vector<double>> out;
  for (int r = 0; r < group->world_size(); ++r) {
    const double* p = all[r].data_ptr<double>();
    out.emplace_back(p, p + row.size());
  }
  return out;
}

}  // namespace hp::comm
