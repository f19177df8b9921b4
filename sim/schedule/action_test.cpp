#include "sim/schedule/action.h"

#include <gtest/gtest.h>

#include <random>

#include "sim/core/error.h"
#include "sim/core/error_testing.h"
#include "sim/proto/scenario.pb.h"
#include "sim/schedule/lower_p2p.h"
#include "sim/schedule/validate_actions.h"

namespace lacuna::schedule {
namespace {

using testing_support::formatted_error_of;
std::string error_of(const std::function<void()>& f) { return formatted_error_of(f); }

ScheduleAction random_action(std::mt19937_64& rng) {
  ScheduleAction a;
  a.type = static_cast<ActionType>(rng() % 15);
  a.stage = static_cast<int32_t>(rng() % 1000);
  if (has_microbatch(a.type)) a.microbatch = static_cast<int32_t>(rng() % 100000);
  if (rng() % 3 == 0) a.module = (rng() % 2) ? "vit" : "audio-enc_2.b";
  if (is_compute(a.type) && rng() % 3 == 0) {
    const int32_t first = static_cast<int32_t>(rng() % 50);
    a.kernels = KernelRange{first, first + 1 + static_cast<int32_t>(rng() % 50)};
  }
  return a;
}

TEST(ActionText, PyTorchsExamplesParse) {
  const ScheduleAction f = parse_action("1F0", "t");
  EXPECT_EQ(f.type, ActionType::kForward);
  EXPECT_EQ(f.stage, 1);
  EXPECT_EQ(f.microbatch, 0);
  const ScheduleAction s = parse_action("12SEND_B34", "t");
  EXPECT_EQ(s.type, ActionType::kSendBackward);
  EXPECT_EQ(s.stage, 12);
  EXPECT_EQ(s.microbatch, 34);
  const ScheduleAction u = parse_action("2UNSHARD", "t");
  EXPECT_EQ(u.type, ActionType::kUnshard);
  EXPECT_EQ(u.microbatch, -1);
  const ScheduleAction r = parse_action("3RECV_F1", "t");  // not R + ECV_F1
  EXPECT_EQ(r.type, ActionType::kRecvForward);
  const ScheduleAction k = parse_action("vit:0F1@4-9", "t");
  EXPECT_EQ(k.module, "vit");
  ASSERT_TRUE(k.kernels.has_value());
  EXPECT_EQ(k.kernels->begin, 4);
  EXPECT_EQ(k.kernels->end, 9);
}

TEST(ActionText, RoundTripsRandomActionsAndSchedules) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 5000; ++i) {
    const ScheduleAction a = random_action(rng);
    EXPECT_EQ(parse_action(to_string(a), "t"), a) << to_string(a);
  }
  for (int i = 0; i < 200; ++i) {
    ActionSchedule s(1 + rng() % 6);
    for (auto& rank : s) {
      const size_t n = rng() % 12;
      for (size_t k = 0; k < n; ++k) {
        if (rng() % 5 == 0)
          rank.push_back(std::nullopt);
        else
          rank.push_back(random_action(rng));
      }
      // Batched calls: consecutive transfers joined.
      for (size_t k = 0; k + 1 < rank.size(); ++k)
        if (rank[k] && rank[k + 1] && is_transfer(rank[k]->type) && is_transfer(rank[k + 1]->type) && rng() % 2)
          rank[k]->joins_next = true;
      // Overlapped pairs: a whole forward, then a whole backward (B or I), unjoined.
      for (size_t k = 0; k + 1 < rank.size(); ++k) {
        auto& f = rank[k];
        auto& b = rank[k + 1];
        if (f && b && f->type == ActionType::kForward && !f->kernels && !b->kernels && !b->joins_next &&
            (k == 0 || !rank[k - 1] || (!rank[k - 1]->joins_next && !rank[k - 1]->overlaps_next)) &&
            (b->type == ActionType::kBackward || b->type == ActionType::kBackwardInput) && rng() % 2)
          f->overlaps_next = true;
      }
    }
    EXPECT_EQ(parse_schedule(format_schedule(s), "t"), s) << format_schedule(s);
    // CSV cannot tell a trailing idle step from the row's end, nor an empty row.
    bool csv_exact = true;
    for (const auto& rank : s) csv_exact = csv_exact && !rank.empty() && rank.back().has_value();
    if (csv_exact) EXPECT_EQ(parse_schedule(format_csv(s), "t"), s) << format_csv(s);
  }
}

