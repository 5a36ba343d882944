#include "comm/p2p.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace hp::comm {
namespace {

constexpr int kKindShift = 28;
constexpr int kStageShift = 16;
constexpr int kMetaBase = 6 << kKindShift;
constexpr int kNumDataKinds = 5;  // every kind but Meta

void check_kind(MessageKind kind) {
  if (static_cast<int>(kind) >= kNumMessageKinds) {
    throw std::invalid_argument("unknown MessageKind " + std::to_string(static_cast<int>(kind)));
  }
}

}  // namespace

std::string_view kind_name(MessageKind kind) {
  switch (kind) {
    case MessageKind::Activation: return "Activation";
    case MessageKind::Gradient: return "Gradient";
    case MessageKind::MPipeFeature: return "MPipeFeature";
    case MessageKind::MPipeInput: return "MPipeInput";
    case MessageKind::MPipeGrad: return "MPipeGrad";
    case MessageKind::Meta: return "Meta";
  }
  return "?";
}

bool is_forward_kind(MessageKind kind) {
  switch (kind) {
    case MessageKind::Activation:
    case MessageKind::MPipeFeature:
    case MessageKind::MPipeInput:
    case MessageKind::Meta:
      return true;
    case MessageKind::Gradient:
    case MessageKind::MPipeGrad:
      return false;
  }
  return true;
}

int make_tag(MessageKind kind, int stage, int micro) {
  check_kind(kind);
  if (stage < 0 || stage >= kTagMaxStages) {
    throw std::invalid_argument("make_tag: stage " + std::to_string(stage) + " must be in [0, " +
                                std::to_string(kTagMaxStages) + ")");
  }
  if (micro < 0 || micro >= kTagMaxMicros) {
    throw std::invalid_argument("make_tag: micro-batch " + std::to_string(micro) + " must be in [0, " +
                                std::to_string(kTagMaxMicros) + ")");
  }
  return (static_cast<int>(kind) << kKindShift) | (stage << kStageShift) | micro;
}

int meta_tag(int tensor_tag) {
  TagInfo t = decode_tag(tensor_tag);
  if (t.is_meta || t.kind == MessageKind::Meta) {
    throw std::invalid_argument("meta_tag: tag " + std::to_string(tensor_tag) + " (" + describe_tag(tensor_tag) +
                                ") is itself a meta message; only data messages have a meta message");
  }
  if (t.stage >= kMetaTagMaxStages) {
    throw std::invalid_argument("meta_tag: stage " + std::to_string(t.stage) + " of " + describe_tag(tensor_tag) +
                                " must be < " + std::to_string(kMetaTagMaxStages) +
                                " for a message sent with its meta");
  }
  return kMetaBase + ((static_cast<int>(t.kind) * kMetaTagMaxStages + t.stage) << kStageShift) + t.micro;
}

TagInfo decode_tag(int tag) {
  if (tag < 0) throw std::invalid_argument("decode_tag: tag " + std::to_string(tag) + " is negative");
  TagInfo t;
  if (tag < kMetaBase) {
    t.kind = static_cast<MessageKind>(tag >> kKindShift);
    t.stage = (tag >> kStageShift) & (kTagMaxStages - 1);
    t.micro = tag & (kTagMaxMicros - 1);
    return t;
  }
  int rest = tag - kMetaBase;
  int ks = rest >> kStageShift;
  int k = ks / kMetaTagMaxStages;
  if (k >= kNumDataKinds) {
    throw std::invalid_argument("decode_tag: tag " + std::to_string(tag) + " is not a hyperpipe tag");
  }
  t.kind = static_cast<MessageKind>(k);
  t.stage = ks % kMetaTagMaxStages;
  t.micro = rest & (kTagMaxMicros - 1);
  t.is_meta = true;
  return t;
}

std::string describe_tag(int tag) {
  TagInfo t;
  try {
    t = decode_tag(tag);
  } catch (const std::invalid_argument&) {
    return "tag " + std::to_string(tag);
  }
  std::ostringstream os;
  if (t.is_meta) os << "meta of ";
  os << kind_name(t.kind) << "(stage " << t.stage << ", micro " << t.micro << ")";
  return os.str();
}

P2POp P2POp::send(at::Tensor t, int dst, MessageKind k, int stage, int micro, bool with_meta) {
  P2POp op;
  op.direction = Direction::Send;
  op.tensor = std::move(t);
  op.peer = dst;
  op.kind = k;
  op.stage = stage;
  op.micro = micro;
  op.with_meta = with_meta;
  return op;
}

