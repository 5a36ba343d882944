#include "train/task.hpp"

#include <set>

namespace hp::train {

void keep_what_is_read(std::vector<runtime::MicroBatch>& micros, const std::vector<int>& input_micros, bool targets) {
  const std::set<int> read(input_micros.begin(), input_micros.end());
  for (size_t m = 0; m < micros.size(); ++m) {
    if (!read.count(static_cast<int>(m))) micros[m].input = at::Tensor();
    if (!targets) micros[m].target = at::Tensor();
  }
}

}  // namespace hp::train
