#include "cli/option_flags.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace hp::cli {
namespace {

void longest_first(FlagNames& f) {
  // Longest names first, so no name is replaced inside a longer one.
  std::sort(f.begin(), f.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

FlagNames schedule_flags(const std::string& pp_flag, const std::string& frozen_flag) {
  return {{"schedule.pp", pp_flag},
          {"schedule.vpp", "--vpp"},
          {"schedule.micro_batches", "--mb"},
          {"schedule.group_size", "--group-size"},
          {"schedule.layers", "--layers"},
          {"schedule.kind", "--schedule"},
          {"schedule.forward_only", "--forward-only"},
          {"schedule.mpipe.transpose_layers", "--transpose-layers"},
          {"schedule.mpipe.owner_backward", "--owner-backward"},
          {"schedule.mpipe.overflow", "--overflow"},
          {"schedule.mpipe.body", "--mpipe-body"},
          {"schedule.mpipe.frozen_preprocess", frozen_flag}};
}

// TransformerConfig, VisionConfig and the model builders' options.
const FlagNames kModelFlags = {{"model.num_layers", "--layers"},
                               {"model.tensor_parallel.size", "--tp"},
                               {"model.tensor_parallel.sequence_parallel", "--sequence-parallel"},
                               {"model.context_parallel.size", "--cp"},
                               {"model.hidden_size", "--hidden"},
                               {"model.num_attention_heads", "--heads"},
                               {"model.ffn_hidden_size", "--ffn-hidden"},
                               {"model.vocab_size", "--vocab"},
                               {"model.max_seq_len", "--seq-len"},
                               {"model.dtype", "--dtype"},
                               {"model.layers_per_stage", "--layers-per-stage"},
                               {"model.mhc_num_residual_streams", "--mhc-streams"},
                               {"model.mhc_sinkhorn_iterations", "--mhc-sinkhorn-iterations"},
                               {"model.mhc_init_gating_factor", "--mhc-init-gating-factor"},
                               {"model.enable_mhc_connections", "--mhc"},
                               {"model.hybrid_pattern", "--hybrid-pattern"},
                               {"model.recompute_modules", "--recompute-modules"},
                               {"model.mhc_recompute_layer_num", "--mhc-recompute-layer-num"},
                               {"model.mtp_num_layers", "--mtp-layers"},
                               {"model.mtp_loss_scaling_factor", "--mtp-loss-scaling"},
                               {"model.mtp_loss_scaling", "--mtp-loss-scaling"},
                               {"model.moe_num_experts", "--moe-experts"},
                               {"model.moe_top_k", "--moe-top-k"},
                               {"model.overlap_moe_expert_parallel_comm", "--overlap-moe-expert-parallel-comm"},
                               {"model.mamba_state_size", "--mamba-state"},
                               {"vision.num_layers", "--vision-layers"},
                               {"vision.image_size", "--image-size"},
                               {"vision.patch_size", "--patch-size"},
                               {"vision.hidden_size", "--vision-hidden"},
                               {"vision.num_attention_heads", "--vision-heads"}};

}  // namespace

std::string with_flags(std::string message, const FlagNames& flags) {
  for (const auto& [name, flag] : flags) {
    for (size_t at = message.find(name); at != std::string::npos; at = message.find(name, at + flag.size()))
      message.replace(at, name.size(), flag);
  }
  return message;
}

// The simulator's CostModel.
const FlagNames kCostFlags = {{"costs.f", "--cost-f"},
                              {"costs.b", "--cost-b"},
                              {"costs.pre_f", "--cost-pre-f"},
                              {"costs.pre_b", "--cost-pre-b"},
                              {"costs.recompute", "--cost-recompute"},
                              {"costs.broadcast_bytes", "--broadcast-bytes"},
                              {"costs.broadcast_bw", "--broadcast-bw"},
                              {"costs.p2p_latency", "--p2p-latency"},
                              {"costs.p2p_bw", "--p2p-bw"},
                              {"costs.activation_bytes", "--activation-bytes"},
                              {"costs.preprocess_input_bytes", "--input-bytes"},
                              {"costs.per_stage", "--stage-cost"}};

// The advisor's ModelProfile (plan --advise).
const FlagNames kProfileFlags = {{"profile.layers", "--layers"},           {"profile.layer_f", "--layer-f"},
                                 {"profile.layer_b", "--layer-b"},         {"profile.layer_bytes", "--layer-bytes"},
                                 {"profile.embed_f", "--embed-f"},         {"profile.embed_b", "--embed-b"},
                                 {"profile.embed_bytes", "--embed-bytes"}, {"profile.tower_layers", "--tower-layers"},
                                 {"profile.tower_f", "--tower-f"},         {"profile.tower_b", "--tower-b"},
                                 {"profile.tower_bytes", "--tower-bytes"}};

const FlagNames& plan_flags() {
  static const FlagNames f = [] {
    FlagNames f = schedule_flags("--pp", "--frozen-preprocess");
    f.insert(f.end(), kCostFlags.begin(), kCostFlags.end());
    f.insert(f.end(), kProfileFlags.begin(), kProfileFlags.end());
    longest_first(f);
    return f;
  }();
  return f;
}

namespace {

FlagNames model_job_flags(const std::string& pp_flag) {
  FlagNames f = schedule_flags(pp_flag, "--freeze-vision");
  f.insert(f.end(), kModelFlags.begin(), kModelFlags.end());
  longest_first(f);
  return f;
}

}  // namespace

const FlagNames& job_flags(bool data_parallel) {
  static const FlagNames plain = model_job_flags("--nproc");
  static const FlagNames dp = model_job_flags("pp (--nproc / (--tp x --cp x --dp))");
  return data_parallel ? dp : plain;
}

schedule::Overflow overflow_from_flag(const std::string& value) {
  for (auto o : {schedule::Overflow::Full, schedule::Overflow::Min, schedule::Overflow::Auto})
    if (value == schedule::overflow_name(o)) return o;
  throw std::invalid_argument("--overflow " + value + ": allowed: full, min, auto");
}

std::vector<int> layer_counts_from_flag(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string cell;
  while (std::getline(in, cell, ',')) {
    try {
      size_t used = 0;
      out.push_back(std::stoi(cell, &used));
      if (used != cell.size()) throw std::invalid_argument(cell);
    } catch (const std::exception&) {
      throw std::invalid_argument("--layers-per-stage '" + text +
                                  "': expected comma-separated layer counts per global stage, e.g. 2,2,1,3");
    }
  }
  return out;
}

schedule::ScheduleKind mpipe_body_from_flag(const std::string& value) {
  for (auto k : {schedule::ScheduleKind::Interleaved, schedule::ScheduleKind::OneFOneB, schedule::ScheduleKind::GPipe})
    if (value == schedule::kind_name(k)) return k;
  throw std::invalid_argument("--mpipe-body " + value + ": allowed: interleaved, 1f1b, gpipe");
}

void apply_mpipe_flags(const std::string& mpipe_body, const std::string& overflow, bool vpp_given,
                       schedule::ScheduleOptions& o) {
  o.mpipe.body = mpipe_body_from_flag(mpipe_body);
  if (!vpp_given) o.vpp = schedule::default_vpp(o);
  o.mpipe.overflow = overflow_from_flag(overflow);
}

}  // namespace hp::cli