P2POp P2POp::recv(at::Tensor into, int src, MessageKind k, int stage, int micro) {
  P2POp op;
  op.direction = Direction::Recv;
  op.tensor = std::move(into);
  op.peer = src;
  op.kind = k;
  op.stage = stage;
  op.micro = micro;
  return op;
}

P2POp P2POp::recv_with_meta(int src, MessageKind k, int stage, int micro) {
  P2POp op;
  op.direction = Direction::Recv;
  op.peer = src;
  op.kind = k;
  op.stage = stage;
  op.micro = micro;
  op.with_meta = true;
  return op;
}

// ---------------------------------------------------------------------------
// Meta encoding

at::Tensor P2P::encode_meta(const at::Tensor& t) {
  if (!t.defined()) throw std::invalid_argument("send_with_meta: the tensor is undefined");
  if (t.dim() > kMetaMaxDims) {
    throw std::invalid_argument("send_with_meta: a tensor of " + std::to_string(t.dim()) +
                                " dimensions cannot be described; at most " + std::to_string(kMetaMaxDims));
  }
  at::Tensor meta = at::zeros({kMetaLength}, at::TensorOptions().dtype(at::kLong));
  auto* p = meta.data_ptr<std::int64_t>();
  p[0] = static_cast<std::int64_t>(t.scalar_type());
  p[1] = t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) p[2 + d] = t.size(d);
  return meta;
}

P2P::Meta P2P::decode_meta(const at::Tensor& meta) {
  if (!meta.defined() || meta.scalar_type() != at::kLong || meta.numel() != kMetaLength) {
    throw std::invalid_argument("malformed meta message: expected " + std::to_string(kMetaLength) + " int64 values");
  }
  at::Tensor m = meta.contiguous();
  const auto* p = m.data_ptr<std::int64_t>();
  Meta out;
  if (p[0] < 0 || p[0] >= static_cast<std::int64_t>(c10::ScalarType::NumOptions)) {
    throw std::invalid_argument("malformed meta message: dtype code " + std::to_string(p[0]) + " is not a ScalarType");
  }
  out.dtype = static_cast<c10::ScalarType>(p[0]);
  if (p[1] < 0 || p[1] > kMetaMaxDims) {
    throw std::invalid_argument("malformed meta message: ndim " + std::to_string(p[1]) + " must be in [0, " +
                                std::to_string(kMetaMaxDims) + "]");
  }
  for (std::int64_t d = 0; d < p[1]; ++d) {
    if (p[2 + d] < 0) {
      throw std::invalid_argument("malformed meta message: size " + std::to_string(p[2 + d]) + " of dimension " +
                                  std::to_string(d) + " is negative");
    }
    out.sizes.push_back(p[2 + d]);
  }
  return out;
}

// A receive whose shape comes in a meta message: the meta's receive is posted
// at once; wait() waits for it, allocates the tensor, posts the data's
// receive and waits for that (the sender posted both sends without waiting).
class MetaRecvWork final : public detail::WorkImpl {
 public:
  MetaRecvWork(ProcessGroup* group, at::Tensor buffer, Work meta, int peer, int tag, int meta_tag)
      : group_(group), buffer_(std::move(buffer)), meta_(std::move(meta)), peer_(peer), tag_(tag), meta_tag_(meta_tag) {}

  void wait() override {
    if (error_) std::rethrow_exception(error_);
    if (done_) return;
    try {
      meta_.wait();
      if (!data_) {
        P2P::Meta meta;
        try {
          meta = P2P::decode_meta(buffer_);
        } catch (const std::invalid_argument& e) {
          throw CommError("rank " + std::to_string(group_->global_rank(group_->rank())) + ": recv " +
                              describe_tag(tag_) + " from rank " + std::to_string(group_->global_rank(peer_)) + ": " +
                              e.what(),
                          group_->rank(), peer_, "recv", meta_tag_, false);
        }
        at::Tensor out = at::empty(meta.sizes, at::TensorOptions().dtype(meta.dtype));
        data_ = out.numel() == 0 ? Work::ready(out) : group_->irecv(out, peer_, tag_, describe_tag(tag_));
        result_ = out;
      }
      data_->wait();
    } catch (...) {
      error_ = std::current_exception();
      throw;
    }
    done_ = true;
  }
  bool is_completed() override { return done_ || error_; }
  at::Tensor tensor() const override { return done_ ? result_ : at::Tensor(); }

