#include "cli/checkpoint_command.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <memory>

#include "cli/option_schema.hpp"
#include "train/checkpoint.hpp"
#include "train/weights_file.hpp"

namespace hp::cli {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// read_checkpoint_info, or with every shard verified (sizes and CRC-32, as --load does).
train::CheckpointInfo read_info(const std::string& dir, bool verify) {
  try {
    return verify ? train::verify_checkpoint(dir) : train::read_checkpoint_info(dir);
  } catch (const std::invalid_argument& e) {
    // The loader names its option, train.load; here the directory is the argument.
    std::string what = e.what();
    if (what.rfind("train.load ", 0) == 0) what = what.substr(11);
    throw std::invalid_argument(what);
  }
}

// Lists what meta.json records, then checks every shard: a damaged one is
// named (std::invalid_argument) after the listing, as --load would refuse it.
void list(const std::string& dir) {
  const train::CheckpointInfo info = read_info(dir, false);
  std::int64_t numel = 0;
  size_t width = 4;
  for (const auto& p : info.params) {
    std::int64_t n = 1;
    for (auto d : p.shape) n *= d;
    numel += n;
    width = std::max(width, p.name.size());
  }
  std::cout << info.path << ": step " << info.step << ", saved by " << info.world_size << " rank(s), "
            << info.params.size() << " parameters, " << numel << " values\n";
  if (!info.metadata_json.empty()) std::cout << "model " << info.metadata_json << "\n";
  std::cout << std::left << std::setw(static_cast<int>(width) + 2) << "name" << std::setw(18) << "shape"
            << std::setw(10) << "dtype" << std::setw(7) << "shard" << "optimizer\n";
  for (const auto& p : info.params)
    std::cout << std::left << std::setw(static_cast<int>(width) + 2) << p.name << std::setw(18) << shape_text(p.shape)
              << std::setw(10) << p.dtype << std::setw(7) << p.shard << (p.optimizer_state ? "adamw" : "-") << "\n";
  std::cout << std::flush;
  read_info(dir, true);
  std::cout << "every shard present, of its recorded size and CRC-32\n";
}

}  // namespace

void add_checkpoint_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("checkpoint", "Inspect checkpoints");
  cmd->require_subcommand(1);
  auto dir = std::make_shared<std::string>();
  auto* ls = cmd->add_subcommand("ls", "List a checkpoint's parameters (global names, shapes, dtypes)");
  ls->add_option("DIR", *dir, "a --save directory (its latest step) or one step-N directory")->required();
  ls->callback([dir, exit_code] {
    try {
      list(*dir);
    } catch (const std::exception& e) {
      std::cerr << "hyperpipe checkpoint ls: error: " << e.what() << "\n";
      *exit_code = 2;
    }
  });
  auto* ex = cmd->add_subcommand("export", "Write a checkpoint's whole model (global names, any layout or mesh) as one "
                                           "torch or safetensors file that PyTorch loads");
  auto opts = std::make_shared<train::ExportOptions>();
  ex->add_option("DIR", *dir, "a --save directory (its latest step) or one step-N directory")->required();
  OptionRoots roots;
  roots.exporting = opts.get();
  add_schema_options(ex, kCheckpoint, roots);
  ex->callback([dir, opts, exit_code] {
    try {
      const train::ExportReport r = train::export_weights(*dir, *opts);
      std::cout << "hyperpipe checkpoint export: wrote " << opts->output << " (" << opts->format << ", step " << r.step
                << ", " << r.tensors << " tensors, " << r.values << " values) and " << r.config << std::endl;
    } catch (const std::exception& e) {
      std::string what = e.what();
      if (what.rfind("train.load ", 0) == 0) what = what.substr(11);  // the directory is the argument here
      std::cerr << "hyperpipe checkpoint export: error: " << with_flags(what, schema_flags(kCheckpoint)) << "\n";
      *exit_code = 2;
    }
  });
}

}  // namespace hp::cli
