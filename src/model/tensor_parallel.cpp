#include "model/tensor_parallel.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <stdexcept>

#include "comm/process_group.hpp"
#include "model/fused_linear.hpp"
#include "model/param_init.hpp"
#include "model/parallel_mappings.hpp"

namespace hp::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

comm::ProcessGroup& group(const TensorParallel& tp) {
  if (!tp.group)
    throw std::logic_error("tensor parallel size " + std::to_string(tp.size) +
                           " but the model was built without its process group (model.tensor_parallel.group)");
  return *tp.group;
}

// The group travels through the autograd context as an integer.
std::int64_t handle(const TensorParallel& tp) {
  return static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(&group(tp)));
}

comm::ProcessGroup& tp_group_of(AutogradContext* ctx) {
  return *reinterpret_cast<comm::ProcessGroup*>(static_cast<std::intptr_t>(ctx->saved_data["group"].toInt()));
}

// Megatron's _VocabParallelCrossEntropy: the max, the target's logit and the
// sum of exponentials are reduced over the group; the gradient is the local
// softmax minus the one-hot of the target where this rank holds it.
struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& target,
                            std::int64_t group, std::int64_t rank) {
    ctx->saved_data["group"] = group;
    comm::ProcessGroup& g = tp_group_of(ctx);
    const int64_t vp = logits.size(-1);
    const at::Tensor l = logits.reshape({-1, vp});
    const at::Tensor t = target.reshape({-1});
    at::Tensor max = std::get<0>(l.max(-1));
    g.all_reduce(max, comm::ReduceOp::Max);
    const at::Tensor shifted = l - max.unsqueeze(-1);
    const int64_t begin = rank * vp;
    const at::Tensor outside = (t < begin).logical_or(t >= begin + vp);
    const at::Tensor local = (t - begin).masked_fill(outside, 0);
    at::Tensor predicted = shifted.gather(1, local.unsqueeze(1)).squeeze(1).masked_fill(outside, 0);
    g.all_reduce(predicted);
    at::Tensor exp = shifted.exp();
    at::Tensor sum = exp.sum(-1);
    g.all_reduce(sum);
    ctx->saved_data["softmax"] = exp.div_(sum.unsqueeze(-1));
    ctx->saved_data["local"] = local;
    ctx->saved_data["inside"] = outside.logical_not().to(logits.scalar_type());
    ctx->saved_data["shape"] = logits.sizes();
    return (sum.log() - predicted).view(target.sizes());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::Tensor grad = ctx->saved_data["softmax"].toTensor().clone();
    const at::Tensor local = ctx->saved_data["local"].toTensor();
    grad.scatter_add_(1, local.unsqueeze(1), -ctx->saved_data["inside"].toTensor().unsqueeze(1));
    grad.mul_(grads[0].reshape({-1, 1}));
    return {grad.view(ctx->saved_data["shape"].toIntVector()), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

void check_split(const char* what, int64_t n, const TensorParallel& tp) {
  if (tp.size < 1 || n % tp.size != 0)
    throw std::invalid_argument(std::string(what) + " " + std::to_string(n) + " is not divisible by tensor parallel size " +
                                std::to_string(tp.size));
}

}  // namespace

at::Tensor copy_to_tensor_parallel(const at::Tensor& x, const TensorParallel& tp) {
  return tp.size == 1 ? x : copy_to_group(x, group(tp));
}

at::Tensor reduce_from_tensor_parallel(const at::Tensor& x, const TensorParallel& tp) {
  return tp.size == 1 ? x : reduce_from_group(x, group(tp));
}

at::Tensor gather_from_sequence_parallel(const at::Tensor& x, const TensorParallel& tp) {
  return tp.size == 1 ? x : all_gather_along(x, 1, group(tp));
}

at::Tensor reduce_scatter_to_sequence_parallel(const at::Tensor& x, const TensorParallel& tp) {
  if (tp.size == 1) return x;
  if (x.dim() < 2 || x.size(1) % tp.size != 0)
    throw std::invalid_argument("sequence parallelism: sequence length " + std::to_string(x.dim() < 2 ? 0 : x.size(1)) +
                                " is not divisible by the tensor-parallel size " + std::to_string(tp.size));
  return reduce_scatter_along(x, 1, group(tp));
}

at::Tensor enter_tensor_parallel(const at::Tensor& x, const TensorParallel& tp) {
  return tp.sequence_parallel ? gather_from_sequence_parallel(x, tp) : copy_to_tensor_parallel(x, tp);
}

at::Tensor leave_tensor_parallel(const at::Tensor& x, const TensorParallel& tp) {
  return tp.sequence_parallel ? reduce_scatter_to_sequence_parallel(x, tp) : reduce_from_tensor_parallel(x, tp);
}

void sum_sequence_parallel_grads(const std::map<std::string, at::Tensor>& params, const runtime::TensorShards& shards,
                                 const TensorParallel& tp) {
  if (!tp.sequence_parallel || tp.size == 1) return;
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const auto& [name, p] : params)
    if (!shards.count(name) && p.grad().defined()) by_dtype[p.scalar_type()].push_back(p.grad());
  at::NoGradGuard no_grad;
  for (auto& [dtype, grads] : by_dtype) {
    std::vector<at::Tensor> flat;
    for (const auto& g : grads) flat.push_back(g.reshape({-1}));
    at::Tensor all = at::cat(flat);
    group(tp).all_reduce(all);
    int64_t offset = 0;
    for (auto& g : grads) {
      g.copy_(all.narrow(0, offset, g.numel()).view_as(g));
      offset += g.numel();
    }
  }
}

