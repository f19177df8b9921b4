#include "sim/report/formats/trace_writer.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/report/observers/test_fixture.h"

namespace lacuna::report {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string write_trace(const ir::Program& p, const std::string& name, const std::string& spec, bool fold = false) {
  const fs::path path = fs::path(::testing::TempDir()) / name;
  fs::remove(path);
  TraceWriter w(p, path.string(), parse_rank_spec(spec));
  testing::replay(p, {&w}, fold);
  EXPECT_FALSE(fs::exists(path)) << "visible before commit";
  w.commit();
  return slurp(path);
}

TEST(TraceWriter, IsValidJsonWithNamedTracksSlicesFlowsAndCounters) {
  const ir::Program p = testing::two_rank_program();
  const std::string text = write_trace(p, "lacuna_trace_all.json", "all");
  const auto j = nlohmann::json::parse(text);
  ASSERT_TRUE(j.contains("traceEvents"));

  std::map<int, std::string> processes;
  std::set<std::pair<int, std::string>> threads;
  std::set<std::string> slices;
  std::map<uint64_t, int> flow_starts, flow_ends;
  std::vector<int64_t> rank1_memory;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "process_name") processes[e["pid"].get<int>()] = e["args"]["name"].get<std::string>();
    if (ph == "M" && e["name"] == "thread_name") threads.insert({e["pid"].get<int>(), e["args"]["name"].get<std::string>()});
    if (ph == "X") {
      slices.insert(e["name"].get<std::string>());
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    }
    if (ph == "s") flow_starts[e["id"].get<uint64_t>()] = e["pid"].get<int>();
    if (ph == "f") {
      flow_ends[e["id"].get<uint64_t>()] = e["pid"].get<int>();
      EXPECT_EQ(e["bp"], "e");
    }
    if (ph == "C" && e["pid"] == 1) rank1_memory.push_back(e["args"]["bytes"].get<int64_t>());
  }
  EXPECT_EQ(processes[0], "rank 0 (pp 0 tp 0 dp 0)");
  EXPECT_EQ(processes[1], "rank 1 (pp 1 tp 0 dp 0)");
  for (const char* s : {"compute", "pp_recv", "tp", "dp", "pp_send"}) EXPECT_TRUE(threads.count({1, s})) << s;
  for (const char* s : {"F mb0 L0 qkv", "B mb0 L0 fc2", "opt adam", "AG tp", "RS dp_cp", "send→r1 mb0", "recv←r0 mb0"}) {
    EXPECT_TRUE(slices.count(s)) << s;
  }
  for (const auto& s : slices) {
    EXPECT_EQ(s.rfind("wait", 0), std::string::npos) << "waits are not drawn";
    EXPECT_EQ(s.rfind("record", 0), std::string::npos) << "records are not drawn";
  }
  ASSERT_EQ(flow_starts.size(), 1u);
  EXPECT_EQ(flow_starts, (std::map<uint64_t, int>{{1, 0}}));
  EXPECT_EQ(flow_ends, (std::map<uint64_t, int>{{1, 1}}));
  EXPECT_EQ(rank1_memory, (std::vector<int64_t>{1800, 2100, 1800}));
  // Exact ns in µs: the recv on rank 1 starts at 60 ns and lasts 40 ns.
  EXPECT_NE(text.find("\"ts\":0.060,\"dur\":0.040,\"name\":\"recv←r0 mb0\""), std::string::npos);
  EXPECT_EQ(j["otherData"]["iteration_time_ns"], 400);
}

