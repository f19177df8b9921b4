// The bubble scheduler on hand-made timelines, where every placement and the
// estimate can be checked by hand.
#include <gtest/gtest.h>

#include "sim/placement/optimus_scheduler.h"

namespace lacuna::placement::optimus {
namespace {

PassOp kernel(int64_t ns) {
  PassOp op;
  op.kind = PassOp::kKernel;
  op.duration_ns = ns;
  op.op.mutable_compute()->set_op_class(ir::GEMM);
  op.op.set_module(1);
  return op;
}

PassOp collective(int64_t ns) {
  PassOp op;
  op.kind = PassOp::kCollective;
  op.duration_ns = ns;
  op.op.mutable_collective()->set_kind(ir::ALL_GATHER);
  op.op.set_module(1);
  return op;
}

PassOp wait_for(int32_t collective_index) {
  PassOp op;
  op.kind = PassOp::kWait;
  op.waits_for = collective_index;
  op.op.set_module(1);
  return op;
}

// As PassBuilder::finish computes them.
Pass make_pass(std::vector<PassOp> ops) {
  Pass p;
  p.ops = std::move(ops);
  int64_t cursor = 0, stream = 0;
  std::vector<int64_t> end(p.ops.size(), 0);
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const PassOp& op = p.ops[i];
    if (op.kind == PassOp::kKernel) {
      cursor += op.duration_ns;
      p.compute_ns += op.duration_ns;
      p.max_kernel_ns = std::max(p.max_kernel_ns, op.duration_ns);
    } else if (op.kind == PassOp::kCollective) {
      stream = std::max(stream, cursor) + op.duration_ns;
      end[i] = stream;
    } else {
      cursor = std::max(cursor, end[static_cast<size_t>(op.waits_for)]);
    }
  }
  p.contiguous_ns = cursor;
  return p;
}

Bubble bubble(int64_t start, int64_t end, int32_t position) {
  Bubble b;
  b.start_ns = start;
  b.end_ns = end;
  b.position = position;
  b.kind = BubbleKind::kTp;
  return b;
}

// One LLM stage, two microbatches; one encoder pipeline of one stage on the
// same GPU (its output reaches the LLM through an event).
struct OneGpu {
  LlmTimeline tl;
  EncoderWork work;
  SchedulerInput in;

