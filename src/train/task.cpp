#include "train/task.hpp"

#include <set>

namespace hp::train {

void keep_what_is_read(std::vector<runtime::MicroBatch>& micros, const runtime::Reads& reads) {
  const std::set<int> read(reads.input_micros.begin(), reads.input_micros.end());
  for (size_t m = 0; m < micros.size(); ++m) {
    if (!read.count(static_cast<int>(m))) micros[m].input = at::Tensor();
    if (!reads.targets || !reads.covers(static_cast<int>(m))) micros[m].target = at::Tensor();
    if (!reads.extra || !reads.covers(static_cast<int>(m))) micros[m].extra = at::Tensor();
  }
}

}  // namespace hp::train