at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& target, const TensorParallel& tp) {
  if (tp.size == 1)
    return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), target.reshape({-1}), {}, at::Reduction::None)
        .view(target.sizes());
  return VocabParallelCrossEntropy::apply(logits, target, handle(tp), tp.rank);
}

ColumnParallelLinear::ColumnParallelLinear(int64_t in, int64_t out, bool with_bias, c10::ScalarType dtype,
                                           const TensorParallel& tp, int parts)
    : tp_(tp), parts_(parts) {
  check_split("a column-parallel linear's output features", out / parts, tp);
  const auto opts = at::TensorOptions().dtype(dtype);
  weight = register_parameter("weight", at::zeros({out / tp.size, in}, opts));
  if (with_bias) bias = register_parameter("bias", at::zeros({out / tp.size}, opts));
}

torch::Tensor ColumnParallelLinear::forward(const torch::Tensor& x) {
  return fused_linear(enter_tensor_parallel(x, tp_), weight, bias);
}

RowParallelLinear::RowParallelLinear(int64_t in, int64_t out, bool with_bias, c10::ScalarType dtype,
                                     const TensorParallel& tp)
    : tp_(tp) {
  check_split("a row-parallel linear's input features", in, tp);
  const auto opts = at::TensorOptions().dtype(dtype);
  weight = register_parameter("weight", at::zeros({out, in / tp.size}, opts));
  if (with_bias) bias = register_parameter("bias", at::zeros({out}, opts));
}

torch::Tensor RowParallelLinear::forward(const torch::Tensor& x) {
  // Alone, the bias folds into the product (one addmm, as torch's Linear).
  if (tp_.size == 1) return fused_linear(x, weight, bias);
  at::Tensor y = leave_tensor_parallel(fused_linear(x, weight), tp_);
  return bias.defined() ? y + bias : y;
}

VocabParallelEmbedding::VocabParallelEmbedding(int64_t num, int64_t dim, c10::ScalarType dtype,
                                               const TensorParallel& tp)
    : tp_(tp) {
  check_split("a vocabulary-parallel embedding's rows", num, tp);
  weight = register_parameter("weight", at::zeros({num / tp.size, dim}, at::TensorOptions().dtype(dtype)));
}

torch::Tensor VocabParallelEmbedding::forward(const torch::Tensor& ids) {
  if (tp_.size == 1) return at::embedding(weight, ids);
  const int64_t rows = weight.size(0), begin = tp_.rank * rows;
  const at::Tensor outside = (ids < begin).logical_or(ids >= begin + rows);
  const at::Tensor out = at::embedding(weight, (ids - begin).masked_fill(outside, 0)).masked_fill(outside.unsqueeze(-1), 0);
  return leave_tensor_parallel(out, tp_);
}

runtime::TensorShards ColumnParallelLinear::own_shards() const {
  if (tp_.size == 1) return {};
  runtime::TensorShards out{{"weight", {0, parts_}}};
  if (bias.defined()) out["bias"] = {0, parts_};
  return out;
}

runtime::TensorShards RowParallelLinear::own_shards() const {
  if (tp_.size == 1) return {};
  return {{"weight", {1, 1}}};
}

runtime::TensorShards VocabParallelEmbedding::own_shards() const {
  if (tp_.size == 1) return {};
  return {{"weight", {0, 1}}};
}

runtime::TensorShards tensor_parallel_shards(const torch::nn::Module& root) {
  runtime::TensorShards out;
  auto add = [&out](const std::string& prefix, const torch::nn::Module& module) {
    if (const auto* m = dynamic_cast<const TensorParallelModule*>(&module))
      for (const auto& [name, shard] : m->own_shards()) out[prefix + name] = shard;
  };
  add("", root);  // (root may be under construction: not yet in a shared_ptr)
  for (const auto& item : root.named_modules("", /*include_self=*/false)) add(item.key() + ".", *item.value());
  return out;
}

void initialize_parameters(torch::nn::Module& root, const TensorParallel& tp,
                           const std::function<at::Tensor(const std::string&, at::IntArrayRef)>& init) {
  const runtime::TensorShards shards = tensor_parallel_shards(root);
  const std::map<std::string, ParamInit> declared = declared_inits(root);
  at::NoGradGuard no_grad;
  for (auto& item : root.named_parameters(/*recurse=*/true)) {
    at::Tensor& p = item.value();
    const auto rule = declared.find(item.key());
    const ParamInit& draw = rule == declared.end() ? init : rule->second;
    const auto it = shards.find(item.key());
    if (it == shards.end()) {
      p.copy_(draw(item.key(), p.sizes()));
    } else {
      const auto whole = runtime::unsharded_shape(p.sizes(), it->second, tp.size);
      p.copy_(runtime::shard_of(draw(item.key(), whole), it->second, tp.rank, tp.size));
    }
  }
}

}  // namespace hp::model
