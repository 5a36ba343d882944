#include "schedule/schedule_io.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "schedule/generate.hpp"

namespace hp::schedule {
namespace {

// The reader under test, beside the hand-schedule helper of the same name
// another file of this unity build may bring in (one is called with text, the
// other with lines).
using hp::schedule::from_text;

std::vector<Action> parse_all(const std::vector<std::string>& tokens) {
  std::vector<Action> out;
  for (const std::string& t : tokens) {
    std::string error;
    auto a = parse_action(t, &error);
    EXPECT_TRUE(a.has_value()) << error;
    if (a) out.push_back(*a);
  }
  return out;
}

Schedule make(const std::vector<std::vector<std::string>>& ranks) {
  Schedule s;
  for (const auto& r : ranks) s.ranks.push_back(parse_all(r));
  infer_options(s);
  return s;
}

// PP=2, MB=2 owner-backward MPipe with T > 0: not a schedule anyone would run
// (it carries both backward styles), but it uses every action type once or more.
Schedule every_type() {
  return make({
      {"0MPIPE_PARAM_BROADCAST", "0MPIPE_TRANSPOSE_FWD0", "0MPIPE_FWD_RECV1@1", "0MPIPE_GRAPH_RECV1@1", "0F0",
       "0SEND_F0@1", "0F1", "0SEND_F1@1", "0RECV_B0@1", "0B0", "0MPIPE_TRANSPOSE_BWD0", "0RECV_B1@1", "0B1",
       "0MPIPE_GRAD_SEND1@1", "0MPIPE_GRAD_REDUCE"},
      {"0MPIPE_PARAM_BROADCAST", "0MPIPE_TRANSPOSE_FWD1", "0MPIPE_FWD_SEND1@0", "0MPIPE_GRAPH_SEND1@0",
       "1RECV_F0@0", "1F0", "1B0", "1SEND_B0@0", "1RECV_F1@0", "1F1", "1I1", "1SEND_B1@0", "1W1",
       "0MPIPE_GRAD_RECV_WITH_BACKWARD1@0", "0MPIPE_GRAD_REDUCE"},
  });
}

Schedule one_f_one_b_pp2_mb2() {
  return make({
      {"0F0", "0SEND_F0@1", "0F1", "0SEND_F1@1", "0RECV_B0@1", "0B0", "0RECV_B1@1", "0B1"},
      {"1RECV_F0@0", "1F0", "1B0", "1SEND_B0@0", "1RECV_F1@0", "1F1", "1B1", "1SEND_B1@0"},
  });
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected std::invalid_argument";
  return "";
}

TEST(ScheduleIo, EveryActionTypeIsCovered) {
  std::set<ActionType> seen;
  for (const auto& r : every_type().ranks)
    for (const Action& a : r) seen.insert(a.type);
  EXPECT_EQ(static_cast<int>(seen.size()), kNumActionTypes);
}

TEST(ScheduleIo, TextFormat) {
  EXPECT_EQ(to_text(one_f_one_b_pp2_mb2()),
            "rank 0: 0F0 0SEND_F0@1 0F1 0SEND_F1@1 0RECV_B0@1 0B0 0RECV_B1@1 0B1\n"
            "rank 1: 1RECV_F0@0 1F0 1B0 1SEND_B0@0 1RECV_F1@0 1F1 1B1 1SEND_B1@0\n");
}

TEST(ScheduleIo, CsvFormat) {
  EXPECT_EQ(to_csv(one_f_one_b_pp2_mb2()),
            "0,0F0,0SEND_F0@1,0F1,0SEND_F1@1,0RECV_B0@1,0B0,0RECV_B1@1,0B1\n"
            "1,1RECV_F0@0,1F0,1B0,1SEND_B0@0,1RECV_F1@0,1F1,1B1,1SEND_B1@0\n");
}

TEST(ScheduleIo, RoundTripEveryType) {
  const Schedule s = every_type();
  EXPECT_EQ(from_text(to_text(s)).ranks, s.ranks);
  EXPECT_EQ(from_csv(to_csv(s)).ranks, s.ranks);
  EXPECT_EQ(to_text(from_text(to_text(s))), to_text(s));
  EXPECT_EQ(to_csv(from_csv(to_csv(s))), to_csv(s));
}

TEST(ScheduleIo, AScheduleWithoutBackwardsReadsBackAsForwardOnly) {
  ScheduleOptions o;
  o.kind = ScheduleKind::Interleaved;
  o.pp = 2;
  o.vpp = 2;
  o.micro_batches = 3;
  o.forward_only = true;
  const Schedule s = generate(o);
  const Schedule back = from_csv(to_csv(s));
  EXPECT_TRUE(back.options.forward_only);
  EXPECT_EQ(back.ranks, s.ranks);
  o.forward_only = false;
  EXPECT_FALSE(from_csv(to_csv(generate(o))).options.forward_only);
}

TEST(ScheduleIo, RoundTripKeepsEmptyRanks) {
  // Rank 1 idles; the stage count still has to be a multiple of the ranks.
  Schedule s = make({{"0F0", "1F0", "1B0", "0B0"}, {}});
  EXPECT_EQ(to_text(s), "rank 0: 0F0 1F0 1B0 0B0\nrank 1:\n");
  EXPECT_EQ(to_csv(s), "0,0F0,1F0,1B0,0B0\n1\n");
  EXPECT_EQ(from_text(to_text(s)).ranks, s.ranks);
  EXPECT_EQ(from_csv(to_csv(s)).ranks, s.ranks);
}

TEST(ScheduleIo, ToleratesTrailingBlankLinesCrlfPaddingAndQuotes) {
  const Schedule s = one_f_one_b_pp2_mb2();
  std::string csv = to_csv(s);
  std::string crlf;
  for (char c : csv) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  EXPECT_EQ(from_csv(crlf + "\r\n\r\n").ranks, s.ranks);
  EXPECT_EQ(from_text(to_text(s) + "\n  \n").ranks, s.ranks);
  EXPECT_EQ(from_csv("0,\"0F0\", 0B0 ,,\n").ranks, make({{"0F0", "0B0"}}).ranks);
  EXPECT_EQ(from_text("rank 0:\t0F0   0B0  \n").ranks, make({{"0F0", "0B0"}}).ranks);
}

TEST(ScheduleIo, BadTokenNamesLineTokenAndExpectation) {
  const std::string e = error_of([] { from_text("rank 0: 0F0 0B0\nrank 1: 1F0 1X3\n"); });
  EXPECT_NE(e.find("line 2"), std::string::npos) << e;
  EXPECT_NE(e.find("token 2"), std::string::npos) << e;
  EXPECT_NE(e.find("'1X3'"), std::string::npos) << e;
  EXPECT_NE(e.find("expected e.g."), std::string::npos) << e;

  const std::string c = error_of([] { from_csv("0,0F0,0B0\n1,1F0,1SEND_F0\n"); });
  EXPECT_NE(c.find("row 2"), std::string::npos) << c;
  EXPECT_NE(c.find("cell 3"), std::string::npos) << c;
  EXPECT_NE(c.find("'1SEND_F0'"), std::string::npos) << c;
  EXPECT_NE(c.find("@rank"), std::string::npos) << c;
}

TEST(ScheduleIo, WrongRankOrder) {
  const std::string t = error_of([] { from_text("rank 0: 0F0\nrank 2: 1F0\n"); });
  EXPECT_NE(t.find("line 2"), std::string::npos) << t;
  EXPECT_NE(t.find("expected 'rank 1:'"), std::string::npos) << t;
  EXPECT_NE(t.find("got 'rank 2:'"), std::string::npos) << t;

  const std::string c = error_of([] { from_csv("1,1F0\n0,0F0\n"); });
  EXPECT_NE(c.find("row 1, cell 1"), std::string::npos) << c;
  EXPECT_NE(c.find("expected rank 0"), std::string::npos) << c;

  const std::string h = error_of([] { from_text("0F0 0B0\n"); });
  EXPECT_NE(h.find("line 1"), std::string::npos) << h;
  EXPECT_NE(h.find("'rank 0:'"), std::string::npos) << h;

  const std::string n = error_of([] { from_csv("zero,0F0\n"); });
  EXPECT_NE(n.find("expected the rank number 0"), std::string::npos) << n;
}

TEST(ScheduleIo, EmptyAndRaggedFiles) {
  EXPECT_NE(error_of([] { from_text(""); }).find("empty"), std::string::npos);
  EXPECT_NE(error_of([] { from_csv("\n\n"); }).find("empty"), std::string::npos);
  // A blank line before a later rank would hide a missing rank.
  const std::string b = error_of([] { from_text("rank 0: 0F0 0B0\n\nrank 1: 1F0\n"); });
  EXPECT_NE(b.find("line 2"), std::string::npos) << b;
  EXPECT_NE(b.find("blank"), std::string::npos) << b;
  // A hole between cells is a lost action, unlike padding at the end.
  const std::string h = error_of([] { from_csv("0,0F0,,0B0\n"); });
  EXPECT_NE(h.find("row 1"), std::string::npos) << h;
  EXPECT_NE(h.find("cell 3"), std::string::npos) << h;
  EXPECT_NE(h.find("empty cell"), std::string::npos) << h;
  // Rows that parse but carry no actions at all.
  EXPECT_NE(error_of([] { from_csv("0\n1\n"); }).find("no actions"), std::string::npos);
}

TEST(ScheduleIo, PeerOutOfRange) {
  const std::string e = error_of([] { from_text("rank 0: 0F0 0SEND_F0@2 0B0\nrank 1: 1F0 1B0\n"); });
  EXPECT_NE(e.find("rank 0"), std::string::npos) << e;
  EXPECT_NE(e.find("action 2"), std::string::npos) << e;
  EXPECT_NE(e.find("peer 2"), std::string::npos) << e;
  EXPECT_NE(e.find("0..1"), std::string::npos) << e;
}

TEST(ScheduleIo, StagesMustBeAMultipleOfRanks) {
  const std::string e = error_of([] { from_text("rank 0: 0F0 2F0\nrank 1: 1F0\n"); });
  EXPECT_NE(e.find("3 stages"), std::string::npos) << e;
  EXPECT_NE(e.find("2 ranks"), std::string::npos) << e;
}

TEST(ScheduleIo, InferBodyKinds) {
  const Schedule f = one_f_one_b_pp2_mb2();
  EXPECT_EQ(f.options.kind, ScheduleKind::OneFOneB);
  EXPECT_EQ(f.options.pp, 2);
  EXPECT_EQ(f.options.vpp, 1);
  EXPECT_EQ(f.options.micro_batches, 2);

  const Schedule g = make({{"0F0", "0F1", "0B0", "0B1"}, {"1F0", "1F1", "1B0", "1B1"}});
  EXPECT_EQ(g.options.kind, ScheduleKind::GPipe);

  const Schedule n = make({{"0F0", "0B0", "0F1", "0B1", "0F2", "0B2"}});
  EXPECT_EQ(n.options.kind, ScheduleKind::NoPipelining);
  EXPECT_EQ(n.options.micro_batches, 3);

  const Schedule i = make({{"0F0", "2F0", "2B0", "0B0"}, {"1F0", "3F0", "3B0", "1B0"}});
  EXPECT_EQ(i.options.kind, ScheduleKind::Interleaved);
  EXPECT_EQ(i.options.vpp, 2);
  EXPECT_EQ(i.options.num_stages(), 4);
}

// MPipe layouts for PP=2, MB=2 (NT=2) unless said otherwise; body comms are
// left out, inference does not look at them.
TEST(ScheduleIo, InferMPipeRecomputeBackward) {
  const Schedule s = make({
      {"0MPIPE_PARAM_BROADCAST", "0MPIPE_TRANSPOSE_FWD0", "0MPIPE_FWD_RECV1@1", "0MPIPE_GRAPH_RECV1@1", "0F0", "0F1",
       "0B0", "0MPIPE_TRANSPOSE_BWD0", "0B1", "0MPIPE_TRANSPOSE_BWD1"},
      {"0MPIPE_PARAM_BROADCAST", "0MPIPE_TRANSPOSE_FWD1", "0MPIPE_FWD_SEND1@0", "0MPIPE_GRAPH_SEND1@0", "1F0", "1B0",
       "1F1", "1B1"},
  });
  EXPECT_EQ(s.options.kind, ScheduleKind::MPipe);
  EXPECT_EQ(s.options.mpipe.transpose_layers, 1);
  EXPECT_FALSE(s.options.mpipe.owner_backward);
  EXPECT_FALSE(s.options.mpipe.frozen_preprocess);
  EXPECT_EQ(s.options.mpipe.overflow, Overflow::Full);
}

TEST(ScheduleIo, InferMPipeDataLoadOnly) {
  const Schedule s = make({
      {"0MPIPE_TRANSPOSE_FWD0", "0MPIPE_FWD_RECV1@1", "0F0", "0F1", "0B0", "0B1"},
      {"0MPIPE_TRANSPOSE_FWD1", "0MPIPE_FWD_SEND1@0", "1F0", "1B0", "1F1", "1B1"},
  });
  EXPECT_EQ(s.options.kind, ScheduleKind::MPipe);
  EXPECT_EQ(s.options.mpipe.transpose_layers, 0);
  EXPECT_FALSE(s.options.mpipe.frozen_preprocess);
}

TEST(ScheduleIo, InferMPipeFrozenAndOwnerBackward) {
  const Schedule frozen = make({
      {"0MPIPE_PARAM_BROADCAST", "0MPIPE_TRANSPOSE_FWD0", "0MPIPE_FWD_RECV1@1", "0F0", "0F1", "0B0", "0B1"},
      {"0MPIPE_PARAM_BROADCAST", "0MPIPE_TRANSPOSE_FWD1", "0MPIPE_FWD_SEND1@0", "1F0", "1B0", "1F1", "1B1"},
  });
  EXPECT_TRUE(frozen.options.mpipe.frozen_preprocess);
  EXPECT_FALSE(frozen.options.mpipe.owner_backward);
  EXPECT_EQ(frozen.options.mpipe.transpose_layers, 1);

  const Schedule owner = make({
      {"0MPIPE_PARAM_BROADCAST", "0MPIPE_TRANSPOSE_FWD0", "0MPIPE_FWD_RECV1@1", "0F0", "0F1", "0B0",
       "0MPIPE_TRANSPOSE_BWD0", "0B1", "0MPIPE_GRAD_SEND1@1", "0MPIPE_GRAD_REDUCE"},
      {"0MPIPE_PARAM_BROADCAST", "0MPIPE_TRANSPOSE_FWD1", "0MPIPE_FWD_SEND1@0", "1F0", "1B0", "1F1", "1B1",
       "0MPIPE_GRAD_RECV_WITH_BACKWARD1@0", "0MPIPE_GRAD_REDUCE"},
  });
  EXPECT_TRUE(owner.options.mpipe.owner_backward);
  EXPECT_FALSE(owner.options.mpipe.frozen_preprocess);
  EXPECT_EQ(owner.options.mpipe.transpose_layers, 1);
}

TEST(ScheduleIo, InferMPipeOverflow) {
  // PP=2, MB=4, NT=2. "min": micros 2 and 3 inline on rank 0 before F(0, m).
  const Schedule min = make({
      {"0MPIPE_TRANSPOSE_FWD0", "0MPIPE_FWD_RECV1@1", "0F0", "0F1", "0B0", "0MPIPE_TRANSPOSE_FWD2", "0F2", "0B1",
       "0MPIPE_TRANSPOSE_FWD3", "0F3", "0B2", "0B3"},
      {"0MPIPE_TRANSPOSE_FWD1", "0MPIPE_FWD_SEND1@0", "1F0", "1B0", "1F1", "1B1", "1F2", "1B2", "1F3", "1B3"},
  });
  EXPECT_EQ(min.options.micro_batches, 4);
  EXPECT_EQ(min.options.mpipe.overflow, Overflow::Min);

  // "full": micro 3 belongs to rank 1, micro 2 to rank 0, both in the prefix.
  const Schedule full = make({
      {"0MPIPE_TRANSPOSE_FWD0", "0MPIPE_TRANSPOSE_FWD2", "0MPIPE_FWD_RECV1@1", "0MPIPE_FWD_RECV3@1", "0F0", "0F1",
       "0B0", "0F2", "0B1", "0F3", "0B2", "0B3"},
      {"0MPIPE_TRANSPOSE_FWD1", "0MPIPE_FWD_SEND1@0", "0MPIPE_TRANSPOSE_FWD3", "0MPIPE_FWD_SEND3@0", "1F0", "1B0",
       "1F1", "1B1", "1F2", "1B2", "1F3", "1B3"},
  });
  EXPECT_EQ(full.options.mpipe.overflow, Overflow::Full);

  // MB = NT + 1: micro 2 is rank 0's under both modes; the position decides.
  const Schedule full3 = make({
      {"0MPIPE_TRANSPOSE_FWD0", "0MPIPE_TRANSPOSE_FWD2", "0MPIPE_FWD_RECV1@1", "0F0", "0F1", "0B0", "0F2", "0B1",
       "0B2"},
      {"0MPIPE_TRANSPOSE_FWD1", "0MPIPE_FWD_SEND1@0", "1F0", "1B0", "1F1", "1B1", "1F2", "1B2"},
  });
  EXPECT_EQ(full3.options.mpipe.overflow, Overflow::Full);
  const Schedule min3 = make({
      {"0MPIPE_TRANSPOSE_FWD0", "0MPIPE_FWD_RECV1@1", "0F0", "0F1", "0B0", "0MPIPE_TRANSPOSE_FWD2", "0F2", "0B1",
       "0B2"},
      {"0MPIPE_TRANSPOSE_FWD1", "0MPIPE_FWD_SEND1@0", "1F0", "1B0", "1F1", "1B1", "1F2", "1B2"},
  });
  EXPECT_EQ(min3.options.mpipe.overflow, Overflow::Min);
}

TEST(ScheduleIo, FromTextInfersOptions) {
  const Schedule s = from_text(to_text(every_type()));
  EXPECT_EQ(s.options.kind, ScheduleKind::MPipe);
  EXPECT_EQ(s.options.pp, 2);
  EXPECT_EQ(s.options.vpp, 1);
  EXPECT_EQ(s.options.micro_batches, 2);
  EXPECT_TRUE(s.options.mpipe.owner_backward);
}

std::vector<ScheduleOptions> generated_layouts() {
  std::vector<ScheduleOptions> out;
  auto add = [&](ScheduleKind k, int pp, int vpp, int mb) {
    ScheduleOptions o;
    o.kind = k;
    o.pp = pp;
    o.vpp = vpp;
    o.micro_batches = mb;
    out.push_back(o);
    return &out.back();
  };
  for (int mb : {1, 2, 3, 4, 5, 8}) {
    add(ScheduleKind::NoPipelining, 1, 1, mb);
    for (int pp : {2, 3, 4}) {
      add(ScheduleKind::GPipe, pp, 1, mb);
      add(ScheduleKind::OneFOneB, pp, 1, mb);
      for (int vpp : {1, 2, 3}) add(ScheduleKind::Interleaved, pp, vpp, mb);
      for (int vpp : {1, 2}) {
        for (Overflow ov : {Overflow::Full, Overflow::Min}) {
          for (int variant = 0; variant < 4; ++variant) {
            ScheduleOptions* o = add(ScheduleKind::MPipe, pp, vpp, mb);
            o->mpipe.overflow = ov;
            o->mpipe.transpose_layers = variant == 1 ? 0 : 2;
            o->mpipe.owner_backward = variant == 2;
            o->mpipe.frozen_preprocess = variant == 3;
          }
        }
      }
    }
  }
  return out;
}

std::string describe(const ScheduleOptions& o) {
  return std::string(kind_name(o.kind)) + " pp=" + std::to_string(o.pp) + " v=" + std::to_string(o.vpp) +
         " mb=" + std::to_string(o.micro_batches) + " T=" + std::to_string(o.mpipe.transpose_layers) +
         (o.mpipe.overflow == Overflow::Min ? " min" : " full") + (o.mpipe.owner_backward ? " owner" : "") +
         (o.mpipe.frozen_preprocess ? " frozen" : "");
}

// Generated schedules round-trip exactly, and the layout read back
// regenerates the very same actions: inference loses nothing the actions
// carry (the layer count T is not in them, so T=2 comes back as 1).
TEST(ScheduleIo, GeneratedSchedulesRoundTripAndRegenerate) {
  int checked = 0;
  for (const ScheduleOptions& o : generated_layouts()) {
    SCOPED_TRACE(describe(o));
    Schedule s;
    try {
      s = generate(o);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "generate failed: " << e.what();
      continue;
    }
    const Schedule from_t = from_text(to_text(s));
    const Schedule from_c = from_csv(to_csv(s));
    ASSERT_EQ(from_t.ranks, s.ranks);
    ASSERT_EQ(from_c.ranks, s.ranks);
    const ScheduleOptions& in = from_c.options;
    EXPECT_EQ(in.pp, o.pp);
    EXPECT_EQ(in.vpp, o.vpp);
    EXPECT_EQ(in.micro_batches, o.micro_batches);
    EXPECT_EQ(in.kind == ScheduleKind::MPipe, o.kind == ScheduleKind::MPipe);
    EXPECT_EQ(to_text(generate(in)), to_text(s)) << "inferred " << describe(in);
    if (o.kind == ScheduleKind::MPipe) {
      EXPECT_EQ(in.mpipe.transpose_layers, std::min(o.mpipe.transpose_layers, 1));
      EXPECT_EQ(in.mpipe.owner_backward, o.mpipe.owner_backward);
      EXPECT_EQ(in.mpipe.frozen_preprocess, o.mpipe.frozen_preprocess);
      if (o.micro_batches > o.nt()) {
        EXPECT_EQ(in.mpipe.overflow, o.mpipe.overflow);
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 300);
}

// Where the order differs, the kind comes back as generated.
TEST(ScheduleIo, GeneratedKindsAreRecognised) {
  for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved}) {
    ScheduleOptions o;
    o.kind = k;
    o.pp = 4;
    o.vpp = 1;
    o.micro_batches = 8;
    EXPECT_EQ(from_csv(to_csv(generate(o))).options.kind, k) << kind_name(k);
  }
}

}  // namespace
}  // namespace hp::schedule
