#include "train/checkpoint.hpp"

#include <ATen/ATen.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <stdexcept>

#include "train/checkpoint_dir.hpp"
#include "train/checkpoint_error.hpp"
#include "train/checkpoint_meta.hpp"
#include "train/durable_file.hpp"

namespace hp::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string shape_str(at::IntArrayRef s) { return cat(s); }
std::string shape_str(const std::vector<std::int64_t>& s) { return cat(at::IntArrayRef(s)); }

std::string shard_name(int rank) { return "rank-" + std::to_string(rank) + ".pt"; }
std::string manifest_name(int rank) { return "rank-" + std::to_string(rank) + ".json"; }

bool is_reserved(const std::string& name) {
  return name.rfind("adam.", 0) == 0 || name.rfind("checkpoint.", 0) == 0;
}

at::Tensor scalar_i64(std::int64_t v) { return at::scalar_tensor(static_cast<double>(v), at::kLong); }

// A tensor the archive can store compactly on the CPU (a view would drag its whole storage).
at::Tensor storable(const at::Tensor& t) {
  at::Tensor c = t.detach().to(at::kCPU).contiguous();
  if (c.storage_offset() != 0 || c.storage().nbytes() != c.nbytes()) c = c.clone();
  return c;
}

json parse_metadata(const std::string& text, const std::string& dir) {
  if (text.empty()) return nullptr;
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    bad_save(dir, cat("the checkpoint metadata is not valid JSON (", e.what(), ")"));
  }
}

void check_common(const std::string& dir, std::int64_t step, int world_size) {
  if (dir.empty()) throw std::invalid_argument("train.save: a checkpoint directory is required");
  if (step < 0) bad_save(dir, cat("the step must be >= 0, got ", step));
  if (world_size < 1) bad_save(dir, cat("world_size must be >= 1, got ", world_size));
}

// "layers.<k>." names: one past the largest k, 0 when there are none.
std::int64_t count_layers(const json& params) {
  static const std::regex re(R"(^layers\.([0-9]+)\.)");
  std::int64_t n = 0;
  for (auto it = params.begin(); it != params.end(); ++it) {
    std::smatch m;
    const std::string& key = it.key();
    if (std::regex_search(key, m, re)) n = std::max<std::int64_t>(n, std::stoll(m[1].str()) + 1);
  }
  return n;
}

}  // namespace

void write_checkpoint_shard(const std::string& dir, std::int64_t step, int rank, int world_size,
                            const NamedParams& params, const AdamWState& optimizer) {
  check_common(dir, step, world_size);
  if (rank < 0 || rank >= world_size) bad_save(dir, cat("rank ", rank, " is not in [0, ", world_size, ")"));
  for (const auto& [name, p] : params) {
    if (!p.defined()) bad_save(dir, "parameter " + name + " is an undefined tensor");
    if (is_reserved(name)) bad_save(dir, "parameter name " + name + " uses a reserved prefix (adam., checkpoint.)");
  }
  for (const auto& [name, st] : optimizer.params) {
    auto it = params.find(name);
    if (it == params.end()) bad_save(dir, "optimizer state for " + name + ", which is not a parameter of this rank");
    if (!st.exp_avg.defined() || !st.exp_avg_sq.defined())
      bad_save(dir, "optimizer state for " + name + " lacks exp_avg or exp_avg_sq");
    if (!st.exp_avg.sizes().equals(it->second.sizes()) || !st.exp_avg_sq.sizes().equals(it->second.sizes()))
      bad_save(dir, "optimizer state for " + name + " does not have the parameter's shape " +
                        shape_str(it->second.sizes()));
  }

  const fs::path tmp_dir = fs::path(dir) / (step_name(step) + ".tmp");
  const fs::path shard = tmp_dir / shard_name(rank);
  const fs::path manifest_path = tmp_dir / manifest_name(rank);
  try {
    std::error_code ec;
    fs::create_directories(tmp_dir, ec);
    if (ec) throw std::runtime_error(cat("cannot create ", tmp_dir.string(), ": ", ec.message()));
    torch::serialize::OutputArchive archive;
    json manifest;
    manifest["step"] = step;
    manifest["rank"] = rank;
    manifest["world_size"] = world_size;
    manifest["adam_step"] = optimizer.step;
    json entries = json::object();
    for (const auto& [name, p] : params) {
      archive.write(name, storable(p));
      json e;
      e["shape"] = std::vector<std::int64_t>(p.sizes().begin(), p.sizes().end());
      e["dtype"] = std::string(c10::toString(p.scalar_type()));
      auto st = optimizer.params.find(name);
      e["adam_state"] = st != optimizer.params.end();
      if (st != optimizer.params.end()) {
        archive.write("adam.exp_avg." + name, storable(st->second.exp_avg));
        archive.write("adam.exp_avg_sq." + name, storable(st->second.exp_avg_sq));
        archive.write("adam.step." + name, scalar_i64(st->second.step));
      }
      entries[name] = std::move(e);
    }
    manifest["params"] = std::move(entries);
    archive.write("adam.step", scalar_i64(optimizer.step));
    archive.write("checkpoint.step", scalar_i64(step));
    archive.write("checkpoint.rank", scalar_i64(rank));
    archive.write("checkpoint.world_size", scalar_i64(world_size));

    // Serialized in memory first: the CRC-32 goes into the manifest, and the file is written by
    // write_file, whose errors name the file and the bytes.
    std::string bytes;
    archive.save_to([&bytes](const void* data, std::size_t n) {
      bytes.append(static_cast<const char*>(data), n);
      return n;
    });
    manifest["file_bytes"] = bytes.size();
    manifest["file_crc32"] = crc_hex(crc32_of(bytes));
    write_text_atomic(shard, bytes);
    write_text_atomic(manifest_path, manifest.dump(1));
    fsync_path(tmp_dir, true);
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& e) {
    // Nothing of this rank's attempt stays behind (a retry or the next save would clean it too).
    std::error_code ec;
    for (const fs::path& p : {shard, tmp_sibling(shard), manifest_path, tmp_sibling(manifest_path)}) fs::remove(p, ec);
    throw std::runtime_error(cat("train.save ", dir, ": writing shard ", rank, " of step ", step, " failed: ", first_line(e)));
  }
}

