// FP8 programs end to end (docs/fp8.md): every switch off compiles to the
// BF16 program's kernels and simulated time; the default recipe tags the
// linear GEMMs, adds the casts, the per-step weight casts, the FP8 parameter
// gather, and fills both peaks for MFU.
#include <gtest/gtest.h>

#include "sim/compiler/compile.h"
#include "sim/compiler/rank_layout.h"
#include "sim/compiler/compiler_test_support.h"
#include "sim/cost/cost_model.h"
#include "sim/engine/simulator.h"
#include "sim/model/fp8.h"
#include "sim/model/layer_shape.h"

namespace lacuna::compiler {
namespace {

using testing::make_scenario;
using testing::Small;

scenario::LoadedScenario fp8_scenario(const Small& s, bool switches) {
  auto ls = make_scenario(s);
  ls.spec.mutable_cluster()->mutable_gpu()->set_peak_fp8_tflops(1979);
  auto* t = ls.spec.mutable_training();
  t->set_precision(scenario::FP8);
  auto* f = t->mutable_fp8();
  if (!switches) {
    f->set_fprop(false);
    f->set_dgrad(false);
    f->set_wgrad(false);
    f->set_attention(false);
    f->set_param_gather(false);
    f->set_activation_storage(false);
  }
  return ls;
}

TimeNs simulate(const ir::Program& p, const scenario::Cluster& cluster) {
  const auto cost = cost::make_analytic_cost_model(cluster, p.info().precision());
  return engine::Simulator(p, *cost).run().end_time;
}

using testing::sp_small;

TEST(Fp8Compile, EverySwitchOffIsTheBf16Program) {
  for (const bool sp : {false, true}) {
    Small s = sp_small();
    s.sp = sp;
    const auto bf16_ls = make_scenario(s);
    auto bf16_cluster = bf16_ls.spec.cluster();
    bf16_cluster.mutable_gpu()->set_peak_fp8_tflops(1979);
    const ir::Program bf16 = compile(bf16_ls);
    const auto off_ls = fp8_scenario(s, false);
    const ir::Program off = compile(off_ls);
    ASSERT_EQ(bf16.classes_size(), off.classes_size());
    for (int c = 0; c < bf16.classes_size(); ++c) {
      const auto& a = bf16.classes(c);
      const auto& b = off.classes(c);
      ASSERT_EQ(a.streams_size(), b.streams_size());
      for (int st = 0; st < a.streams_size(); ++st) {
        ASSERT_EQ(a.streams(st).ops_size(), b.streams(st).ops_size());
        for (int o = 0; o < a.streams(st).ops_size(); ++o)
          EXPECT_EQ(a.streams(st).ops(o).SerializeAsString(), b.streams(st).ops(o).SerializeAsString());
      }
      EXPECT_EQ(a.memory().SerializeAsString(), b.memory().SerializeAsString());
    }
    EXPECT_EQ(simulate(off, off_ls.spec.cluster()), simulate(bf16, bf16_cluster));
  }
}

struct Tally {
  int64_t fp8_gemms = 0, bf16_linear_gemms = 0, casts = 0, step_casts = 0;
  double step_cast_elements = 0;
  int64_t dp_gather_bytes = 0;
};

Tally tally(const ir::Program& p, int cls) {
  Tally t;
  for (const auto& st : p.classes(cls).streams())
    for (const auto& op : st.ops()) {
      if (op.has_compute()) {
        const auto& c = op.compute();
        if (c.op_class() == ir::GEMM && model::fp8_linear_role(c.role()))
          (c.precision() == scenario::FP8 ? t.fp8_gemms : t.bf16_linear_gemms)++;
        if (c.role() == ir::ROLE_FP8_CAST) {
          ++t.casts;
          if (op.phase() == ir::OPTIMIZER_STEP) {
            ++t.step_casts;
            t.step_cast_elements += static_cast<double>(c.shape(0));
          }
        }
      }
      if (st.kind() == ir::DP_COMM && op.has_collective() && op.collective().kind() == ir::ALL_GATHER)
        t.dp_gather_bytes += op.collective().bytes();
    }
  return t;
}

TEST(Fp8Compile, DefaultRecipeRunsTheLinearGemmsInFp8WithCasts) {
  const Small s = sp_small();
  const auto ls = fp8_scenario(s, true);
  const ir::Program p = compile(ls);
  const ir::Program bf16 = compile(make_scenario(s));
  ASSERT_TRUE(p.info().has_fp8());
  EXPECT_EQ(p.info().fp8().recipe(), scenario::FP8_DELAYED);
  EXPECT_EQ(p.info().peak_bf16_flops_per_gpu(), 989e12);
  EXPECT_EQ(p.info().peak_fp8_flops_per_gpu(), 1979e12);
  EXPECT_EQ(p.info().peak_flops_per_gpu(), 1979e12);
  EXPECT_FALSE(bf16.info().has_fp8());
  const model::LayerShape shape = model::layer_shape(ls.spec);
  for (int c = 0; c < p.classes_size(); ++c) {
    const Tally t = tally(p, c), b = tally(bf16, c);
    EXPECT_EQ(t.bf16_linear_gemms, 0);
    EXPECT_EQ(t.fp8_gemms, b.bf16_linear_gemms);
    EXPECT_GT(t.casts, 0);
    // One weight cast per step over this rank's layers (pp 2: half of 4).
    EXPECT_EQ(t.step_casts, 1);
    EXPECT_EQ(t.step_cast_elements, static_cast<double>(2 * model::fp8_layer_weights(shape).total()));
    EXPECT_EQ(t.dp_gather_bytes, b.dp_gather_bytes);  // param_gather off: bf16 weights
  }
  // The FP8 GEMMs are faster at this size on the analytic model's FP8 peak
  // (blockwise: delayed scaling's synchronous amax reductions, two per
  // microbatch, outweigh what FP8 saves on a model this small).
  auto block = ls;
  block.spec.mutable_training()->mutable_fp8()->set_recipe(scenario::FP8_BLOCKWISE);
  EXPECT_LT(simulate(compile(block), ls.spec.cluster()), simulate(bf16, ls.spec.cluster()));
}

TEST(Fp8Compile, ParamGatherMovesFp8WeightsAtOneByte) {
  const Small s = sp_small();
  auto ls = fp8_scenario(s, true);
  ls.spec.mutable_training()->mutable_fp8()->set_param_gather(true);
  const ir::Program p = compile(ls);
  const ir::Program plain = compile(fp8_scenario(s, true));
  const model::LayerShape shape = model::layer_shape(ls.spec);
  for (int c = 0; c < p.classes_size(); ++c) {
    const Tally t = tally(p, c), b = tally(plain, c);
    // This rank's 2 layers of FP8 weights travel at 1 byte instead of 2.
    EXPECT_EQ(b.dp_gather_bytes - t.dp_gather_bytes, 2 * model::fp8_layer_weights(shape).total());
    // Master shard quantized (1/dp) and the transposes of the gathered weights.
    EXPECT_EQ(t.step_casts, 2);
    // The bf16 weights are replaced by the FP8 copies: 2 B → 2 × 1 B, on Hopper.
    EXPECT_EQ(p.classes(c).memory().weights_bytes(), plain.classes(c).memory().weights_bytes() -
                                                         2 * 2 * model::fp8_layer_weights(shape).total());
  }
}

TEST(Fp8Compile, ActivationStorageShrinksTheSavedActivations) {
  const Small s = sp_small();
  auto on = fp8_scenario(s, true);
  auto off = fp8_scenario(s, true);
  off.spec.mutable_training()->mutable_fp8()->set_activation_storage(false);
  int64_t kept_on = 0, kept_off = 0;
  for (const auto& [ls, kept] : {std::pair{&on, &kept_on}, std::pair{&off, &kept_off}}) {
    const ir::Program p = compile(*ls);
    for (const auto& st : p.classes(0).streams())
      for (const auto& op : st.ops())
        if (op.has_compute() && op.compute().memory_delta_bytes() > 0) *kept += op.compute().memory_delta_bytes();
  }
  EXPECT_LT(kept_on, kept_off);
}

// Delayed scaling (docs/fp8.md#delayed-scaling-amax-reduction): per
// microbatch and model chunk, one forward and one backward MAX all-reduce of
// all the rank's amaxes over the stage's tp × cp × dp ranks, each followed by
// the fused update.
struct AmaxTally {
  int64_t forward = 0, backward = 0, forward_bytes = 0, backward_bytes = 0, updates = 0;
};

AmaxTally amax_tally(const ir::Program& p, int cls) {
  AmaxTally t;
  for (const auto& st : p.classes(cls).streams())
    for (const auto& op : st.ops()) {
      if (op.has_collective() && op.collective().group_slot() == kSlotAmax) {
        EXPECT_EQ(op.collective().kind(), ir::ALL_REDUCE);
        EXPECT_EQ(st.name(), "sync");  // with the loss and gradient-norm reductions
        if (op.phase() == ir::FORWARD) {
          ++t.forward;
          t.forward_bytes = op.collective().bytes();
        } else {
          EXPECT_EQ(op.phase(), ir::BACKWARD_INPUT);
          ++t.backward;
          t.backward_bytes = op.collective().bytes();
        }
      }
      if (op.has_compute() && op.compute().role() == ir::ROLE_FP8_AMAX) ++t.updates;
    }
  return t;
}

TEST(Fp8Compile, DelayedScalingReducesEveryAmaxOverTheStagePerChunkPass) {
  for (const int64_t v : {1, 2}) {
    Small s = sp_small();
    s.v = v;
    s.layers = 8;
    if (v > 1) s.schedule = scenario::INTERLEAVED_1F1B;
    const auto ls = fp8_scenario(s, true);  // the default recipe: delayed
    const ir::Program p = compile(ls);
    ASSERT_EQ(p.group_slots_size(), kNumAmaxGroupSlots);
    EXPECT_EQ(p.group_slots(kSlotAmax).kind(), ir::AMAX_REDUCTION);
    for (const auto& r : p.ranks()) {
      // A dense program's MoE slots are bound to nothing.
      for (int32_t slot = kSlotEp; slot <= kSlotEpInterDomain; ++slot) EXPECT_EQ(r.group(slot), -1);
      // The amax group: every rank of the rank's pipeline stage.
      const auto& g = p.groups(r.group(kSlotAmax));
      EXPECT_EQ(g.kind(), ir::AMAX_REDUCTION);
      ASSERT_EQ(g.ranks_size(), s.tp * s.dp);
      for (int32_t m : g.ranks()) EXPECT_EQ(p.ranks(m).coord().pp(), r.coord().pp());
    }
    const int64_t m = s.global_batch / (s.micro_batch * s.dp);
    const int64_t gemms = 4 * s.layers / s.pp;  // QKV, projection, FC1, FC2 of every layer the rank holds
    for (int c = 0; c < p.classes_size(); ++c) {
      const AmaxTally t = amax_tally(p, c);
      EXPECT_EQ(t.forward, m * v);
      EXPECT_EQ(t.backward, m * v);
      EXPECT_EQ(t.forward_bytes, 3 * gemms * 4);
      EXPECT_EQ(t.backward_bytes, 2 * gemms * 4);
      EXPECT_EQ(t.updates, 2 * m * v);
    }
  }
}

TEST(Fp8Compile, TpOnlyAmaxReductionStaysInsideTheDataParallelReplica) {
  Small s = sp_small();
  auto ls = fp8_scenario(s, true);
  ls.spec.mutable_training()->mutable_fp8()->set_tp_only_amax_reduction(true);
  const ir::Program p = compile(ls);
  for (const auto& r : p.ranks()) {
    const auto& g = p.groups(r.group(kSlotAmax));
    ASSERT_EQ(g.ranks_size(), s.tp);
    for (int32_t m : g.ranks()) {
      EXPECT_EQ(p.ranks(m).coord().pp(), r.coord().pp());
      EXPECT_EQ(p.ranks(m).coord().dp(), r.coord().dp());
    }
  }
  // A group of one rank: no all-reduce, the update still runs.
  s.tp = 1;
  s.sp = false;
  auto alone = fp8_scenario(s, true);
  alone.spec.mutable_training()->mutable_fp8()->set_tp_only_amax_reduction(true);
  const ir::Program q = compile(alone);
  const AmaxTally t = amax_tally(q, 0);
  EXPECT_EQ(t.forward + t.backward, 0);
  EXPECT_GT(t.updates, 0);
  for (const auto& r : q.ranks()) EXPECT_EQ(r.group(kSlotAmax), -1);
}

TEST(Fp8Compile, OnlyDelayedScalingHasAnAmaxGroup) {
  for (const auto recipe : {scenario::FP8_CURRENT, scenario::FP8_BLOCKWISE}) {
    auto ls = fp8_scenario(sp_small(), true);
    ls.spec.mutable_training()->mutable_fp8()->set_recipe(recipe);
    const ir::Program p = compile(ls);
    EXPECT_EQ(p.group_slots_size(), kNumGroupSlots) << recipe;
    for (int c = 0; c < p.classes_size(); ++c) EXPECT_EQ(amax_tally(p, c).forward, 0);
  }
  // Every GEMM switch off: no FP8 module, nothing to reduce.
  const ir::Program off = compile(fp8_scenario(sp_small(), false));
  EXPECT_EQ(off.group_slots_size(), kNumGroupSlots);
}

// The compute stream waits for each reduction: the same program with
// zero-byte reductions (which take no time) runs faster.
TEST(Fp8Compile, DelayedScalingWaitsForItsAmaxReductions) {
  const Small s = sp_small();
  auto delayed = fp8_scenario(s, true);
  const ir::Program p = compile(delayed);
  ir::Program stripped = p;
  for (auto& cls : *stripped.mutable_classes())
    for (auto& st : *cls.mutable_streams())
      for (auto& op : *st.mutable_ops())
        if (op.has_collective() && op.collective().group_slot() == kSlotAmax) op.mutable_collective()->set_bytes(0);
  EXPECT_GT(simulate(p, delayed.spec.cluster()), simulate(stripped, delayed.spec.cluster()));
}

}  // namespace
}  // namespace lacuna::compiler
