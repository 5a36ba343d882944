// MultiTokenPrediction: DeepSeek-V3-style multi-token prediction on the final
// stage. Depth k = 1..D predicts the token k + 1 positions ahead, with x the
// input tokens (x_{t+k} = target_{t+k-1}, so the final stage needs only the
// targets) and e_k = token_norm_k(embed(x_{k..S-1})). Two forms:
//
// One stream in (the GPT, and any model without mHC): h_0 is the decoder's
// single-stream result before the final norm,
//   h_k = layers_k(proj_k([hidden_norm_k(h_{k-1}[:S-k]); e_k]))
//   loss_k = cross_entropy(head(h_k), target[k..S-1])
// with head the model's final norm + LM head; with mHC the depth's layers
// run on n streams, expanded from the projection and contracted by the
// model's rule (the GPT's mean).
//
// Streams in (MtpOptions::carry_streams; the Hybrid model with mHC, as
// Megatron's MTP with hyper-connections): ms_0 is the decoder's n streams
// before its contraction, and per depth
//   x_k  = stream j: e_proj_k(e_k) + h_proj_k(hidden_norm_k(ms_{k-1}[:S-k] stream j))
//   ms_k = layers_k(x_k)                              (carried to depth k + 1)
//   loss_k = cross_entropy(head(final_norm_k(contract_k(ms_k))), target[k..S-1])
// with head the LM head alone and contract_k the depth's learned contraction.
//
// The MTP loss, loss_scaling / D * sum_k loss_k, reaches training through its
// gradient, injected into the main output's backward with `grad_scale`
// (model/loss_injection.hpp, as the MoE balance loss).
//
// Parameters (registered by the owner under "mtp"): mtp.<k>.{hidden_norm,
// token_norm}.{weight,bias}, mtp.<k>.layers.<j>.*, and either mtp.<k>.proj.weight
// [C, 2C] (one stream) or mtp.<k>.{e_proj,h_proj}.weight [C, C],
// mtp.<k>.final_contraction.* and mtp.<k>.final_norm.* (streams).
#pragma once

#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/transformer_config.hpp"

namespace hp::model {

class LayerNorm;
class Linear;

// One depth's layers: the module (registered under layers.<j>) and how to run it.
struct MtpLayer {
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
};

struct MtpOptions {
  int depth = 1;
  double loss_scaling = 0.1;
  // The decoder's streams in and carried from depth to depth (needs mHC and a
  // contraction per depth); false: one stream.
  bool carry_streams = false;
};

class MultiTokenPrediction : public torch::nn::Module {
 public:
  using Fn = std::function<torch::Tensor(const torch::Tensor&)>;
  // make_layers(k) builds depth k's layers; with mHC, make_contraction(k)
  // builds the module that maps its n streams to one (registered as
  // mtp.<k>.final_contraction); null: the mean over the streams.
  MultiTokenPrediction(const TransformerConfig& config, const MtpOptions& options,
                       const std::function<std::vector<MtpLayer>(int k)>& make_layers,
                       const std::function<MtpLayer(int k)>& make_contraction = nullptr);

  // The scaled MTP loss of one micro-batch and each depth's loss (detached,
  // for logs; still where the model runs).
  // h: [b, S, C], or [b, S, nC] with carry_streams; target: int64 [b, S];
  // embed: ids -> [.., C]; head: [.., C] -> logits (the final norm and LM
  // head, or the LM head alone with carry_streams).
  struct Losses {
    torch::Tensor total;
    std::vector<torch::Tensor> per_depth;
  };
  Losses losses(const torch::Tensor& h, const torch::Tensor& target, const Fn& embed, const Fn& head);

  int depth() const { return depth_; }
  // Each depth's loss averaged over the losses() calls since the last take
  // (the micro-batches of a step), then reset.
  std::vector<double> take_mean_losses();
  // "mtp_loss_1", ... : the names of those values.
  static std::vector<std::string> metric_names(int depth);

 private:
  struct Depth {
    std::shared_ptr<LayerNorm> hidden_norm, token_norm, final_norm;
    std::shared_ptr<Linear> proj, e_proj, h_proj;
    std::vector<MtpLayer> layers;
    Fn contract;
  };
  // Depth d's output for its input `prev` (one stream or streams, as carried).
  torch::Tensor depth_input(Depth& d, const torch::Tensor& prev, const torch::Tensor& tokens, const Fn& embed) const;
  TransformerConfig config_;
  int depth_;
  double loss_scaling_;
  bool carry_streams_;
  std::vector<Depth> depths_;
  torch::Tensor sums_;  // [depth] double: each depth's losses since the last take
  int calls_ = 0;
};

}  // namespace hp::model
