#include "cli/generate_command.hpp"

#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/job.hpp"
#include "cli/option_flags.hpp"
#include "infer/decoder.hpp"
#include "infer/gpt_decode_model.hpp"
#include "schedule/generate.hpp"
#include "train/checkpoint.hpp"
#include "train/gpt_task.hpp"

namespace hp::cli {
namespace {

struct GenerateArgs {
  std::string load;
  std::string prompt;
  std::string prompts_file;
  infer::GenerateOptions options;
  bool no_kv_cache = false;
  int vpp = 1;
  JobOptions job = [] {
    JobOptions j;
    j.nproc = 1;
    return j;
  }();
};

const FlagNames& generate_flags() {
  static const FlagNames f = [] {
    FlagNames f = {{"generate.max_new_tokens", "--max-new-tokens"},
                   {"generate.prompts", "--prompt/--prompts"},
                   {"sampling.temperature", "--temperature"},
                   {"sampling.top_k", "--top-k"}};
    for (const auto& p : job_flags()) f.push_back(p);
    return f;
  }();
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
  if (a.prompt.empty() == a.prompts_file.empty())
    throw std::invalid_argument("give exactly one of --prompt TEXT and --prompts FILE (one prompt per line)");
  if (!a.prompt.empty()) return {a.prompt};
  std::ifstream in(a.prompts_file);
  if (!in) throw std::invalid_argument("--prompts " + a.prompts_file + ": cannot open the file");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  if (out.empty()) throw std::invalid_argument("--prompts " + a.prompts_file + ": the file holds no prompt");
  return out;
}

struct Job {
  model::TransformerConfig config;
  schedule::ScheduleOptions layout;
  std::vector<std::string> texts;
  std::vector<std::vector<std::int64_t>> prompts;
  infer::GenerateOptions options;
};

// Everything checked before any rank starts: the checkpoint's model, the
// layout, the prompts against the model.
Job resolve(const GenerateArgs& a, int world) {
  if (a.load.empty()) throw std::invalid_argument("--load DIR is required: the checkpoint to decode from");
  Job job;
  job.config = train::gpt_config_from_checkpoint(train::verify_checkpoint(a.load));
  job.texts = prompt_texts(a);
  for (const auto& t : job.texts) job.prompts.push_back(encode(t));
  job.options = a.options;
  job.options.kv_cache = !a.no_kv_cache;
  auto& l = job.layout;
  l.pp = world;
  l.vpp = a.vpp;
  l.kind = a.vpp > 1 ? schedule::ScheduleKind::Interleaved
                     : (world == 1 ? schedule::ScheduleKind::NoPipelining : schedule::ScheduleKind::OneFOneB);
  l.micro_batches = static_cast<int>(job.prompts.size());
  l.forward_only = true;
  if (a.vpp < 1) throw std::invalid_argument("--vpp must be >= 1, got " + std::to_string(a.vpp));
  schedule::check_options(l);
  infer::check_gpt_decode_layout(job.config, l);
  infer::check_generate(job.prompts, job.options, job.config.vocab_size, job.config.max_seq_len);
  return job;
}

int generate_rank(const GenerateArgs& a, comm::ProcessGroup* pg) {
  const int world = pg ? pg->world_size() : 1;
  const int rank = pg ? pg->rank() : 0;
  const Job job = resolve(a, world);
  infer::Decoder decoder(job.layout, rank, pg, infer::build_gpt_decode_model(job.config, job.layout, rank, 1));
  train::NamedParams params = decoder.named_parameters();
  train::restore_checkpoint(a.load, params, nullptr);
  const auto generated = decoder.generate(job.prompts, job.options);
  if (rank == 0)
    for (size_t p = 0; p < generated.size(); ++p) std::cout << job.texts[p] << decode(generated[p]) << std::endl;
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Decode text from a checkpoint through a forward-only pipeline");
  cmd->add_option("--config", "TOML file whose keys are these flags' names; later flags override it");
  auto* nproc = cmd->add_option("--nproc", a->job.nproc, "local ranks of the decoding pipeline (default 1)");
  cmd->add_option("--vpp", a->vpp, "model chunks per rank (> 1: interleaved)")->capture_default_str();
  cmd->add_option("--load", a->load, "checkpoint directory (any training layout)");
  cmd->add_option("--prompt", a->prompt, "the text to continue (byte tokens)");
  cmd->add_option("--prompts", a->prompts_file, "a file of prompts, one per line, decoded together as micro-batches");
  cmd->add_option("--max-new-tokens", a->options.max_new_tokens, "tokens to add to each prompt")->capture_default_str();
  cmd->add_option("--temperature", a->options.sampling.temperature, "0 = greedy; else sample softmax(logits / T)")
      ->capture_default_str();
  cmd->add_option("--top-k", a->options.sampling.top_k, "sample among the K likeliest tokens (0 = all)")
      ->capture_default_str();
  cmd->add_option("--seed", a->options.sampling.seed, "seed of the sampler")->capture_default_str();
  cmd->add_flag("--no-kv-cache", a->no_kv_cache, "recompute the whole prefix at every token (no KV cache)");
  cmd->add_option("--timeout", a->job.timeout_s, "seconds before a silent peer is declared dead")->capture_default_str();
  cmd->callback([a, exit_code, nproc] {
    a->job.nproc_given = nproc->count() > 0;
    *exit_code = run_job_reporting(
        "generate", generate_flags(), a->job, [a](int world) { resolve(*a, world); },
        [a](comm::ProcessGroup* pg) { return generate_rank(*a, pg); });
  });
}

}  // namespace hp::cli
