// Tagged point-to-point messages between pipeline stages.
//
// Tags. Every message carries a tag derived from (kind, stage, micro), so an
// activation and a gradient between the same two ranks can never be confused
// (at PP=2 the previous and the next rank coincide). Packing, in a
// non-negative int32:
//
//     bit 31      30..28      27..16          15..0
//      0          kind        stage           micro
//                 (0..5)      (< 4096)        (< 65536)
//
//   make_tag(kind, stage, micro) = kind << 28 | stage << 16 | micro
//
// so data tags fill [0, 6 * 2^28). `stage` is the stage that produces the
// message (the sender's stage: Activation(s, m) is stage s's output for s + 1,
// Gradient(s, m) is the gradient of stage s's input for s - 1); the receiver
// computes the same tag from the sender's stage. Tags repeat every step, which
// is safe: messages with the same source and tag arrive in the order sent.
//
// Meta tags. A tensor sent with its meta (isend_with_meta) is preceded by a
// small message under meta_tag(tag), in [6 * 2^28, 2^31):
//
//   meta_tag(make_tag(k, s, m)) = (6 << 28) + ((k * 1024 + s) << 16) + m
//
// for the five data kinds k and stages s < 1024. (All 5 data kinds x 4096
// stages x 65536 micros plus their meta tags would need 11 * 2^28 > 2^31
// values, so meta tags cover stages < 1024: far beyond any real pipeline.)
// The free-standing kind Meta is for meta messages a caller ships itself;
// make_tag(Meta, s, m) is a data-range tag and never collides with meta_tag().
//
// Meta message: int64 [dtype, ndim, d0, ..., d7] (kMetaLength = 10 elements,
// unused dims 0), then the data (none when numel is 0). The receiver
// allocates a CPU tensor from it.
//
// Contract (P2P object): a thin, non-owning view of a ProcessGroup (which
// must outlive it); same threading rules as the group (one thread). Posting
// order between the same two ranks does not matter for correctness because
// tags differ; batch_isend_irecv still posts forward-kind messages before
// backward-kind ones, as the pipeline spec requires, so both sides of a pair
// post in the same, deterministic order.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "comm/process_group.hpp"
#include "comm/work.hpp"

namespace hp::comm {

enum class MessageKind : std::uint8_t {
  Activation = 0,    // forward output of a body stage
  Gradient = 1,      // gradient of a body stage's input
  MPipeFeature = 2,  // MPipe: preprocess output, owner -> rank 0
  MPipeInput = 3,    // MPipe: preprocess input (for the recompute backward), owner -> rank 0
  MPipeGrad = 4,     // MPipe owner-backward: dL/dfeatures, rank 0 -> owner
  Meta = 5,          // a caller's own meta message
};

inline constexpr int kNumMessageKinds = 6;
inline constexpr int kTagMaxStages = 4096;   // stage < 4096
inline constexpr int kTagMaxMicros = 65536;  // micro < 65536
inline constexpr int kMetaTagMaxStages = 1024;
inline constexpr int kMetaMaxDims = 8;
inline constexpr int kMetaLength = 2 + kMetaMaxDims;

std::string_view kind_name(MessageKind kind);
// Activation, MPipeFeature, MPipeInput and Meta travel in the forward
// direction; Gradient and MPipeGrad in the backward direction.
bool is_forward_kind(MessageKind kind);

// Throws std::invalid_argument when stage or micro is out of range.
int make_tag(MessageKind kind, int stage, int micro);
// The tag of the meta message that precedes the tensor sent under
// `tensor_tag` (a data kind other than Meta, stage < 1024).
int meta_tag(int tensor_tag);

struct TagInfo {
  MessageKind kind = MessageKind::Activation;
  int stage = 0;
  int micro = 0;
  bool is_meta = false;  // the meta message of the tensor (kind, stage, micro)
};
// Inverse of make_tag / meta_tag; throws std::invalid_argument for a negative tag.
TagInfo decode_tag(int tag);
// "Gradient(stage 1, micro 7)", "meta of Activation(stage 0, micro 2)".
std::string describe_tag(int tag);

// One message of a batch.
struct P2POp {
  enum class Direction { Send, Recv };
  Direction direction = Direction::Send;
  // Send: the data. Recv: the destination buffer (unused with with_meta).
  at::Tensor tensor;
  int peer = -1;
  MessageKind kind = MessageKind::Activation;
  int stage = 0;
  int micro = 0;
  bool with_meta = false;

  static P2POp send(at::Tensor t, int dst, MessageKind k, int stage, int micro, bool with_meta = false);
  static P2POp recv(at::Tensor into, int src, MessageKind k, int stage, int micro);
  static P2POp recv_with_meta(int src, MessageKind k, int stage, int micro);
};

class P2P {
 public:
  explicit P2P(ProcessGroup& group) : group_(&group) {}

  ProcessGroup& group() const { return *group_; }

  // Fixed shape: both sides know the shape and dtype.
  Work isend(const at::Tensor& tensor, int dst, MessageKind kind, int stage, int micro);
  Work irecv(const at::Tensor& into, int src, MessageKind kind, int stage, int micro);

  // Variable shape: the meta message travels first. The sender never blocks.
  Work isend_with_meta(const at::Tensor& tensor, int dst, MessageKind kind, int stage, int micro);
  // Posts the meta message's receive and returns at once; wait() waits for
  // the meta, allocates the tensor, posts its receive and waits for it (the
  // group must outlive the handle). The received tensor is Work::tensor()
  // after wait().
  Work irecv_with_meta(int src, MessageKind kind, int stage, int micro);
  // Blocking convenience: irecv_with_meta(...) then wait.
  at::Tensor recv_with_meta(int src, MessageKind kind, int stage, int micro);

  // Posts a batch without blocking: forward-kind messages first, then
  // backward-kind ones, keeping the given order within each class. Returns
  // one handle per op, in the order of `ops`.
  std::vector<Work> batch_isend_irecv(const std::vector<P2POp>& ops);

  // Build the meta message for `t` / read one back (exposed for tests).
  static at::Tensor encode_meta(const at::Tensor& t);
  struct Meta {
    c10::ScalarType dtype = c10::ScalarType::Float;
    std::vector<std::int64_t> sizes;
  };
  // Throws std::invalid_argument naming what is malformed.
  static Meta decode_meta(const at::Tensor& meta);

 private:
  ProcessGroup* group_;
};

}  // namespace hp::comm
