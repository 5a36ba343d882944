#include "schedule/schedule.hpp"

#include <algorithm>

namespace hp::schedule {
int mpipe_owner(const ScheduleOptions& o, int micro) {
  const int nt = o.nt();
  switch (o.mpipe.overflow) {
    case Overflow::Full: return micro % nt;
    case Overflow::Min: return micro < nt ? micro : 0;
    case Overflow::Auto: return std::max(o.mpipe.owners.at(static_cast<size_t>(micro)), 0);
  }
  return 0;
}

const char* overflow_name(Overflow overflow) {
  switch (overflow) {
    case Overflow::Full: return "full";
    case Overflow::Min: return "min";
    case Overflow::Auto: return "auto";
  }
  return "?";
}

std::vector<std::string> overflow_name_list() {
  return {overflow_name(Overflow::Full), overflow_name(Overflow::Min), overflow_name(Overflow::Auto)};
}

bool mpipe_inline_on_rank0(const ScheduleOptions& o, int micro) {
  if (o.mpipe.overflow == Overflow::Auto) return o.mpipe.owners.at(static_cast<size_t>(micro)) < 0;
  return o.mpipe.overflow == Overflow::Min && micro >= o.nt();
}

}  // namespace hp::schedule