 private:
  ProcessGroup* group_;
  at::Tensor buffer_;
  Work meta_;
  std::optional<Work> data_;
  at::Tensor result_;
  int peer_, tag_, meta_tag_;
  bool done_ = false;
  std::exception_ptr error_;
};

// ---------------------------------------------------------------------------
// Operations

Work P2P::isend(const at::Tensor& tensor, int dst, MessageKind kind, int stage, int micro) {
  int tag = make_tag(kind, stage, micro);
  return group_->isend(tensor, dst, tag, describe_tag(tag));
}

Work P2P::irecv(const at::Tensor& into, int src, MessageKind kind, int stage, int micro) {
  int tag = make_tag(kind, stage, micro);
  return group_->irecv(into, src, tag, describe_tag(tag));
}

Work P2P::isend_with_meta(const at::Tensor& tensor, int dst, MessageKind kind, int stage, int micro) {
  std::vector<P2POp> ops{P2POp::send(tensor, dst, kind, stage, micro, true)};
  return std::move(batch_isend_irecv(ops)[0]);
}

Work P2P::irecv_with_meta(int src, MessageKind kind, int stage, int micro) {
  std::vector<P2POp> ops{P2POp::recv_with_meta(src, kind, stage, micro)};
  return std::move(batch_isend_irecv(ops)[0]);
}

at::Tensor P2P::recv_with_meta(int src, MessageKind kind, int stage, int micro) {
  Work w = irecv_with_meta(src, kind, stage, micro);
  w.wait();
  return w.tensor();
}

std::vector<Work> P2P::batch_isend_irecv(const std::vector<P2POp>& ops) {
  const std::string who = "rank " + std::to_string(group_->rank()) + ": ";
  // Validate everything before posting anything.
  std::vector<int> tags(ops.size());
  std::vector<int> mtags(ops.size(), -1);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const P2POp& op = ops[i];
    tags[i] = make_tag(op.kind, op.stage, op.micro);
    if (op.with_meta) mtags[i] = meta_tag(tags[i]);
    const bool needs_tensor = op.direction == P2POp::Direction::Send || !op.with_meta;
    if (needs_tensor && !op.tensor.defined()) {
      throw std::invalid_argument(who + "P2P op " + std::to_string(i) + " (" + describe_tag(tags[i]) +
                                  ") has no tensor");
    }
    if (op.peer < 0 || op.peer >= group_->world_size() || op.peer == group_->rank()) {
      throw std::invalid_argument(who + "P2P op " + std::to_string(i) + " (" + describe_tag(tags[i]) +
                                  "): peer rank " + std::to_string(op.peer) + " must be another rank in [0, " +
                                  std::to_string(group_->world_size()) + ")");
    }
    if (op.with_meta && op.direction == P2POp::Direction::Send) encode_meta(op.tensor);  // validates ndim
  }
  std::vector<std::size_t> order(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return is_forward_kind(ops[a].kind) && !is_forward_kind(ops[b].kind);
  });

  std::vector<Work> works(ops.size());
  for (std::size_t i : order) {
    const P2POp& op = ops[i];
    const std::string name = describe_tag(tags[i]);
    if (op.direction == P2POp::Direction::Send) {
      if (op.with_meta) {
        std::vector<Work> parts;
        parts.push_back(group_->isend(encode_meta(op.tensor), op.peer, mtags[i], describe_tag(mtags[i])));
        parts.push_back(group_->isend(op.tensor, op.peer, tags[i], name));
        works[i] = Work::all_of(std::move(parts));
      } else {
        works[i] = group_->isend(op.tensor, op.peer, tags[i], name);
      }
    } else if (!op.with_meta) {
      works[i] = group_->irecv(op.tensor, op.peer, tags[i], name);
    } else {
      at::Tensor buffer = at::empty({kMetaLength}, at::TensorOptions().dtype(at::kLong));
      Work meta = group_->irecv(buffer, op.peer, mtags[i], describe_tag(mtags[i]));
      works[i] = Work(std::make_unique<MetaRecvWork>(group_, std::move(buffer), std::move(meta), op.peer, tags[i],
                                                     mtags[i]));
    }
  }
  return works;
}

}  // namespace hp::comm
