// The host post-pass (compiler/host_model.h, docs/compiler.md#the-host): which
// ops of a compiled program get which launch cost, where the host waits for
// the GPU, and that zero costs change nothing.
#include "sim/compiler/host_model.h"

#include <gtest/gtest.h>

#include <google/protobuf/util/message_differencer.h>

#include <set>
#include <tuple>

#include "sim/compiler/compiler_test_support.h"

namespace lacuna::compiler {
namespace {

using testing::make_scenario;
using testing::Small;

// Costs in ns, chosen so that any sum of them identifies its terms.
constexpr int64_t kKernel = 3, kComm = 50, kPass = 700, kIteration = 11'000;

// The small plan (tp 2 × pp 2 × dp 2, 1F1B) with only the p2p's host syncs:
// no NaN checks, no clipping, no step statistics, no batch broadcast, no timer
// syncs. m = 16 / (2 × 2) = 4 microbatches per pipeline.
Small quiet(scenario::PipelineP2p p2p) {
  Small s;
  auto& x = s.execution;
  x.set_pipeline_p2p(p2p);
  x.set_nan_check(false);
  x.set_clip_grad(0);
  x.set_step_stats_sync(false);
  x.set_batch_broadcast(scenario::BROADCAST_NONE);
  x.set_timer_sync(false);
  return s;
}
constexpr int64_t kMicrobatches = 4;

void set_costs(scenario::LoadedScenario& ls, int64_t pass_ns) {
  auto* host = ls.spec.mutable_cluster()->mutable_host();
  host->set_kernel_launch_us(kKernel / 1000.0);
  host->set_collective_launch_us(kComm / 1000.0);
  host->set_microbatch_overhead_us(static_cast<double>(pass_ns) / 1000.0);
  host->set_iteration_overhead_us(kIteration / 1000.0);
}

ir::Program compiled_with_costs(const Small& s, int64_t pass_ns = kPass) {
  scenario::LoadedScenario ls = make_scenario(s);
  set_costs(ls, pass_ns);
  return compile(ls);
}

const ir::Stream& compute_stream(const ir::RankClass& c) {
  for (const auto& st : c.streams())
    if (st.kind() == ir::COMPUTE) return st;
  ADD_FAILURE() << "no compute stream in " << c.name();
  return c.streams(0);
}

// Events recorded on a receive stream that never waits (irecvs posted ahead).
std::set<int32_t> free_receive_events(const ir::RankClass& c) {
  std::set<int32_t> out;
  for (const auto& st : c.streams()) {
    if (st.kind() != ir::PP_RECV) continue;
    bool waits = false;
    for (const auto& op : st.ops()) waits |= op.has_wait();
    if (waits) continue;
    for (const auto& op : st.ops())
      if (op.has_record()) out.insert(op.record().event());
  }
  return out;
}

// Events recorded on any p2p stream (the transfers' completion).
std::set<int32_t> p2p_events(const ir::RankClass& c) {
  std::set<int32_t> out;
  for (const auto& st : c.streams())
    if (st.kind() == ir::PP_RECV || st.kind() == ir::PP_SEND)
      for (const auto& op : st.ops())
        if (op.has_record()) out.insert(op.record().event());
  return out;
}

// The launch part of an op's host time: a kernel, a record handing work to a
// stream, a wait on a free-running receive.
int64_t launch_ns(const ir::Op& op, const std::set<int32_t>& free) {
  int64_t ns = 0;
  if (op.has_compute()) ns += kKernel;
  if (op.has_record()) ns += kComm;
  if (op.has_wait() && free.count(op.wait().event())) ns += kComm;
  return ns;
}

TEST(HostModel, ZeroCostsLeaveTheProgramUnchanged) {
  // The compiler tests' cluster has every host cost at 0; Megatron-core's
  // default has no timer syncs.
  for (scenario::PipelineP2p p2p : {scenario::P2P_BLOCKING, scenario::P2P_OVERLAPPED}) {
    Small s;
    s.execution.set_pipeline_p2p(p2p);
    const ir::Program before = compile(make_scenario(s));
    ir::Program after = before;
    apply_host_model(after);
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(before, after));
  }
  // Unset costs count as 0 too.
  scenario::LoadedScenario ls = make_scenario(Small{});
  ls.spec.mutable_cluster()->clear_host();
  const ir::Program before = compile(ls);
  ir::Program after = before;
  apply_host_model(after);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(before, after));
}

TEST(HostModel, CompileLeavesHostTimeToThePostPass) {
  // compiler::compile sets no host_ns even with host costs: the post-pass,
  // run once by placement::compile, is the only place that does.
  const ir::Program p = compiled_with_costs(quiet(scenario::P2P_OVERLAPPED));
  for (const auto& c : p.classes())
    for (const auto& st : c.streams())
      for (const auto& op : st.ops()) ASSERT_EQ(op.host_ns(), 0) << c.name() << " " << st.name();
}

