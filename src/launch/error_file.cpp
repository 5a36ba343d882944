#include "launch/error_file.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <cstdlib>

namespace hp::launch {

void write_error_file(const std::string& path, const ErrorRecord& record) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  nlohmann::json j;
  j["message"]["message"] = record.message;
  j["message"]["extraInfo"]["timestamp"] = std::to_string(record.timestamp_s > 0 ? record.timestamp_s : now);
  if (record.culprit >= 0) j["hyperpipe"] = {{"culprit", record.culprit}, {"culprit_state", record.culprit_state}};
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!out) return;
  }
  std::rename(tmp.c_str(), path.c_str());
}

std::optional<ErrorRecord> read_error_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("message")) return std::nullopt;
  ErrorRecord r;
  const auto& m = j["message"];
  if (m.is_string()) {
    r.message = m.get<std::string>();
  } else if (m.is_object()) {
    r.message = m.value("message", "");
    const auto info = m.find("extraInfo");
    if (info != m.end() && info->is_object() && info->contains("timestamp")) {
      const auto& t = (*info)["timestamp"];
      r.timestamp_s = t.is_string() ? std::atoll(t.get<std::string>().c_str()) : t.is_number() ? t.get<std::int64_t>() : 0;
    }
  }
  const auto ours = j.find("hyperpipe");
  if (ours != j.end() && ours->is_object()) {
    const auto c = ours->find("culprit");
    if (c != ours->end() && c->is_number_integer()) r.culprit = c->get<int>();
    const auto st = ours->find("culprit_state");
    if (st != ours->end() && st->is_string()) r.culprit_state = st->get<std::string>();
  }
  return r;
}

}  // namespace hp::launch
