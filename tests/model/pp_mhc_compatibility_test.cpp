// pp_mhc_compatibility (after Megatron-LM's test_pp_mhc_compatibility.py): for
// layouts of GPT and Hybrid models with and without mHC, every rank's stages
// are built as the runtime gets them and run in stage order in one process;
// every communicating edge (stage s -> s + 1, including the last rank's send to
// the first rank's next virtual chunk) must carry [rows, seq, hidden * n] on
// the sender's side, equal to what the receiver allocates (output_spec) and
// takes; layer counts per stage follow the partition, empty stages included.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <map>

#include "model/gpt_stages.hpp"
#include "model/hybrid_stages.hpp"
#include "model/test_util.hpp"

namespace hp::model {
namespace {

struct Layout {
  int pp, vpp;
  bool mhc;
  std::vector<int> gpt_counts;  // empty: even split
  std::string hybrid_pattern;   // empty: a GPT
};

std::string name(const Layout& l) {
  std::string s = "pp" + std::to_string(l.pp) + "_v" + std::to_string(l.vpp) + (l.mhc ? "_mhc" : "");
  return s + (l.hybrid_pattern.empty() ? "_gpt" : "_hybrid");
}

constexpr int64_t kRows = 2, kSeq = 5, kHidden = 8, kStreams = 3;

std::map<int, runtime::PipelineStage> all_stages(const Layout& l, runtime::RankModel* any_rank) {
  schedule::ScheduleOptions s;
  s.kind = l.vpp > 1 ? schedule::ScheduleKind::Interleaved : schedule::ScheduleKind::OneFOneB;
  s.pp = l.pp;
  s.vpp = l.vpp;
  s.micro_batches = 4;
  TransformerConfig c;
  c.hidden_size = kHidden;
  c.num_attention_heads = 2;
  c.vocab_size = 16;
  c.max_seq_len = kSeq;
  c.dtype = DType::Float64;
  c.enable_mhc_connections = l.mhc;
  c.mhc_num_residual_streams = kStreams;
  std::map<int, runtime::PipelineStage> out;
  for (int r = 0; r < l.pp; ++r) {
    runtime::RankModel m;
    if (l.hybrid_pattern.empty()) {
      GPTStagesOptions g;
      g.config = c;
      g.config.num_layers = 7;
      g.layers_per_stage = l.gpt_counts;
      g.micro_batch_rows = kRows;
      g.seq_len = kSeq;
      m = build_gpt_stages(g, s, r);
    } else {
      HybridStagesOptions h;
      h.config.base = c;
      h.config.pattern = l.hybrid_pattern;
      h.micro_batch_rows = kRows;
      h.seq_len = kSeq;
      m = build_hybrid_stages(h, s, r);
    }
    for (auto& st : m.stages) {
      EXPECT_EQ(st.index % l.pp, r) << "rank " << r << " got stage " << st.index;
      out[st.index] = st;
    }
    *any_rank = m;
  }
  return out;
}

class PpMhcCompatibility : public ::testing::TestWithParam<Layout> {};

TEST_P(PpMhcCompatibility, EveryEdgeCarriesTheStreamsAndSenderEqualsReceiver) {
  at::manual_seed(114);  // a failure reproduces
  const Layout l = GetParam();
  runtime::RankModel model;
  const auto stages = all_stages(l, &model);
  const int n = l.pp * l.vpp;
  ASSERT_EQ(static_cast<int>(stages.size()), n);
  const int64_t width = kHidden * (l.mhc ? kStreams : 1);
  const auto tokens = at::randint(16, {kRows, kSeq + 1}, at::kLong);
  runtime::MicroBatch micro;
  micro.input = tokens.narrow(1, 0, kSeq);
  micro.target = tokens.narrow(1, 1, kSeq);
  at::Tensor x = micro.input;
  for (int s = 0; s < n; ++s) {
    const at::Tensor out = stages.at(s).forward(x, micro);
    if (s == n - 1) {
      EXPECT_EQ(out.sizes().vec(), (std::vector<int64_t>{kRows, kSeq, 16}));
      break;
    }
    // The edge s -> s + 1 (ranks s % pp -> (s + 1) % pp).
    const runtime::TensorSpec spec = model.output_spec(s, 0);
    EXPECT_EQ(out.sizes().vec(), (std::vector<int64_t>{kRows, kSeq, width})) << "edge " << s << " -> " << s + 1;
    EXPECT_EQ(out.sizes().vec(), spec.shape) << "edge " << s << " -> " << s + 1;
    EXPECT_EQ(out.scalar_type(), spec.dtype);
    EXPECT_FALSE(out.is_same(x));  // an empty stage's output is its own tensor
    x = out.detach().requires_grad_(true);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, PpMhcCompatibility,
    ::testing::Values(Layout{2, 1, true, {}, ""}, Layout{4, 1, true, {}, ""}, Layout{2, 2, true, {}, ""},
                      Layout{2, 2, false, {}, ""},
                      // [embedding], [decoder x7], [], [loss]
                      Layout{4, 1, true, {0, 7, 0, 0}, ""}, Layout{2, 2, true, {0, 7, 0, 0}, ""},
                      Layout{2, 1, true, {}, "M*E|-M/*-"}, Layout{2, 2, true, {}, "M*||E-|M/-"},
                      Layout{4, 1, false, {}, "M|*||E-"}, Layout{2, 2, true, {}, "|M*E|-|M"}),
    [](const auto& info) { return name(info.param) + "_" + std::to_string(info.index); });

TEST(PpMhcCompatibility, LayerCountsPerStageFollowThePartitionEmptyStagesIncluded) {
  EXPECT_EQ(HybridPattern::parse("M*||E-|M").stage_layer_counts(2, 2), (std::vector<int>{2, 0, 2, 1}));
  EXPECT_EQ(Partition::from_counts(7, 4, 1, {0, 7, 0, 0}).counts(), (std::vector<int>{0, 7, 0, 0}));
  EXPECT_EQ(Partition::from_counts(7, 2, 2, {0, 7, 0, 0}).stage_of_layer(6), 1);
  EXPECT_EQ(Partition::even(7, 2, 2).counts(), (std::vector<int>{2, 2, 2, 1}));
}

}  // namespace
}  // namespace hp::model
