// MetricsWriter: one JSON object per training step, one per line ("JSON
// lines"), appended to a file and flushed after every line, so a crashed or
// still-running job leaves a readable log:
//   {"step":12,"loss":3.91,"step_ms":84.2,"tokens_per_s":12163.5,"lr":0.0003,"grad_norm":0.87,"mfu":0.41}
// The six standard keys come first, then the extra fields in name order, the
// text fields in name order, then the per-rank arrays ("peak_bytes":[...]) in
// name order.
// Non-finite numbers (a NaN loss) are written as null, since JSON has no NaN.
//
// Contract: one rank writes (the caller decides which); not thread-safe; the
// file is opened by the constructor and closed by the destructor.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace hp::train {

struct StepMetrics {
  std::int64_t step = 0;
  double loss = 0.0;
  double step_ms = 0.0;
  double tokens_per_s = 0.0;
  double lr = 0.0;
  double grad_norm = 0.0;
  std::map<std::string, double> extra;  // names must differ from the six above
  std::map<std::string, std::string> text;  // string fields (a restart's reason), after the extras
  // One value per rank (in rank order), written as a JSON array after the extras.
  std::map<std::string, std::vector<double>> per_rank;
};

class MetricsWriter {
 public:
  // Appends to path (truncates instead when append is false). Throws
  // std::invalid_argument "--metrics PATH: cannot open ..." when it cannot.
  explicit MetricsWriter(std::string path, bool append = true);

  // Writes and flushes one line. Throws std::invalid_argument for an extra
  // field named like a standard one (or empty), std::runtime_error when the
  // write fails.
  void write(const StepMetrics& m);

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

// For a resumed run: rewrites path (atomically: a temporary file renamed over it) keeping only
// the lines of steps up to last_step, the first line of each step, so that the lines the
// resumed run appends make one line per step. Lines that are not a JSON object with a "step"
// (a line torn by a crash) are dropped. A missing file is left missing. Throws
// std::invalid_argument "--metrics PATH: ..." when it cannot.
void keep_metrics_through(const std::string& path, std::int64_t last_step);

// Before a job starts: path can be opened for appending (an existing file is not changed; a new
// one is created empty). Throws std::invalid_argument "FLAG PATH: cannot ..." naming why (the
// flag of the file: --metrics, --trace, --timeline).
void check_metrics_writable(const std::string& path, const std::string& flag = "train.metrics");

// The line write() emits for m, without the newline.
std::string metrics_json_line(const StepMetrics& m);

}  // namespace hp::train
