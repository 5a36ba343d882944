#include "train/weights_file.hpp"

#include <ATen/ATen.h>
#include <c10/util/StringUtil.h>
#include <caffe2/serialize/inline_container.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "train/checkpoint.hpp"
#include "train/durable_file.hpp"
#include "train/safetensors.hpp"

namespace hp::train {
namespace {

namespace fs = std::filesystem;

// LibTorch's dtypes and safetensors' names for them.
const std::vector<std::pair<at::ScalarType, const char*>>& dtype_names() {
  static const std::vector<std::pair<at::ScalarType, const char*>> kNames = {
      {at::kDouble, "F64"}, {at::kFloat, "F32"}, {at::kHalf, "F16"}, {at::kBFloat16, "BF16"}, {at::kLong, "I64"},
      {at::kInt, "I32"},    {at::kShort, "I16"}, {at::kChar, "I8"},  {at::kByte, "U8"},      {at::kBool, "BOOL"}};
  return kNames;
}

at::ScalarType dtype_of_checkpoint(const std::string& name, const std::string& path) {
  for (const auto& [type, _] : dtype_names())
    if (name == c10::toString(type)) return type;
  throw std::invalid_argument(path + ": a parameter of dtype " + name + ", which no weights file holds");
}

std::string bytes_of(const at::Tensor& t) {
  const at::Tensor c = t.detach().cpu().contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

// A torch file (pickle_save, torch.save) is a zip archive; anything else is read as safetensors.
bool is_zip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("train.init_from " + path + ": cannot open the file");
  char magic[2] = {0, 0};
  in.read(magic, 2);
  return magic[0] == 'P' && magic[1] == 'K';
}

std::vector<SafeTensor> read_safetensors_for(const std::string& path, bool with_data) {
  try {
    return read_safetensors(path, nullptr, with_data);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("train.init_from " + std::string(e.what()) +
                                "; give a file of hyperpipe checkpoint export (torch or safetensors)");
  }
}

}  // namespace

ExportReport export_weights(const std::string& checkpoint, const ExportOptions& o) {
  if (o.format != "torch" && o.format != "safetensors")
    throw std::invalid_argument("export.format " + o.format + ": allowed: torch, safetensors");
  if (o.output.empty()) throw std::invalid_argument("export.output: not given (the file to write)");
  const fs::path out(o.output);
  if (!out.parent_path().empty() && !fs::is_directory(out.parent_path()))
    throw std::invalid_argument("export.output " + o.output + ": the directory " + out.parent_path().string() +
                                " does not exist");
  const CheckpointInfo info = verify_checkpoint(checkpoint);
  NamedParams needed;
  for (const auto& e : info.params)
    needed[e.name] = at::empty(e.shape, at::TensorOptions().dtype(dtype_of_checkpoint(e.dtype, info.path)));
  const LoadedCheckpoint loaded = load_checkpoint(checkpoint, needed);

  ExportReport report;
  report.step = loaded.step;
  if (o.format == "torch") {
    c10::Dict<std::string, at::Tensor> dict;
    for (const auto& [name, t] : loaded.params) dict.insert(name, t.detach().cpu().contiguous());
    const std::vector<char> bytes = torch::jit::pickle_save(dict);
    write_text_atomic(out, std::string(bytes.begin(), bytes.end()));
  } else {
    std::vector<SafeTensor> tensors;
    for (const auto& [name, t] : loaded.params) {
      SafeTensor s;
      s.name = name;
      s.shape = t.sizes().vec();
      for (const auto& [type, text] : dtype_names())
        if (type == t.scalar_type()) s.dtype = text;
      s.data = bytes_of(t);
      tensors.push_back(std::move(s));
    }
    write_safetensors(o.output, tensors, {{"format", "pt"}, {"step", std::to_string(loaded.step)}});
  }
  for (const auto& [name, t] : loaded.params) {
    ++report.tensors;
    report.values += t.numel();
  }
  nlohmann::json config = loaded.metadata_json.empty() ? nlohmann::json::object() : nlohmann::json::parse(loaded.metadata_json);
  config["step"] = loaded.step;
  config["format"] = o.format;
  config["checkpoint"] = fs::absolute(info.path).string();
  report.config = fs::path(o.output).replace_extension(".json").string();
  write_text_atomic(report.config, config.dump(2) + "\n");
  return report;
}

NamedParams read_weights(const std::string& path) {
  const std::string where = "train.init_from " + path;
  NamedParams out;
  if (is_zip(path)) {
    const std::string text = read_text(path);
    c10::IValue value;
    try {
      value = torch::jit::pickle_load(std::vector<char>(text.begin(), text.end()));
    } catch (const std::exception& e) {
      throw std::invalid_argument(where + ": a zip file that torch cannot load (" +
                                  std::string(e.what()).substr(0, std::string(e.what()).find('\n')) + ")");
    }
    if (!value.isGenericDict()) throw std::invalid_argument(where + ": the torch file holds no dict of tensors");
    for (const auto& item : value.toGenericDict()) {
      if (!item.key().isString() || !item.value().isTensor())
        throw std::invalid_argument(where + ": the torch file's dict is not {name: tensor}");
      out[item.key().toStringRef()] = item.value().toTensor();
    }
    return out;
  }
  for (auto& s : read_safetensors_for(path, /*with_data=*/true)) {
    at::ScalarType type = at::kFloat;
    for (const auto& [t, text] : dtype_names())
      if (s.dtype == text) type = t;
    at::Tensor t = at::empty(s.shape, at::TensorOptions().dtype(type));
    std::memcpy(t.data_ptr(), s.data.data(), s.data.size());
    out[s.name] = t;
  }
  return out;
}

void check_weights_file(const std::string& path) {
  if (!is_zip(path)) {
    read_safetensors_for(path, /*with_data=*/false);
    return;
  }
  // torch's archive: its zip directory and the pickle's record, without
  // unpickling the tensors, which each rank then reads once.
  try {
    caffe2::serialize::PyTorchStreamReader archive(path);
    if (!archive.hasRecord("data.pkl"))
      throw std::invalid_argument("train.init_from " + path + ": a zip file without a torch pickle (data.pkl)");
  } catch (const c10::Error& e) {
    const std::string why = e.what_without_backtrace();
    throw std::invalid_argument("train.init_from " + path + ": a zip file that torch cannot load (" +
                                why.substr(0, why.find('\n')) + ")");
  }
}

void init_from_weights(const std::string& path, const NamedParams& params, const runtime::TensorShards& shards,
                       int tp_rank, int tp_size) {
  const NamedParams file = read_weights(path);
  NamedParams values;
  for (const auto& [name, whole] : unsharded_like(params, shards, tp_size)) {
    const auto it = file.find(name);
    if (it == file.end())
      throw std::invalid_argument("train.init_from " + path + " has no parameter " + name + " (it holds " +
                                  std::to_string(file.size()) + "; export it from a checkpoint of this model)");
    if (!it->second.sizes().equals(whole.sizes()))
      throw std::invalid_argument("train.init_from " + path + ": parameter " + name + " has shape " +
                                  c10::str(it->second.sizes()) + " in the file but " + c10::str(whole.sizes()) +
                                  " in this model");
    const auto shard = shards.find(name);
    values[name] = shard == shards.end() ? it->second : runtime::shard_of(it->second, shard->second, tp_rank, tp_size);
  }
  at::NoGradGuard no_grad;
  for (const auto& [name, p] : params) p.detach().copy_(values.at(name));
}

}  // namespace hp::train
