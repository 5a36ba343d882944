#include "train/checkpoint_dir.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <stdexcept>
#include <vector>

#include "train/checkpoint.hpp"
#include "train/checkpoint_error.hpp"
#include "train/durable_file.hpp"

namespace hp::train {
namespace {

namespace fs = std::filesystem;

const std::regex& stale_dir_re() {
  static const std::regex re(R"(step-[0-9]+\.(tmp|old))");
  return re;
}

}  // namespace

std::string step_name(std::int64_t step) { return "step-" + std::to_string(step); }

std::string latest_name(const fs::path& root) {
  std::ifstream in(root / "latest");
  std::string name;
  if (!(in >> name)) return {};
  return name;
}

void install_dir(const fs::path& tmp, const fs::path& final) {
  if (!fs::exists(final)) {
    fs::rename(tmp, final);
    return;
  }
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(tmp);  // now holds the replaced checkpoint
    return;
  }
  const int err = errno;
  if (err != EINVAL && err != ENOSYS && err != ENOTSUP && err != EOPNOTSUPP)
    throw std::runtime_error(cat("cannot swap ", tmp.string(), " with ", final.string(), ": ", std::strerror(err)));
  fs::path old = final;
  old += ".old";
  fs::remove_all(old);
  fs::rename(final, old);
  fs::rename(tmp, final);
  fs::remove_all(old);
}

std::vector<std::string> remove_stale_dirs(const fs::path& root) {
  std::vector<std::string> removed;
  if (!fs::is_directory(root)) return removed;
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string n = entry.path().filename().string();
    if (entry.is_directory() && std::regex_match(n, stale_dir_re())) removed.push_back(n);
  }
  for (const auto& n : removed) fs::remove_all(root / n);
  return removed;
}

std::vector<std::int64_t> prune_checkpoints(const std::string& dir, const CheckpointRetention& keep) {
  std::vector<std::int64_t> removed;
  if (keep.keep_last <= 0) return removed;
  const fs::path root(dir);
  const std::string latest = latest_name(root);
  if (latest.empty()) return removed;  // without latest nothing is known to be complete
  static const std::regex re(R"(step-([0-9]+))");
  std::vector<std::int64_t> steps;  // complete checkpoints
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string n = entry.path().filename().string();
    std::smatch m;
    if (std::regex_match(n, m, re) && fs::exists(entry.path() / "meta.json")) steps.push_back(std::stoll(m[1].str()));
  }
  std::sort(steps.rbegin(), steps.rend());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::int64_t s = steps[i];
    const bool kept = i < static_cast<std::size_t>(keep.keep_last) || (keep.keep_every > 0 && s % keep.keep_every == 0) ||
                      step_name(s) == latest;
    if (kept) continue;
    // Renamed first: a kill during remove_all leaves a *.old, which no load reads.
    const fs::path from = root / step_name(s);
    fs::path old = from;
    old += ".old";
    fs::remove_all(old, ec);
    fs::rename(from, old, ec);
    if (ec) continue;
    fs::remove_all(old, ec);
    removed.push_back(s);
  }
  return removed;
}

void check_checkpoint_dir_writable(const std::string& dir) {
  if (dir.empty()) throw std::invalid_argument("train.save: a checkpoint directory is required");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) bad_save(dir, cat("cannot create the directory (", ec.message(), ")"));
  if (!fs::is_directory(dir, ec)) bad_save(dir, "is not a directory");
  const fs::path probe = fs::path(dir) / cat(".hyperpipe-write-test-", ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) bad_save(dir, cat("cannot write a file in it (", std::strerror(errno), ")"));
  ::close(fd);
  ::unlink(probe.c_str());
}

std::string resolve_checkpoint(const std::string& path) {
  if (path.empty()) throw std::invalid_argument("train.load: a checkpoint directory is required");
  const fs::path p(path);
  std::error_code ec;
  if (!fs::is_directory(p, ec)) bad_load(path, "no such directory");
  const std::string leaf = p.filename().empty() ? p.parent_path().filename().string() : p.filename().string();
  if (std::regex_match(leaf, stale_dir_re()))
    bad_load(path, "is an unfinished or replaced save (a *.tmp or *.old directory); load its parent "
                   "directory or a step-<N> directory instead");
  if (fs::exists(p / "meta.json")) return p.string();
  const fs::path latest = p / "latest";
  if (!fs::exists(latest))
    bad_load(path, "not a checkpoint: neither " + (p / "meta.json").string() + " nor " + latest.string() + " exists");
  std::string name = read_text(latest);
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
  static const std::regex step_re(R"(step-[0-9]+)");
  if (!std::regex_match(name, step_re))
    bad_load(path, "latest holds '" + name + "', expected step-<N>");
  const fs::path target = p / name;
  if (!fs::exists(target / "meta.json"))
    bad_load(path, "latest names " + name + " but " + (target / "meta.json").string() + " does not exist");
  return target.string();
}

std::optional<std::string> latest_checkpoint(const std::string& dir) {
  const fs::path p(dir);
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(p, ec)) return std::nullopt;
  if (!fs::exists(p / "meta.json") && !fs::exists(p / "latest")) return std::nullopt;
  return resolve_checkpoint(dir);
}

}  // namespace hp::train
