// The CPU scenario's compiled Optimus program (encoder + LLM, PP 2 x TP 2 x
// DP 2 on 8 ranks) runs end to end on rank threads: every op of every stream
// executes once, in stream order. No timing thresholds.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <utility>

#include "runtime/executor.h"
#include "sim/placement/compile.h"
#include "sim/scenario/scenario.h"

namespace lacuna::runtime {
namespace {

TEST(ExecutorScenario, TinyMllmCpu8RankRunsEveryOpInStreamOrder) {
  const ir::Program program =
      placement::compile(scenario::load_scenario(LACUNA_SOURCE_DIR "/scenarios/cpu/tiny-mllm-cpu-8rank.pbtxt"));
  ASSERT_EQ(program.ranks_size(), 8);
  const ExecutionResult r = execute(program, {.iterations = 1, .timeout = std::chrono::milliseconds(120000)});

  size_t ops = 0;
  for (int rank = 0; rank < program.ranks_size(); ++rank)
    for (const auto& st : program.classes(program.ranks(rank).class_id()).streams()) ops += st.ops_size();
  ASSERT_EQ(r.spans.size(), ops);
  ASSERT_EQ(r.iteration_ns.size(), 1u);
  EXPECT_GT(r.iteration_ns[0], 0);
  EXPECT_GT(r.bytes_moved, 0);

  // Spans are sorted by (rank, stream, op): each op is reached after the
  // previous one of its stream ended, and ends after it started.
  std::map<std::pair<int, int>, int> next_op;
  std::map<std::pair<int, int>, int64_t> last_end;
  for (const ExecutedSpan& s : r.spans) {
    const auto key = std::make_pair(s.rank, s.stream);
    EXPECT_EQ(s.op, next_op[key]++) << "rank " << s.rank << " stream " << s.stream;
    EXPECT_GE(s.ready_ns, last_end[key]) << "rank " << s.rank << " stream " << s.stream << " op " << s.op;
    EXPECT_LE(s.ready_ns, s.start_ns);
    EXPECT_LE(s.start_ns, s.end_ns);
    last_end[key] = s.end_ns;
  }
}

}  // namespace
}  // namespace lacuna::runtime
