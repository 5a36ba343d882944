// `hyperpipe bench`: measured step times of several schedules side by side,
// next to what the simulator predicts from per-stage costs measured on the
// same ranks, so both the schedules' ratios and measured / simulated can be read
// off one run (absolute times on a shared machine are noisy; ratios less so).
#pragma once

namespace CLI {
class App;
}

namespace hp::cli {

void add_bench_command(CLI::App& app, int* exit_code);

}  // namespace hp::cli