TEST(HostModel, AppliedTwiceAddsTwice) {
  // "Adds to host_ns already set": applying it twice is visible, which is why
  // every compile path applies it exactly once.
  ir::Program once = compiled_with_costs(quiet(scenario::P2P_OVERLAPPED));
  apply_host_model(once);
  ir::Program twice = once;
  apply_host_model(twice);
  for (int c = 0; c < once.classes_size(); ++c)
    for (int s = 0; s < once.classes(c).streams_size(); ++s)
      for (int i = 0; i < once.classes(c).streams(s).ops_size(); ++i)
        ASSERT_EQ(twice.classes(c).streams(s).ops(i).host_ns(), 2 * once.classes(c).streams(s).ops(i).host_ns());
}

// Per op: the launch cost by kind, the pass overhead on the first kernel of each
// of the rank's 2·m passes (forward and backward of each microbatch), the
// iteration overhead on the stream's first op; nothing off the compute stream.
void expect_documented_costs(const Small& s, int64_t expected_free_waits, int64_t pass_ns = kPass) {
  ir::Program p = compiled_with_costs(s, pass_ns);
  apply_host_model(p);
  ASSERT_EQ(p.classes_size(), 2);
  for (const auto& c : p.classes()) {
    SCOPED_TRACE(c.name());
    for (const auto& st : c.streams()) {
      if (st.kind() == ir::COMPUTE) continue;
      for (const auto& op : st.ops()) ASSERT_EQ(op.host_ns(), 0) << st.name();
    }
    const std::set<int32_t> free = free_receive_events(c);
    const ir::Stream& compute = compute_stream(c);
    int64_t kernels = 0, records = 0, free_waits = 0;
    std::set<std::tuple<int32_t, int32_t, bool>> pass_keys;
    for (int i = 0; i < compute.ops_size(); ++i) {
      const ir::Op& op = compute.ops(i);
      kernels += op.has_compute();
      records += op.has_record();
      free_waits += op.has_wait() && free.count(op.wait().event());
      const int64_t rest = op.host_ns() - launch_ns(op, free);
      const int64_t iteration = i == 0 ? kIteration : 0;
      ASSERT_TRUE(rest == iteration || rest == iteration + pass_ns)
          << "op " << i << " host_ns " << op.host_ns() << ": " << op.ShortDebugString();
      if (pass_ns > 0 && rest == iteration + pass_ns) {
        // A pass starts here: a forward or backward op of a microbatch not
        // started before in that direction.
        const bool forward = op.phase() == ir::FORWARD;
        EXPECT_TRUE(op.has_compute()) << "a pass starts at its first kernel: " << op.ShortDebugString();
        EXPECT_TRUE(forward || op.phase() == ir::BACKWARD_INPUT || op.phase() == ir::BACKWARD_WEIGHT ||
                    op.phase() == ir::RECOMPUTE)
            << op.ShortDebugString();
        EXPECT_TRUE(pass_keys.emplace(op.chunk(), op.microbatch(), forward).second)
            << "second pass start for " << op.ShortDebugString();
      }
    }
    EXPECT_GT(kernels, 0);
    EXPECT_EQ(free_waits, expected_free_waits);
    // 1F1B, v = 1: a forward and a backward pass per microbatch.
    if (pass_ns > 0) {
      EXPECT_EQ(static_cast<int64_t>(pass_keys.size()), 2 * kMicrobatches);
    }
    int64_t total = 0;
    for (const auto& op : compute.ops()) total += op.host_ns();
    EXPECT_EQ(total, kKernel * kernels + kComm * (records + free_waits) + pass_ns * 2 * kMicrobatches + kIteration);
  }
}

TEST(HostModel, OverlappedP2pCostsEachOpAsDocumented) {
  // Overlapped p2p: each rank's m receives are posted ahead on a receive
  // stream that never waits; the compute stream's wait for each costs a
  // collective launch (rank 0 the gradients, rank 1 the activations).
  expect_documented_costs(quiet(scenario::P2P_OVERLAPPED), kMicrobatches);
}

TEST(HostModel, BlockingP2pCostsEachLaunchAsDocumented) {
  // Blocking p2p: the receives wait for the call's record (one launch for the
  // batched group); no free-running receive stream. The calls' own records
  // and waits start no pass: exactly 2·m pass overheads, on kernels.
  expect_documented_costs(quiet(scenario::P2P_BLOCKING), 0);
}