void finalize_checkpoint(const std::string& dir, std::int64_t step, int world_size,
                         const std::string& metadata_json) {
  check_common(dir, step, world_size);
  const json metadata = parse_metadata(metadata_json, dir);
  const fs::path root(dir);
  const fs::path tmp_dir = root / (step_name(step) + ".tmp");
  const fs::path final_dir = root / step_name(step);
  try {
    json meta;
    meta["format"] = kCheckpointFormat;
    meta["version"] = kCheckpointVersion;
    meta["step"] = step;
    meta["world_size"] = world_size;
    json shards = json::array();
    json params = json::object();
    json files = json::object();
    std::int64_t adam_step = 0;
    for (int r = 0; r < world_size; ++r) {
      const fs::path shard = tmp_dir / shard_name(r);
      const fs::path manifest_path = tmp_dir / manifest_name(r);
      if (!fs::exists(shard) || !fs::exists(manifest_path))
        throw std::runtime_error(cat("shard ", r, " of ", world_size, " is missing in ", tmp_dir.string(),
                                     " (every rank must write its shard before rank 0 finalizes)"));
      const json m = json::parse(read_text(manifest_path));
      if (m.at("step").get<std::int64_t>() != step || m.at("rank").get<int>() != r ||
          m.at("world_size").get<int>() != world_size)
        throw std::runtime_error(cat(manifest_path.string(), " belongs to step ", m.at("step").dump(), " rank ",
                                     m.at("rank").dump(), " of ", m.at("world_size").dump(), ", not step ", step,
                                     " rank ", r, " of ", world_size));
      if (r == 0) adam_step = m.at("adam_step").get<std::int64_t>();
      if (!m.contains("file_bytes") || !m.contains("file_crc32"))
        throw std::runtime_error(cat(manifest_path.string(), " lacks the shard's size and checksum"));
      files[shard_name(r)] = json{{"bytes", m.at("file_bytes")}, {"crc32", m.at("file_crc32")}};
      for (auto it = m.at("params").begin(); it != m.at("params").end(); ++it) {
        auto prev = params.find(it.key());
        if (prev != params.end()) {  // a copy held by several ranks: keep the lowest rank's
          if ((*prev)["shape"] != (*it)["shape"])
            throw std::runtime_error(cat("parameter ", it.key(), " has shape ", (*prev)["shape"].dump(), " in shard ",
                                         (*prev)["shard"].dump(), " but ", (*it)["shape"].dump(), " in shard ", r));
          continue;
        }
        json e = *it;
        e["shard"] = r;
        params[it.key()] = std::move(e);
      }
      shards.push_back(shard_name(r));
    }
    meta["shards"] = std::move(shards);
    meta["optimizer_step"] = adam_step;
    meta["metadata"] = metadata;
    meta["params"] = std::move(params);
    meta["files"] = std::move(files);
    meta["checksum"] = meta_checksum(meta);
    write_text_atomic(tmp_dir / "meta.json", meta.dump(1));

    // Leftovers of an earlier interrupted save of this step (partial files, more ranks).
    for (const auto& entry : fs::directory_iterator(tmp_dir)) {
      const std::string n = entry.path().filename().string();
      bool keep = n == "meta.json";
      for (int r = 0; r < world_size && !keep; ++r) keep = n == shard_name(r) || n == manifest_name(r);
      if (!keep) fs::remove_all(entry.path());
    }
    fsync_path(tmp_dir, true);

    install_dir(tmp_dir, final_dir);
    fsync_path(root, true);
    write_text_atomic(root / "latest", step_name(step) + "\n");
    fsync_path(root, true);

    remove_stale_dirs(root);
  } catch (const std::exception& e) {
    throw std::runtime_error(cat("train.save ", dir, ": finalizing step ", step, " failed: ", first_line(e)));
  }
}

