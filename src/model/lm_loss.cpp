#include "model/lm_loss.hpp"

#include "model/tensor_parallel.hpp"

#include <c10/util/StringUtil.h>
#include <ATen/ops/cross_entropy_loss.h>

#include <stdexcept>
#include <string>

namespace hp::model {

at::Tensor lm_loss(const at::Tensor& logits, const at::Tensor& labels, const TensorParallel& tp) {
  if (!logits.defined() || !labels.defined()) {
    throw std::invalid_argument("lm_loss: logits and labels must be defined tensors");
  }
  if (logits.dim() != 3 || !at::isFloatingType(logits.scalar_type())) {
    throw std::invalid_argument("lm_loss: logits must be floating [batch, seq, vocab], got " +
                                c10::str(logits.sizes()));
  }
  if (labels.scalar_type() != at::kLong || labels.dim() != 2 ||
      labels.size(0) != logits.size(0) || labels.size(1) != logits.size(1)) {
    throw std::invalid_argument("lm_loss: labels must be int64 [batch, seq] = [" +
                                std::to_string(logits.size(0)) + ", " +
                                std::to_string(logits.size(1)) + "] to match the logits, got " +
                                std::string(c10::toString(labels.scalar_type())) + " " +
                                c10::str(labels.sizes()));
  }
  const int64_t vocab = logits.size(2) * tp.size;
  // Checked where it costs no device round trip; a device's loss kernel checks its own.
  if (labels.numel() > 0 && labels.is_cpu()) {
    const auto [min, max] = at::aminmax(labels);
    const int64_t lo = min.item<int64_t>(), hi = max.item<int64_t>();
    if (lo < 0 || hi >= vocab) {
      throw std::invalid_argument("lm_loss: labels must lie in [0, " + std::to_string(vocab) +
                                  ") (the logits' vocabulary, model.vocab_size), got values in [" +
                                  std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
  }
  if (tp.size > 1) return vocab_parallel_cross_entropy(logits, labels, tp).mean();
  return at::cross_entropy_loss(logits.reshape({-1, vocab}), labels.reshape({-1}));
}

}  // namespace hp::model
