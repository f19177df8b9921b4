// class_actions (class_actions.h): hand-built classes read back as the
// actions they run (pieces, I/W against B, skipped ops), and compiled
// pipelines read back as exactly the schedule the builder gave them.
#include "sim/compiler/class_actions.h"

#include <gtest/gtest.h>

#include "sim/compiler/compile.h"
#include "sim/compiler/compiler_test_support.h"
#include "sim/core/error.h"
#include "sim/schedule/lower_recompute.h"
#include "sim/schedule/schedule.h"

namespace lacuna::compiler {
namespace {

struct ClassWriter {
  ir::RankClass cls;
  ir::Stream* compute;
  ClassWriter() {
    cls.set_name("test_class");
    compute = cls.add_streams();
    compute->set_name("compute");
  }
  // n kernels of (module, phase, microbatch, chunk).
  void kernels(int n, int32_t module, ir::Phase phase, int32_t mb, int32_t chunk = 0) {
    for (int i = 0; i < n; ++i) {
      ir::Op* op = compute->add_ops();
      op->set_module(module);
      op->set_phase(phase);
      op->set_microbatch(mb);
      op->set_chunk(chunk);
      op->mutable_compute()->set_fixed_duration_ns(1);
    }
  }
  void wait(ir::Phase phase, int32_t mb) {
    ir::Op* op = compute->add_ops();
    op->set_phase(phase);
    op->set_microbatch(mb);
    op->mutable_wait()->set_event(0);
  }
};

std::string read_back(const ir::RankClass& cls, int32_t pp_rank = 0, int32_t pp = 1) {
  const StageOf stage = [&](int32_t module, int32_t chunk) { return module == 0 ? chunk * pp + pp_rank : 0; };
  return schedule::format_schedule({[&] {
    schedule::RankActions r;
    for (auto& a : class_actions(cls, stage, {"", "vit"})) r.push_back(a);
    return r;
  }()});
}

TEST(ClassActions, CutPassesCarryTheirKernelRanges) {
  ClassWriter w;
  w.kernels(3, 0, ir::FORWARD, 0);
  w.kernels(2, 1, ir::FORWARD, 1);  // an encoder forward placed inside the LLM's
  w.wait(ir::FORWARD, 0);           // waits and records belong to no pass
  w.kernels(4, 0, ir::FORWARD, 0);
  w.kernels(1, 1, ir::FORWARD, 1);
  // A full backward: input and weight gradients interleave per layer.
  for (int layer = 0; layer < 3; ++layer) {
    w.kernels(2, 0, ir::BACKWARD_INPUT, 0);
    w.kernels(1, 0, ir::BACKWARD_WEIGHT, 0);
  }
  w.kernels(5, 0, ir::OPTIMIZER_STEP, 0);  // not a pass
  EXPECT_EQ(read_back(w.cls), "rank 0: 0F0@0-3 vit:0F1@0-2 0F0@3-7 vit:0F1@2-3 0B0\n");
}

TEST(ClassActions, InputGradientsAllFirstSplitIntoIAndW) {
  ClassWriter w;
  w.kernels(2, 0, ir::FORWARD, 0);
  w.kernels(3, 0, ir::BACKWARD_INPUT, 0);
  w.kernels(2, 0, ir::FORWARD, 1);
  w.kernels(2, 0, ir::BACKWARD_WEIGHT, 0);
  // Microbatch 1: a full backward (interleaved) cut by an encoder's kernels.
  w.kernels(2, 0, ir::BACKWARD_INPUT, 1);
  w.kernels(1, 0, ir::BACKWARD_WEIGHT, 1);
  w.kernels(1, 1, ir::BACKWARD_INPUT, 0);
  w.kernels(2, 0, ir::BACKWARD_INPUT, 1);
  w.kernels(1, 0, ir::BACKWARD_WEIGHT, 1);
  // Microbatch 2: input then weight gradients, adjacent: still I and W.
  w.kernels(2, 0, ir::BACKWARD_INPUT, 2);
  w.kernels(2, 0, ir::BACKWARD_WEIGHT, 2);
  EXPECT_EQ(read_back(w.cls), "rank 0: 0F0 0I0 0F1 0W0 0B1@0-3 vit:0B0 0B1@3-6 0I2 0W2\n");
}

TEST(ClassActions, RecomputeAndChunksAndFrozenBackwards) {
  ClassWriter w;
  w.kernels(2, 0, ir::FORWARD, 0, 1);
  w.kernels(2, 0, ir::RECOMPUTE, 0, 1);
  w.kernels(2, 0, ir::BACKWARD_INPUT, 0, 1);  // no weight gradient: still a B
  // Microbatch 1: the output layer's backward first (not checkpointed), then
  // the recompute and the backward of each checkpointed group in turn.
  w.kernels(1, 0, ir::FORWARD, 1, 1);
  w.kernels(1, 0, ir::BACKWARD_INPUT, 1, 1);
  for (int group = 0; group < 2; ++group) {
    w.kernels(2, 0, ir::RECOMPUTE, 1, 1);
    w.kernels(1, 0, ir::BACKWARD_INPUT, 1, 1);
    w.kernels(1, 0, ir::BACKWARD_WEIGHT, 1, 1);
  }
  // Microbatch 0 recomputed wholly before its backward: a lone R; microbatch
  // 1's recompute interleaved with its backward: "R&B".
  EXPECT_EQ(read_back(w.cls, 1, 4), "rank 0: 5F0 5R0 5B0 5F1 5R1&5B1\n");
}

TEST(ClassActions, RefusesAClassWithoutComputeStreamOrAnUnnamedModule) {
  ir::RankClass empty;
  empty.set_name("lonely");
  const StageOf stage = [](int32_t, int32_t) { return 0; };
  try {
    class_actions(empty, stage, {""});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lonely"), std::string::npos);
  }
  ClassWriter w;
  w.kernels(1, 2, ir::FORWARD, 0);
  EXPECT_THROW(class_actions(w.cls, stage, {"", "vit"}), Error);
}

// Every built-in schedule, compiled, reads back as the builder's actions on
// every pipeline rank: the compiler runs the schedule it was given.
TEST(ClassActions, CompiledPipelinesReadBackAsTheirSchedule) {
  struct Case {
    scenario::ScheduleKind kind;
    int64_t v;
    scenario::Recompute recompute;
  };
  for (const Case c : {Case{scenario::ONE_F_ONE_B, 1, scenario::RECOMPUTE_NONE},
                       Case{scenario::GPIPE, 1, scenario::RECOMPUTE_NONE},
                       Case{scenario::INTERLEAVED_1F1B, 2, scenario::RECOMPUTE_NONE},
                       Case{scenario::ZB_H1, 1, scenario::RECOMPUTE_NONE},
                       Case{scenario::ONE_F_ONE_B, 1, scenario::RECOMPUTE_FULL}}) {
    SCOPED_TRACE(scenario::ScheduleKind_Name(c.kind) + " v " + std::to_string(c.v));
    testing::Small s;
    s.pp = 4;
    s.dp = 1;
    s.layers = 8;
    s.v = c.v;
    s.schedule = c.kind;
    s.recompute = c.recompute;
    const ir::Program p = compile(testing::make_scenario(s));
    const schedule::PipelineShape shape{4, static_cast<int32_t>(c.v), static_cast<int32_t>(p.info().num_microbatches())};
    const schedule::ActionSchedule want = schedule::to_actions(schedule::build_schedule(c.kind, shape), shape);
    for (const ir::RankBinding& b : p.ranks()) {
      const int32_t r = b.coord().pp();
      const StageOf stage = [&](int32_t, int32_t chunk) { return schedule::virtual_stage(shape, r, chunk); };
      const schedule::RankActions got = class_actions(p.classes(b.class_id()), stage, {""});
      // Full recompute runs inside each backward, as the recompute pass
      // writes it ("R&B").
      const schedule::ActionSchedule expected =
          c.recompute == scenario::RECOMPUTE_FULL ? schedule::add_recompute_actions(want) : want;
      EXPECT_EQ(schedule::format_schedule({got}), schedule::format_schedule({expected[static_cast<size_t>(r)]}))
          << "pipeline rank " << r;
    }
  }
}

}  // namespace
}  // namespace lacuna::compiler
