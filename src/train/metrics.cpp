#include "train/metrics.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <stdexcept>

namespace hp::train {
namespace {

nlohmann::ordered_json number(double v) {
  if (!std::isfinite(v)) return nullptr;
  return v;
}

}  // namespace

std::string metrics_json_line(const StepMetrics& m) {
  nlohmann::ordered_json j;
  j["step"] = m.step;
  j["loss"] = number(m.loss);
  j["step_ms"] = number(m.step_ms);
  j["tokens_per_s"] = number(m.tokens_per_s);
  j["lr"] = number(m.lr);
  j["grad_norm"] = number(m.grad_norm);
  for (const auto& [name, v] : m.extra) {
    if (name.empty() || j.contains(name))
      throw std::invalid_argument("metrics: extra field '" + name +
                                  "' must be a non-empty name other than step, loss, step_ms, "
                                  "tokens_per_s, lr, grad_norm");
    j[name] = number(v);
  }
  for (const auto& [name, v] : m.text) {
    if (name.empty() || j.contains(name))
      throw std::invalid_argument("metrics: text field '" + name + "' must be a non-empty name of its own");
    j[name] = v;
  }
  for (const auto& [name, values] : m.per_rank) {
    if (name.empty() || j.contains(name))
      throw std::invalid_argument("metrics: per-rank field '" + name + "' must be a non-empty name of its own");
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (double v : values) a.push_back(number(v));
    j[name] = std::move(a);
  }
  return j.dump();
}

MetricsWriter::MetricsWriter(std::string path, bool append) : path_(std::move(path)) {
  if (path_.empty()) throw std::invalid_argument("train.metrics: a file path is required");
  out_.open(path_, append ? std::ios::app : std::ios::trunc);
  if (!out_) {
    throw std::invalid_argument("train.metrics " + path_ + ": cannot open the file for writing (" +
                                std::strerror(errno) + ")");
  }
}

void MetricsWriter::write(const StepMetrics& m) {
  const std::string line = metrics_json_line(m);
  out_ << line << '\n';
  out_.flush();
  if (!out_) throw std::runtime_error("train.metrics " + path_ + ": write failed at step " + std::to_string(m.step));
}

void keep_metrics_through(const std::string& path, std::int64_t last_step) {
  std::ifstream in(path);
  if (!in) return;
  std::string kept, line;
  std::set<std::int64_t> seen;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("step") || !j.at("step").is_number_integer()) continue;
    const auto step = j.at("step").get<std::int64_t>();
    if (step > last_step || !seen.insert(step).second) continue;
    kept += line;
    kept += '\n';
  }
  in.close();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kept;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw std::invalid_argument("train.metrics " + path + ": cannot write " + tmp + " (" + std::strerror(errno) + ")");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw std::invalid_argument("train.metrics " + path + ": cannot replace it (" + std::strerror(err) + ")");
  }
}

void check_metrics_writable(const std::string& path, const std::string& flag) {
  if (path.empty()) throw std::invalid_argument(flag + ": a file path is required");
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::invalid_argument(flag + " " + path + ": cannot open the file for writing (" + std::strerror(errno) + ")");
  ::close(fd);
}

}  // namespace hp::train
