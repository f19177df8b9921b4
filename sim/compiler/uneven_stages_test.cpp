// Uneven first / last pipeline stages in the compiled program
// (parallel.first_stage_layers / last_stage_layers, docs/compiler.md#passes):
// plan_stages gives the first / last rank the layers asked for and the other
// ranks the rest evenly, and each rank class runs exactly those layers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "sim/compiler/compile.h"
#include "sim/compiler/compiler_test_support.h"
#include "sim/compiler/stage_plan.h"

namespace lacuna::compiler {
namespace {

using testing::make_scenario;
using testing::Small;

// pp 4 (tp 1, dp 1), 8 microbatches of 2.
scenario::LoadedScenario uneven(int64_t layers, int64_t v, int64_t first, int64_t last) {
  Small s;
  s.layers = layers;
  s.tp = 1;
  s.pp = 4;
  s.dp = 1;
  s.v = v;
  s.schedule = v > 1 ? scenario::INTERLEAVED_1F1B : scenario::ONE_F_ONE_B;
  scenario::LoadedScenario ls = make_scenario(s);
  ls.spec.mutable_parallel()->set_first_stage_layers(first);
  ls.spec.mutable_parallel()->set_last_stage_layers(last);
  return ls;
}

// The layers each model chunk of a rank class runs forward.
std::map<int32_t, std::set<int32_t>> forward_layers(const ir::RankClass& c) {
  std::map<int32_t, std::set<int32_t>> out;
  for (const auto& st : c.streams())
    if (st.kind() == ir::COMPUTE)
      for (const auto& op : st.ops())
        if (op.has_compute() && op.phase() == ir::FORWARD && op.layer() >= 0) out[op.chunk()].insert(op.layer());
  return out;
}

std::set<int32_t> range(int32_t first, int32_t count) {
  std::set<int32_t> out;
  for (int32_t l = first; l < first + count; ++l) out.insert(l);
  return out;
}

int64_t count_role(const ir::RankClass& c, ir::KernelRole role, ir::Phase phase) {
  int64_t n = 0;
  for (const auto& st : c.streams())
    for (const auto& op : st.ops()) n += op.has_compute() && op.compute().role() == role && op.phase() == phase;
  return n;
}

TEST(UnevenStages, PlanGivesFirstAndLastTheirLayers) {
  // 11 layers: 1 on the first rank, 4 on the last, (11 − 5) / 2 = 3 between.
  const auto ranges = plan_stages(uneven(11, 1, 1, 4));
  ASSERT_EQ(ranges.size(), 4u);
  const int64_t first[] = {0, 1, 4, 7}, count[] = {1, 3, 3, 4};
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(ranges[k].first, first[k]) << k;
    EXPECT_EQ(ranges[k].count, count[k]) << k;
  }
}

TEST(UnevenStages, EachRankRunsItsLayers) {
  const ir::Program p = compile(uneven(11, 1, 1, 4));
  ASSERT_EQ(p.classes_size(), 4);
  const int32_t first[] = {0, 1, 4, 7}, count[] = {1, 3, 3, 4};
  const int64_t m = 8;
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("pp rank " + std::to_string(r));
    const ir::RankClass& c = p.classes(r);
    const auto layers = forward_layers(c);
    ASSERT_EQ(layers.size(), 1u);
    EXPECT_EQ(layers.begin()->second, range(first[r], count[r]));
    // One QKV GEMM per layer and microbatch, forward.
    EXPECT_EQ(count_role(c, ir::ROLE_QKV, ir::FORWARD), count[r] * m);
    // The embedding on the first rank, the logits on the last.
    EXPECT_EQ(count_role(c, ir::ROLE_EMBEDDING, ir::FORWARD), r == 0 ? m : 0);
    EXPECT_EQ(count_role(c, ir::ROLE_LOGITS, ir::FORWARD), r == 3 ? m : 0);
  }
}

TEST(UnevenStages, InterleavedSplitsEachRanksLayersOverItsChunks) {
  // 22 layers, pp 4 × 2 chunks: rank 0 holds 2 (1 per chunk), rank 3 holds
  // 4 (2 per chunk), ranks 1 and 2 hold (22 − 6) / 2 = 8 (4 per chunk).
  // Virtual stage k = chunk·pp + rank; in pipeline order the counts are
  // 1 4 4 2 1 4 4 2, so stage k starts at the sum of those before it.
  const scenario::LoadedScenario ls = uneven(22, 2, 2, 4);
  const int32_t per_stage[] = {1, 4, 4, 2, 1, 4, 4, 2};
  int32_t start[8];
  for (int32_t k = 0, at = 0; k < 8; ++k) {
    start[k] = at;
    at += per_stage[k];
  }
  const auto ranges = plan_stages(ls);
  ASSERT_EQ(ranges.size(), 8u);
  for (size_t k = 0; k < 8; ++k) {
    EXPECT_EQ(ranges[k].first, start[k]) << k;
    EXPECT_EQ(ranges[k].count, per_stage[k]) << k;
  }
  const ir::Program p = compile(ls);
  ASSERT_EQ(p.classes_size(), 4);
  for (int32_t r = 0; r < 4; ++r) {
    SCOPED_TRACE("pp rank " + std::to_string(r));
    const auto layers = forward_layers(p.classes(r));
    ASSERT_EQ(layers.size(), 2u);
    for (int32_t chunk = 0; chunk < 2; ++chunk) {
      const int32_t k = chunk * 4 + r;
      EXPECT_EQ(layers.at(chunk), range(start[k], per_stage[k])) << "chunk " << chunk;
    }
  }
}

}  // namespace
}  // namespace lacuna::compiler