TEST(ActionText, ErrorsNameFileLineColumnAndToken) {
  EXPECT_EQ(error_of([] { parse_schedule("rank 0: 0F0 0X1\n", "s.txt"); }).rfind("s.txt:1:13: action: \"0X1\"", 0),
            0u)
      << error_of([] { parse_schedule("rank 0: 0F0 0X1\n", "s.txt"); });
  EXPECT_NE(error_of([] { parse_schedule("0F0,0F1\n\n0F0,F1\n", "s.csv"); }).find("s.csv:3:5: action: \"F1\""),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_schedule("rank 1: 0F0\n", "s.txt"); }).find("rank 1 where rank 0 comes next"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_action("0F", "w"); }).find("F needs a microbatch number"), std::string::npos);
  EXPECT_NE(error_of([] { parse_action("0SEND_F1@1-2", "w"); }).find("only compute passes take a kernel range"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_action("0F1@5-5", "w"); }).find("end must be past"), std::string::npos);
  EXPECT_NE(error_of([] { parse_action("99999999999F1", "w"); }).find("stage number"), std::string::npos);
  EXPECT_NE(error_of([] { parse_schedule("# nothing\n", "e.txt"); }).find("lists no rank"), std::string::npos);
}

// DualPipe's overlapped pair: "F&B", a forward then a backward, two passes.
TEST(ActionText, OverlappedPairsParseAndRefuseWhatIsNotAPair) {
  const ActionSchedule s = parse_schedule("rank 0: 0F5&3B1 3F2&0I0 0W0\n", "t");
  ASSERT_EQ(s[0].size(), 5u);
  EXPECT_TRUE(s[0][0]->overlaps_next);
  EXPECT_FALSE(s[0][1]->overlaps_next);
  EXPECT_EQ(s[0][1]->type, ActionType::kBackward);
  EXPECT_EQ(s[0][3]->type, ActionType::kBackwardInput);
  EXPECT_EQ(format_schedule(s), "rank 0: 0F5&3B1 3F2&0I0 0W0\n");
  EXPECT_EQ(format_csv(s), "0F5&3B1,3F2&0I0,0W0\n");
  EXPECT_EQ(overlapped_pairs(s), (std::vector<std::vector<int32_t>>{{0, 2}}));
  EXPECT_NE(error_of([] { parse_schedule("rank 0: 0B1&3F1\n", "t"); }).find("starts with a forward (F&B)"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_schedule("rank 0: 0F1&3W1\n", "t"); }).find("ends with a backward"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_schedule("rank 0: 0F1&3B1&3B2\n", "t"); }).find("is two passes"), std::string::npos);
  EXPECT_NE(error_of([] { parse_schedule("rank 0: 0F1@0-3&3B1\n", "t"); }).find("runs whole passes"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_schedule("rank 0: 0F1&3SEND_B1\n", "t"); }).find("ends with a backward"),
            std::string::npos);
}

TEST(ActionText, GridShowsRanksAsColumnsAndMarksAStep) {
  const ActionSchedule s = parse_schedule("rank 0: 0F0 0B0\nrank 1: _ 1F0 1B0\n", "t");
  EXPECT_EQ(format_grid(s), "  step rank 0 rank 1\n     0    0F0       \n     1    0B0    1F0\n     2           1B0\n");
  EXPECT_NE(format_grid(s, 1, 1, std::make_pair(1, 1)).find("1F0*"), std::string::npos);
  // Many ranks: the nine around the marked one.
  ActionSchedule wide(40);
  for (int32_t r = 0; r < 40; ++r) wide[static_cast<size_t>(r)].push_back(ScheduleAction{ActionType::kForward, r, 0});
  const std::string g = format_grid(wide, 0, 0, std::make_pair(20, 0));
  EXPECT_NE(g.find("rank 16"), std::string::npos) << g;
  EXPECT_NE(g.find("rank 24"), std::string::npos) << g;
  EXPECT_EQ(g.find("rank 15"), std::string::npos) << g;
  EXPECT_EQ(g.find("rank 25"), std::string::npos) << g;
  EXPECT_NE(g.find("20F0*"), std::string::npos) << g;
  EXPECT_NE(format_grid(wide, 0, 0, std::make_pair(39, 0)).find("rank 31"), std::string::npos);
}

