#include "cli/generate_command.hpp"

#include <ATen/ATen.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "cli/job.hpp"
#include "cli/option_flags.hpp"
#include "cli/option_schema.hpp"
#include "data/ppm_image.hpp"
#include "data/vl_data.hpp"
#include "infer/decoder.hpp"
#include "infer/gpt_decode_model.hpp"
#include "infer/hybrid_decode_model.hpp"
#include "infer/vl_decode_model.hpp"
#include "model/layers.hpp"
#include "schedule/generate.hpp"
#include "train/checkpoint.hpp"
#include "train/gpt_task.hpp"
#include "train/hybrid_task.hpp"
#include "train/task.hpp"
#include "train/vl_task.hpp"

namespace hp::cli {
namespace {

// What generate reads from the command line (option_schema.hpp).
struct GenerateArgs {
  CommandValues values;
  infer::GenerateOptions options;
  schedule::ScheduleOptions layout;  // --vpp
  JobOptions job = [] {
    JobOptions j;
    j.nproc = 1;  // one process decodes; more pipeline the model
    return j;
  }();
  RegisteredFlags flags;

  OptionRoots roots() {
    OptionRoots r;
    r.values = &values;
    r.generate = &options;
    r.schedule = &layout;
    r.job = &job;
    return r;
  }
};

// Error lines: generate's flags, the decoder's name for the prompts, and the
// checkpoint's model described by the train flags that made it ("a model of
// --mhc-streams 4").
FlagNames generate_flags() {
  FlagNames f = schema_flags(kGenerate);
  f.emplace_back("generate.prompts", "--prompt/--prompts");
  for (const auto& [name, flag] : schema_flags(kTrain))
    if (std::none_of(f.begin(), f.end(), [&](const auto& p) { return p.first == name; })) f.emplace_back(name, flag);
  longest_first(f);
  return f;
}

// Byte tokens, as the embedded corpus and text data are tokenized.
std::vector<std::int64_t> encode(const std::string& text) {
  std::vector<std::int64_t> ids;
  for (unsigned char c : text) ids.push_back(c);
  return ids;
}

std::string decode(const std::vector<std::int64_t>& ids) {
  std::string out;
  for (std::int64_t id : ids) {
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

std::vector<std::string> prompt_texts(const GenerateArgs& a) {
  if (a.values.prompt.empty() == a.values.prompts_file.empty())
    throw std::invalid_argument("give exactly one of --prompt TEXT and --prompts FILE (one prompt per line)");
  if (!a.values.prompt.empty()) return {a.values.prompt};
  std::ifstream in(a.values.prompts_file);
  if (!in) throw std::invalid_argument("--prompts " + a.values.prompts_file + ": cannot open the file");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  if (out.empty()) throw std::invalid_argument("--prompts " + a.values.prompts_file + ": the file holds no prompt");
  return out;
}

struct GenerateJob {
  model::TransformerConfig config;
  std::optional<model::VLStagesOptions> vl;  // a VL checkpoint: captions of images
  std::optional<model::HybridConfig> hybrid;  // a Hybrid checkpoint
  schedule::ScheduleOptions layout;
  std::vector<std::string> texts;  // the prompts, or the images' names
  std::vector<std::vector<std::int64_t>> prompts;
  std::vector<std::vector<float>> images;  // VL: [3, S, S] per prompt
  infer::GenerateOptions options;
};

// VL: each --image is a held-out sample's index or a PPM file; its prompt is <bos>.
void resolve_images(const GenerateArgs& a, GenerateJob& job) {
  if (!a.values.prompt.empty() || !a.values.prompts_file.empty())
    throw std::invalid_argument("--load " + a.values.load + " holds a VL model, which captions images: give --image N "
                                "(a held-out synthetic image) or --image FILE.ppm, not --prompt/--prompts");
  if (a.values.images.empty())
    throw std::invalid_argument("--load " + a.values.load + " holds a VL model: give --image N (a held-out synthetic image) "
                                "or --image FILE.ppm, once per image to caption");
  const int size = job.vl->vision.image_size;
  // The held-out stream of the checkpoint's --seed: images its training never read.
  const std::uint64_t held_out = job.vl->text.config.seed ^ train::kHeldOutSeedMix;
  for (const auto& image : a.values.images) {
    if (!image.empty() && image.find_first_not_of("0123456789") == std::string::npos && image.size() < 16) {
      const auto index = std::stoll(image);
      const data::VLBatch b = data::make_vl_batch(size, 1, held_out, index);
      job.images.push_back(b.images);
      job.texts.push_back("image " + image + " (drawn: " + data::caption_text(b.captions.data(), data::kVLCaptionTokens) +
                          ")");
    } else {
      try {
        job.images.push_back(data::read_ppm(image, size));
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string("--image ") + e.what());
      }
      job.texts.push_back(image);
    }
    job.prompts.push_back({data::kVLBos});
  }
  // A caption's words, unless asked otherwise: what the positions after the patches hold.
  if (!a.flags.given("--max-new-tokens")) job.options.max_new_tokens = data::kVLCaptionTokens - 2;
}

// Everything checked before any rank starts: the checkpoint's model, the
// layout, the prompts against the model.
GenerateJob resolve(const GenerateArgs& a, int world) {
  if (a.values.load.empty()) throw std::invalid_argument("--load DIR is required: the checkpoint to decode from");
  GenerateJob job;
  const train::CheckpointInfo info = train::verify_checkpoint(a.values.load);
  job.options = a.options;
  job.options.kv_cache = !a.values.no_kv_cache;
  const std::string model = nlohmann::json::parse(info.metadata_json.empty() ? "{}" : info.metadata_json).value("model", "");
  if (model == "vl") {
    job.vl = train::vl_options_from_checkpoint(info);
    job.config = job.vl->text.config;
    resolve_images(a, job);
  } else {
    if (!a.values.images.empty())
      throw std::invalid_argument("--image: --load " + a.values.load + " holds a language model, which continues text; "
                                  "give --prompt TEXT or --prompts FILE");
    if (model == "hybrid") job.hybrid = train::hybrid_config_from_checkpoint(info);
    job.config = job.hybrid ? job.hybrid->base : train::gpt_config_from_checkpoint(info);
    job.texts = prompt_texts(a);
    for (const auto& t : job.texts) job.prompts.push_back(encode(t));
  }
  auto& l = job.layout;
  l.pp = world;
  l.vpp = a.layout.vpp;
  l.kind = a.layout.vpp > 1 ? schedule::ScheduleKind::Interleaved
                     : (world == 1 ? schedule::ScheduleKind::NoPipelining : schedule::ScheduleKind::OneFOneB);
  l.micro_batches = static_cast<int>(job.prompts.size());
  l.forward_only = true;
  if (a.layout.vpp < 1) throw std::invalid_argument("--vpp must be >= 1, got " + std::to_string(a.layout.vpp));
  schedule::check_options(l);
  if (job.hybrid)
    infer::check_hybrid_decode_layout(*job.hybrid, l);
  else
    infer::check_gpt_decode_layout(job.config, l);
  const std::int64_t patches = job.vl ? job.vl->vision.num_patches() : 0;
  infer::check_generate(job.prompts, job.options, job.config.vocab_size, job.config.max_seq_len - patches);
  return job;
}

int generate_rank(const GenerateArgs& a, comm::ProcessGroup* pg) {
  const int world = pg ? pg->world_size() : 1;
  const int rank = pg ? pg->rank() : 0;
  const GenerateJob job = resolve(a, world);
  infer::DecodeModel model;
  if (job.vl) {
    const int s = job.vl->vision.image_size;
    std::vector<at::Tensor> images;
    for (const auto& pixels : job.images)
      images.push_back(at::tensor(pixels, at::kFloat)
                           .view({1, data::kVLChannels, s, s})
                           .to(model::to_scalar_type(job.config.dtype)));
    model = infer::build_vl_decode_model(*job.vl, job.layout, rank, std::move(images));
  } else if (job.hybrid) {
    model = infer::build_hybrid_decode_model(*job.hybrid, job.layout, rank, 1);
  } else {
    model = infer::build_gpt_decode_model(job.config, job.layout, rank, 1);
  }
  infer::Decoder decoder(job.layout, rank, pg, std::move(model));
  train::NamedParams params = decoder.named_parameters();
  train::restore_checkpoint(a.values.load, params, nullptr);
  const auto generated = decoder.generate(job.prompts, job.options);
  if (rank != 0) return 0;
  for (size_t p = 0; p < generated.size(); ++p) {
    if (!job.vl) {
      std::cout << job.texts[p] << decode(generated[p]) << std::endl;
      continue;
    }
    const auto& ids = generated[p];
    const auto eos = std::find(ids.begin(), ids.end(), data::kVLEos);  // ends a caption
    std::cout << job.texts[p] << ": " << data::caption_text(ids.data(), static_cast<int>(eos - ids.begin()))
              << std::endl;
  }
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Decode text from a checkpoint through a forward-only pipeline");
  a->flags = add_schema_options(cmd, kGenerate, a->roots());
  cmd->callback([a, exit_code] {
    a->job.nproc_given = a->flags.given("--nproc");
    *exit_code = run_job_reporting(
        "generate", generate_flags(), a->job, [a](int world) { resolve(*a, world); },
        [a](comm::ProcessGroup* pg) { return generate_rank(*a, pg); });
  });
}

}  // namespace hp::cli
