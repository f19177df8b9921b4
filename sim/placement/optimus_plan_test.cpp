// Optimus planner pieces as pure functions: the GPU → encoder mapping, plan
// enumeration, layer split, microbatch splits and the paper's memory model.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "sim/placement/optimus_plan.h"

namespace lacuna::placement::optimus {
namespace {

TEST(OptimusGeometry, EveryGpuHoldsExactlyOneEncoderStageShard) {
  for (int32_t tp_enc : {1, 2, 4, 8})
    for (int32_t pp_enc : {1, 2, 4, 8}) {
      Geometry g;
      g.tp_llm = 8;
      g.pp_llm = 8;
      g.dp_llm = 48;
      g.tp_enc = tp_enc;
      g.pp_enc = pp_enc;
      SCOPED_TRACE("tp_enc " + std::to_string(tp_enc) + " pp_enc " + std::to_string(pp_enc));
      EXPECT_EQ(g.pipelines(), (8 / pp_enc) * (8 / tp_enc));
      EXPECT_EQ(g.dp_enc(), g.pipelines() * 48);
      // (encoder pipeline, encoder stage, encoder tp rank) of every GPU of one
      // LLM pipeline: a bijection onto pipelines × PP_enc × TP_enc.
      std::set<std::tuple<int, int, int>> seen;
      for (int32_t s = 0; s < 8; ++s)
        for (int32_t t = 0; t < 8; ++t) {
          const int32_t e = g.pipeline(s, t), j = g.encoder_stage(s);
          EXPECT_TRUE(seen.insert({e, j, t % tp_enc}).second);
          // Stage j of pipeline e sits where the mapping says, and its next
          // stage is the LLM's pp_next neighbour (same tp, s + 1).
          EXPECT_EQ(g.llm_stage(e, j), s);
          if (j + 1 < pp_enc) {
            EXPECT_EQ(g.pipeline(s + 1, t), e);
            EXPECT_EQ(g.encoder_stage(s + 1), j + 1);
          }
          EXPECT_EQ(g.slice_of_pipeline(e), t / tp_enc);
        }
      EXPECT_EQ(static_cast<int>(seen.size()), g.pipelines() * pp_enc * tp_enc);
    }
}

TEST(OptimusGeometry, BoundaryIsLocalOnlyOnStageZeroOwnSlice) {
  Geometry g;
  g.tp_llm = 4;
  g.pp_llm = 2;
  g.tp_enc = 2;
  g.pp_enc = 1;  // R = 2, m = 4: pipelines 0, 1 on LLM stage 0, 2, 3 on stage 1
  EXPECT_TRUE(g.boundary_self(0, 0));
  EXPECT_FALSE(g.boundary_self(0, 1));
  EXPECT_TRUE(g.boundary_self(1, 1));
  EXPECT_FALSE(g.boundary_self(2, 0));
  EXPECT_FALSE(g.boundary_self(3, 1));
  g.pp_enc = 2;  // every pipeline ends on LLM stage 1: never local
  for (int e = 0; e < g.pipelines(); ++e)
    for (int k = 0; k < g.slices(); ++k) EXPECT_FALSE(g.boundary_self(e, k));
}

TEST(OptimusGeometry, EnumerationOrderAndLayerLimit) {
  const auto all = enumerate_geometries(8, 8, 48, 48);
  ASSERT_EQ(all.size(), 16u);
  EXPECT_EQ(all.front().pp_enc, 1);
  EXPECT_EQ(all.front().tp_enc, 1);
  EXPECT_EQ(all[1].tp_enc, 2);
  EXPECT_EQ(all.back().pp_enc, 8);
  EXPECT_EQ(all.back().tp_enc, 8);
  // An encoder of 3 layers cannot have 4 or 8 stages.
  const auto few = enumerate_geometries(8, 8, 1, 3);
  EXPECT_EQ(few.size(), 8u);
  for (const auto& g : few) EXPECT_LE(g.pp_enc, 2);
}

TEST(OptimusGeometry, StageLayersSplitEvenlyFirstStagesTakeTheRest) {
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(stage_layers(48, 8, j).count, 6);
    EXPECT_EQ(stage_layers(48, 8, j).first, 6 * j);
  }
  // 10 layers over 4 stages: 3, 3, 2, 2.
  const int64_t counts[] = {3, 3, 2, 2}, firsts[] = {0, 3, 6, 8};
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(stage_layers(10, 4, j).count, counts[j]);
    EXPECT_EQ(stage_layers(10, 4, j).first, firsts[j]);
  }
}

TEST(OptimusSplits, PaperCountsEveryPipelineNonEmpty) {
  // The Optimus model planner: N_mb = 8 microbatches over m = 2 encoder pipelines gives 7
  // splits, i.e. each pipeline gets at least one (1+7 … 7+1).
  EXPECT_EQ(count_splits(8, 2, 1), 7u);
  const auto splits = enumerate_splits(8, 2, 4096, {});
  ASSERT_EQ(splits.size(), 7u);
  for (size_t i = 0; i < splits.size(); ++i) {
    EXPECT_EQ(splits[i][0], static_cast<int>(i) + 1);
    EXPECT_EQ(splits[i][0] + splits[i][1], 8);
  }
  EXPECT_EQ(count_splits(16, 4, 1), 455u);  // C(15, 3)
  EXPECT_EQ(enumerate_splits(16, 4, 4096, {}).size(), 455u);
  EXPECT_EQ(count_splits(16, 1, 1), 1u);
  EXPECT_EQ(count_splits(4, 5, 1), 0u);
  EXPECT_EQ(count_splits(2, 4, 0), 10u);  // C(5, 3): zeros allowed
  // Saturates instead of overflowing.
  EXPECT_EQ(count_splits(1000, 500, 0), std::numeric_limits<uint64_t>::max());
}