const lacuna::scenario::ScheduleKind kKinds[] = {lacuna::scenario::GPIPE, lacuna::scenario::ONE_F_ONE_B,
                                                 lacuna::scenario::INTERLEAVED_1F1B, lacuna::scenario::ZB_H1};

PipelineShape shape_for(lacuna::scenario::ScheduleKind kind) {
  PipelineShape s{.pp = 4, .virtual_stages = kind == lacuna::scenario::INTERLEAVED_1F1B ? 2 : 1, .microbatches = 8};
  return s;
}

// Every built-in schedule is a valid action schedule, and survives the trip
// through actions and text back to the builder's form unchanged.
TEST(ActionSchedule, BuiltInSchedulesValidateAndRoundTrip) {
  for (const auto kind : kKinds) {
    const PipelineShape shape = shape_for(kind);
    const auto built = build_schedule(kind, shape);
    const ActionSchedule actions = to_actions(built, shape);
    EXPECT_NO_THROW(validate_actions(actions, shape, "t")) << lacuna::scenario::ScheduleKind_Name(kind);
    const ActionSchedule parsed = parse_schedule(format_schedule(actions), "t");
    EXPECT_EQ(to_schedule(parsed, shape, "t"), built) << lacuna::scenario::ScheduleKind_Name(kind);
  }
}

TEST(ActionSchedule, InterleavedStagesAreGlobal) {
  const PipelineShape shape{.pp = 2, .virtual_stages = 2, .microbatches = 2};
  const ActionSchedule a = to_actions(build_schedule(lacuna::scenario::INTERLEAVED_1F1B, shape), shape);
  // Rank 1 holds stages 1 and 3.
  for (const auto& x : a[1]) EXPECT_TRUE(x->stage == 1 || x->stage == 3) << to_string(*x);
}

std::string validation_error(const std::string& text, PipelineShape shape) {
  return error_of([&] { validate_actions(parse_schedule(text, "s.txt"), shape, "s.txt"); });
}

TEST(ValidateActions, RejectsEachBrokenInvariantNamingRankAndStep) {
  const PipelineShape two{.pp = 2, .virtual_stages = 1, .microbatches = 2};
  const std::string good = "rank 0: 0F0 0F1 0B0 0B1\nrank 1: 1F0 1B0 1F1 1B1\n";
  EXPECT_EQ(validation_error(good, two), "");
  // Wrong rank for the stage.
  EXPECT_NE(validation_error("rank 0: 0F0 0F1 0B0 1B1\nrank 1: 1F0 1B0 1F1 0B1\n", two)
                .find("rank 0, step 3: 1B1 names stage 1, which runs on rank 1"),
            std::string::npos);
  // Out of range.
  EXPECT_NE(validation_error("rank 0: 0F0 0F2 0B0 0B1\nrank 1: 1F0 1B0 1F1 1B1\n", two)
                .find("rank 0, step 1: 0F2 names microbatch 2, but the iteration has 2"),
            std::string::npos);
  // Twice.
  EXPECT_NE(validation_error("rank 0: 0F0 0F1 0F1 0B0 0B1\nrank 1: 1F0 1B0 1F1 1B1\n", two)
                .find("rank 0, step 2: 0F1 runs twice (first at step 1)"),
            std::string::npos);
  // Missing backward.
  EXPECT_NE(validation_error("rank 0: 0F0 0F1 0B0 0W1\nrank 1: 1F0 1B0 1F1 1B1\n", two).find("never runs 0B1"),
            std::string::npos);
  // Too few passes for the pipeline: refused before anything is sized.
  EXPECT_NE(validation_error("rank 0: 0F0 0F1 0B0\nrank 1: 1F0 1B0 1F1 1B1\n", two)
                .find("the schedule lists 7 passes, but 2 stages × 2 microbatches need at least 8"),
            std::string::npos);
  // B and I of the same microbatch.
  EXPECT_NE(validation_error("rank 0: 0F0 0F1 0B0 0B1 0I1 0W1\nrank 1: 1F0 1B0 1F1 1B1\n", two)
                .find("0B1 is a full backward, but the same microbatch also has 0I1"),
            std::string::npos);
  // I without W.
  EXPECT_NE(validation_error("rank 0: 0F0 0F1 0B0 0I1\nrank 1: 1F0 1B0 1F1 1B1\n", two).find("never runs 0W1"),
            std::string::npos);
  // Wrong rank count.
  EXPECT_NE(validation_error("rank 0: 0F0 0F1 0B0 0B1\n", two).find("lists 1 ranks, but the pipeline has pp = 2"),
            std::string::npos);
}

