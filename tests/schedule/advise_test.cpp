// The schedule advisor: the costs it derives for each layout, its ranking in
// the regimes of spec section 6 (a frozen vision tower: MPipe wins; a
// trainable embedding broadcast every step: MPipe loses), and its refusals.
#include <gtest/gtest.h>

#include <tuple>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "schedule/advise.hpp"

namespace hp::schedule {
namespace {

// Spec section 6's winning regime: a frozen tower whose forward is 4x one
// stage's body forward (4 blocks of 2 against 2 layers of 1 at PP 4 v 1).
ModelProfile frozen_tower() {
  ModelProfile m;
  m.layers = 8;
  m.tower_layers = 4;
  m.tower_f = 2;
  m.tower_b = 4;
  m.embed_f = 0.2;
  m.frozen_preprocess = true;
  return m;
}

// The losing regime: a trainable embedding of 2e8 bytes broadcast every step.
ModelProfile trainable_llm() {
  ModelProfile m;
  m.layers = 8;
  m.embed_f = 0.2;
  m.embed_b = 0.4;
  m.embed_bytes = 2e8;
  m.layer_bytes = 1e7;
  m.broadcast_bw = 1e8;
  return m;
}

const Candidate& best_of(const Advice& a, ScheduleKind kind, int min_t = 0) {
  const auto it = std::find_if(a.ranked.begin(), a.ranked.end(), [&](const Candidate& c) {
    return c.options.kind == kind && (kind != ScheduleKind::MPipe || c.options.mpipe.transpose_layers >= min_t);
  });
  if (it == a.ranked.end()) throw std::logic_error("no candidate of that kind");
  return *it;
}

TEST(Advise, ProfileCostsMoveWhatMPipeTransposes) {
  ModelProfile gpt = trainable_llm();
  ScheduleOptions o;
  o.kind = ScheduleKind::MPipe;
  o.pp = 2;
  o.vpp = 1;
  o.mpipe.transpose_layers = 1;
  CostModel c = profile_costs(gpt, o);  // 4 layers per chunk; the embedding and layer 0 move
  EXPECT_DOUBLE_EQ(c.f, 4);
  EXPECT_DOUBLE_EQ(c.per_stage.at(0).f, 3);
  EXPECT_DOUBLE_EQ(c.per_stage.at(0).b, 6);
  EXPECT_DOUBLE_EQ(c.pre_f, 1.2);
  EXPECT_DOUBLE_EQ(c.pre_b, 2.4);
  EXPECT_DOUBLE_EQ(c.broadcast_bytes, 2.1e8);
  o.mpipe.transpose_layers = 0;  // the data load only: stage 0 keeps the embedding
  c = profile_costs(gpt, o);
  EXPECT_DOUBLE_EQ(c.pre_f, 0);
  EXPECT_DOUBLE_EQ(c.per_stage.at(0).f, 4.2);
  EXPECT_DOUBLE_EQ(c.broadcast_bytes, 0);
  o.kind = ScheduleKind::OneFOneB;  // the simulator adds the embedding to F(0, m)
  c = profile_costs(gpt, o);
  EXPECT_DOUBLE_EQ(c.pre_f, 0.2);
  EXPECT_DOUBLE_EQ(c.per_stage.at(0).f, 4);

  const ModelProfile vl = frozen_tower();
  o.kind = ScheduleKind::MPipe;
  o.mpipe.transpose_layers = 3;  // 3 of the 4 tower blocks move; frozen: no backward
  c = profile_costs(vl, o);
  EXPECT_DOUBLE_EQ(c.pre_f, 0.2 + 3 * 2);
  EXPECT_DOUBLE_EQ(c.pre_b, 0);
  EXPECT_DOUBLE_EQ(c.per_stage.at(0).f, 4 + 2);
  EXPECT_DOUBLE_EQ(c.per_stage.at(0).b, 8);
}

TEST(Advise, AFrozenTowerMakesMPipeTheFirstChoice) {
  const Advice a = advise(frozen_tower(), 4, 8);
  // By step time; the same time (to rounding) by peak memory.
  for (size_t i = 1; i < a.ranked.size(); ++i) {
    const Candidate &prev = a.ranked[i - 1], &c = a.ranked[i];
    EXPECT_LE(prev.step_time, c.step_time * (1 + 1e-9)) << prev.name << " before " << c.name;
    if (std::abs(prev.step_time - c.step_time) <= 1e-9 * c.step_time) {
      EXPECT_LE(prev.peak_layer_activations, c.peak_layer_activations) << prev.name << " before " << c.name;
    }
  }
  const Candidate& w = a.ranked.front();
  EXPECT_EQ(w.options.kind, ScheduleKind::MPipe);
  EXPECT_GE(w.options.mpipe.transpose_layers, 1);
  EXPECT_LT(w.step_time, 0.8 * best_of(a, ScheduleKind::OneFOneB).step_time);
  // The interleaved body at v = 1 warms up 2(PP-1) deep: rank 0 holds 7 micro-batches where 1F1B holds 4;
  // MPipe over a 1F1B body holds what 1F1B holds.
  auto first_v1 = [&](ScheduleKind body) {
    return *std::find_if(a.ranked.begin(), a.ranked.end(), [&](const Candidate& c) {
      return c.options.kind == ScheduleKind::MPipe && c.options.vpp == 1 && c.options.mpipe.body == body;
    });
  };
  EXPECT_DOUBLE_EQ(first_v1(ScheduleKind::Interleaved).peak_layer_activations, 7 * 2);
  EXPECT_DOUBLE_EQ(first_v1(ScheduleKind::OneFOneB).peak_layer_activations, 4 * 2);
  EXPECT_EQ(first_v1(ScheduleKind::OneFOneB).name.rfind("mpipe body=1f1b T=", 0), 0u);
  EXPECT_DOUBLE_EQ(best_of(a, ScheduleKind::OneFOneB).peak_layer_activations, 4 * 2);
  const std::string why = explain(a);
  EXPECT_EQ(why.rfind(w.name + " wins", 0), 0u) << why;
  EXPECT_NE(why.find("off rank 0's critical path"), std::string::npos) << why;
}

TEST(Advise, ABroadcastEmbeddingMakesMPipeLoseAndSaysWhy) {
  const Advice a = advise(trainable_llm(), 4, 8);
  const Candidate& moving = best_of(a, ScheduleKind::MPipe, 1);
  EXPECT_GT(moving.step_time, a.ranked.front().step_time);
  EXPECT_GT(moving.broadcast_time, 1.9);  // 2.1e8 bytes at 1e8 per unit
  EXPECT_GT(moving.recompute_time, 0);
  EXPECT_NE(a.ranked.front().options.kind, ScheduleKind::MPipe);
  const std::string why = explain(a);
  EXPECT_NE(why.find("vs " + moving.name + ": "), std::string::npos) << why;
  EXPECT_NE(why.find("its parameter broadcast takes 2.10"), std::string::npos) << why;
  // T = 0 moves only a free data load: the same step as its interleaved body.
  for (const auto& c : a.ranked)
    if (c.options.kind == ScheduleKind::MPipe && c.options.mpipe.transpose_layers == 0 && c.options.vpp == 2 &&
        c.options.mpipe.body == ScheduleKind::Interleaved) {
      EXPECT_NEAR(c.step_time, best_of(a, ScheduleKind::Interleaved).step_time, 1e-9) << c.name;
    }
}

// The zero-bubble schedules are candidates: zb1p at every v the layers
// split into, zbv at v 2; with B = 2F split evenly into I and W, zb1p at v 1
// beats 1F1B and holds no more than it (ZB-H1's promise).
TEST(Advise, RanksTheZeroBubbleSchedulesBesideTheOthers) {
  ModelProfile m;
  m.layers = 8;
  m.layer_f = 1;
  m.layer_b = 2;
  const Advice a = advise(m, 4, 8);
  auto named = [&](const std::string& name) {
    auto it = std::find_if(a.ranked.begin(), a.ranked.end(), [&](const Candidate& c) { return c.name == name; });
    return it == a.ranked.end() ? nullptr : &*it;
  };
  for (const char* name : {"zb1p v=1", "zb1p v=2", "zbv", "dualpipev"}) ASSERT_NE(named(name), nullptr) << name;
  EXPECT_EQ(named("zbv")->options.vpp, 2);
  EXPECT_EQ(named("dualpipev")->options.vpp, 2);
  // Below 2 PP micro-batches DualPipeV is skipped with its reason.
  const Advice few = advise(m, 4, 6);
  EXPECT_NE(std::find_if(few.skipped.begin(), few.skipped.end(),
                         [](const std::string& s) { return s.rfind("dualpipev: ", 0) == 0 && s.find(">= 2 x") != std::string::npos; }),
            few.skipped.end());
  EXPECT_LT(named("zb1p v=1")->step_time, best_of(a, ScheduleKind::OneFOneB).step_time);
  EXPECT_LE(named("zb1p v=1")->peak_layer_activations, best_of(a, ScheduleKind::OneFOneB).peak_layer_activations);
  // MPipe around each zero-bubble body is a candidate too; with T = 0 it moves
  // only the (here free) data load, so it takes its body's step.
  for (const auto& [body, v, own] : std::vector<std::tuple<ScheduleKind, int, std::string>>{
           {ScheduleKind::ZeroBubble1P, 1, "zb1p v=1"}, {ScheduleKind::ZeroBubble1P, 2, "zb1p v=2"},
           {ScheduleKind::ZeroBubbleV, 2, "zbv"}, {ScheduleKind::DualPipeV, 2, "dualpipev"}}) {
    const auto it = std::find_if(a.ranked.begin(), a.ranked.end(), [&, body = body, v = v](const Candidate& c) {
      return c.options.kind == ScheduleKind::MPipe && c.options.mpipe.body == body && c.options.vpp == v &&
             c.options.mpipe.transpose_layers == 0 && c.options.mpipe.overflow == Overflow::Full;
    });
    ASSERT_NE(it, a.ranked.end()) << "mpipe around " << own;
    EXPECT_NEAR(it->step_time, named(own)->step_time, 1e-9) << it->name;
  }
}

TEST(Advise, RefusesABadProfileNamingTheField) {
  ModelProfile m;
  m.layers = 0;
  EXPECT_THROW(
      {
        try {
          advise(m, 4, 8);
        } catch (const std::invalid_argument& e) {
          EXPECT_STREQ(e.what(), "profile.layers must be >= 1, got 0");
          throw;
        }
      },
      std::invalid_argument);
  m.layers = 8;
  m.tower_b = -1;
  EXPECT_THROW(advise(m, 4, 8), std::invalid_argument);
  m.tower_b = 0;
  m.layers = 3;  // no split over 4 ranks
  EXPECT_THROW(advise(m, 4, 8), std::invalid_argument);
}

}  // namespace
}  // namespace hp::schedule