  OneGpu() {
    tl.microbatches = 2;
    tl.iteration_ns = 1010;
    StageTimeline st;
    st.pre_end_ns = 20;
    st.post_position = 50;
    st.post_start_ns = 900;
    st.post_end_ns = 1000;
    st.optimizer_ns = 10;
    st.end_ns = 1010;
    st.bubbles = {bubble(300, 340, 10), bubble(500, 520, 20), bubble(600, 700, 30)};
    tl.stages = {st};
    tl.forward_start_ns = {20, 400};
    tl.forward_position = {0, 15};
    tl.backward_end_ns = {800, 850};
    tl.backward_position = {40, 45};
    work.microbatches = 2;
    StageWork sw;
    sw.forward = make_pass({kernel(10), kernel(10), kernel(10)});
    sw.backward = make_pass({kernel(20), kernel(20)});
    work.stages = {sw};
    in.llm = &tl;
    in.work = &work;
    in.pp_forward_ns = {0};
    in.pp_backward_ns = {0};
    in.boundary_ns = {0};
  }
};

TEST(OptimusScheduler, CoarseShiftsTheLlmByThePreOverflow) {
  OneGpu t;
  BubbleScheduler s(t.in);
  const Schedule c = s.schedule({2}, true);
  // PRE: [0, 30) and [30, 60) against a 20 ns PRE bubble: δ = 40.
  EXPECT_EQ(c.delta_ns, 40);
  EXPECT_EQ(c.estimate_ns, 1010 + 40);
  EXPECT_EQ(s.evaluate({2}, true), c.estimate_ns);
  ASSERT_EQ(c.gpus.size(), 1u);
  const auto& g = c.gpus[0];
  EXPECT_EQ(g.forward[0].start_ns, 0);
  EXPECT_EQ(g.forward[1].end_ns, 60);
  EXPECT_FALSE(g.forward[1].in_bubbles);
  ASSERT_EQ(g.forward[0].segments.size(), 1u);
  EXPECT_EQ(g.forward[0].segments[0].position, 0);
  // POST from 900 + δ, within the POST bubble [900, 1000) (+ δ).
  EXPECT_EQ(g.backward[0].start_ns, 940);
  EXPECT_EQ(g.backward[1].end_ns, 1020);
  EXPECT_EQ(g.backward[0].segments[0].position, 50);
  // Encoder output i feeds LLM microbatch i; EF_i in absolute time.
  EXPECT_EQ(c.forward_arrival_ns, (std::vector<int64_t>{30, 60}));
  // Inside bubbles: 20 of the PRE work, all POST work: 100 of 140.
  EXPECT_EQ(g.compute_ns, 140);
  EXPECT_EQ(g.inside_ns, 100);
  EXPECT_DOUBLE_EQ(c.efficiency, 100.0 / 140.0);
}

TEST(OptimusScheduler, FineMovesTheLastMicrobatchIntoBubblesUntilADependencyBreaks) {
  OneGpu t;
  BubbleScheduler s(t.in);
  const Schedule f = s.schedule({2}, false);
  // Microbatch 1 moves into bubble [300, 340) (its three kernels fit);
  // PRE keeps microbatch 0 ([0, 30): δ = 10). Moving microbatch 0 too
  // leaves microbatch 1 no room before the LLM's last forward (400) and
  // would deliver LLM microbatch 0's input at 330 > F_0: rejected, stop.
  EXPECT_EQ(f.forward_moves, 1);
  EXPECT_EQ(f.delta_ns, 10);
  const auto& g = f.gpus[0];
  EXPECT_FALSE(g.forward[0].in_bubbles);
  ASSERT_TRUE(g.forward[1].in_bubbles);
  ASSERT_EQ(g.forward[1].segments.size(), 1u);
  EXPECT_EQ(g.forward[1].segments[0].position, 10);
  EXPECT_EQ(g.forward[1].segments[0].begin, 0);
  EXPECT_EQ(g.forward[1].segments[0].end, 3);
  EXPECT_EQ(g.forward[1].start_ns, 300 + 10);
  EXPECT_EQ(f.forward_arrival_ns, (std::vector<int64_t>{30, 340}));
  EXPECT_EQ(f.estimate_ns, 1010 + 10);
  EXPECT_LT(f.estimate_ns, s.evaluate({2}, true));
  EXPECT_EQ(s.evaluate({2}, false), f.estimate_ns);
  // 20 (PRE) + 30 (bubble) + 80 (POST) of 140.
  EXPECT_EQ(g.inside_ns, 130);
  EXPECT_GE(f.efficiency, s.schedule({2}, true).efficiency);
}

TEST(OptimusScheduler, KernelsSplitOverBubblesAndCollectivesOverlapTheLlmBetween) {
  OneGpu t;
  t.tl.stages[0].pre_end_ns = 0;
  t.tl.forward_start_ns = {600, 650};
  t.tl.stages[0].bubbles = {bubble(300, 320, 10), bubble(500, 520, 20), bubble(600, 700, 30)};
  // kernel 10 · collective 15 (consumed by the next kernel) · kernel 10.
  t.work.stages[0].forward = make_pass({kernel(10), collective(15), wait_for(1), kernel(10)});
  BubbleScheduler s(t.in);
  const Schedule f = s.schedule({2}, false);
  EXPECT_EQ(f.forward_moves, 2);
  EXPECT_EQ(f.delta_ns, 0);
  const auto& p0 = f.gpus[0].forward[0];
  // Kernel 300–310 and the collective's record in bubble 1; the collective
  // ends at 325, after that bubble: the wait and the kernel go to the next
  // bubble (500–510), the collective overlapping the LLM meanwhile.
  ASSERT_EQ(p0.segments.size(), 2u);
  EXPECT_EQ(p0.segments[0].position, 10);
  EXPECT_EQ(p0.segments[0].begin, 0);
  EXPECT_EQ(p0.segments[0].end, 2);
  EXPECT_EQ(p0.segments[1].position, 20);
  EXPECT_EQ(p0.segments[1].begin, 2);
  EXPECT_EQ(p0.segments[1].end, 4);
  EXPECT_EQ(p0.start_ns, 300);
  EXPECT_EQ(p0.end_ns, 510);
  // Microbatch 1 follows in program order: 510–520, collective to 535,
  // then bubble 3.
  const auto& p1 = f.gpus[0].forward[1];
  EXPECT_EQ(p1.start_ns, 510);
  EXPECT_EQ(p1.end_ns, 610);
  EXPECT_EQ(f.forward_arrival_ns, (std::vector<int64_t>{510, 610}));
}

TEST(OptimusScheduler, BackwardMovesShortenThePostOverflow) {
  OneGpu t;
  t.tl.stages[0].pre_end_ns = 100;
  t.tl.forward_start_ns = {100, 400};
  t.tl.stages[0].post_end_ns = 905;  // POST bubble of 5 ns: encoder backward overruns it
  t.tl.stages[0].end_ns = t.tl.iteration_ns = 915;
  t.tl.stages[0].bubbles.push_back(bubble(820, 880, 46));
  BubbleScheduler s(t.in);
  const Schedule c = s.schedule({2}, true);
  // δ = 0; POST backward 900–980 pushes the LLM optimizer from 905 to 980.
  EXPECT_EQ(c.delta_ns, 0);
  EXPECT_EQ(c.estimate_ns, 980 + 10);
  const Schedule f = s.schedule({2}, false);
  // Microbatch 0's gradient is there at 800: its backward fits 820–860.
  // Microbatch 1's (850) would need 860–900: only 20 ns of bubble left, stop.
  EXPECT_EQ(f.backward_moves, 1);
  EXPECT_TRUE(f.gpus[0].backward[0].in_bubbles);
  EXPECT_EQ(f.gpus[0].backward[0].start_ns, 820);
  EXPECT_EQ(f.gpus[0].backward[0].segments[0].position, 46);
  EXPECT_FALSE(f.gpus[0].backward[1].in_bubbles);
  // Whole microbatches only (the planner's search): POST backward 900–940.
  EXPECT_EQ(s.evaluate({2}, false), 940 + 10);
  // Kernel level: microbatch 1's first kernel takes the bubble's last 20 ns
  // (860–880) and its second runs in POST 900–920.
  EXPECT_EQ(f.backward_cuts, 1);
  const auto& cut = f.gpus[0].backward[1];
  EXPECT_EQ(cut.cut_op, 1);
  ASSERT_EQ(cut.segments.size(), 2u);
  EXPECT_EQ(cut.segments[0].position, 46);
  EXPECT_EQ(cut.segments[0].begin, 0);
  EXPECT_EQ(cut.segments[0].end, 1);
  EXPECT_EQ(cut.segments[1].position, 50);  // POST
  EXPECT_EQ(cut.segments[1].begin, 1);
  EXPECT_EQ(cut.segments[1].end, 2);
  EXPECT_EQ(cut.start_ns, 900);
  EXPECT_EQ(cut.end_ns, 920);
  EXPECT_EQ(f.estimate_ns, 920 + 10);
  // Efficiency by hand: of 140 ns of encoder kernels, both forwards (60) run
  // in the 100 ns PRE bubble, microbatch 0's backward (40) and the cut head
  // (20) in bubble 46, and 5 of the tail's 20 ns in the POST bubble.
  EXPECT_DOUBLE_EQ(f.efficiency, 125.0 / 140.0);
  EXPECT_GE(f.efficiency, c.efficiency);
}

TEST(OptimusScheduler, EncoderOutputsAreAssignedInArrivalOrderAcrossPipelines) {
  // Two LLM stages, PP_enc = 1: pipeline 0 on stage 0 (local output),
  // pipeline 1 on stage 1 (its output crosses to stage 0 in 5 ns).
  LlmTimeline tl;
  tl.microbatches = 3;
  tl.iteration_ns = 2000;
  StageTimeline a;
  a.pre_end_ns = 0;
  a.post_position = 100;
  a.post_start_ns = 1900;
  a.post_end_ns = 1990;
  a.optimizer_ns = 10;
  a.end_ns = 2000;
  StageTimeline b = a;
  b.pre_end_ns = 200;
  tl.stages = {a, b};
  tl.forward_start_ns = {50, 60, 500};
  tl.forward_position = {0, 5, 10};
  tl.backward_end_ns = {1000, 1100, 1200};
  tl.backward_position = {20, 30, 40};
  EncoderWork work;
  work.geo.tp_llm = 1;
  work.geo.pp_llm = 2;
  work.geo.pp_enc = 1;
  work.microbatches = 3;
  StageWork sw;
  sw.forward = make_pass({kernel(40)});
  sw.backward = make_pass({kernel(40)});
  work.stages = {sw};
  SchedulerInput in;
  in.llm = &tl;
  in.work = &work;
  in.pp_forward_ns = {0, 0};
  in.pp_backward_ns = {0, 0};
  in.boundary_ns = {0, 5};  // pipeline 0 → slice 0: same GPU; pipeline 1 → slice 0: 5 ns
  BubbleScheduler s(in);
  const Schedule c = s.schedule({1, 2}, true);
  // Outputs: pipeline 0 at 40 (local), pipeline 1 at 40 + 5 and 80 + 5.
  // EF = 40, 45, 85 against F = 50, 60, 500: pipeline 0 still has to fill
  // PRE of stage 0 (ends 40 > 0): δ = 40.
  EXPECT_EQ(c.source_pipeline, (std::vector<int32_t>{0, 1, 1}));
  EXPECT_EQ(c.source_x, (std::vector<int32_t>{0, 0, 1}));
  EXPECT_EQ(c.forward_arrival_ns, (std::vector<int64_t>{40, 45, 85}));
  EXPECT_EQ(c.delta_ns, 40);
  // Gradients: microbatch 0 stays local (1000 + δ), 1 and 2 cross (+5).
  EXPECT_EQ(c.gradient_arrival_ns, (std::vector<int64_t>{1040, 1145, 1245}));
  EXPECT_EQ(c.gpus[1].forward[1].llm_microbatch, 2);
  // Equal arrivals: the pipeline ending on the later LLM stage (its GPUs
  // reach POST first) takes the earlier microbatch.
  in.boundary_ns = {0, 0};
  BubbleScheduler tie(in);
  EXPECT_EQ(tie.schedule({1, 2}, true).source_pipeline, (std::vector<int32_t>{1, 0, 1}));
  EXPECT_THROW(s.evaluate({1, 1}, true), Error);  // does not sum to 3
  EXPECT_THROW(s.evaluate({3}, true), Error);     // wrong number of pipelines
}

}  // namespace
}  // namespace lacuna::placement::optimus
