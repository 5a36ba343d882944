// Pictures of a simulated schedule: a text grid (a row per rank, a column per
// time slot), Chrome trace JSON (one track per rank, spans named by action;
// opens in Perfetto and chrome://tracing) and an SVG timeline (a row per rank,
// colour by action kind, micro-batch numbers in the boxes, MPipe steps
// distinct, idle time visible).
#pragma once

#include <string>

#include "schedule/simulate.hpp"

namespace hp::schedule {

std::string render_text_grid(const Schedule& s, const SimulationReport& r);
std::string render_chrome_trace(const Schedule& s, const SimulationReport& r);
std::string render_svg(const Schedule& s, const SimulationReport& r);
// The report as one JSON object: step_time, bubble_fraction, ranks[{rank, busy, idle, peak_activations}].
std::string report_json(const SimulationReport& r);

}  // namespace hp::schedule
