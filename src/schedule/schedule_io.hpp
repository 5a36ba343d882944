// Text and CSV forms of a Schedule; both round-trip exactly.
// Text: one line per rank, "rank R:" then the action tokens separated by spaces.
// CSV: one row per rank: the rank, then one cell per action token.
#pragma once

#include <string>

#include "schedule/schedule.hpp"

namespace hp::schedule {

std::string to_text(const Schedule& s);
std::string to_csv(const Schedule& s);

// Parse; throw std::invalid_argument naming the line, cell and what was expected.
// The layout (pp, vpp, micro_batches, kind, MPipe options) is inferred from the
// actions: pp = rows, stages = max stage + 1, vpp = stages / pp,
// micro_batches = max micro + 1, kind = MPipe when any MPIPE_* action appears,
// zbv when two chunks per rank sit in V placement (schedule.hpp), dualpipev
// when they do and overlapped pairs appear, zb1p when
// the backward is split, else the loop schedule the order looks like.
Schedule from_text(const std::string& text);
Schedule from_csv(const std::string& csv);
// Fills s.options from s.ranks as described above.
void infer_options(Schedule& s);

}  // namespace hp::schedule
