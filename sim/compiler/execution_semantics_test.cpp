// Each execution switch checked against its closed form on a small compiled
// program run through the engine (docs/compiler.md): the switch changes ops,
// streams and dependencies, and the timing follows from them exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "sim/compiler/compile.h"
#include "sim/compiler/compiler_test_support.h"
#include "sim/engine/simulator.h"

namespace lacuna::compiler {
namespace {

using testing::make_scenario;
using testing::Small;
using testing::TrivialCost;

struct Spans : engine::Observer {
  std::vector<engine::OpSpan> all;
  void on_op_end(const engine::OpSpan& s) override { all.push_back(s); }
};

struct SimRun {
  ir::Program program;
  std::vector<engine::OpSpan> spans;
  TimeNs end;
};

SimRun simulate(const scenario::LoadedScenario& ls, const cost::CostModel& cost) {
  SimRun r;
  r.program = compile(ls);
  Spans spans;
  engine::Simulator sim(r.program, cost);
  sim.add_observer(&spans);
  r.end = sim.run().end_time;
  r.spans = std::move(spans.all);
  return r;
}

SimRun simulate(const Small& s, const cost::CostModel& cost) { return simulate(make_scenario(s), cost); }

ir::StreamKind kind_of(const SimRun& r, const engine::OpSpan& s) {
  const int32_t cls = r.program.ranks(s.rank).class_id();
  return r.program.classes(cls).streams(s.stream).kind();
}

// Spans of `rank` on streams of `kind` satisfying `pred`, in stream order.
std::vector<engine::OpSpan> select(const SimRun& r, int32_t rank, ir::StreamKind kind,
                                   const std::function<bool(const ir::Op&)>& pred) {
  std::vector<engine::OpSpan> out;
  for (const auto& s : r.spans)
    if (s.rank == rank && kind_of(r, s) == kind && pred(*s.ir)) out.push_back(s);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.stream, a.op) < std::tie(b.stream, b.op);
  });
  return out;
}

int64_t duration(const engine::OpSpan& s) { return (s.end - s.start).count(); }

// Two pipeline stages, no TP / DP: rank 0's only neighbour is rank 1.
Small two_stages() {
  Small s;
  s.tp = 1;
  s.dp = 1;
  s.pp = 2;
  s.layers = 2;
  s.global_batch = 8;
  s.micro_batch = 2;  // 4 microbatches
  s.gpus_per_node = 2;
  return s;
}

// Blocking p2p (Megatron's batch_isend_irecv + wait): after its first
// forward, the first stage sends the activation (send_forward, a warm-up call)
// and its compute stream waits for the transfer before the next forward. The
// next forward therefore starts exactly one transfer time later than with
// overlapped p2p, where the send runs beside compute.
TEST(ExecutionSemantics, BlockingP2pAddsTheTransferTimeToTheSendersComputeStream) {
  const TrivialCost cost;
  Small s = two_stages();
  s.execution.set_pipeline_p2p(scenario::P2P_BLOCKING);
  const SimRun blocking = simulate(s, cost);
  s.execution.set_pipeline_p2p(scenario::P2P_OVERLAPPED);
  const SimRun overlapped = simulate(s, cost);

  auto forward_of = [](int32_t mb) {
    return [mb](const ir::Op& op) { return op.has_compute() && op.phase() == ir::FORWARD && op.microbatch() == mb; };
  };
  auto is_send0 = [](const ir::Op& op) { return op.has_send() && op.phase() == ir::FORWARD && op.microbatch() == 0; };
  const auto f0_b = select(blocking, 0, ir::COMPUTE, forward_of(0));
  const auto f1_b = select(blocking, 0, ir::COMPUTE, forward_of(1));
  const auto f0_o = select(overlapped, 0, ir::COMPUTE, forward_of(0));
  const auto f1_o = select(overlapped, 0, ir::COMPUTE, forward_of(1));
  const auto send_b = select(blocking, 0, ir::PP_SEND, is_send0);
  ASSERT_FALSE(f0_b.empty());
  ASSERT_FALSE(f1_b.empty());
  ASSERT_FALSE(f1_o.empty());
  ASSERT_EQ(send_b.size(), 1u);

  // The same first forward either way.
  EXPECT_EQ(f0_b.back().end, f0_o.back().end);
  // The send starts when the forward ends (the receiver posted its receive at
  // the start) and takes the transfer time: same node, bytes / 1000 + 200 ns.
  const auto& send = send_b.front();
  EXPECT_EQ(send.start, f0_b.back().end);
  EXPECT_EQ(duration(send), 200 + send.ir->send().bytes() / 1000);
  // Overlapped: the next forward follows at once. Blocking: after the send.
  EXPECT_EQ(f1_o.front().start, f0_o.back().end);
  EXPECT_EQ(f1_b.front().start, send.end);
  EXPECT_EQ((f1_b.front().start - f1_o.front().start).count(), duration(send));
}

// The same cost, with the data-parallel reduce-scatters and all-gathers free.
class FreeDpCollectives : public TrivialCost {
 public:
  TimeNs collective(ir::CollectiveKind kind, int64_t bytes, const cost::GroupShape& g) const override {
    if (kind == ir::REDUCE_SCATTER || kind == ir::ALL_GATHER) return TimeNs(0);
    return TrivialCost::collective(kind, bytes, g);
  }
};

Small data_parallel(bool overlap) {
  Small s;
  s.tp = 1;
  s.pp = 1;
  s.dp = 2;
  s.layers = 4;
  s.global_batch = 8;
  s.micro_batch = 2;  // 2 microbatches per replica
  s.gpus_per_node = 2;
  s.distributed_optimizer = true;
  s.overlap_grad = overlap;
  s.overlap_param = overlap;
  return s;
}

