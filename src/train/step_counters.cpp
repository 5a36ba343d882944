#include "train/step_counters.hpp"

#include "comm/process_group.hpp"

namespace hp::train {

void gather_step_counters(const RankStepCounters& mine, const std::vector<std::string>& model_names,
                          comm::ProcessGroup* pg, StepMetrics& m) {
  // One row per rank: the five counters, then the model's values.
  std::vector<double> row{mine.bytes_sent, mine.bytes_received, mine.optimizer_state_bytes, mine.peak_bytes,
                          mine.bytes_loaded};
  row.insert(row.end(), mine.model_values.begin(), mine.model_values.end());
  row.resize(5 + model_names.size(), 0.0);
  const auto rows = comm::all_gather_rows(pg, row);
  auto sum = [&](std::size_t column) {
    double s = 0;
    for (const auto& r : rows) s += r[column];
    return s;
  };
  m.extra["bytes_sent"] = sum(0);
  m.extra["bytes_received"] = sum(1);
  m.extra["optimizer_state_bytes"] = sum(2);
  for (const auto& r : rows) {
    m.per_rank["peak_bytes"].push_back(r[3]);
    m.per_rank["bytes_loaded"].push_back(r[4]);
  }
  for (std::size_t i = 0; i < model_names.size(); ++i) m.extra[model_names[i]] = sum(5 + i);
}

}  // namespace hp::train
