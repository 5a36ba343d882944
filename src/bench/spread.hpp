// Summaries of repeated timings: the median, which one descheduled run does
// not move, and the range around it.
#pragma once

#include <vector>

namespace hp::bench {

// The median of `v` (the mean of the middle two for an even count); `v` not empty.
double median(std::vector<double> v);

// The median, lowest and highest of per-round values.
struct Spread {
  double median = 0, low = 0, high = 0;
};

// `v` not empty.
Spread spread(const std::vector<double>& v);

}  // namespace hp::bench
