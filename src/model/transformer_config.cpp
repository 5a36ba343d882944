#include "model/transformer_config.hpp"

#include <algorithm>
#include <vector>

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace hp::model {

std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "unknown";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  if (name == "float32" || name == "fp32" || name == "float") return DType::Float32;
  if (name == "float64" || name == "fp64" || name == "double") return DType::Float64;
  return std::nullopt;
}

std::vector<std::string> dtype_names() { return {"float32", "float64"}; }

namespace {

[[noreturn]] void bad_config(const std::string& msg) { throw std::invalid_argument(msg); }

void require_positive(const char* flag, long long value) {
  if (value <= 0) {
    bad_config(std::string(flag) + " must be a positive integer, got " + std::to_string(value));
  }
}

}  // namespace

namespace {

std::vector<std::string> split_modules(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

bool TransformerConfig::recomputes_mhc() const {
  const auto m = split_modules(recompute_modules);
  return std::find(m.begin(), m.end(), "mhc") != m.end();
}

void TransformerConfig::validate() const {
  require_positive("model.num_layers", num_layers);
  require_positive("model.hidden_size", hidden_size);
  require_positive("model.num_attention_heads", num_attention_heads);
  require_positive("model.vocab_size", vocab_size);
  require_positive("model.max_seq_len", max_seq_len);
  const int tp = tensor_parallel.size;
  if (tp < 1) bad_config("model.tensor_parallel.size must be >= 1, got " + std::to_string(tp));
  if (tensor_parallel.rank < 0 || tensor_parallel.rank >= tp)
    bad_config("model.tensor_parallel.rank " + std::to_string(tensor_parallel.rank) + " is not in [0, " + std::to_string(tp) + ")");
  const int cp = context_parallel.size;
  if (cp < 1) bad_config("model.context_parallel.size must be >= 1, got " + std::to_string(cp));
  if (context_parallel.rank < 0 || context_parallel.rank >= cp)
    bad_config("model.context_parallel.rank " + std::to_string(context_parallel.rank) + " is not in [0, " + std::to_string(cp) + ")");
  if (cp > 1) {
    if (max_seq_len % (2 * cp) != 0)
      bad_config("model.max_seq_len " + std::to_string(max_seq_len) + " is not divisible by 2 x model.context_parallel.size " +
           std::to_string(cp) + " (each context-parallel rank holds two of 2 x cp equal chunks)");
    if (mtp_num_layers > 0)
      bad_config("model.mtp_num_layers with model.context_parallel.size " + std::to_string(cp) +
           ": multi-token prediction is not context-parallel yet; use model.context_parallel.size 1");
    if (tensor_parallel.sequence_parallel)
      bad_config("model.tensor_parallel.sequence_parallel with model.context_parallel.size " + std::to_string(cp) +
           ": not supported together yet; drop one");
  }
  if (tensor_parallel.sequence_parallel && tp == 1)
    bad_config("model.tensor_parallel.sequence_parallel needs model.tensor_parallel.size > 1 (it splits the sequence over the"
         " tensor-parallel ranks)");
  if (tp > 1) {
    auto divides = [&](const std::string& what, int n) {
      if (n % tp != 0)
        bad_config(what + " " + std::to_string(n) + " is not divisible by model.tensor_parallel.size " + std::to_string(tp) +
             " (each tensor-parallel rank holds an equal share)");
    };
    divides("model.num_attention_heads", num_attention_heads);
    divides("model.ffn_hidden_size", ffn_hidden());
    divides("model.vocab_size", vocab_size);
    if (tensor_parallel.sequence_parallel && max_seq_len % tp != 0)
      bad_config("model.max_seq_len " + std::to_string(max_seq_len) + " is not divisible by model.tensor_parallel.size " +
           std::to_string(tp) + ", which model.tensor_parallel.sequence_parallel splits every sequence over");
    if (mtp_num_layers > 0 && tensor_parallel.sequence_parallel)
      bad_config("model.mtp_num_layers with model.tensor_parallel.sequence_parallel: multi-token prediction shifts the"
           " sequence, which sequence parallelism splits; drop one");
  }
  if (hidden_size % num_attention_heads != 0) {
    bad_config("model.num_attention_heads " + std::to_string(num_attention_heads) + " must divide model.hidden_size " +
         std::to_string(hidden_size) + " (each head gets hidden / heads channels)");
  }
  if (ffn_hidden_size < 0) {
    bad_config("model.ffn_hidden_size must be a positive integer, or 0 for 4 x model.hidden_size; got " +
         std::to_string(ffn_hidden_size));
  }
  if (dropout != 0.0) {
    std::ostringstream os;
    os << "model.dropout must be 0 (hyperpipe runs are deterministic), got " << dropout;
    bad_config(os.str());
  }
  if (!(layernorm_eps > 0.0) || !std::isfinite(layernorm_eps)) {
    std::ostringstream os;
    os << "model.layernorm_eps must be a finite number > 0, got " << layernorm_eps;
    bad_config(os.str());
  }
  if (!(init_std > 0.0) || !std::isfinite(init_std)) {
    std::ostringstream os;
    os << "model.init_std must be a finite number > 0, got " << init_std;
    bad_config(os.str());
  }
  if (dtype != DType::Float32 && dtype != DType::Float64) {
    bad_config("model.dtype must be float32 or float64");
  }
  if (mhc_num_residual_streams < 1)
    bad_config("model.mhc_num_residual_streams must be >= 1, got " + std::to_string(mhc_num_residual_streams));
  if (mhc_sinkhorn_iterations < 1)
    bad_config("model.mhc_sinkhorn_iterations must be >= 1, got " + std::to_string(mhc_sinkhorn_iterations));
  const auto modules = split_modules(recompute_modules);
  const bool has_mhc = std::find(modules.begin(), modules.end(), "mhc") != modules.end();
  const bool has_mlp = std::find(modules.begin(), modules.end(), "mlp") != modules.end();
  if (has_mhc && has_mlp)
    bad_config("model.recompute_modules '" + recompute_modules + "': mhc cannot be recomputed together with mlp (the "
         "mHC recompute already spans the MLP's hyper-connection); keep one of them");
  for (const auto& m : modules)
    if (m != "mhc")
      bad_config("model.recompute_modules '" + recompute_modules + "': " + m + " cannot be recomputed selectively here; "
           "allowed: mhc");
  if (has_mhc && !enable_mhc_connections)
    bad_config("model.recompute_modules mhc needs multi-stream residuals (model.enable_mhc_connections)");
  if (mhc_recompute_layer_num < 0)
    bad_config("model.mhc_recompute_layer_num must be >= 0 (0: every layer), got " + std::to_string(mhc_recompute_layer_num));
  if (mhc_recompute_layer_num > 0 && !has_mhc)
    bad_config("model.mhc_recompute_layer_num needs mhc in model.recompute_modules");
  if (mtp_num_layers < 0) bad_config("model.mtp_num_layers must be >= 0, got " + std::to_string(mtp_num_layers));
  if (!(mtp_loss_scaling_factor >= 0.0) || !std::isfinite(mtp_loss_scaling_factor)) {
    std::ostringstream os;
    os << "model.mtp_loss_scaling_factor must be a finite number >= 0, got " << mtp_loss_scaling_factor;
    bad_config(os.str());
  }
  if (!(mhc_init_gating_factor >= 0.0) || !std::isfinite(mhc_init_gating_factor)) {
    std::ostringstream os;
    os << "model.mhc_init_gating_factor must be a finite number >= 0, got " << mhc_init_gating_factor;
    bad_config(os.str());
  }
  for (const double ms : {emulate.forward_ms, emulate.backward_ms}) {
    if (!(ms >= 0.0 && ms <= 60000.0)) {
      std::ostringstream os;
      os << "model.emulate forward and backward times must be milliseconds in [0, 60000], got " << ms;
      bad_config(os.str());
    }
  }
}

std::string TransformerConfig::describe() const {
  std::ostringstream os;
  os << "model.num_layers " << num_layers << " model.hidden_size " << hidden_size << " model.num_attention_heads "
     << num_attention_heads << " model.ffn_hidden_size " << ffn_hidden() << " model.vocab_size " << vocab_size
     << " model.max_seq_len " << max_seq_len << (tie_embeddings ? " model.tie_embeddings" : "") << " model.seed "
     << seed << " model.dtype " << dtype_name(dtype);
  if (mtp_num_layers > 0)
    os << " model.mtp_num_layers " << mtp_num_layers << " model.mtp_loss_scaling_factor " << mtp_loss_scaling_factor;
  if (emulate.active())
    os << " model.emulate " << emulate.forward_ms << "," << emulate.backward_ms
       << (emulate.replace_math ? " model.emulate.replace_math" : "");
  if (enable_mhc_connections)
    os << " model.enable_mhc_connections model.mhc_num_residual_streams " << mhc_num_residual_streams
       << " model.mhc_sinkhorn_iterations " << mhc_sinkhorn_iterations << " model.mhc_init_gating_factor "
       << mhc_init_gating_factor;
  return os.str();
}

}  // namespace hp::model