TEST(ValidateActions, FindsDeadlocksAndSaysWhatEachRankWaitsFor) {
  const PipelineShape two{.pp = 2, .virtual_stages = 1, .microbatches = 2};
  // Rank 0 runs its backward of microbatch 0 before forwarding microbatch 1,
  // but rank 1 wants microbatch 1's forward before it runs microbatch 0's
  // backward: each waits for the other.
  const std::string e = validation_error("rank 0: 0F0 0B0 0F1 0B1\nrank 1: 1F0 1F1 1B0 1B1\n", two);
  EXPECT_NE(e.find("rank 0, step 1: the schedule deadlocks"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 0 step 1: 0B0 waits for 1B0 (rank 1 step 2)"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 1 step 1: 1F1 waits for 0F1 (rank 0 step 2)"), std::string::npos) << e;
  EXPECT_NE(e.find("0B0*"), std::string::npos) << e;  // the grid marks it
  // A backward before its own forward on the same rank.
  const std::string own = validation_error("rank 0: 0B0 0F0 0F1 0B1\nrank 1: 1F0 1B0 1F1 1B1\n", two);
  EXPECT_NE(own.find("0B0 waits for 0F0 (rank 0 step 1, later on the same rank)"), std::string::npos) << own;
  // W before its I.
  const std::string w = validation_error("rank 0: 0F0 0F1 0B0 0W1 0I1\nrank 1: 1F0 1B0 1F1 1B1\n", two);
  EXPECT_NE(w.find("0W1 waits for 0I1"), std::string::npos) << w;
}

// The random property: any interleaving of a valid schedule's ranks that
// keeps each rank's order is accepted, and swapping a forward with the
// backward it feeds is refused.
TEST(ValidateActions, ZeroBubbleAndIdleStepsAreAccepted) {
  const PipelineShape shape{.pp = 3, .virtual_stages = 1, .microbatches = 5};
  ActionSchedule a = to_actions(build_schedule(lacuna::scenario::ZB_H1, shape), shape);
  a[2].insert(a[2].begin(), std::nullopt);
  a[1].insert(a[1].begin() + 2, ScheduleAction{ActionType::kSendForward, 1, 0, "", std::nullopt});
  EXPECT_NO_THROW(validate_actions(a, shape, "t"));
  std::swap(a[0][0], a[0][a[0].size() - 1]);
  EXPECT_THROW(validate_actions(a, shape, "t"), Error);
}

TEST(ActionSchedule, ToScheduleRefusesWhatTheBuilderCannotHold) {
  const PipelineShape one{.pp = 1, .virtual_stages = 1, .microbatches = 1};
  // A recompute is the builder's: a lone R a pass, "R&B" the backward alone
  // (lower_recompute_test.cpp).
  EXPECT_EQ(to_schedule(parse_schedule("rank 0: 0F0 0R0 0B0\n", "t"), one, "t")[0].size(), 3u);
  EXPECT_EQ(to_schedule(parse_schedule("rank 0: 0F0 0R0&0B0\n", "t"), one, "t")[0].size(), 2u);
  EXPECT_NE(error_of([&] { to_schedule(parse_schedule("rank 0: vit:0F0 0F0 0B0\n", "t"), one, "t"); })
                .find("an encoder's action"),
            std::string::npos);
  EXPECT_NE(error_of([&] { to_schedule(parse_schedule("rank 0: 0F0@0-3 0B0\n", "t"), one, "t"); })
                .find("cuts a pass into kernels"),
            std::string::npos);
  // Communication actions are the lowering's: accepted and left out.
  EXPECT_EQ(to_schedule(parse_schedule("rank 0: 0F0 0SEND_F0 0B0 0REDUCE_GRAD\n", "t"), one, "t").front().size(), 2u);
}

}  // namespace
}  // namespace lacuna::schedule

