#include "runtime/tied_parameters.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>

#include "comm/p2p.hpp"
#include "comm/process_group.hpp"
#include "runtime/fnv1a.hpp"

namespace hp::runtime {
namespace {

std::int64_t hash_names(const std::vector<std::string>& names) {
  std::string joined;
  for (const auto& n : names) joined += n + '\n';
  return static_cast<std::int64_t>(fnv1a64(joined) >> 1);  // non-negative: one entry per column, summed
}

}  // namespace

TiedParameters::TiedParameters(std::vector<std::string> names, const NamedTensors& copies, int rank,
                               comm::ProcessGroup* pg, int tag_stage)
    : rank_(rank), pg_(pg), tag_stage_(tag_stage) {
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const auto& name : names) {
    Entry e;
    e.name = name;
    for (const auto& [n, t] : copies) {
      // One tensor listed twice (a module shared by two stages) is one copy.
      const bool seen = std::any_of(e.copies.begin(), e.copies.end(), [&](const at::Tensor& c) {
        return c.unsafeGetTensorImpl() == t.unsafeGetTensorImpl();
      });
      if (n == name && !seen) e.copies.push_back(t);
    }
    entries_.push_back(std::move(e));
  }
  const int world = pg_ ? pg_->world_size() : 1;
  const auto n = static_cast<std::int64_t>(entries_.size());
  // The declared names first, in a table of the same size on every rank.
  const std::int64_t hash = hash_names(names);
  at::Tensor declared = at::zeros({2, world}, at::kLong);
  declared[0][rank_] = n;
  declared[1][rank_] = hash;
  if (pg_ && world > 1) pg_->all_reduce(declared);
  std::string differ;
  for (int r = 0; r < world; ++r)
    if (declared[0][r].item<std::int64_t>() != n || declared[1][r].item<std::int64_t>() != hash)
      differ += (differ.empty() ? "" : ", ") + std::to_string(r);
  if (!differ.empty())
    throw std::invalid_argument("rank " + std::to_string(rank_) + ": rank(s) " + differ +
                                " declare other tied parameters; every rank must pass the same tied_parameters");
  // Rows [0, n): holds the name; [n, 2n): its size there.
  at::Tensor info = at::zeros({2 * n, world}, at::kLong);
  for (std::int64_t i = 0; i < n; ++i) {
    if (entries_[i].copies.empty()) continue;
    info[i][rank_] = 1;
    info[n + i][rank_] = entries_[i].copies.front().numel();
  }
  if (pg_ && world > 1 && n > 0) pg_->all_reduce(info);
  for (std::int64_t i = 0; i < n; ++i) {
    Entry& e = entries_[i];
    for (int r = 0; r < world; ++r) {
      if (info[i][r].item<std::int64_t>() == 0) continue;
      e.holders.push_back(r);
      const auto numel = info[n + i][r].item<std::int64_t>();
      if (!e.copies.empty() && numel != e.copies.front().numel())
        throw std::invalid_argument("tied parameter " + e.name + " has " + std::to_string(numel) +
                                    " elements on rank " + std::to_string(r) + " but " +
                                    std::to_string(e.copies.front().numel()) + " on rank " + std::to_string(rank_));
    }
  }
}

void TiedParameters::reduce_grads() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (e.copies.empty()) continue;
    at::Tensor total = at::zeros_like(e.copies.front());
    for (const auto& c : e.copies)
      if (c.grad().defined()) total += c.grad();
    if (e.holders.size() > 1) {
      // Gather at the holder of record, which sends the sum back.
      comm::P2P p2p(*pg_);
      const auto kind = comm::MessageKind::Gradient;
      const int micro = static_cast<int>(i);
      const int owner = e.holders.front();
      if (rank_ == owner) {
        std::vector<comm::Work> recvs;
        for (size_t h = 1; h < e.holders.size(); ++h)
          recvs.push_back(p2p.irecv(at::empty_like(total), e.holders[h], kind, tag_stage_, micro));
        for (auto& r : recvs) {
          r.wait();
          total += r.tensor();
        }
        std::vector<comm::Work> sends;
        for (size_t h = 1; h < e.holders.size(); ++h)
          sends.push_back(p2p.isend(total, e.holders[h], kind, tag_stage_, micro));
        comm::wait_all(sends);
      } else {
        comm::Work s = p2p.isend(total.clone(), owner, kind, tag_stage_, micro);
        comm::Work r = p2p.irecv(total, owner, kind, tag_stage_, micro);
        s.wait();
        r.wait();
      }
    }
    for (auto& c : e.copies) {
      if (c.grad().defined())
        c.mutable_grad().copy_(total);
      else
        c.mutable_grad() = total.clone();
    }
  }
}

std::vector<std::string> TiedParameters::duplicate_names() const {
  std::vector<std::string> out;
  for (const auto& e : entries_)
    if (!e.copies.empty() && e.holders.front() != rank_) out.push_back(e.name);
  return out;
}

}  // namespace hp::runtime
