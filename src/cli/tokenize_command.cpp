#include "cli/tokenize_command.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/option_schema.hpp"
#include "data/tokenize.hpp"

namespace hp::cli {
namespace {

std::string rate(double bytes, double seconds) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f MB in %.1f s, %.2f MB/s", bytes / 1e6, seconds,
                seconds > 0 ? bytes / 1e6 / seconds : 0.0);
  return text;
}

}  // namespace

void add_tokenize_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand(
      "tokenize", "Turn text or JSON lines into a Megatron indexed dataset (train --data PREFIX), with a SentencePiece "
                  "model given or trained on the input");
  auto opts = std::make_shared<data::TokenizeOptions>();
  OptionRoots roots;
  roots.tokenize = opts.get();
  add_schema_options(cmd, kTokenize, roots);
  cmd->callback([opts, exit_code] {
    try {
      const auto report = data::tokenize(*opts, [](const data::TokenizeProgress& p) {
        std::cerr << "tokenize: " << p.documents << " documents, " << p.tokens << " tokens, "
                  << rate(static_cast<double>(p.bytes), p.seconds) << std::endl;
      });
      const auto& d = report.done;
      std::cout << "hyperpipe tokenize: wrote " << opts->output_prefix << ".bin and .idx: " << d.documents
                << " documents, " << d.tokens << " tokens (" << report.dtype << ", vocabulary " << report.vocab_size
                << " of " << report.tokenizer_model << "); " << rate(static_cast<double>(d.bytes), d.seconds)
                << std::endl;
      *exit_code = 0;
    } catch (const std::exception& e) {
      std::cerr << "hyperpipe tokenize: error: " << with_flags(e.what(), schema_flags(kTokenize)) << "\n";
      *exit_code = 2;
    }
  });
}

}  // namespace hp::cli