namespace lacuna::schedule {
namespace {

// Megatron-Core's docstring example (schedules.py, "PP2 N3M5 with VP2"):
// microbatch ids 0 1 2 0 1 2 3 4 3 4 on chunks 0 0 0 1 1 1 0 0 1 1; rank 0
// warms up with (pp − 1)·2 + (v − 1)·N = 5 forwards.
TEST(MicrobatchGroup, FollowsMegatronCoresScheduleTable) {
  PipelineShape shape{.pp = 2, .virtual_stages = 2, .microbatches = 5};
  shape.microbatch_group = 3;
  EXPECT_EQ(interleaved_warmup(shape, 0), 5);
  EXPECT_EQ(interleaved_warmup(shape, 1), 3);
  const auto ranks = build_schedule(lacuna::scenario::INTERLEAVED_1F1B, shape);
  std::vector<std::pair<int32_t, int32_t>> forwards;
  for (const Action& a : ranks[0])
    if (a.pass == Pass::kForward) forwards.emplace_back(a.microbatch, a.chunk);
  const std::vector<std::pair<int32_t, int32_t>> table = {{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1},
                                                          {2, 1}, {3, 0}, {4, 0}, {3, 1}, {4, 1}};
  EXPECT_EQ(forwards, table);
  // Warm-up, then the first backward: entry 0 of the table on the last chunk.
  EXPECT_EQ(ranks[0][5], (Action{Pass::kForward, 2, 1}));
  EXPECT_EQ(ranks[0][6], (Action{Pass::kBackward, 0, 1}));
  EXPECT_NO_THROW(validate_actions(to_actions(ranks, shape), shape, "t"));
}

TEST(MicrobatchGroup, GroupOfPpIsTheClassicSchedule) {
  PipelineShape shape{.pp = 4, .virtual_stages = 3, .microbatches = 12};
  const auto classic = build_schedule(lacuna::scenario::INTERLEAVED_1F1B, shape);
  shape.microbatch_group = 4;
  EXPECT_EQ(build_schedule(lacuna::scenario::INTERLEAVED_1F1B, shape), classic);
  // Larger groups: every schedule valid, and a larger warm-up.
  for (int32_t n : {6, 8, 12}) {
    shape.microbatch_group = n;
    const auto ranks = build_schedule(lacuna::scenario::INTERLEAVED_1F1B, shape);
    EXPECT_NO_THROW(validate_actions(to_actions(ranks, shape), shape, "t")) << n;
    EXPECT_EQ(interleaved_warmup(shape, 3), 2 * n) << n;
  }
}

TEST(MicrobatchGroup, MegatronCoresRefusalsAreKept) {
  PipelineShape shape{.pp = 4, .virtual_stages = 2, .microbatches = 10};
  shape.microbatch_group = 3;  // below pp
  EXPECT_THROW(build_schedule(lacuna::scenario::INTERLEAVED_1F1B, shape), Error);
  shape.microbatch_group = 8;  // 10 % 8 = 2 < pp
  EXPECT_THROW(build_schedule(lacuna::scenario::INTERLEAVED_1F1B, shape), Error);
  shape.microbatch_group = 6;  // 10 % 6 = 4 = pp: allowed, no multiple of pp needed
  EXPECT_NO_THROW(build_schedule(lacuna::scenario::INTERLEAVED_1F1B, shape));
  shape.microbatch_group = 11;  // above the microbatches
  EXPECT_THROW(build_schedule(lacuna::scenario::INTERLEAVED_1F1B, shape), Error);
}

}  // namespace
}  // namespace lacuna::schedule

