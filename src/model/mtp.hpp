// MultiTokenPrediction: DeepSeek-V3-style multi-token prediction on the final
// stage. Depth k = 1..D predicts the token k + 1 positions ahead: with h_0 the
// decoder's (single-stream) result before the final norm and x the input
// tokens (x_{t+k} = target_{t+k-1}, so the final stage needs only the targets),
//   h_k = layers_k(proj_k([hidden_norm_k(h_{k-1}[:S-k]); token_norm_k(embed(x_{k..S-1}))]))
//   loss_k = cross_entropy(head(h_k), target[k..S-1])
// sharing the model's embedding and output head (final norm + LM head). With
// mHC the depth's layers run on n streams: expanded from the projection,
// contracted by the model's rule (GPT: the mean; Hybrid: a learned contraction).
// The MTP loss, loss_scaling / D * sum_k loss_k, reaches training through its
// gradient, injected into the main output's backward with `grad_scale`
// (model/loss_injection.hpp, as the MoE balance loss).
//
// Parameters: mtp.<k>.{hidden_norm,token_norm}.{weight,bias}, mtp.<k>.proj.weight
// [C, 2C], mtp.<k>.layers.<j>.* and, for a learned contraction,
// mtp.<k>.final_contraction.* (registered by the owner under "mtp").
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

class MultiTokenPrediction : public torch::nn::Module {
 public:
  using Fn = std::function<torch::Tensor(const torch::Tensor&)>;
  // make_layers(k) builds depth k's layers; with mHC, make_contraction(k)
  // builds the module that maps its n streams to one (registered as
  // mtp.<k>.final_contraction); null: the mean over the streams.
  MultiTokenPrediction(const TransformerConfig& config, int depth, double loss_scaling,
                       const std::function<std::vector<MtpLayer>(int k)>& make_layers,
                       const std::function<MtpLayer(int k)>& make_contraction = nullptr);

  // The scaled MTP loss of one micro-batch and each depth's loss (detached,
  // for logs; still where the model runs).
  // h: [b, S, C]; target: int64 [b, S]; embed: ids -> [.., C]; head: [.., C] -> logits.
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
    std::shared_ptr<LayerNorm> hidden_norm, token_norm;
    std::shared_ptr<Linear> proj;
    std::vector<MtpLayer> layers;
    Fn contract;
  };
  TransformerConfig config_;
  int depth_;
  double loss_scaling_;
  std::vector<Depth> depths_;
  torch::Tensor sums_;  // [depth] double: each depth's losses since the last take
  int calls_ = 0;
};

}  // namespace hp::model
