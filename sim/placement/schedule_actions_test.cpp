// schedule_actions (schedule_actions.h) for the placements that are read back
// from their compiled program: the islands' encoder classes run exactly
// their graph-aware 1F1B (schedule::graph_aware_1f1b), colocated classes run
// their three-phase schedule (schedule::colocated_three_phase) around the
// LLM's unchanged one, and Optimus's cut
// passes tile their kernels while the LLM's passes, joined, are its schedule.
#include "sim/placement/schedule_actions.h"

#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "sim/core/error.h"
#include "sim/placement/hetero_test_support.h"
#include "sim/placement/optimus_test_support.h"
#include "sim/schedule/colocated.h"
#include "sim/schedule/graph_aware.h"
#include "sim/schedule/schedule.h"

namespace lacuna::placement {
namespace {

using compiler::testing::Small;
using schedule::ActionType;
using schedule::RankActions;

// The actions of `line` whose module is `module`, the pieces of a cut pass
// joined back into the pass (its kernel ranges checked to tile it in order).
RankActions joined(const RankActions& line, const std::string& module) {
  RankActions out;
  std::map<std::tuple<ActionType, int32_t, int32_t>, int32_t> next_kernel;
  for (const auto& a : line) {
    if (!a || a->module != module) continue;
    const auto key = std::make_tuple(a->type, a->stage, a->microbatch);
    if (a->kernels) {
      auto [it, first] = next_kernel.try_emplace(key, 0);
      EXPECT_EQ(a->kernels->begin, it->second) << schedule::to_string(*a) << " does not continue its pass";
      EXPECT_LT(a->kernels->begin, a->kernels->end);
      it->second = a->kernels->end;
      if (!first) continue;  // a later piece of a pass already listed
    }
    schedule::ScheduleAction whole = *a;
    whole.kernels.reset();
    out.push_back(whole);
  }
  return out;
}

std::string text(const RankActions& r) { return schedule::format_schedule({r}); }

// Index of the first / last action of `module` in `line` (−1: none).
int32_t first_of(const RankActions& line, const std::string& module) {
  for (size_t i = 0; i < line.size(); ++i)
    if (line[i]->module == module) return static_cast<int32_t>(i);
  return -1;
}
int32_t last_of(const RankActions& line, const std::string& module) {
  for (size_t i = line.size(); i-- > 0;)
    if (line[i]->module == module) return static_cast<int32_t>(i);
  return -1;
}

// The LLM's 1F1B actions of pipeline rank `rank`.
RankActions llm_line(int32_t pp, int32_t microbatches, int32_t rank) {
  const schedule::PipelineShape shape{pp, 1, microbatches};
  return schedule::to_actions(schedule::build_schedule(scenario::ONE_F_ONE_B, shape), shape)[static_cast<size_t>(rank)];
}

TEST(ScheduleActionsReadBack, IslandsRunTheirGraphAwareScheduleAndTheLlmItsOwn) {
  const Small llm;  // TP 2 × PP 2 × DP 2, 1F1B, 4 microbatches
  testing::EncoderSpec enc;
  enc.pp = 2;
  enc.dp = 2;
  enc.first_rank = 8;
  const auto sc = testing::make_mllm(llm, {enc});
  std::vector<std::string> lanes;
  const schedule::ActionSchedule got = schedule_actions(sc, false, &lanes);
  ASSERT_EQ(got.size(), lanes.size());
  // LLM stage 0 returns microbatch i's gradient after pp + i chunk-0 forwards.
  schedule::GraphAwareInput in;
  in.stages = 2;
  in.sink_distance = 2;
  in.downstream_need = {2, 3, 4, 4};
  in.trains = {true, true};
  in.module = "vit0";
  const schedule::ActionSchedule want = schedule::graph_aware_1f1b(in);
  EXPECT_EQ(schedule::parse_schedule(schedule::format_schedule(got), "islands"), got);
  int32_t encoder_lines = 0, llm_lines = 0;
  for (size_t k = 0; k < got.size(); ++k) {
    SCOPED_TRACE(lanes[k]);
    const RankActions& line = got[k];
    ASSERT_FALSE(line.empty());
    if (line.front()->module == "vit0") {
      ++encoder_lines;
      const int32_t stage = line.front()->stage;
      EXPECT_EQ(text(line), text(want[static_cast<size_t>(stage)]));
    } else {
      ++llm_lines;
      EXPECT_EQ(first_of(line, "vit0"), -1);
      const int32_t rank = line.front()->stage;  // its first forward is of its own stage
      EXPECT_EQ(text(line), text(llm_line(2, 4, rank)));
    }
  }
  EXPECT_GE(encoder_lines, 2);  // both encoder stages (leaders may form classes of their own)
  EXPECT_GE(llm_lines, 2);
}

TEST(ScheduleActionsReadBack, ColocatedClassesRunThreePhasesAroundTheLlm) {
  const Small llm;
  testing::EncoderSpec enc;  // dp 8 on the LLM's 8 ranks
  const auto sc = testing::make_mllm(llm, {enc});
  const schedule::ActionSchedule got = schedule_actions(sc);
  ASSERT_FALSE(got.empty());
  for (const RankActions& line : got) {
    SCOPED_TRACE(text(line));
    const RankActions llm_part = joined(line, "");
    ASSERT_FALSE(llm_part.empty());
    EXPECT_EQ(text(llm_part), text(llm_line(2, 4, llm_part.front()->stage)));
    // Phase 1: every encoder forward before the LLM's first pass; phase 3:
    // every encoder backward after its last.
    int32_t forwards = 0, backwards = 0;
    const int32_t llm_first = first_of(line, ""), llm_last = last_of(line, "");
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i]->module != "vit0") continue;
      if (line[i]->type == ActionType::kForward) {
        ++forwards;
        EXPECT_LT(static_cast<int32_t>(i), llm_first);
      } else {
        ++backwards;
        EXPECT_GT(static_cast<int32_t>(i), llm_last);
      }
    }
    EXPECT_GT(forwards, 0);
    EXPECT_EQ(forwards, backwards);
    // Exactly the placement's own schedule.
    EXPECT_EQ(text(line), text(schedule::colocated_three_phase({{"vit0", 1, 0, forwards, true}},
                                                               llm_line(2, 4, llm_part.front()->stage))));
  }
}

