#include "cli/generate_command.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <iostream>

#include "cli/job.hpp"
#include "cli/option_flags.hpp"
#include "cli/option_schema.hpp"
#include "family/model_family.hpp"
#include "infer/decode_model.hpp"
#include "infer/decoder.hpp"
#include "schedule/generate.hpp"
#include "train/checkpoint.hpp"

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
  family::CheckpointModel model;  // the checkpoint's family's, ready to decode
  schedule::ScheduleOptions layout;
  std::vector<family::Prompt> prompts;
  std::vector<std::vector<std::int64_t>> tokens;  // each prompt's, what the decoder continues
  infer::GenerateOptions options;
};

// The prompts a family decodes: text for a language model, each --image for
// one that captions images.
std::vector<family::Prompt> read_prompts(const GenerateArgs& a, const family::CheckpointModel& model,
                                         const std::string& title) {
  std::vector<family::Prompt> out;
  if (model.captions_images) {
    const std::string holds = "--load " + a.values.load + " holds a " + title + " model";
    if (!a.values.prompt.empty() || !a.values.prompts_file.empty())
      throw std::invalid_argument(holds + ", which captions images: give --image N (a held-out synthetic image) or "
                                          "--image FILE.ppm, not --prompt/--prompts");
    if (a.values.images.empty())
      throw std::invalid_argument(holds + ": give --image N (a held-out synthetic image) or --image FILE.ppm, once per "
                                          "image to caption");
    for (const auto& image : a.values.images) out.push_back(model.prompt(image));
    return out;
  }
  if (!a.values.images.empty())
    throw std::invalid_argument("--image: --load " + a.values.load + " holds a language model, which continues text; "
                                "give --prompt TEXT or --prompts FILE");
  for (const auto& text : prompt_texts(a)) out.push_back(model.prompt(text));
  return out;
}

// Everything checked before any rank starts: the checkpoint's model, the
// layout, the prompts against the model.
GenerateJob resolve(const GenerateArgs& a, int world) {
  if (a.values.load.empty()) throw std::invalid_argument("--load DIR is required: the checkpoint to decode from");
  GenerateJob job;
  const train::CheckpointInfo info = train::verify_checkpoint(a.values.load);
  const std::string name =
      nlohmann::json::parse(info.metadata_json.empty() ? "{}" : info.metadata_json).value("model", "gpt");
  const family::ModelFamily& family = family::find_family(name);
  if (!family.from_checkpoint)
    throw std::invalid_argument("--load " + a.values.load + " holds a " + family.title +
                                " model, which generate cannot decode");
  job.model = family.from_checkpoint(info);
  job.prompts = read_prompts(a, job.model, family.title);
  job.options = a.options;
  job.options.kv_cache = !a.values.no_kv_cache;
  if (job.model.default_new_tokens > 0 && !a.flags.given(a.options.max_new_tokens))
    job.options.max_new_tokens = job.model.default_new_tokens;
  auto& l = job.layout;
  l.pp = world;
  l.vpp = a.layout.vpp;
  l.kind = a.layout.vpp > 1 ? schedule::ScheduleKind::Interleaved
                     : (world == 1 ? schedule::ScheduleKind::NoPipelining : schedule::ScheduleKind::OneFOneB);
  l.micro_batches = static_cast<int>(job.prompts.size());
  l.forward_only = true;
  schedule::check_options(l);
  job.model.check_layout(l);
  for (const auto& p : job.prompts) job.tokens.push_back(p.tokens);
  infer::check_generate(job.tokens, job.options, job.model.config.vocab_size,
                        job.model.config.max_seq_len - job.model.prefix_positions);
  return job;
}

int generate_rank(const GenerateArgs& a, comm::ProcessGroup* pg) {
  const int world = pg ? pg->world_size() : 1;
  const int rank = pg ? pg->rank() : 0;
  const GenerateJob job = resolve(a, world);
  infer::Decoder decoder(job.layout, rank, pg, job.model.build(job.layout, rank, job.prompts));
  train::NamedParams params = decoder.named_parameters();
  train::restore_checkpoint(a.values.load, params, nullptr);
  const auto generated = decoder.generate(job.tokens, job.options);
  if (rank != 0) return 0;
  for (size_t p = 0; p < generated.size(); ++p)
    std::cout << job.prompts[p].name << (job.model.captions_images ? ": " : "") << job.model.detokenize(job.prompts[p], generated[p])
              << std::endl;
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Decode text from a checkpoint through a forward-only pipeline");
  a->flags = add_schema_options(cmd, kGenerate, a->roots());
  cmd->callback([a, exit_code] {
    a->job.nproc_given = a->flags.given(a->job.nproc);
    *exit_code = run_job_reporting(
        "generate", generate_flags(), a->job, [a](int world) { resolve(*a, world); },
        [a](comm::ProcessGroup* pg) { return generate_rank(*a, pg); });
  });
}

}  // namespace hp::cli
