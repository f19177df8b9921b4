// The closed loop of issue 6 on the CPU (docs/executor.md#the-closed-loop):
// compile the scaled-down MLLM scenario (encoder + LLM, PP 2 × TP 2 × DP 2 on
// 8 ranks, Optimus), calibrate the CPU kernels it runs, simulate it with that
// profile, execute it on CPU threads, diff. The test asserts that every step
// runs and that the measured timeline respects the schedule's dependency
// order: stream order, every event wait after the op its record follows,
// every recv after its send began, every collective after all its members
// arrived. No timing threshold: a 2-core CI machine is far too noisy.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <algorithm>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/proto/program.pb.h"
#include "tests/cli_test_util.h"

namespace lacuna::testing {
namespace {

const std::string kScenario = source_path("scenarios/cpu/tiny-mllm-cpu-8rank.pbtxt");

struct Measured {
  int64_t ready = 0, start = 0, end = 0;
};

// (rank, stream, op) → measured times, from the JSON timeline.
using Times = std::map<std::tuple<int, int, int>, Measured>;

Times read_timeline(const std::string& path) {
  const auto j = nlohmann::json::parse(read_file(path));
  Times times;
  for (const auto& r : j.at("timeline").at("ranks")) {
    for (const auto& s : r.at("streams")) {
      for (const auto& o : s.at("ops")) {
        times[{r.at("rank").get<int>(), s.at("stream").get<int>(), o.at(0).get<int>()}] =
            Measured{o.at(5).get<int64_t>(), o.at(6).get<int64_t>(), o.at(7).get<int64_t>()};
      }
    }
  }
  return times;
}

bool is_event(const ir::Op& op) { return op.kind_case() == ir::Op::kRecord || op.kind_case() == ir::Op::kWait; }

// Every listed op of every stream, in op order, never overlaps the one before.
void expect_stream_order(const ir::Program& program, const Times& t, int* checked) {
  for (int r = 0; r < program.ranks_size(); ++r) {
    const ir::RankClass& cls = program.classes(program.ranks(r).class_id());
    for (int s = 0; s < cls.streams_size(); ++s) {
      int64_t previous_end = 0;
      for (int i = 0; i < cls.streams(s).ops_size(); ++i) {
        if (is_event(cls.streams(s).ops(i))) continue;
        const auto it = t.find({r, s, i});
        ASSERT_NE(it, t.end()) << "rank " << r << " stream " << s << " op " << i << " missing from the timeline";
        const Measured& m = it->second;
        EXPECT_LE(previous_end, m.ready) << "rank " << r << " stream " << s << " op " << i;
        EXPECT_LE(m.ready, m.start) << "rank " << r << " stream " << s << " op " << i;
        EXPECT_LE(m.start, m.end) << "rank " << r << " stream " << s << " op " << i;
        previous_end = m.end;
        ++*checked;
      }
    }
  }
}

// A wait (event e, value v) orders the next op of its stream after the op
// that precedes the v-th record of e (records in stream order; the compiler
// records each event on one stream).
void expect_event_order(const ir::Program& program, const Times& t, int* checked) {
  for (int r = 0; r < program.ranks_size(); ++r) {
    const ir::RankClass& cls = program.classes(program.ranks(r).class_id());
    // event → the op (stream, index) before each of its records, in order.
    std::map<int, std::vector<std::pair<int, int>>> records;
    for (int s = 0; s < cls.streams_size(); ++s) {
      int last_op = -1;
      for (int i = 0; i < cls.streams(s).ops_size(); ++i) {
        const ir::Op& op = cls.streams(s).ops(i);
        if (op.kind_case() == ir::Op::kRecord) records[op.record().event()].emplace_back(s, last_op);
        if (!is_event(op)) last_op = i;
      }
    }
    for (int s = 0; s < cls.streams_size(); ++s) {
      const auto& ops = cls.streams(s).ops();
      for (int i = 0; i < ops.size(); ++i) {
        if (ops[i].kind_case() != ir::Op::kWait) continue;
        const auto& list = records[ops[i].wait().event()];
        const int64_t v = ops[i].wait().value();
        ASSERT_LE(v, static_cast<int64_t>(list.size())) << "rank " << r << " stream " << s << " op " << i;
        const auto [cause_stream, cause_op] = list[static_cast<size_t>(v - 1)];
        if (cause_op < 0) continue;
        int next = i + 1;
        while (next < ops.size() && is_event(ops[next])) ++next;
        if (next == ops.size()) continue;
        const Measured& cause = t.at({r, cause_stream, cause_op});
        const Measured& after = t.at({r, s, next});
        EXPECT_LE(cause.end, after.start) << "rank " << r << ": stream " << s << " op " << next
                                          << " started before stream " << cause_stream << " op " << cause_op
                                          << " (which its wait depends on) ended";
        ++*checked;
      }
    }
  }
}

// The k-th send src→dst on a channel pairs with the k-th recv; the k-th
// collective of each member on a group is one instance.
void expect_communication_order(const ir::Program& program, const Times& t, int* checked) {
  std::map<std::tuple<int, int, int>, std::vector<Measured>> sends, recvs;
  std::map<int, std::map<int, std::vector<Measured>>> collectives;  // group → rank → instances
  for (int r = 0; r < program.ranks_size(); ++r) {
    const ir::RankBinding& b = program.ranks(r);
    const ir::RankClass& cls = program.classes(b.class_id());
    for (int s = 0; s < cls.streams_size(); ++s) {
      for (int i = 0; i < cls.streams(s).ops_size(); ++i) {
        const ir::Op& op = cls.streams(s).ops(i);
        if (op.kind_case() == ir::Op::kSend) {
          sends[{r, b.peer(op.send().peer_slot()), op.send().channel()}].push_back(t.at({r, s, i}));
        } else if (op.kind_case() == ir::Op::kRecv) {
          recvs[{b.peer(op.recv().peer_slot()), r, op.recv().channel()}].push_back(t.at({r, s, i}));
        } else if (op.kind_case() == ir::Op::kCollective) {
          collectives[b.group(op.collective().group_slot())][r].push_back(t.at({r, s, i}));
        }
      }
    }
  }
  for (const auto& [key, list] : sends) {
    const auto& other = recvs.at(key);
    ASSERT_EQ(list.size(), other.size());
    for (size_t k = 0; k < list.size(); ++k) {
      EXPECT_LE(list[k].ready, other[k].end) << "a recv ended before its send was posted";
      EXPECT_LE(other[k].ready, list[k].end) << "a send ended before its recv was posted";
      ++*checked;
    }
  }
  for (const auto& [group, members] : collectives) {
    size_t instances = members.begin()->second.size();
    for (const auto& [rank, list] : members) ASSERT_EQ(list.size(), instances) << "group " << group;
    for (size_t k = 0; k < instances; ++k) {
      for (const auto& [a, la] : members) {
        for (const auto& [b, lb] : members) {
          EXPECT_LE(la[k].ready, lb[k].end) << "group " << group << " instance " << k << ": rank " << b
                                            << " finished before rank " << a << " arrived";
        }
      }
      ++*checked;
    }
  }
}

TEST(ClosedLoop, CalibrateSimulateExecuteDiffOnCpu) {
  TempDir dir("loop");
  const auto compiled = run_lacuna("compile " + kScenario + " -o " + (dir / "program.pb"));
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  // The 8 ranks share this machine's cores: the kernels are calibrated with
  // every core busy, the prediction models the sharing, the execution
  // enforces it (docs/executor.md#cpu-contention).
  const std::string cores = std::to_string(std::max(1u, std::thread::hardware_concurrency()));
  const std::string slots = " --compute-slots " + cores;
  const auto calibrated = run_lacuna("calibrate --cpu --concurrency " + cores + " --scenario " + kScenario +
                                     " --no-grid --repetitions 2 --warmup 1 -o " + (dir / "cpu.pbtxt"));
  ASSERT_EQ(calibrated.exit_code, 0) << calibrated.output;
  const auto simulated = run_lacuna("simulate " + (dir / "program.pb") + " --calibration " + (dir / "cpu.pbtxt") +
                                    slots + " --trace-ranks all --no-trace --no-svg --json " +
                                    (dir / "predicted.json"));
  ASSERT_EQ(simulated.exit_code, 0) << simulated.output;
  const auto executed =
      run_lacuna("execute " + (dir / "program.pb") + " --backend cpu" + slots + " --iterations 1 --warmup 0" +
                 " --trace-ranks all" +
                 " --json " + (dir / "measured.json") + " --trace " + (dir / "measured.trace.json") + " --svg " +
                 (dir / "measured.svg"));
  ASSERT_EQ(executed.exit_code, 0) << executed.output;
  for (const char* s : {"iteration time", "bubble total", "measured: cpu backend", "executed: all 8 ranks"}) {
    EXPECT_NE(executed.output.find(s), std::string::npos) << s << "\n" << executed.output;
  }
  const auto diffed = run_lacuna("diff " + (dir / "predicted.json") + " " + (dir / "measured.json") + " --svg " +
                                 (dir / "diff.svg") + " --json " + (dir / "diff.json"));
  ASSERT_EQ(diffed.exit_code, 0) << diffed.output;
  EXPECT_NE(diffed.output.find("iteration time"), std::string::npos) << diffed.output;
  const auto d = nlohmann::json::parse(read_file(dir / "diff.json"));
  EXPECT_EQ(d["ranks"]["compared"].size(), 8u);
  EXPECT_FALSE(d["op_classes"].empty());

  // The measured trace is a Perfetto JSON with every rank.
  const auto trace = nlohmann::json::parse(read_file(dir / "measured.trace.json"));
  EXPECT_FALSE(trace["traceEvents"].empty());

  ir::Program program;
  {
    std::ifstream in(dir / "program.pb", std::ios::binary);
    ASSERT_TRUE(program.ParseFromIstream(&in));
  }
  const Times measured = read_timeline(dir / "measured.json");
  int checked = 0;
  expect_stream_order(program, measured, &checked);
  int stream_checks = checked;
  expect_event_order(program, measured, &checked);
  int event_checks = checked - stream_checks;
  expect_communication_order(program, measured, &checked);
  EXPECT_GT(stream_checks, 1000);
  EXPECT_GT(event_checks, 100);
  EXPECT_GT(checked - stream_checks - event_checks, 100);
}

}  // namespace
}  // namespace lacuna::testing
