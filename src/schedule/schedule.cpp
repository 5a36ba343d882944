#include "schedule/schedule.hpp"

#include <algorithm>
#include <array>

namespace hp::schedule {
namespace {
constexpr std::array<std::pair<ScheduleKind, std::string_view>, 8> kKinds = {{
    {ScheduleKind::NoPipelining, "no-pipelining"},
    {ScheduleKind::GPipe, "gpipe"},
    {ScheduleKind::OneFOneB, "1f1b"},
    {ScheduleKind::Interleaved, "interleaved"},
    {ScheduleKind::MPipe, "mpipe"},
    {ScheduleKind::ZeroBubble1P, "zb1p"},
    {ScheduleKind::ZeroBubbleV, "zbv"},
    {ScheduleKind::DualPipeV, "dualpipev"},
}};
}  // namespace

std::string_view kind_name(ScheduleKind k) {
  for (auto& [kind, name] : kKinds)
    if (kind == k) return name;
  return "?";
}

std::vector<std::string> kind_name_list() {
  std::vector<std::string> out;
  for (auto& [kind, name] : kKinds) out.emplace_back(name);
  return out;
}

std::vector<std::string> mpipe_body_name_list() {
  std::vector<std::string> out;
  for (auto& [kind, name] : kKinds)
    if (is_mpipe_body(kind)) out.emplace_back(name);
  return out;
}

namespace {
std::string comma_joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}
}  // namespace

std::string kind_names() { return comma_joined(kind_name_list()); }
std::string mpipe_body_names() { return comma_joined(mpipe_body_name_list()); }

int default_vpp(const ScheduleOptions& o) {
  const ScheduleKind k = o.kind == ScheduleKind::MPipe ? o.mpipe.body : o.kind;
  return k == ScheduleKind::Interleaved || placed_in_v(k) ? 2 : 1;
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
