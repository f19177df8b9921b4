// End-to-end: schedules users bring (docs/schedules.md#schedules-users-bring).
// A scenario's schedule dumped as actions and fed back as a CUSTOM schedule
// simulates to the same iteration as the built-in one (GPIPE and ZB_H1 share
// the custom schedule's p2p rule); the CSV form gives the same; a broken file
// is refused naming the rank, the step and the action.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli_test_util.h"

namespace lacuna::testing {
namespace {

// Scenario text with its schedule block replaced by `schedule_text`.
std::string schedule_replaced(const std::string& text, const std::string& schedule_text) {
  return std::regex_replace(text, std::regex("schedule \\{[^}]*\\}"), "schedule { " + schedule_text + " }");
}

// The scenario file with its schedule kind replaced by `schedule_text`.
std::string with_schedule(const std::string& scenario, const std::string& schedule_text) {
  return schedule_replaced(read_file(scenario), schedule_text);
}

// `text` with the first occurrence of each `from` replaced by its `to`; a
// missing one fails the test.
std::string edited(std::string text, const std::vector<std::pair<std::string, std::string>>& edits) {
  for (const auto& [from, to] : edits) {
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
  }
  return text;
}

const std::string kSoftware = "software: \"megatron-core-0.12\"";
const std::string kOverlapped = kSoftware + " pipeline_p2p: P2P_OVERLAPPED";

// gpt-1.3b-8gpu with its schedule replaced by `schedule_text`, two model
// chunks per rank and overlapped p2p (as the V-shaped and generated
// schedules run).
std::string two_chunks_overlapped(const std::string& schedule_text) {
  return edited(with_schedule(source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt"), schedule_text),
                {{"virtual_stages: 1", "virtual_stages: 2"}, {kSoftware, kOverlapped}});
}

int64_t iteration_ns(const TempDir& dir, const std::string& scenario, const std::string& tag) {
  const std::string json = dir / (tag + ".json");
  const auto r = run_lacuna("simulate " + scenario + " --fold --ideal --no-trace --no-svg --json " + json);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  if (r.exit_code != 0) return -1;
  return nlohmann::json::parse(read_file(json))["iteration_time_ns"].get<int64_t>();
}

TEST(ScheduleE2E, DumpedScheduleRunsAsTheBuiltInOne) {
  TempDir dir("custom-schedule");
  const std::string base = read_file(source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt"));
  ASSERT_NE(base.find("kind: ONE_F_ONE_B"), std::string::npos);
  for (const std::string kind : {"GPIPE", "ZB_H1"}) {
    SCOPED_TRACE(kind);
    const std::string builtin = dir / (kind + ".pbtxt");
    std::ofstream(builtin) << with_schedule(source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt"), "kind: " + kind);
    for (const std::string ext : {".txt", ".csv"}) {
      const std::string actions = dir / (kind + ext);
      const auto d = run_lacuna("compile " + builtin + " --dump-schedule " + actions);
      ASSERT_EQ(d.exit_code, 0) << d.output;
      EXPECT_NE(d.output.find("on 2 pipeline ranks"), std::string::npos) << d.output;
      const std::string custom = dir / (kind + "-custom" + ext + ".pbtxt");
      std::ofstream(custom) << with_schedule(source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt"),
                                             "actions_file: \"" + kind + ext + "\"");
      const auto c = run_lacuna("check " + custom);
      ASSERT_EQ(c.exit_code, 0) << c.output;
      EXPECT_NE(c.output.find("schedule.kind = CUSTOM"), std::string::npos) << c.output;
      EXPECT_NE(c.output.find("# schedule " + actions + ": ok (2 pipeline ranks"), std::string::npos) << c.output;
      EXPECT_EQ(iteration_ns(dir, custom, kind + ext), iteration_ns(dir, builtin, kind));
    }
  }
  // The text form of 1F1B: rank 0 warms up with one forward.
  const auto d = run_lacuna("compile " + source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt") + " --dump-schedule " +
                            (dir / "1f1b.txt"));
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_NE(read_file(dir / "1f1b.txt").find("rank 0: 0F0 0F1 0B0 0F2 0B1"), std::string::npos)
      << read_file(dir / "1f1b.txt");
  EXPECT_NE(read_file(dir / "1f1b.txt").find("rank 1: 1F0 1B0 1F1 1B1"), std::string::npos);
}

// With its sends and receives written out (--with-p2p), 1F1B's schedule is
// compiled with Megatron-LM's own calls: the same iteration as the built-in
// 1F1B, to the nanosecond; the schedule file then differs from the generic
// p2p rule's only in where the calls sit.
TEST(ScheduleE2E, WrittenOutSendsAndReceivesAreCompiledAsWritten) {
  TempDir dir("p2p-schedule");
  const std::string scenario = source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt");
  const auto d = run_lacuna("compile " + scenario + " --dump-schedule " + (dir / "p2p.txt") + " --with-p2p");
  ASSERT_EQ(d.exit_code, 0) << d.output;
  const std::string lowered = read_file(dir / "p2p.txt");
  EXPECT_NE(lowered.find("rank 0: 0F0 0SEND_F0 0F1 0SEND_F1+0RECV_B0 0B0"), std::string::npos) << lowered;
  const std::string custom = dir / "custom.pbtxt";
  std::ofstream(custom) << with_schedule(scenario, "actions_file: \"p2p.txt\"");
  EXPECT_EQ(iteration_ns(dir, custom, "custom"), iteration_ns(dir, scenario, "builtin"));
  // A transfer removed is named.
  std::string broken = lowered;
  broken.replace(broken.find(" 0SEND_F0 "), 10, " ");
  std::ofstream(dir / "broken.txt") << broken;
  const auto b = run_lacuna("check " + scenario + " --schedule " + (dir / "broken.txt"));
  EXPECT_EQ(b.exit_code, 2) << b.output;
  EXPECT_NE(b.output.find("rank 0, step 0: 0F0 has no 0SEND_F0 after it"), std::string::npos) << b.output;
  // --with-p2p alone is refused.
  EXPECT_EQ(run_lacuna("compile " + scenario + " -o " + (dir / "p.pb") + " --with-p2p").exit_code, 2);
}

TEST(ScheduleE2E, BrokenSchedulesAreRefusedNamingRankStepAndAction) {
  TempDir dir("bad-schedule");
  const std::string scenario = source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt");
  const std::string dumped = dir / "s.txt";
  ASSERT_EQ(run_lacuna("compile " + scenario + " --dump-schedule " + dumped).exit_code, 0);
  // Rank 1 runs microbatch 1's forward before microbatch 0's backward, which
  // rank 0 needs before it forwards microbatch 1... swapped the other way:
  // rank 0 waits on a backward that rank 1 runs only after a forward rank 0
  // has not sent.
  std::string text = read_file(dumped);
  const std::string rank0 = "rank 0: 0F0 0F1 0B0";
  ASSERT_NE(text.find(rank0), std::string::npos) << text;
  text.replace(text.find(rank0), rank0.size(), "rank 0: 0F0 0B0 0F1");
  const std::string rank1 = "rank 1: 1F0 1B0 1F1";
  ASSERT_NE(text.find(rank1), std::string::npos) << text;
  text.replace(text.find(rank1), rank1.size(), "rank 1: 1F0 1F1 1B0");
  const std::string bad = dir / "bad.txt";
  std::ofstream(bad) << text;
  const auto r = run_lacuna("check " + scenario + " --schedule " + bad);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(bad + ": schedule: rank 0, step 1: the schedule deadlocks"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 0 step 1: 0B0 waits for 1B0 (rank 1 step 2)"), std::string::npos) << r.output;

  // A syntax error: file, line, column and token.
  const std::string typo = dir / "typo.txt";
  std::ofstream(typo) << "rank 0: 0F0 0Q1\nrank 1: 1F0\n";
  const auto t = run_lacuna("check " + scenario + " --schedule " + typo);
  EXPECT_EQ(t.exit_code, 2) << t.output;
  EXPECT_NE(t.output.find(typo + ":1:13: action: \"0Q1\""), std::string::npos) << t.output;

  // A byte-order mark is named, not reported as a stray character.
  const std::string bom = dir / "bom.txt";
  std::ofstream(bom) << "\xEF\xBB\xBF" << read_file(dumped);
  const auto mark = run_lacuna("check " + scenario + " --schedule " + bom);
  EXPECT_EQ(mark.exit_code, 2) << mark.output;
  EXPECT_NE(mark.output.find(bom + ":1:1: schedule: the file starts with a UTF-8 byte-order mark"), std::string::npos)
      << mark.output;

  // A CUSTOM scenario whose file does not exist names the scenario's field.
  const std::string missing = dir / "missing.pbtxt";
  std::ofstream(missing) << with_schedule(scenario, "actions_file: \"nope.txt\"");
  const auto m = run_lacuna("simulate " + missing + " --fold --no-trace --no-svg");
  EXPECT_EQ(m.exit_code, 2) << m.output;
  EXPECT_NE(m.output.find("schedule.actions_file"), std::string::npos) << m.output;
  // CUSTOM without a file.
  const std::string nofile = dir / "nofile.pbtxt";
  std::ofstream(nofile) << with_schedule(scenario, "kind: CUSTOM");
  const auto n = run_lacuna("check " + nofile);
  EXPECT_EQ(n.exit_code, 2) << n.output;
  EXPECT_NE(n.output.find("CUSTOM needs schedule.actions_file"), std::string::npos) << n.output;
}

// The Megatron-LM multimodal placements run one pipeline over encoder and LLM
// stages: its actions are dumped. Optimus is read back from its compiled
// program, one line per rank class, its encoder passes among the LLM's; the
// p2p form is refused for it (and nothing is written).
TEST(ScheduleE2E, DumpsTheMegatronMultimodalPipelineAndReadsOptimusBack) {
  TempDir dir("mllm-schedule");
  const std::string optimus = source_path("scenarios/mllm/optimus-small-vit3b-gpt11b-8xa100.pbtxt");
  const auto o = run_lacuna("compile " + optimus + " --dump-schedule " + (dir / "o.txt"));
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("on 8 rank classes"), std::string::npos) << o.output;
  const std::string read_back = read_file(dir / "o.txt");
  EXPECT_NE(read_back.find("# line 0: class pp0_enc0: 1 rank from rank 0"), std::string::npos) << read_back;
  // GPU 0 runs encoder microbatch 4's forward before the LLM's first pass
  // (the interleaved pp 2 × 5 pipeline: rank 0 holds stages 0, 2, …, 8).
  EXPECT_NE(read_back.find("rank 0: vit-3b:0F4 0F0 0F1 2F0"), std::string::npos) << read_back.substr(0, 800);
  const auto p = run_lacuna("compile " + optimus + " --dump-schedule " + (dir / "p.txt") + " --with-p2p");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_NE(p.output.find("no blocking pipeline calls"), std::string::npos) << p.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "p.txt"));
  // MEGATRON_BASELINE: the vision model in stage 0 of an interleaved
  // pp 2 × 12 pipeline; rank 1 holds stages 1, 3, …, 23.
  const std::string baseline = source_path("scenarios/mllm/qwen3vl-vit-0.4b-qwen3-30b-a3b-16.pbtxt");
  const auto b = run_lacuna("compile " + baseline + " --dump-schedule " + (dir / "b.txt"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("on 2 pipeline ranks"), std::string::npos) << b.output;
  const std::string dumped = read_file(dir / "b.txt");
  EXPECT_NE(dumped.find("rank 1: 1F0 1F1 3F0 3F1"), std::string::npos) << dumped.substr(0, 400);
  EXPECT_NE(dumped.find(" 23B0"), std::string::npos);
}

// The V layout of ZB-V and DualPipe, brought as a file: rank r holds stages r
// and 2·pp − 1 − r (here pp 2: rank 0 stages 0 and 3, rank 1 stages 1 and 2).
// Inferred from the actions, compiled with no transfer at the turn, and the
// same iteration folded and at full rank, blocking and overlapped p2p alike.
TEST(ScheduleE2E, VShapedSchedulesCompileAndRun) {
  TempDir dir("v-schedule");
  std::string r0 = "rank 0:", r1 = "rank 1:";
  auto add = [](std::string& line, int stage, const char* pass) {
    for (int k = 0; k < 8; ++k) line += " " + std::to_string(stage) + pass + std::to_string(k);
  };
  add(r0, 0, "F"), add(r0, 3, "F"), add(r0, 3, "B"), add(r0, 0, "B");
  add(r1, 1, "F"), add(r1, 2, "F"), add(r1, 2, "B"), add(r1, 1, "B");
  std::ofstream(dir / "v.txt") << r0 << "\n" << r1 << "\n";
  const std::string text = edited(
      with_schedule(source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt"), "actions_file: \"v.txt\""),
      {{"virtual_stages: 1", "virtual_stages: 2"}});
  const std::string blocking = dir / "v.pbtxt", overlapped = dir / "vo.pbtxt";
  // With two chunks the default is overlapped (the interleaved schedule's):
  // blocking is asked for.
  std::ofstream(blocking) << edited(text, {{kSoftware, kSoftware + " pipeline_p2p: P2P_BLOCKING"}});
  const std::string o = edited(text, {{kSoftware, kOverlapped}});
  std::ofstream(overlapped) << o;
  const auto c = run_lacuna("check " + blocking);
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("4 virtual stages in the V layout"), std::string::npos) << c.output;
  for (const std::string& scenario : {blocking, overlapped}) {
    SCOPED_TRACE(scenario);
    const int64_t folded = iteration_ns(dir, scenario, "fold");
    const std::string json = dir / "full.json";
    const auto full = run_lacuna("simulate " + scenario + " --ideal --no-trace --no-svg --json " + json);
    ASSERT_EQ(full.exit_code, 0) << full.output;
    EXPECT_GT(folded, 0);
    EXPECT_EQ(nlohmann::json::parse(read_file(json))["iteration_time_ns"].get<int64_t>(), folded);
  }
  // ZB-V, generated for this pipeline (sim/schedule/zbv.h) and run with
  // overlapped p2p: the same at full rank as folded, and shorter than the
  // V-shaped GPipe order.
  const int64_t gpipe = iteration_ns(dir, overlapped, "gpipe");
  const auto g = run_lacuna("compile " + overlapped + " --dump-schedule " + (dir / "zbv.txt") + " --generate zb-v");
  ASSERT_EQ(g.exit_code, 0) << g.output;
  // Weighed by lacuna's own pass times, written at the top.
  EXPECT_EQ(read_file(dir / "zbv.txt").rfind("# pass costs (lacuna's analytic model", 0), 0u)
      << read_file(dir / "zbv.txt").substr(0, 300);
  std::string z = o;
  z.replace(z.find("v.txt"), 5, "zbv.txt");
  std::ofstream(dir / "zbv.pbtxt") << z;
  const int64_t zbv = iteration_ns(dir, dir / "zbv.pbtxt", "zbv");
  EXPECT_GT(zbv, 0);
  EXPECT_LT(zbv, gpipe);
  const auto zfull = run_lacuna("simulate " + (dir / "zbv.pbtxt") + " --ideal --no-trace --no-svg --json " + (dir / "zf.json"));
  ASSERT_EQ(zfull.exit_code, 0) << zfull.output;
  EXPECT_EQ(nlohmann::json::parse(read_file(dir / "zf.json"))["iteration_time_ns"].get<int64_t>(), zbv);
  // DualPipeV likewise (sim/schedule/dualpipev.h): its F&B pairs survive the
  // file, folded equals full rank, and it beats the GPipe order.
  const auto d =
      run_lacuna("compile " + overlapped + " --dump-schedule " + (dir / "dpv.csv") + " --generate dualpipev");
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_NE(read_file(dir / "dpv.csv").find("3F2&0B0"), std::string::npos) << read_file(dir / "dpv.csv");
  std::string dp = o;
  dp.replace(dp.find("v.txt"), 5, "dpv.csv");
  std::ofstream(dir / "dpv.pbtxt") << dp;
  const int64_t dpv = iteration_ns(dir, dir / "dpv.pbtxt", "dpv");
  EXPECT_GT(dpv, 0);
  EXPECT_LT(dpv, gpipe);
  const auto dfull =
      run_lacuna("simulate " + (dir / "dpv.pbtxt") + " --ideal --no-trace --no-svg --json " + (dir / "df.json"));
  ASSERT_EQ(dfull.exit_code, 0) << dfull.output;
  EXPECT_EQ(nlohmann::json::parse(read_file(dir / "df.json"))["iteration_time_ns"].get<int64_t>(), dpv);
  // Both need two chunks; the error names the field.
  for (const char* generator : {"zb-v", "dualpipev"}) {
    const auto no = run_lacuna("compile " + source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt") + " --dump-schedule " +
                               (dir / "no.txt") + " --generate " + generator);
    EXPECT_EQ(no.exit_code, 2) << no.output;
    EXPECT_NE(no.output.find("parallel.virtual_stages"), std::string::npos) << no.output;
  }

  // The lowered form has no transfer at rank 1's turn (stage 1 → 2).
  ASSERT_EQ(run_lacuna("compile " + blocking + " --dump-schedule " + (dir / "p2p.txt") + " --with-p2p").exit_code, 0);
  const std::string lowered = read_file(dir / "p2p.txt");
  EXPECT_EQ(lowered.find("1SEND_F"), std::string::npos) << lowered;
  EXPECT_EQ(lowered.find("2RECV_F"), std::string::npos) << lowered;
  EXPECT_NE(lowered.find("2SEND_F0"), std::string::npos) << lowered;
}

// The DP pass (sim/schedule/lower_dp.h): gpt-1.3b-8gpu's 1F1B written with
// its gathers and reductions (at the end: the scenario does not overlap its
// gradient reduction) and its blocking calls, runs as the built-in schedule
// does.
TEST(ScheduleE2E, DataParallelActionsRoundTrip) {
  TempDir dir("dp-actions");
  const std::string builtin = source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt");
  const auto d = run_lacuna("compile " + builtin + " --dump-schedule " + (dir / "dp.txt") + " --with-dp --with-p2p");
  ASSERT_EQ(d.exit_code, 0) << d.output;
  const std::string text = read_file(dir / "dp.txt");
  EXPECT_NE(text.find("rank 0: 0UNSHARD 0F0 0SEND_F0"), std::string::npos) << text;
  EXPECT_NE(text.find("0B7 0REDUCE_GRAD\n"), std::string::npos) << text;
  const std::string custom = dir / "custom.pbtxt";
  std::ofstream(custom) << with_schedule(builtin, "actions_file: \"dp.txt\"");
  EXPECT_EQ(iteration_ns(dir, custom, "custom"), iteration_ns(dir, builtin, "builtin"));
}

// DualPipe, bidirectional (sim/schedule/dualpipe.h): generated for
// gpt-1.3b-8gpu (pp 2, 8 microbatches) with two chunks, read by `check` as
// the bidirectional layout, simulated folded and at full rank to the same
// iteration.
TEST(ScheduleE2E, BidirectionalDualPipeCompilesAndRuns) {
  TempDir dir("dualpipe");
  const std::string text = two_chunks_overlapped("kind: INTERLEAVED_1F1B");
  std::ofstream(dir / "interleaved.pbtxt") << text;
  const auto g = run_lacuna("compile " + (dir / "interleaved.pbtxt") + " --dump-schedule " + (dir / "dp.txt") +
                            " --generate dualpipe");
  ASSERT_EQ(g.exit_code, 0) << g.output;
  // Rank 1 starts with the second pipeline's first stage (microbatches 4 to 7).
  EXPECT_NE(read_file(dir / "dp.txt").find("rank 1: 2F4 1F0 2F5 1B0"), std::string::npos) << read_file(dir / "dp.txt");
  std::string custom = text;
  custom.replace(custom.find("kind: INTERLEAVED_1F1B"), 22, "actions_file: \"dp.txt\"");
  const std::string scenario = dir / "dp.pbtxt";
  std::ofstream(scenario) << custom;
  const auto c = run_lacuna("check " + scenario);
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("4 virtual stages in the bidirectional layout (two pipelines), 8 microbatches"),
            std::string::npos)
      << c.output;
  const int64_t folded = iteration_ns(dir, scenario, "fold");
  EXPECT_GT(folded, 0);
  const auto full = run_lacuna("simulate " + scenario + " --ideal --no-trace --no-svg --json " + (dir / "full.json"));
  ASSERT_EQ(full.exit_code, 0) << full.output;
  EXPECT_EQ(nlohmann::json::parse(read_file(dir / "full.json"))["iteration_time_ns"].get<int64_t>(), folded);
}

// Megatron-Core's microbatch group (parallel.microbatch_group_size_per_vp_stage):
// four consecutive microbatches per chunk on a pp 2 × v 2 pipeline, so rank 0
// warms up with (2 − 1)·2 + (2 − 1)·4 = 6 forwards, four of chunk 0 (stage 0)
// then two of chunk 1 (stage 2); the scenario simulates.
TEST(ScheduleE2E, MicrobatchGroupsReorderTheInterleavedSchedule) {
  TempDir dir("microbatch-group");
  const std::string text = two_chunks_overlapped("kind: INTERLEAVED_1F1B");
  const std::string classic = dir / "classic.pbtxt", grouped = dir / "grouped.pbtxt";
  std::ofstream(classic) << text;
  std::string g = text;
  g.replace(g.find("virtual_stages: 2"), 17, "virtual_stages: 2 microbatch_group_size_per_vp_stage: 4");
  std::ofstream(grouped) << g;
  ASSERT_EQ(run_lacuna("compile " + grouped + " --dump-schedule " + (dir / "g.txt")).exit_code, 0);
  EXPECT_NE(read_file(dir / "g.txt").find("rank 0: 0F0 0F1 0F2 0F3 2F0 2F1 2F2 2B0"), std::string::npos)
      << read_file(dir / "g.txt");
  ASSERT_EQ(run_lacuna("compile " + classic + " --dump-schedule " + (dir / "c.txt")).exit_code, 0);
  EXPECT_NE(read_file(dir / "c.txt").find("rank 0: 0F0 0F1 2F0 2F1 0F2 2B0 0F3"), std::string::npos)
      << read_file(dir / "c.txt");
  EXPECT_GT(iteration_ns(dir, grouped, "grouped"), 0);
  // Megatron-Core's range rule, named by field.
  std::string bad = text;
  bad.replace(bad.find("virtual_stages: 2"), 17, "virtual_stages: 2 microbatch_group_size_per_vp_stage: 7");
  std::ofstream(dir / "bad.pbtxt") << bad;
  const auto r = run_lacuna("check " + (dir / "bad.pbtxt"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("parallel.microbatch_group_size_per_vp_stage: grouping 8 microbatches by 7 leaves a last "
                          "group of 1"),
            std::string::npos)
      << r.output;
}

// Full recompute (docs/schedules.md#recompute-actions): gpt-1.3b-8gpu
// recomputing every layer, with overlapped p2p. Its dumped schedule writes
// each backward's recompute inside it ("R&B") and runs as the built-in 1F1B
// to the nanosecond; each R unpaired, run right before its backward as a
// pass of its own, recomputes while the gradient is on its way: a shorter
// iteration, with overlapped and with blocking p2p.
TEST(ScheduleE2E, RecomputeActionsPlaceTheReForward) {
  TempDir dir("recompute-actions");
  const std::string base = edited(read_file(source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt")),
                                  {{"recompute: RECOMPUTE_NONE", "recompute: RECOMPUTE_FULL"}, {kSoftware, kOverlapped}});
  const std::string builtin = dir / "full.pbtxt";
  std::ofstream(builtin) << base;
  const auto d = run_lacuna("compile " + builtin + " --dump-schedule " + (dir / "paired.txt"));
  ASSERT_EQ(d.exit_code, 0) << d.output;
  const std::string paired = read_file(dir / "paired.txt");
  EXPECT_NE(paired.find("rank 0: 0F0 0F1 0R0&0B0 0F2 0R1&0B1"), std::string::npos) << paired;
  std::string lone = paired;
  std::replace(lone.begin(), lone.end(), '&', ' ');
  std::ofstream(dir / "lone.txt") << lone;
  auto custom = [&](const std::string& file) {
    const std::string path = dir / (file + ".pbtxt");
    std::ofstream(path) << schedule_replaced(base, "actions_file: \"" + file + ".txt\"");
    return path;
  };
  const int64_t t_builtin = iteration_ns(dir, builtin, "builtin");
  EXPECT_EQ(iteration_ns(dir, custom("paired"), "paired"), t_builtin);
  const auto c = run_lacuna("check " + custom("lone"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("16 recomputes run ahead of their backward as passes of their own"), std::string::npos)
      << c.output;
  EXPECT_LT(iteration_ns(dir, custom("lone"), "lone"), t_builtin);
  // Blocking calls (1F1B's default under megatron-core-0.12) too: the
  // forward's send and the gradient's receive go out after the R.
  const std::string blocking = edited(base, {{kOverlapped, kSoftware}});
  std::ofstream(dir / "blocking.pbtxt") << blocking;
  std::ofstream(dir / "blocking-lone.pbtxt") << schedule_replaced(blocking, "actions_file: \"lone.txt\"");
  EXPECT_LT(iteration_ns(dir, dir / "blocking-lone.pbtxt", "blocking-lone"),
            iteration_ns(dir, dir / "blocking.pbtxt", "blocking"));
  // Without full recompute an R is refused, naming the setting.
  std::ofstream(dir / "none.pbtxt") << edited(base, {{"RECOMPUTE_FULL", "RECOMPUTE_NONE"}});
  const auto r = run_lacuna("check " + (dir / "none.pbtxt") + " --schedule " + (dir / "lone.txt"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("rank 0, step 2: 0R0 recomputes whole layers, but the scenario's parallel.recompute is "
                          "RECOMPUTE_NONE"),
            std::string::npos)
      << r.output;
}

// A dumped interleaved schedule, run as a CUSTOM file under the software's
// defaults, runs as the built-in one: with model chunks the file gets the
// interleaved schedule's p2p default (overlapped under megatron-core-0.12).
TEST(ScheduleE2E, ADumpedInterleavedScheduleKeepsTheBuiltInPipelineP2p) {
  TempDir dir("interleaved-dump");
  const std::string base = edited(with_schedule(source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt"), "kind: INTERLEAVED_1F1B"),
                                  {{"virtual_stages: 1", "virtual_stages: 2"}});
  const std::string builtin = dir / "builtin.pbtxt";
  std::ofstream(builtin) << base;
  const auto d = run_lacuna("compile " + builtin + " --dump-schedule " + (dir / "interleaved.txt"));
  ASSERT_EQ(d.exit_code, 0) << d.output;
  const std::string custom = dir / "custom.pbtxt";
  std::ofstream(custom) << schedule_replaced(base, "actions_file: \"interleaved.txt\"");
  EXPECT_EQ(iteration_ns(dir, custom, "custom"), iteration_ns(dir, builtin, "builtin"));
}

// Looped BFS (sim/schedule/looped_bfs.h), generated for gpt-1.3b-8gpu with
// two chunks: it runs, folded and at full rank, and holds more activation
// memory at its peak than the interleaved schedule it reorders.
TEST(ScheduleE2E, LoopedBfsIsGeneratedAndRuns) {
  TempDir dir("looped-bfs");
  const std::string interleaved = dir / "interleaved.pbtxt";
  std::ofstream(interleaved) << two_chunks_overlapped("kind: INTERLEAVED_1F1B");
  const auto g = run_lacuna("compile " + interleaved + " --dump-schedule " + (dir / "bfs.txt") + " --generate looped-bfs");
  ASSERT_EQ(g.exit_code, 0) << g.output;
  const std::string text = read_file(dir / "bfs.txt");
  EXPECT_NE(text.find("rank 0: 0F0 0F1 0F2 0F3 0F4 0F5 0F6 0F7 2F0"), std::string::npos) << text.substr(0, 400);
  const std::string bfs = dir / "bfs.pbtxt";
  std::ofstream(bfs) << two_chunks_overlapped("actions_file: \"bfs.txt\"");
  auto peak_bytes = [&](const std::string& scenario, const std::string& tag) {
    const std::string json = dir / (tag + ".json");
    const auto r = run_lacuna("simulate " + scenario + " --fold --ideal --no-trace --no-svg --json " + json);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.exit_code == 0 ? nlohmann::json::parse(read_file(json))["peak_memory"]["max_bytes"].get<int64_t>() : -1;
  };
  EXPECT_GT(peak_bytes(bfs, "bfs"), peak_bytes(interleaved, "interleaved"));
  // At full rank the other pipelines' traffic shares the links, which a
  // folded flow run leaves out (docs/network.md#folded-runs): close, not equal.
  const int64_t folded = iteration_ns(dir, bfs, "fold");
  EXPECT_GT(folded, 0);
  const auto full = run_lacuna("simulate " + bfs + " --ideal --no-trace --no-svg --json " + (dir / "full.json"));
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const int64_t full_ns = nlohmann::json::parse(read_file(dir / "full.json"))["iteration_time_ns"].get<int64_t>();
  EXPECT_LT(std::abs(full_ns - folded), folded / 1000);
}

// 1F1B with the microbatches in flight chosen per rank
// (sim/schedule/in_flight_1f1b.h): with Megatron-LM's counts it writes the
// built-in 1F1B's actions; capped at one it holds less activation memory at
// its peak and takes longer, under blocking and overlapped transfers; a list
// that grows downstream is refused before anything is written.
TEST(ScheduleE2E, InFlight1F1BIsGeneratedAndRuns) {
  TempDir dir("in-flight-1f1b");
  const std::string scenario = source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt");
  auto actions_of = [](const std::string& text) {
    std::string lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (!line.starts_with("#")) lines += line + "\n";
    return lines;
  };
  ASSERT_EQ(run_lacuna("compile " + scenario + " --dump-schedule " + (dir / "builtin.txt")).exit_code, 0);
  const auto g = run_lacuna("compile " + scenario + " --dump-schedule " + (dir / "1f1b.txt") + " --generate 1f1b");
  ASSERT_EQ(g.exit_code, 0) << g.output;
  EXPECT_EQ(actions_of(read_file(dir / "1f1b.txt")), actions_of(read_file(dir / "builtin.txt")));
  const auto c = run_lacuna("compile " + scenario + " --dump-schedule " + (dir / "cap1.txt") + " --generate 1f1b:1");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(read_file(dir / "cap1.txt").find("rank 0: 0F0 0B0 0F1 0B1"), std::string::npos);
  auto run = [&](const std::string& actions, bool overlapped, const std::string& tag) {
    std::string text = with_schedule(scenario, "actions_file: \"" + actions + "\"");
    if (overlapped) text = edited(text, {{kSoftware, kOverlapped}});
    const std::string path = dir / (tag + ".pbtxt");
    std::ofstream(path) << text;
    const std::string json = dir / (tag + ".json");
    const auto r = run_lacuna("simulate " + path + " --fold --ideal --no-trace --no-svg --json " + json);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    if (r.exit_code != 0) return std::pair<int64_t, int64_t>{-1, -1};
    const auto j = nlohmann::json::parse(read_file(json));
    return std::pair{j["iteration_time_ns"].get<int64_t>(), j["peak_memory"]["max_bytes"].get<int64_t>()};
  };
  for (const bool overlapped : {false, true}) {
    SCOPED_TRACE(overlapped ? "overlapped" : "blocking");
    const auto [megatron_ns, megatron_bytes] = run("1f1b.txt", overlapped, overlapped ? "m-o" : "m-b");
    const auto [capped_ns, capped_bytes] = run("cap1.txt", overlapped, overlapped ? "c-o" : "c-b");
    EXPECT_GT(capped_ns, megatron_ns);
    EXPECT_LT(capped_bytes, megatron_bytes);
    EXPECT_GT(capped_bytes, 0);
  }
  EXPECT_EQ(run("1f1b.txt", false, "again").first, iteration_ns(dir, scenario, "builtin"));
  const auto bad = run_lacuna("compile " + scenario + " --dump-schedule " + (dir / "bad.txt") + " --generate 1f1b:1,2");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("rank 1 would hold 2 microbatches in flight but rank 0 upstream only 1"), std::string::npos)
      << bad.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.txt"));
}

// --with-amax (docs/schedules.md#the-amax-pass): refused without FP8
// delayed scaling, naming the field and the flag, and without
// --dump-schedule; nothing is written.
TEST(ScheduleE2E, WithAmaxNeedsDelayedScaling) {
  TempDir dir("with-amax");
  const std::string scenario = source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt");
  const auto r = run_lacuna("compile " + scenario + " --dump-schedule " + (dir / "a.txt") + " --with-amax");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("training.fp8"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("reduces no amax"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("leave out --with-amax"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "a.txt"));
  const auto n = run_lacuna("compile " + scenario + " -o " + (dir / "p.pb") + " --with-amax");
  EXPECT_EQ(n.exit_code, 2) << n.output;
  EXPECT_NE(n.output.find("--with-amax shapes --dump-schedule's output"), std::string::npos) << n.output;
}

}  // namespace
}  // namespace lacuna::testing
