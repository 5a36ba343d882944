// ModelFamily: what the commands know of a model family, registered once
// under the name `model.family` takes. train, verify and bench build its
// Task; train's owner choice and bench's advisor check read its profile;
// generate reads a checkpoint of it back into a decode model.
//
// Adding a family is one register_family() call before the command line is
// parsed (tests/family/family_worker.cpp registers one and runs the CLI).
//
// Contract: the built-in families (gpt, hybrid, vl) are registered from the
// start; register_family is for main() before any command runs, not for
// threads. find_family and family_names only read.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/transformer_config.hpp"
#include "schedule/advise.hpp"

namespace hp::model {
struct VisionConfig;
struct HybridConfig;
}  // namespace hp::model
namespace hp::train {
class Task;
struct LmDataOptions;
struct CheckpointInfo;
}  // namespace hp::train
namespace hp::infer {
struct DecodeModel;
}

namespace hp::family {

// The model's options as a command parsed them: one set for every family;
// each reads its own and refuses those it cannot honour (in one line naming
// the option). The pointers are never null and outlive the call.
struct FamilyOptions {
  model::TransformerConfig model;     // dtype and emulation set
  std::vector<int> layers_per_stage;  // model.layers_per_stage; empty: even split
  const train::LmDataOptions* data = nullptr;
  const model::VisionConfig* vision = nullptr;
  const model::HybridConfig* hybrid = nullptr;
};

// One prompt of a decode: a text's tokens, or an image to caption.
struct Prompt {
  std::string name;                  // as generate prints it before the output
  std::vector<std::int64_t> tokens;  // what the decoder continues
  std::vector<float> pixels;         // captioning families: [3, S, S]
};

// A checkpoint of the family, ready to decode (infer/decoder.hpp).
struct CheckpointModel {
  model::TransformerConfig config;  // the text body: vocabulary, positions, dtype
  // Captioning families take images (each generate --image value), language
  // models text (each --prompt line); `prompt` turns one value into a Prompt
  // or throws std::invalid_argument naming the value.
  bool captions_images = false;
  std::function<Prompt(const std::string& value)> prompt;
  std::int64_t default_new_tokens = 0;  // 0: generate's own default
  std::int64_t prefix_positions = 0;    // positions a prompt's tokens cannot use (image patches)
  // Throws std::invalid_argument where the model cannot decode in `layout`.
  std::function<void(const schedule::ScheduleOptions& layout)> check_layout;
  // This rank's stages of the decode model for `prompts` (one micro each).
  std::function<infer::DecodeModel(const schedule::ScheduleOptions& layout, int rank,
                                   const std::vector<Prompt>& prompts)>
      build;
  // Generated tokens as the text that continues `prompt` (a tokenizer that
  // drops a word's leading space at the start of a text keeps it here).
  std::function<std::string(const Prompt& prompt, const std::vector<std::int64_t>& tokens)> detokenize;
};

struct ModelFamily {
  std::string name;   // model.family's value
  std::string title;  // in messages: "a VL model" (the name where empty)
  std::string help;  // one line for --help
  // The family's Task for train, verify and bench; throws
  // std::invalid_argument naming the option at fault.
  std::function<std::unique_ptr<train::Task>(const FamilyOptions&)> make_task;
  // Its layers as the advisor and MPipe's owner choice see them, each at the
  // emulated cost (model.emulate: forward 1 and backward 2 where none is set).
  std::function<schedule::ModelProfile(const FamilyOptions&)> profile;
  // Null for a family generate cannot decode; `info` is a checkpoint whose
  // metadata names this family.
  std::function<CheckpointModel(const train::CheckpointInfo& info)> from_checkpoint;
};

// Adds or replaces the family of that name.
void register_family(ModelFamily family);
// Throws std::invalid_argument "model.family NAME: allowed: gpt, hybrid, vl".
const ModelFamily& find_family(const std::string& name);
std::vector<std::string> family_names();

// The layer counts of a profile at the emulated costs: every text layer and
// tower block forward F and backward B (1 and 2 without emulation).
schedule::ModelProfile emulated_profile(const model::EmulatedLayer& emulate, int layers, int tower_layers = 0);

// Byte tokens, as the embedded corpus and text data are tokenized, and back
// (unprintable bytes escaped).
std::vector<std::int64_t> byte_tokens(const std::string& text);
std::string byte_text(const std::vector<std::int64_t>& tokens);
// A language model's CheckpointModel of `config`: its prompts and
// detokenizer set, on the SentencePiece model the checkpoint's metadata
// records ("tokenizer-model", train --tokenizer-model) or else on byte
// tokens; the family sets check_layout and build. Throws
// std::invalid_argument naming the checkpoint when the recorded tokenizer
// cannot be read.
CheckpointModel language_model(const model::TransformerConfig& config, const train::CheckpointInfo& info);

}  // namespace hp::family
