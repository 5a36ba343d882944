#include "train/metrics.hpp"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstring>
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
  return j.dump();
}

MetricsWriter::MetricsWriter(std::string path, bool append) : path_(std::move(path)) {
  if (path_.empty()) throw std::invalid_argument("--metrics: a file path is required");
  out_.open(path_, append ? std::ios::app : std::ios::trunc);
  if (!out_) {
    throw std::invalid_argument("--metrics " + path_ + ": cannot open the file for writing (" +
                                std::strerror(errno) + ")");
  }
}

void MetricsWriter::write(const StepMetrics& m) {
  const std::string line = metrics_json_line(m);
  out_ << line << '\n';
  out_.flush();
  if (!out_) throw std::runtime_error("--metrics " + path_ + ": write failed at step " + std::to_string(m.step));
}

}  // namespace hp::train