TEST(TraceWriter, ALateHostShowsAsHostUsAndWaitingAfterItAsWaitedUs) {
  const ir::Program p = testing::two_rank_program();
  const fs::path path = fs::path(::testing::TempDir()) / "lacuna_trace_host.json";
  fs::remove(path);
  TraceWriter w(p, path.string(), parse_rank_spec("all"));
  engine::RunInfo info;
  info.program = &p;
  info.simulated_ranks = {0, 1};
  info.represents = {{0}, {1}};
  w.on_run_begin(info);
  w.on_op_end(testing::span(p, 0, testing::kCompute, 1, 0, 0, 100));                // host on time
  w.on_op_end(testing::span(p, 1, testing::kCompute, 1, 0, 2500, 2500, 3000));      // issued 2.5 µs late
  w.on_op_end(testing::span(p, 1, testing::kTp, 0, 3000, 3200, 3700, 4000));        // late, then peers
  w.on_run_end(TimeNs(4000));
  w.commit();
  const auto j = nlohmann::json::parse(slurp(path));
  std::map<std::string, nlohmann::json> args;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") args[std::to_string(e["pid"].get<int>()) + " " + e["name"].get<std::string>()] = e["args"];
  }
  EXPECT_FALSE(args["0 F mb0 L0 qkv"].contains("host_us"));
  EXPECT_FALSE(args["0 F mb0 L0 qkv"].contains("waited_us"));
  EXPECT_DOUBLE_EQ(args["1 F mb0 L0 qkv"]["host_us"].get<double>(), 2.5);
  EXPECT_FALSE(args["1 F mb0 L0 qkv"].contains("waited_us"));
  EXPECT_DOUBLE_EQ(args["1 AG tp"]["host_us"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(args["1 AG tp"]["waited_us"].get<double>(), 0.5);
}

TEST(TraceWriter, PipelineDefaultAndFoldModeDrawOnlySelectedSimulatedRanks) {
  const ir::Program p = testing::two_rank_program();
  const auto j = nlohmann::json::parse(write_trace(p, "lacuna_trace_one.json", "1"));
  std::set<int> pids;
  for (const auto& e : j["traceEvents"]) pids.insert(e["pid"].get<int>());
  EXPECT_EQ(pids, std::set<int>{1});
  bool has_flow = false;
  for (const auto& e : j["traceEvents"]) has_flow |= e["ph"] == "s" || e["ph"] == "f";
  EXPECT_FALSE(has_flow) << "a flow needs both ends drawn";

  const auto folded = nlohmann::json::parse(write_trace(p, "lacuna_trace_fold.json", "pipeline", true));
  std::string name;
  for (const auto& e : folded["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") name = e["args"]["name"];
  }
  EXPECT_EQ(name, "rank 1 (pp 1 tp 0 dp 0) [stands for 2 ranks]");
}

TEST(TraceWriter, IsByteIdenticalAcrossRuns) {
  const ir::Program p = testing::two_rank_program();
  EXPECT_EQ(write_trace(p, "lacuna_trace_a.json", "all"), write_trace(p, "lacuna_trace_b.json", "all"));
}

TEST(TraceWriter, UncommittedTraceLeavesNoFile) {
  const ir::Program p = testing::two_rank_program();
  const fs::path path = fs::path(::testing::TempDir()) / "lacuna_trace_aborted.json";
  fs::remove(path);
  {
    TraceWriter w(p, path.string(), parse_rank_spec("all"));
    engine::RunInfo info;
    info.program = &p;
    info.simulated_ranks = {0, 1};
    w.on_run_begin(info);
    EXPECT_THROW(w.commit(), InternalError);  // the run never finished (a bug in the caller)
  }
  EXPECT_FALSE(fs::exists(path));
  for (const auto& entry : fs::directory_iterator(::testing::TempDir())) {
    // The temporary name (sim/core/atomic_file.cpp): ".<name>.tmp.<pid>".
    EXPECT_EQ(entry.path().filename().string().find("lacuna_trace_aborted.json.tmp"), std::string::npos);
  }
}

TEST(TraceWriter, OpNamesShowChunksOnlyWhenInterleaved) {
  ir::Program p = testing::two_rank_program();
  ir::Op op = testing::make_compute(ir::FORWARD, 3, 14, ir::ROLE_QKV);
  op.set_chunk(1);
  EXPECT_EQ(op_name(p, 0, op), "F mb3 L14 qkv");
  p.mutable_info()->set_virtual_stages(2);
  EXPECT_EQ(op_name(p, 0, op), "F mb3 c1 L14 qkv");
}

}  // namespace
}  // namespace lacuna::report