int64_t dp_collective_time(const SimRun& r) {
  int64_t total = 0;
  for (const auto& s :
       select(r, 0, ir::DP_COMM, [](const ir::Op& op) {
         return op.has_collective() &&
                (op.collective().kind() == ir::REDUCE_SCATTER || op.collective().kind() == ir::ALL_GATHER);
       }))
    total += duration(s);
  return total;
}

// Without --overlap-grad-reduce / --overlap-param-gather the gradient
// reduce-scatter runs after the last backward and the parameter all-gather
// after the optimizer step, nothing beside them: the iteration is longer by
// exactly their time than the same program with them free. With overlap some
// of it hides behind compute.
TEST(ExecutionSemantics, DataParallelOverlapOffExposesReduceScatterPlusAllGather) {
  const TrivialCost cost;
  const FreeDpCollectives free_dp;
  const Small off = data_parallel(false);
  const Small on = data_parallel(true);
  const SimRun off_run = simulate(off, cost);
  const int64_t rs_ag = dp_collective_time(off_run);
  ASSERT_GT(rs_ag, 0);
  EXPECT_EQ((off_run.end - simulate(off, free_dp).end).count(), rs_ag);

  scenario::LoadedScenario ls = make_scenario(on);
  ls.spec.mutable_parallel()->set_ddp_bucket_size(1);  // one bucket per layer
  const SimRun on_run = simulate(ls, cost);
  const TimeNs on_free = engine::Simulator(on_run.program, free_dp).run().end_time;
  // Per-layer buckets: the reductions of the later layers run during the
  // backward of the earlier ones.
  const int64_t exposed_on = (on_run.end - on_free).count();
  EXPECT_GE(exposed_on, 0);
  EXPECT_LT(exposed_on, dp_collective_time(on_run));
}

// TP communication overlap (SP): a column-parallel GEMM's all-gather in n
// pieces on the TP stream, back to back, and the GEMM in n pieces, piece j
// after gather j. So gather 1 is exposed, and piece j starts at
// max(end of piece j − 1, end of gather j): per boundary at most
// min(GEMM piece j − 1, gather j) is hidden. A row-parallel GEMM's pieces run
// back to back and reduce-scatter j follows piece j and reduce-scatter j − 1.
TEST(ExecutionSemantics, TpOverlapHidesAtMostMinOfGemmAndCollectivePerPiece) {
  const TrivialCost cost;
  Small s;
  s.tp = 2;
  s.sp = true;
  s.pp = 1;
  s.dp = 1;
  s.layers = 1;
  s.global_batch = 2;
  s.micro_batch = 2;
  s.gpus_per_node = 2;
  s.execution.set_tp_comm_overlap(true);
  const SimRun r = simulate(s, cost);

  auto gemm = [](ir::KernelRole role) {
    return [role](const ir::Op& op) {
      return op.has_compute() && op.compute().role() == role && op.phase() == ir::FORWARD && op.microbatch() == 0;
    };
  };
  const auto tp = select(r, 0, ir::TP_COMM, [](const ir::Op& op) {
    return op.has_collective() && op.phase() == ir::FORWARD && op.microbatch() == 0 && op.layer() >= 0;
  });
  // Transformer Engine's defaults: the all-gather GEMMs in tp = 2 pieces, the
  // reduce-scatter GEMMs in 4 (sim/model/layer_shape.cpp).
  const auto qkv = select(r, 0, ir::COMPUTE, gemm(ir::ROLE_QKV));
  const auto proj = select(r, 0, ir::COMPUTE, gemm(ir::ROLE_ATTN_PROJ));
  ASSERT_EQ(qkv.size(), 2u);
  ASSERT_EQ(proj.size(), 4u);
  ASSERT_GE(tp.size(), 6u);
  for (int j = 0; j < 2; ++j) ASSERT_EQ(tp[j].ir->collective().kind(), ir::ALL_GATHER);
  for (int j = 2; j < 6; ++j) ASSERT_EQ(tp[j].ir->collective().kind(), ir::REDUCE_SCATTER);

  // All-gather → QKV pieces.
  EXPECT_EQ(tp[1].start, tp[0].end);
  EXPECT_EQ(qkv[0].start, tp[0].end);
  EXPECT_EQ(qkv[1].start, std::max(qkv[0].end, tp[1].end));
  const int64_t serial_ag = duration(tp[0]) + duration(tp[1]) + duration(qkv[0]) + duration(qkv[1]);
  const int64_t hidden_ag = serial_ag - (qkv[1].end - tp[0].start).count();
  EXPECT_GT(hidden_ag, 0);
  EXPECT_EQ(hidden_ag, std::min(duration(qkv[0]), duration(tp[1])));

  // Projection pieces → reduce-scatters.
  int64_t bound = 0, serial_rs = 0;
  for (int j = 0; j < 4; ++j) {
    const auto& rs = tp[2 + j];
    if (j > 0) {
      EXPECT_EQ(proj[j].start, proj[j - 1].end);
    }
    const TimeNs ready = j == 0 ? proj[0].end : std::max(proj[j].end, tp[2 + j - 1].end);
    EXPECT_EQ(rs.start, ready) << "piece " << j;
    if (j + 1 < 4) bound += std::min(duration(rs), duration(proj[j + 1]));
    serial_rs += duration(rs) + duration(proj[j]);
  }
  const int64_t hidden_rs = serial_rs - (tp[5].end - proj[0].start).count();
  EXPECT_GT(hidden_rs, 0);
  EXPECT_LE(hidden_rs, bound);
}

}  // namespace
}  // namespace lacuna::compiler