// Host syncs of a program: (op index) per class, compute stream.
std::vector<std::vector<int>> host_syncs(const ir::Program& p) {
  std::vector<std::vector<int>> out;
  for (const auto& c : p.classes()) {
    out.emplace_back();
    const ir::Stream& compute = compute_stream(c);
    for (int i = 0; i < compute.ops_size(); ++i)
      if (compute.ops(i).host_sync()) out.back().push_back(i);
    for (const auto& st : c.streams()) {
      if (st.kind() == ir::COMPUTE) continue;
      for (const auto& op : st.ops()) EXPECT_FALSE(op.host_sync()) << st.name();
    }
  }
  return out;
}

TEST(HostModel, OverlappedP2pHasNoHostSyncs) {
  ir::Program p = compiled_with_costs(quiet(scenario::P2P_OVERLAPPED));
  apply_host_model(p);
  for (const auto& syncs : host_syncs(p)) EXPECT_TRUE(syncs.empty());
}

TEST(HostModel, BlockingP2pSyncsAfterEveryCall) {
  // Megatron-LM's 1F1B at pp = 2, m = 4 (schedules.py): the first rank calls
  // send_forward after its warm-up forward, send_forward_recv_backward after
  // each of its 3 steady forwards and recv_backward before its cool-down
  // backward; the last rank recv_forward first, send_backward_recv_forward
  // after its first 3 backwards and send_backward after the last. 5 calls
  // per rank, moving 2·m = 8 tensors. After each the host synchronizes
  // (torch.cuda.synchronize()): the compute op after the call's waits.
  ir::Program p = compiled_with_costs(quiet(scenario::P2P_BLOCKING));
  apply_host_model(p);
  const auto syncs = host_syncs(p);
  ASSERT_EQ(syncs.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("pp rank " + std::to_string(r));
    EXPECT_EQ(syncs[static_cast<size_t>(r)].size(), 5u);
    const ir::RankClass& c = p.classes(r);
    const std::set<int32_t> done = p2p_events(c);
    const ir::Stream& compute = compute_stream(c);
    int64_t transfer_waits = 0;
    for (const auto& op : compute.ops()) transfer_waits += op.has_wait() && done.count(op.wait().event());
    EXPECT_EQ(transfer_waits, 2 * kMicrobatches);
    for (int i : syncs[static_cast<size_t>(r)]) {
      // Right after the call's waits for its transfers.
      ASSERT_GT(i, 0);
      const ir::Op& before = compute.ops(i - 1);
      EXPECT_TRUE(before.has_wait() && done.count(before.wait().event())) << before.ShortDebugString();
    }
  }
}

TEST(HostModel, TimerSyncWaitsAtEveryPassAndAfterTheLast) {
  // Megatron-LM 2021–2022's timers: a synchronize at the first kernel of each of
  // the 2·m passes and once after the last pass, at the optimizer step's first
  // op (the forward-backward timer stops after the gradient reduction).
  Small s = quiet(scenario::P2P_OVERLAPPED);
  s.execution.set_timer_sync(true);
  ir::Program p = compiled_with_costs(s);
  apply_host_model(p);
  const auto syncs = host_syncs(p);
  for (int r = 0; r < p.classes_size(); ++r) {
    SCOPED_TRACE("pp rank " + std::to_string(r));
    const ir::Stream& compute = compute_stream(p.classes(r));
    const std::set<int32_t> free = free_receive_events(p.classes(r));
    ASSERT_EQ(syncs[static_cast<size_t>(r)].size(), static_cast<size_t>(2 * kMicrobatches + 1));
    int first_step = -1;
    for (int i = 0; i < compute.ops_size() && first_step < 0; ++i)
      if (compute.ops(i).phase() == ir::OPTIMIZER_STEP) first_step = i;
    for (int i : syncs[static_cast<size_t>(r)]) {
      const ir::Op& op = compute.ops(i);
      const bool pass_start = op.host_ns() - launch_ns(op, free) - (i == 0 ? kIteration : 0) == kPass;
      EXPECT_TRUE(pass_start || i == first_step) << "op " << i << ": " << op.ShortDebugString();
    }
    EXPECT_EQ(syncs[static_cast<size_t>(r)].back(), first_step);
  }
  // With zero costs the timers still synchronize: only host_sync changes.
  Small zero = s;
  ir::Program before = compile(make_scenario(zero));
  ir::Program after = before;
  apply_host_model(after);
  int64_t flipped = 0;
  for (int c = 0; c < before.classes_size(); ++c) {
    const ir::Stream& b = compute_stream(before.classes(c));
    const ir::Stream& a = compute_stream(after.classes(c));
    ASSERT_EQ(a.ops_size(), b.ops_size());
    for (int i = 0; i < a.ops_size(); ++i) {
      EXPECT_EQ(a.ops(i).host_ns(), 0);
      flipped += a.ops(i).host_sync() != b.ops(i).host_sync();
    }
  }
  EXPECT_EQ(flipped, 2 * (2 * kMicrobatches + 1));
}

}  // namespace
}  // namespace lacuna::compiler