TEST(OptimusSplits, AllSplitsAreDistinctCompositions) {
  const auto splits = enumerate_splits(9, 3, 4096, {});
  EXPECT_EQ(splits.size(), count_splits(9, 3, 1));
  std::set<std::vector<int32_t>> distinct(splits.begin(), splits.end());
  EXPECT_EQ(distinct.size(), splits.size());
  for (const auto& s : splits) {
    EXPECT_EQ(std::accumulate(s.begin(), s.end(), 0), 9);
    for (int v : s) EXPECT_GE(v, 1);
  }
  EXPECT_TRUE(std::is_sorted(splits.begin(), splits.end()));
}

TEST(OptimusSplits, CappedSubsetIsBalancedThenNeighbours) {
  // 17 over 8 = C(16, 7) = 11440 > cap: balanced (2 each, the extra one to
  // the pipeline with the most bubble time), then one-microbatch moves.
  std::vector<int64_t> bubble(8, 100);
  bubble[5] = 300;
  const auto splits = enumerate_splits(17, 8, 20, bubble);
  ASSERT_EQ(splits.size(), 20u);
  EXPECT_EQ(splits[0], (std::vector<int32_t>{2, 2, 2, 2, 2, 3, 2, 2}));
  EXPECT_EQ(splits[1], (std::vector<int32_t>{1, 3, 2, 2, 2, 3, 2, 2}));  // 0 → 1
  std::set<std::vector<int32_t>> distinct(splits.begin(), splits.end());
  EXPECT_EQ(distinct.size(), splits.size());
  for (const auto& s : splits) {
    EXPECT_EQ(std::accumulate(s.begin(), s.end(), 0), 17);
    for (int v : s) EXPECT_GE(v, 1);
  }
  // Ties go to the lower index; deterministic.
  EXPECT_EQ(enumerate_splits(17, 8, 20, {}), enumerate_splits(17, 8, 20, {}));
  EXPECT_EQ(enumerate_splits(17, 8, 20, {})[0], (std::vector<int32_t>{3, 2, 2, 2, 2, 2, 2, 2}));
}

TEST(OptimusSplits, MorePipelinesThanMicrobatchesLeaveSomeIdle) {
  // m > N: a pipeline may get nothing.
  const auto all = enumerate_splits(2, 3, 4096, {});
  EXPECT_EQ(all.size(), 6u);  // C(4, 2)
  const auto capped = enumerate_splits(4, 64, 100, {});
  ASSERT_FALSE(capped.empty());
  EXPECT_LE(capped.size(), 100u);
  EXPECT_EQ(std::accumulate(capped[0].begin(), capped[0].end(), 0), 4);
  EXPECT_EQ(std::count(capped[0].begin(), capped[0].end(), 1), 4);
}

TEST(OptimusMemory, PaperFormulasOnAHandCheckedCase) {
  // ViT-22B + GPT-175B on 3,072 GPUs, TP 8 PP 8 DP 48 for the LLM; the
  // encoder with TP 1 PP 8: m = 8 pipelines per LLM pipeline, DP_enc = 384.
  // MEM = 6 · (384 · 22e9 + 48 · 175e9) / 3072 = 6 · 16.848e12 / 3072
  //     = 32.90625e9 bytes; overhead = 6 · 336 · 22e9 / 3072 = 14.4375e9.
  EXPECT_DOUBLE_EQ(paper_model_memory_bytes(kReplicatedBytesPerParameter, 384, 22e9, 48, 175e9, 3072), 32.90625e9);
  EXPECT_DOUBLE_EQ(paper_memory_overhead_bytes(kReplicatedBytesPerParameter, 384, 48, 22e9, 3072), 14.4375e9);
  // Unified 3D parallelism (DP_enc = DP_llm): no overhead; the model state is
  // then k · (Φ_enc + Φ_llm) / (TP · PP).
  EXPECT_DOUBLE_EQ(paper_memory_overhead_bytes(6, 48, 48, 22e9, 3072), 0);
  EXPECT_DOUBLE_EQ(paper_model_memory_bytes(6, 48, 22e9, 48, 175e9, 3072), 6 * (22e9 + 175e9) / 64);
  // Overhead = MEM(plan) − MEM(unified).
  EXPECT_DOUBLE_EQ(paper_model_memory_bytes(6, 384, 22e9, 48, 175e9, 3072) -
                       paper_model_memory_bytes(6, 48, 22e9, 48, 175e9, 3072),
                   paper_memory_overhead_bytes(6, 384, 48, 22e9, 3072));
}

}  // namespace
}  // namespace lacuna::placement::optimus