void save_checkpoint(const std::string& dir, std::int64_t step, int rank, int world_size,
                     const NamedParams& params, const AdamWState& optimizer,
                     const std::string& metadata_json, const Barrier& barrier) {
  check_common(dir, step, world_size);
  if (!barrier && world_size > 1) bad_save(dir, cat("a barrier is required with ", world_size, " ranks"));
  parse_metadata(metadata_json, dir);  // fail before any rank writes anything
  write_checkpoint_shard(dir, step, rank, world_size, params, optimizer);
  if (barrier) barrier();
  if (rank == 0) finalize_checkpoint(dir, step, world_size, metadata_json);
  if (barrier) barrier();
}

SaveOutcome try_save_checkpoint(const std::string& dir, std::int64_t step, int rank, int world_size,
                                const NamedParams& params, const AdamWState& optimizer,
                                const std::string& metadata_json, const Agree& agree,
                                const CheckpointRetention& keep) {
  check_common(dir, step, world_size);
  if (!agree && world_size > 1) bad_save(dir, cat("an agreement between the ranks is required with ", world_size, " ranks"));
  parse_metadata(metadata_json, dir);
  auto all_ok = [&](bool ok) { return agree ? agree(ok) : ok; };
  SaveOutcome out;
  try {
    write_checkpoint_shard(dir, step, rank, world_size, params, optimizer);
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  bool ok = all_ok(out.error.empty());
  if (ok && rank == 0) {
    try {
      finalize_checkpoint(dir, step, world_size, metadata_json);
    } catch (const std::exception& e) {
      out.error = e.what();
    }
  }
  if (ok) ok = all_ok(out.error.empty());
  const fs::path root(dir);
  if (!ok) {
    out.ok = false;
    // Every rank is past its writes: rank 0 removes what the attempt left.
    if (rank == 0) {
      std::error_code ec;
      fs::remove_all(root / (step_name(step) + ".tmp"), ec);
      fs::remove(root / "latest.tmp", ec);
    }
    if (!out.error.empty()) {
      const std::string latest = latest_name(root);
      out.error += latest.empty() ? "; there is no earlier checkpoint" : "; " + latest + " stays the latest checkpoint";
    }
    return out;
  }
  if (rank == 0) prune_checkpoints(dir, keep);
  return out;
}

LoadedCheckpoint load_checkpoint(const std::string& path, const NamedParams& needed) {
  LoadedCheckpoint out;
  out.path = resolve_checkpoint(path);
  const fs::path step_dir(out.path);
  const json meta = read_meta(path, step_dir);
  out.step = meta.at("step").get<std::int64_t>();
  out.world_size = meta.at("world_size").get<int>();
  out.metadata_json = meta.at("metadata").is_null() ? std::string() : meta.at("metadata").dump();
  out.optimizer.step = meta.at("optimizer_step").get<std::int64_t>();
  const json& params = meta.at("params");
  const json& shards = meta.at("shards");

  // Check every name and shape before reading any tensor.
  std::map<int, std::vector<std::string>> by_shard;
  for (const auto& [name, t] : needed) {
    auto it = params.find(name);
    if (it == params.end()) {
      const std::int64_t layers = count_layers(params);
      const std::string hint =
          layers > 0 ? cat("it was saved for a model with ", layers, " layers?")
                     : std::string("it was saved for a different model?");
      bad_load(path, cat("checkpoint has no parameter ", name, " (", hint, ")"));
    }
    const auto shape = (*it)["shape"].get<std::vector<std::int64_t>>();
    if (!t.defined()) bad_load(path, "the tensor given for " + name + " is undefined");
    if (!t.sizes().equals(shape))
      bad_load(path, cat("parameter ", name, " has shape ", shape_str(shape), " in the checkpoint but ",
                         shape_str(t.sizes()), " in this model"));
    by_shard[(*it)["shard"].get<int>()].push_back(name);
  }

  for (const auto& [shard, names] : by_shard) {
    if (shard < 0 || shard >= static_cast<int>(shards.size()))
      bad_load(path, cat("meta.json names shard ", shard, " but lists ", shards.size(), " shards"));
    const std::string shard_file = shards.at(shard).get<std::string>();
    const fs::path file = step_dir / shard_file;
    // The bytes that are checked are the bytes that are parsed.
    const std::string bytes = read_shard(path, step_dir, meta, shard_file);
    torch::serialize::InputArchive archive;
    try {
      archive.load_from(bytes.data(), bytes.size(), c10::Device(c10::kCPU));
    } catch (const std::exception& e) {
      bad_load(path, cat("cannot read shard ", file.string(), ": ", first_line(e)));
    }
    auto read = [&](const std::string& key) {
      at::Tensor t;
      if (!archive.try_read(key, t)) bad_load(path, cat("shard ", file.string(), " lacks ", key, " (corrupt checkpoint?)"));
      return t;
    };
    const at::Tensor saved_step = read("checkpoint.step");
    const at::Tensor saved_rank = read("checkpoint.rank");
    if (saved_step.item<std::int64_t>() != out.step || saved_rank.item<std::int64_t>() != shard)
      bad_load(path, cat("shard ", file.string(), " holds step ", saved_step.item<std::int64_t>(), " rank ",
                         saved_rank.item<std::int64_t>(), ", but meta.json says step ", out.step, " rank ", shard));
    for (const auto& name : names) {
      const at::Tensor& like = needed.at(name);
      out.params[name] = read(name).to(like.options());
      if (params.at(name).value("adam_state", false)) {
        AdamWParamState st;
        st.exp_avg = read("adam.exp_avg." + name).to(like.options());
        st.exp_avg_sq = read("adam.exp_avg_sq." + name).to(like.options());
        st.step = read("adam.step." + name).item<std::int64_t>();
        out.optimizer.params.emplace(name, std::move(st));
      }
    }
  }
  return out;
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  CheckpointInfo info;
  info.path = resolve_checkpoint(path);
  const json meta = read_meta(path, info.path);
  try {
    info.step = meta.at("step").get<std::int64_t>();
    info.world_size = meta.at("world_size").get<int>();
    info.metadata_json = meta.at("metadata").is_null() ? std::string() : meta.at("metadata").dump();
    for (auto it = meta.at("params").begin(); it != meta.at("params").end(); ++it) {
      CheckpointEntry e;
      e.name = it.key();
      e.shape = (*it).at("shape").get<std::vector<std::int64_t>>();
      e.dtype = (*it).value("dtype", "");
      e.shard = (*it).at("shard").get<int>();
      e.optimizer_state = (*it).value("adam_state", false);
      info.params.push_back(std::move(e));
    }
  } catch (const std::exception& e) {
    bad_load(path, cat("cannot read ", (fs::path(info.path) / "meta.json").string(), ": ", e.what()));
  }
  return info;
}

CheckpointInfo verify_checkpoint(const std::string& path) {
  CheckpointInfo info = read_checkpoint_info(path);
  const json meta = read_meta(path, info.path);
  try {
    for (const auto& name : meta.at("shards")) read_shard(path, info.path, meta, name.get<std::string>());
  } catch (const json::exception& e) {
    bad_load(path, cat((fs::path(info.path) / "meta.json").string(), " is corrupt (", e.what(), ")"));
  }
  return info;
}

NamedParams unsharded_like(const NamedParams& params, const runtime::TensorShards& shards, int tp_size) {
  NamedParams whole = params;
  for (const auto& [name, shard] : shards)
    if (auto it = whole.find(name); it != whole.end())
      it->second = at::empty(runtime::unsharded_shape(it->second.sizes(), shard, tp_size), it->second.options());
  return whole;
}

LoadedCheckpoint restore_checkpoint(const std::string& path, const NamedParams& params, AdamW* optimizer,
                                    const runtime::TensorShards& shards, int tp_rank, int tp_size) {
  LoadedCheckpoint loaded = load_checkpoint(path, unsharded_like(params, shards, tp_size));
  for (const auto& [name, shard] : shards) {
    auto it = loaded.params.find(name);
    if (it == loaded.params.end()) continue;
    it->second = runtime::shard_of(it->second, shard, tp_rank, tp_size);
    if (auto st = loaded.optimizer.params.find(name); st != loaded.optimizer.params.end()) {
      st->second.exp_avg = runtime::shard_of(st->second.exp_avg, shard, tp_rank, tp_size);
      st->second.exp_avg_sq = runtime::shard_of(st->second.exp_avg_sq, shard, tp_rank, tp_size);
    }
  }
  if (optimizer) optimizer->load_state(loaded.optimizer);  // validates everything before any copy
  at::NoGradGuard no_grad;
  for (const auto& [name, p] : params) p.detach().copy_(loaded.params.at(name));
  return loaded;
}

}  // namespace hp::train