namespace lacuna::schedule {
namespace {

// The V layout (ZB-V, DualPipe): rank r holds stages r and 2·pp − 1 − r.
ActionSchedule v_gpipe(int32_t pp, int32_t m) {
  ActionSchedule s(static_cast<size_t>(pp));
  for (int32_t r = 0; r < pp; ++r) {
    const int32_t first = r, second = 2 * pp - 1 - r;
    auto add = [&](ActionType t, int32_t stage) {
      for (int32_t k = 0; k < m; ++k) s[static_cast<size_t>(r)].push_back(ScheduleAction{t, stage, k, "", {}});
    };
    add(ActionType::kForward, first);
    add(ActionType::kForward, second);
    add(ActionType::kBackward, second);
    add(ActionType::kBackward, first);
  }
  return s;
}

TEST(StageLayoutV, IsInferredFromTheActionsAndMapsStagesToRanks) {
  PipelineShape shape{.pp = 4, .virtual_stages = 2, .microbatches = 3};
  const ActionSchedule v = v_gpipe(4, 3);
  EXPECT_EQ(infer_layout(v, shape, "t"), StageLayout::kV);
  shape.layout = StageLayout::kV;
  EXPECT_EQ(rank_of_stage(shape, 0), 0);
  EXPECT_EQ(rank_of_stage(shape, 7), 0);
  EXPECT_EQ(rank_of_stage(shape, 3), 3);
  EXPECT_EQ(rank_of_stage(shape, 4), 3);
  EXPECT_EQ(virtual_stage(shape, 1, 1), 6);
  EXPECT_EQ(chunk_of_stage(shape, 6), 1);
  EXPECT_NO_THROW(validate_actions(v, shape, "t"));
  // Back to the builder's form: rank 1 runs chunk 0 (stage 1), then chunk 1 (stage 6).
  const auto passes = to_schedule(v, shape, "t");
  EXPECT_EQ(passes[1].front(), (Action{Pass::kForward, 0, 0}));
  EXPECT_EQ(passes[1][3], (Action{Pass::kForward, 0, 1}));
  // Megatron-LM's layout is preferred where both fit, and a file that fits
  // neither is refused by rank, step and action.
  PipelineShape looped{.pp = 4, .virtual_stages = 2, .microbatches = 3};
  EXPECT_EQ(infer_layout(to_actions(build_schedule(lacuna::scenario::INTERLEAVED_1F1B,
                                                   {.pp = 4, .virtual_stages = 2, .microbatches = 4}),
                                    {.pp = 4, .virtual_stages = 2, .microbatches = 4}),
                         looped, "t"),
            StageLayout::kLooped);
  ActionSchedule bad = v;
  bad[2][0]->stage = 1;  // rank 1's stage in both layouts
  const std::string e = error_of([&] { infer_layout(bad, looped, "s.txt"); });
  EXPECT_NE(e.find("rank 2, step 0: 1F0 names stage 1, which runs on rank 1 (the V layout: rank r holds stages r "
                   "and 2·pp − 1 − r); the actions fit neither"),
            std::string::npos)
      << e;
}

// At the V's turn (rank pp − 1, stages pp − 1 and pp) the activation stays on
// the rank: no send, no receive; elsewhere the transfers go to the rank
// holding the neighbouring stage.
TEST(StageLayoutV, NoTransferAtTheTurn) {
  PipelineShape shape{.pp = 3, .virtual_stages = 2, .microbatches = 2};
  shape.layout = StageLayout::kV;
  // Rank 2 holds stages 2 and 3.
  EXPECT_EQ(action_comm(shape, 2, {Pass::kForward, 0, 0}).send, false);  // 2 → 3 in place
  EXPECT_EQ(action_comm(shape, 2, {Pass::kForward, 0, 0}).recv, true);   // from stage 1, rank 1
  EXPECT_EQ(action_comm(shape, 2, {Pass::kForward, 0, 1}).recv, false);  // stage 3 from stage 2 in place
  EXPECT_EQ(action_comm(shape, 2, {Pass::kForward, 0, 1}).send, true);   // to stage 4, rank 1
  EXPECT_EQ(action_comm(shape, 2, {Pass::kBackward, 0, 1}).send, false);
  EXPECT_EQ(action_comm(shape, 0, {Pass::kForward, 0, 1}).send, false);  // stage 5: the last
  // The p2p pass writes no transfer at the turn, and reads back its calls.
  const ActionSchedule lowered = lower_p2p(v_gpipe(3, 2), lacuna::scenario::CUSTOM, shape);
  for (const auto& a : lowered[2])
    if (a && is_transfer(a->type)) EXPECT_TRUE(a->stage == 2 ? a->type == ActionType::kRecvForward ||
                                                                   a->type == ActionType::kSendBackward
                                                             : a->type == ActionType::kSendForward ||
                                                                   a->type == ActionType::kRecvBackward)
        << to_string(*a);
  for (int32_t r = 0; r < 3; ++r) EXPECT_NO_THROW(p2p_calls_of(lowered, r, shape, "t"));
}

}  // namespace
}  // namespace lacuna::schedule
