#include "schedule/schedule.hpp"

#include <array>

namespace hp::schedule {
namespace {
constexpr std::array<std::pair<ScheduleKind, std::string_view>, 5> kKinds = {{
    {ScheduleKind::NoPipelining, "no-pipelining"},
    {ScheduleKind::GPipe, "gpipe"},
    {ScheduleKind::OneFOneB, "1f1b"},
    {ScheduleKind::Interleaved, "interleaved"},
    {ScheduleKind::MPipe, "mpipe"},
}};
}  // namespace

std::string_view kind_name(ScheduleKind k) {
  for (auto& [kind, name] : kKinds)
    if (kind == k) return name;
  return "?";
}

int default_vpp(ScheduleKind k) {
  return k == ScheduleKind::Interleaved || k == ScheduleKind::MPipe ? 2 : 1;
}

bool kind_from_name(std::string_view name, ScheduleKind* out) {
  for (auto& [kind, n] : kKinds)
    if (n == name) {
      *out = kind;
      return true;
    }
  return false;
}

int mpipe_owner(const ScheduleOptions& o, int micro) {
  const int nt = o.nt();
  if (o.mpipe.overflow == Overflow::Full) return micro % nt;
  return micro < nt ? micro : 0;
}

}  // namespace hp::schedule
