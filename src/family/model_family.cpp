#include "family/model_family.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "data/tokenizer.hpp"
#include "family/gpt_family.hpp"
#include "family/hybrid_family.hpp"
#include "family/vl_family.hpp"
#include "train/checkpoint.hpp"

namespace hp::family {
namespace {

std::vector<ModelFamily>& registry() {
  static std::vector<ModelFamily> families{gpt_family(), hybrid_family(), vl_family()};
  return families;
}

}  // namespace

void register_family(ModelFamily family) {
  if (family.name.empty() || !family.make_task || !family.profile)
    throw std::invalid_argument("register_family: a family needs a name, make_task and profile");
  if (family.title.empty()) family.title = family.name;
  auto& all = registry();
  const auto same = std::find_if(all.begin(), all.end(), [&](const ModelFamily& f) { return f.name == family.name; });
  if (same != all.end())
    *same = std::move(family);
  else
    all.push_back(std::move(family));
}

const ModelFamily& find_family(const std::string& name) {
  for (const ModelFamily& f : registry())
    if (f.name == name) return f;
  std::string allowed;
  for (const auto& n : family_names()) allowed += (allowed.empty() ? "" : ", ") + n;
  throw std::invalid_argument("model.family " + name + ": allowed: " + allowed);
}

std::vector<std::string> family_names() {
  std::vector<std::string> names;
  for (const ModelFamily& f : registry()) names.push_back(f.name);
  return names;
}

schedule::ModelProfile emulated_profile(const model::EmulatedLayer& emulate, int layers, int tower_layers) {
  schedule::ModelProfile p;
  p.layers = layers;
  p.layer_f = emulate.forward_ms > 0 ? emulate.forward_ms : 1.0;
  p.layer_b = emulate.backward_ms > 0 ? emulate.backward_ms : 2 * p.layer_f;
  p.tower_layers = tower_layers;
  if (tower_layers > 0) p.tower_f = p.layer_f, p.tower_b = p.layer_b;
  return p;
}

std::vector<std::int64_t> byte_tokens(const std::string& text) {
  std::vector<std::int64_t> ids;
  for (unsigned char c : text) ids.push_back(c);
  return ids;
}

std::string byte_text(const std::vector<std::int64_t>& tokens) {
  std::string out;
  for (std::int64_t id : tokens) {
    if (id >= 32 && id < 127) {
      out += static_cast<char>(id);
    } else {
      std::ostringstream esc;
      esc << (id < 256 ? "\\x" : "<") << std::hex << id << (id < 256 ? "" : ">");
      out += id == '\n' ? "\\n" : esc.str();
    }
  }
  return out;
}

CheckpointModel language_model(const model::TransformerConfig& config, const train::CheckpointInfo& info) {
  CheckpointModel c;
  c.config = config;
  const auto meta = info.metadata_json.empty() ? nlohmann::json::object() : nlohmann::json::parse(info.metadata_json);
  if (!meta.contains("tokenizer-model")) {
    c.prompt = [](const std::string& text) { return Prompt{text, byte_tokens(text), {}}; };
    c.detokenize = [](const Prompt&, const std::vector<std::int64_t>& tokens) { return byte_text(tokens); };
    return c;
  }
  std::shared_ptr<const data::Tokenizer> tokenizer;
  const auto path = meta.at("tokenizer-model").get<std::string>();
  try {
    tokenizer = data::sentencepiece_tokenizer(path);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("train.load " + info.path + " was trained with the tokenizer " + path +
                                ", which cannot be read: " + e.what());
  }
  if (tokenizer->vocab_size() != config.vocab_size)
    throw std::invalid_argument("train.load " + info.path + ": its tokenizer " + path + " has " +
                                std::to_string(tokenizer->vocab_size()) + " pieces, the model " +
                                std::to_string(config.vocab_size));
  c.prompt = [tokenizer](const std::string& text) { return Prompt{text, tokenizer->encode(text), {}}; };
  c.detokenize = [tokenizer](const Prompt& prompt, const std::vector<std::int64_t>& tokens) {
    std::vector<std::int64_t> all = prompt.tokens;
    all.insert(all.end(), tokens.begin(), tokens.end());
    const std::string head = tokenizer->decode(prompt.tokens), whole = tokenizer->decode(all);
    return whole.compare(0, head.size(), head) == 0 ? whole.substr(head.size()) : tokenizer->decode(tokens);
  };
  return c;
}

}  // namespace hp::family