TEST(ScheduleActionsReadBack, OptimusCutsTileTheirPassesAndKeepTheLlmSchedule) {
  optimus::testing::SmallMllm m;  // the small LLM, TP 2 × PP 2 × DP 2, one encoder
  const auto sc = optimus::testing::make_mllm(m);
  std::vector<std::string> lanes;
  const schedule::ActionSchedule got = schedule_actions(sc, false, &lanes);
  ASSERT_EQ(got.size(), lanes.size());
  EXPECT_EQ(schedule::parse_schedule(schedule::format_schedule(got), "optimus"), got);
  int32_t encoder_passes = 0;
  for (const RankActions& line : got) {
    SCOPED_TRACE(text(line));
    const RankActions llm_part = joined(line, "");
    ASSERT_FALSE(llm_part.empty());
    EXPECT_EQ(text(llm_part), text(llm_line(2, 4, llm_part.front()->stage)));
    encoder_passes += static_cast<int32_t>(joined(line, "vit-0").size());
  }
  EXPECT_GT(encoder_passes, 0);
  // Transfers run on their own streams: there are no blocking calls to write.
  EXPECT_THROW(schedule_actions(sc, true), Error);
}

// A name that cannot prefix an action is refused at its field, before
// anything is written.
TEST(ScheduleActionsReadBack, AnEncoderNameThatCannotPrefixActionsIsRefused) {
  testing::EncoderSpec enc;
  auto sc = testing::make_mllm(Small{}, {enc});
  sc.spec.mutable_model()->mutable_encoders(0)->mutable_transformer()->set_name("my vit");
  try {
    schedule_actions(sc);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "model.encoders[0].transformer.name") << e.what();
    EXPECT_NE(std::string(e.what()).find("\"my vit\" cannot prefix its actions"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lacuna::placement
