// The Megatron-LM placements of a multimodal model (sim/placement/megatron_mllm.h):
// the baseline runs every encoder in the pre-process of the LLM's first
// virtual stage; the balanced one runs interleaved 1F1B over the encoder + LLM
// layer chain, partitioned by dynamic programming.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "sim/compiler/compile.h"
#include "sim/compiler/compiler_test_support.h"
#include "sim/compiler/layer_chain.h"
#include "sim/placement/megatron_mllm.h"
#include "sim/compiler/segment_inputs.h"
#include "sim/cost/memory.h"
#include "sim/engine/simulator.h"
#include "sim/model/accounting.h"
#include "sim/model/layer_shape.h"
#include "sim/model/mllm.h"

namespace lacuna::compiler {
namespace {

using placement::compile_megatron_mllm;

using scenario::MEGATRON_BALANCED;
using scenario::MEGATRON_BASELINE;
using scenario::MEGATRON_LAYER_SPLIT;
using testing::find_stream;
using testing::make_encoder_work_free;
using testing::make_mllm_scenario;
using testing::make_scenario;
using testing::Small;
using testing::SmallEncoder;

const cost::CostModel& trivial() {
  static const testing::TrivialCost cost;
  return cost;
}

scenario::LoadedScenario mllm(const Small& s, const std::vector<SmallEncoder>& encoders, scenario::PlacementKind kind,
                              int64_t balanced_v = 2) {
  auto ls = make_mllm_scenario(s, encoders, kind, kind == MEGATRON_BALANCED ? balanced_v : 0);
  scenario::validate_scenario(ls.spec, ls.locations);  // the test scenarios are real ones
  return ls;
}

ir::Program build(const Small& s, const std::vector<SmallEncoder>& encoders, scenario::PlacementKind kind,
                  const cost::CostModel& cost = trivial()) {
  return compile_megatron_mllm(mllm(s, encoders, kind), kind, cost);
}

int32_t microbatches(const Small& s) { return static_cast<int32_t>(s.global_batch / (s.micro_batch * s.dp)); }

template <class F>
void for_each_op(const ir::Program& p, F f) {
  for (int c = 0; c < p.classes_size(); ++c)
    for (const auto& stream : p.classes(c).streams())
      for (const auto& op : stream.ops()) f(c, stream, op);
}

int64_t end_time(const ir::Program& p, const cost::CostModel& cost = trivial(), bool fold = false) {
  return engine::Simulator(p, cost, {.fold = fold}).run().end_time.count();
}

std::string serialized(const ir::Program& p) {
  std::string out;
  google::protobuf::io::StringOutputStream sos(&out);
  google::protobuf::io::CodedOutputStream cos(&sos);
  cos.SetSerializationDeterministic(true);
  p.SerializeToCodedStream(&cos);
  return out;
}

model::ShardSpec shard_of(const Small& s) { return {s.tp, s.cp, s.pp, s.sp && s.tp > 1}; }

// Variants the placements must build and run: schedules, SP, CP, recompute,
// frozen and multi-branch encoders, deeper pipelines, DP without the
// distributed optimizer.
struct Variant {
  std::string name;
  Small s;
  std::vector<SmallEncoder> encoders;
};

std::vector<Variant> variants() {
  std::vector<Variant> out;
  const SmallEncoder enc;
  out.push_back({"1f1b", Small{}, {enc}});
  Small sp;
  sp.sp = true;
  out.push_back({"1f1b-sp", sp, {enc}});
  Small full = sp;
  full.recompute = scenario::RECOMPUTE_FULL;
  full.overlap_grad = false;
  full.overlap_param = false;
  out.push_back({"full-recompute-no-overlap", full, {enc}});
  Small cp = sp;
  cp.cp = 2;
  cp.dp = 1;
  cp.global_batch = 8;
  cp.recompute = scenario::RECOMPUTE_SELECTIVE;
  cp.rank_order = "tp-dp-pp-cp";
  out.push_back({"cp2-sp-selective", cp, {enc}});
  Small zb;
  zb.schedule = scenario::ZB_H1;
  out.push_back({"zb-h1", zb, {enc}});
  Small gpipe;
  gpipe.schedule = scenario::GPIPE;
  out.push_back({"gpipe", gpipe, {enc}});
  Small interleaved;
  interleaved.schedule = scenario::INTERLEAVED_1F1B;
  interleaved.v = 2;
  out.push_back({"interleaved", interleaved, {enc}});
  SmallEncoder frozen = enc;
  frozen.frozen = true;
  frozen.name = "vit-frozen";
  frozen.layers = 3;
  frozen.projector_layers = 1;
  frozen.token_merge = 2;
  Small multi;
  multi.distributed_optimizer = false;
  multi.overlap_param = false;
  multi.parallel_attn = true;
  out.push_back({"two-branches-one-frozen", multi, {enc, frozen}});
  Small deep;
  deep.pp = 4;
  deep.layers = 8;
  deep.global_batch = 32;
  deep.gpus_per_node = 4;
  out.push_back({"pp4", deep, {enc}});
  return out;
}

// ---------------------------------------------------------------- baseline

TEST(MegatronBaseline, EncoderWorkOnlyOnTheFirstVirtualStageAndLlmKernelsUnchanged) {
  for (const auto& var : variants()) {
    SCOPED_TRACE(var.name);
    const ir::Program p = build(var.s, var.encoders, MEGATRON_BASELINE);
    const ir::Program llm = compile(make_scenario(var.s));
    std::map<int32_t, int> per_module;
    for_each_op(p, [&](int c, const ir::Stream& stream, const ir::Op& op) {
      if (op.module() == 0) return;
      ++per_module[op.module()];
      EXPECT_EQ(c, 0) << stream.name();
      if (op.phase() != ir::DP_SYNC && op.phase() != ir::OPTIMIZER_STEP) {
        EXPECT_EQ(op.chunk(), 0) << stream.name();  // virtual stage 0 = chunk 0 of rank 0
      }
    });
    for (int e = 0; e < static_cast<int>(var.encoders.size()); ++e) EXPECT_GT(per_module[e + 1], 0) << e;
    // The LLM's kernels, in order, are the LLM-only program's.
    ASSERT_EQ(p.classes_size(), llm.classes_size());
    for (int c = 0; c < p.classes_size(); ++c) {
      auto kernels = [](const ir::RankClass& cls) {
        std::vector<std::string> out;
        for (const auto& op : find_stream(cls, "compute")->ops())
          if (op.has_compute() && op.module() == 0) out.push_back(op.SerializeAsString());
        return out;
      };
      EXPECT_EQ(kernels(p.classes(c)), kernels(llm.classes(c))) << c;
      if (c > 0) {
        EXPECT_EQ(p.classes(c).SerializeAsString(), llm.classes(c).SerializeAsString()) << c;
      }
    }
  }
}

TEST(MegatronBaseline, EncodersRunBeforeTheEmbeddingAndAfterItsBackward) {
  for (const auto& var : variants()) {
    if (var.s.schedule == scenario::ZB_H1) continue;  // split B / W: covered by the forward/backward pairing test
    SCOPED_TRACE(var.name);
    const ir::Program p = build(var.s, var.encoders, MEGATRON_BASELINE);
    const auto& ops = find_stream(p.classes(0), "compute")->ops();
    const int num_encoders = static_cast<int>(var.encoders.size());
    // Per microbatch: encoder forward kernels so far, by module; whether the
    // LLM embedding's forward / backward kernel was seen.
    std::map<int32_t, std::map<int32_t, int>> fwd_seen;
    std::map<int32_t, int> fwd_total;
    for (const auto& op : ops)
      if (op.has_compute() && op.module() > 0 && op.phase() == ir::FORWARD && op.microbatch() == 0)
        ++fwd_total[op.module()];
    std::set<int32_t> embedding_fwd, embedding_bwd;
    std::map<int32_t, int32_t> last_bwd_module;
    for (const auto& op : ops) {
      if (!op.has_compute() || op.chunk() != 0) continue;
      const int32_t mb = op.microbatch();
      const bool embedding = op.module() == 0 && op.compute().role() == ir::ROLE_EMBEDDING;
      if (embedding && op.phase() == ir::FORWARD) {
        embedding_fwd.insert(mb);
        for (int e = 1; e <= num_encoders; ++e) EXPECT_EQ(fwd_seen[mb][e], fwd_total[e]) << "mb " << mb;
      }
      if (embedding && op.phase() == ir::BACKWARD_WEIGHT) embedding_bwd.insert(mb);
      if (op.module() == 0) continue;
      if (op.phase() == ir::FORWARD) {
        EXPECT_FALSE(embedding_fwd.count(mb)) << "encoder forward after the embedding, mb " << mb;
        // Branches one after another: encoder e's forward after e − 1's.
        for (int e = 1; e < op.module(); ++e) EXPECT_EQ(fwd_seen[mb][e], fwd_total[e]);
        ++fwd_seen[mb][op.module()];
      } else if (op.phase() == ir::BACKWARD_INPUT || op.phase() == ir::BACKWARD_WEIGHT ||
                 op.phase() == ir::RECOMPUTE) {
        EXPECT_TRUE(embedding_bwd.count(mb)) << "encoder backward before the embedding's, mb " << mb;
        // Reverse order in backward: the last branch first.
        if (last_bwd_module.count(mb)) {
          EXPECT_LE(op.module(), last_bwd_module[mb]);
        }
        last_bwd_module[mb] = op.module();
      }
    }
    EXPECT_EQ(static_cast<int>(embedding_fwd.size()), microbatches(var.s));
  }
}

// Iteration time. The baseline program is the LLM-only one plus encoder ops
// (its LLM ops and their order are unchanged, see above), and op start times
// are max-plus functions of op durations, so adding work can only delay:
// T_base ≥ T_llm. Stage 0's compute stream runs its LLM kernels and all
// encoder kernels one at a time: T_base ≥ busy0_llm + E, i.e.
// T_base − T_llm ≥ E − idle0_llm, where idle0_llm = T_llm − busy0_llm is the
// time stage 0's compute stream idles in the LLM-only run (pipeline bubbles,
// exposed communication: what the encoder could hide in, at best). Checked on
// a heavy encoder, where the bound is far from vacuous.
TEST(MegatronBaseline, IterationTimeGrowsByAtLeastTheEncoderWorkStageZeroCannotHide) {
  SmallEncoder heavy;
  heavy.layers = 8;
  heavy.hidden = 256;
  heavy.ffn = 1024;
  heavy.images_per_sample = 2;
  for (auto kind : {scenario::ONE_F_ONE_B, scenario::ZB_H1, scenario::INTERLEAVED_1F1B}) {
    SCOPED_TRACE(scenario::ScheduleKind_Name(kind));
    Small s;
    s.schedule = kind;
    s.v = kind == scenario::INTERLEAVED_1F1B ? 2 : 1;
    const auto& cost = trivial();
    const ir::Program base = build(s, {heavy}, MEGATRON_BASELINE);
    const ir::Program llm = compile(make_scenario(s));
    auto busy = [&](const ir::RankClass& c, bool encoder) {
      int64_t t = 0;
      for (const auto& op : find_stream(c, "compute")->ops())
        if (op.has_compute() && (op.module() > 0) == encoder) t += cost.compute(op.compute()).count();
      return t;
    };
    const int64_t t_base = end_time(base), t_llm = end_time(llm);
    const int64_t encoder = busy(base.classes(0), true);
    const int64_t idle0 = t_llm - busy(llm.classes(0), false);
    // E is every microbatch's encoder forward + backward: the kernels of
    // patch embedding, layers, final norm and projector per microbatch.
    const auto ls = mllm(s, {heavy}, MEGATRON_BASELINE);
    const ModuleWork w = encoder_work(ls.spec, 0, s.micro_batch, shard_of(s), s.recompute);
    auto kernels = [&](const std::vector<model::Step>& steps) {
      int64_t t = 0;
      for (const auto& step : steps)
        if (const auto* k = std::get_if<model::Kernel>(&step)) {
          ir::Compute c;
          c.set_op_class(k->op_class);
          c.set_role(k->role);
          for (int64_t d : k->shape) c.add_shape(d);
          c.set_flops(k->flops);
          c.set_bytes(k->bytes);
          t += cost.compute(c).count();
        }
      return t;
    };
    const int64_t per_microbatch = heavy.layers * (kernels(w.layer_forward) + kernels(w.layer_backward)) +
                                   kernels(w.pre_forward) + kernels(w.pre_backward) + kernels(w.post_forward) +
                                   kernels(w.post_backward);
    const int64_t optimizer = busy(base.classes(0), true) - microbatches(s) * per_microbatch;
    EXPECT_GT(optimizer, 0);  // the encoder's own Adam kernel
    EXPECT_LT(optimizer, 2 * per_microbatch);
    std::printf("  %s: LLM-only %lld ns, baseline %lld ns, encoder work on stage 0 %lld ns, stage-0 idle %lld ns\n",
                scenario::ScheduleKind_Name(kind).c_str(), static_cast<long long>(t_llm),
                static_cast<long long>(t_base), static_cast<long long>(encoder), static_cast<long long>(idle0));
    EXPECT_GE(t_base, t_llm);
    EXPECT_GT(encoder, idle0);  // the bound below says something
    EXPECT_GE(t_base - t_llm, encoder - idle0);
  }
}

// With encoder ops made (almost) free, the baseline is the LLM-only program:
// every module > 0 compute op, collective and send takes 1 ns, so each adds
// at most 1 ns on any path.
TEST(MegatronBaseline, ZeroEncoderWorkGivesTheLlmOnlyIterationTime) {
  for (const auto& var : variants()) {
    SCOPED_TRACE(var.name);
    ir::Program p = build(var.s, var.encoders, MEGATRON_BASELINE);
    const int64_t encoder_ops = make_encoder_work_free(p);
    ASSERT_GT(encoder_ops, 0);
    const int64_t t = end_time(p), t_llm = end_time(compile(make_scenario(var.s)));
    EXPECT_GE(t, t_llm);
    EXPECT_LE(t, t_llm + encoder_ops);
  }
}

// ---------------------------------------------------------------- both placements

TEST(MegatronMllm, EveryEncoderForwardHasItsBackwardUnlessFrozen) {
  for (auto kind : {MEGATRON_BASELINE, MEGATRON_BALANCED, MEGATRON_LAYER_SPLIT}) {
    for (const auto& var : variants()) {
      SCOPED_TRACE(scenario::PlacementKind_Name(kind) + " " + var.name);
      const ir::Program p = build(var.s, var.encoders, kind);
      // (module, microbatch, layer) per phase; layer −1: patch embedding,
      // final norm and projector.
      std::map<ir::Phase, std::multiset<std::tuple<int32_t, int32_t, int32_t>>> seen;
      std::map<ir::Phase, std::multiset<std::tuple<int32_t, int32_t, ir::KernelRole>>> outside;
      for_each_op(p, [&](int, const ir::Stream&, const ir::Op& op) {
        if (!op.has_compute() || op.module() == 0) return;
        if (op.layer() >= 0) {
          seen[op.phase()].insert({op.module(), op.microbatch(), op.layer()});
        } else {
          outside[op.phase()].insert({op.module(), op.microbatch(), op.compute().role()});
        }
      });
      const int32_t m = microbatches(var.s);
      for (int e = 0; e < static_cast<int>(var.encoders.size()); ++e) {
        const SmallEncoder& enc = var.encoders[static_cast<size_t>(e)];
        for (int32_t mb = 0; mb < m; ++mb) {
          EXPECT_EQ(outside[ir::FORWARD].count({e + 1, mb, ir::ROLE_EMBEDDING}), 1u) << "patch embedding " << mb;
          EXPECT_EQ(outside[ir::BACKWARD_WEIGHT].count({e + 1, mb, ir::ROLE_EMBEDDING}), enc.frozen ? 0u : 1u);
          // The projector trains even when the encoder is frozen.
          EXPECT_EQ(outside[ir::BACKWARD_WEIGHT].count({e + 1, mb, ir::ROLE_FC1}), 1u) << "projector " << mb;
          for (int32_t l = 0; l < enc.layers; ++l) {
            const auto key = std::make_tuple(e + 1, mb, l);
            EXPECT_GT(seen[ir::FORWARD].count(key), 0u) << e << " " << mb << " " << l;
            EXPECT_EQ(seen[ir::BACKWARD_INPUT].count(key) > 0, !enc.frozen) << e << " " << mb << " " << l;
            EXPECT_EQ(seen[ir::BACKWARD_WEIGHT].count(key) > 0, !enc.frozen) << e << " " << mb << " " << l;
            EXPECT_EQ(seen[ir::RECOMPUTE].count(key) > 0,
                      !enc.frozen && var.s.recompute != scenario::RECOMPUTE_NONE);
          }
        }
      }
    }
  }
}

TEST(MegatronMllm, SimulatesToCompletionFullAndFolded) {
  for (auto kind : {MEGATRON_BASELINE, MEGATRON_BALANCED, MEGATRON_LAYER_SPLIT}) {
    for (const auto& var : variants()) {
      SCOPED_TRACE(scenario::PlacementKind_Name(kind) + " " + var.name);
      const ir::Program p = build(var.s, var.encoders, kind);
      engine::Simulator full(p, trivial());
      const auto r = full.run();
      EXPECT_GT(r.end_time.count(), 0);
      EXPECT_EQ(static_cast<int>(r.simulated_ranks.size()), p.info().num_ranks());
      engine::Simulator folded(p, trivial(), {.fold = true});
      const auto f = folded.run();
      EXPECT_EQ(f.end_time, r.end_time);
      EXPECT_LE(f.simulated_ranks.size(), r.simulated_ranks.size());
    }
  }
}

TEST(MegatronMllm, MemoryDeltasBalanceAndCountEncoderActivations) {
  for (auto kind : {MEGATRON_BASELINE, MEGATRON_BALANCED, MEGATRON_LAYER_SPLIT}) {
    for (const auto& var : variants()) {
      SCOPED_TRACE(scenario::PlacementKind_Name(kind) + " " + var.name);
      const ir::Program p = build(var.s, var.encoders, kind);
      const auto ls = mllm(var.s, var.encoders, kind);
      int64_t encoder_allocated = 0;
      for (const auto& cls : p.classes()) {
        int64_t sum = 0;
        for (const auto& op : find_stream(cls, "compute")->ops()) {
          sum += op.compute().memory_delta_bytes();
          if (op.module() > 0 && op.compute().memory_delta_bytes() > 0)
            encoder_allocated += op.compute().memory_delta_bytes();
        }
        EXPECT_EQ(sum, 0) << cls.name();
      }
      // Per microbatch: every trained layer keeps its activations (+ what
      // full recompute re-materialises), the final norm its input, the
      // projector its inputs; a frozen encoder only the projector's.
      int64_t expected = 0;
      for (int e = 0; e < static_cast<int>(var.encoders.size()); ++e) {
        const auto shape = model::encoder_layer_shape(ls.spec, e, var.s.micro_batch, shard_of(var.s));
        const auto projector = model::projector_shape(ls.spec, e, var.s.micro_batch, shard_of(var.s));
        int64_t per_mb = model::projector_activation_bytes(projector).count();
        if (!var.encoders[static_cast<size_t>(e)].frozen) {
          int64_t layer = cost::layer_activation_bytes(activation_inputs(shape, var.s.recompute)).count();
          if (var.s.recompute == scenario::RECOMPUTE_FULL)
            layer += cost::layer_activation_bytes(activation_inputs(shape, scenario::RECOMPUTE_NONE)).count();
          per_mb += var.encoders[static_cast<size_t>(e)].layers * layer + shape.sp_tokens() * shape.hidden * 2;
        }
        expected += per_mb;
      }
      EXPECT_EQ(encoder_allocated, expected * microbatches(var.s));
    }
  }
}

// Model state: the encoder's parameters (layers, patch embedding, final norm,
// projector, TP-sharded like the LLM) join virtual stage 0's; frozen ones as
// bf16 weights only.
TEST(MegatronBaseline, MemoryBaselineGrowsByTheEncoderModelState) {
  for (const auto& var : variants()) {
    SCOPED_TRACE(var.name);
    const ir::Program p = build(var.s, var.encoders, MEGATRON_BASELINE);
    const ir::Program llm = compile(make_scenario(var.s));
    const auto ls = mllm(var.s, var.encoders, MEGATRON_BASELINE);
    const auto shape = model::layer_shape(ls.spec);
    // LLM parameters of virtual stage 0 (even split; head too when pp = 1)
    // plus the other chunks of rank 0.
    const int64_t stages = var.s.pp * var.s.v;
    int64_t llm_params = var.s.v * (var.s.layers / stages) * model::layer_parameters(shape) +
                         model::embedding_parameters(shape);
    if (var.s.pp == 1) llm_params += model::head_parameters(shape);
    int64_t trained = 0, frozen = 0;
    for (int e = 0; e < static_cast<int>(var.encoders.size()); ++e) {
      const auto& enc = var.encoders[static_cast<size_t>(e)];
      const int64_t body = enc.layers * model::encoder_layer_parameters(ls.spec, e, shard_of(var.s)) +
                           model::patch_embedding_parameters(ls.spec, e) +
                           model::encoder_final_norm_parameters(ls.spec, e);
      const int64_t projector =
          model::projector_parameters(model::projector_shape(ls.spec, e, var.s.micro_batch, shard_of(var.s)));
      if (var.s.tp == 1) {
        EXPECT_EQ(body + projector, model::encoder_parameters(ls.spec, e));
      }
      trained += projector + (enc.frozen ? 0 : body);
      frozen += enc.frozen ? body : 0;
    }
    const int64_t dp = var.s.dp * var.s.cp;
    const auto state = cost::model_state_bytes(llm_params + trained, dp, var.s.distributed_optimizer);
    const auto& mem = p.classes(0).memory();
    EXPECT_EQ(mem.weights_bytes(), state.weights.count() + 2 * frozen);
    EXPECT_EQ(mem.gradients_bytes(), state.gradients.count());
    EXPECT_EQ(mem.optimizer_bytes(), state.optimizer.count());
    EXPECT_EQ(llm.classes(0).memory().weights_bytes(), 2 * llm_params);
    for (int c = 1; c < p.classes_size(); ++c)
      EXPECT_EQ(p.classes(c).memory().SerializeAsString(), llm.classes(c).memory().SerializeAsString());
  }
}

// Encoder parameters are reduced, gathered and updated with the LLM's, in
// buckets of their own (module-tagged); frozen weights are not.
TEST(MegatronMllm, DataParallelAndOptimizerCoverTrainedEncoderParameters) {
  for (auto kind : {MEGATRON_BASELINE, MEGATRON_BALANCED, MEGATRON_LAYER_SPLIT}) {
    for (const auto& var : variants()) {
      if (var.s.dp * var.s.cp == 1) continue;
      SCOPED_TRACE(scenario::PlacementKind_Name(kind) + " " + var.name);
      const ir::Program p = build(var.s, var.encoders, kind);
      const int64_t dp = var.s.dp * var.s.cp;
      // Trained parameters per class, from the memory baseline (fp32
      // gradients, 4 B each).
      int64_t grad_bytes = 0, optimizer_updates = 0;
      for (const auto& cls : p.classes()) {
        int64_t reduced = 0, gathered = 0, updated = 0;
        for (const auto& op : find_stream(cls, "dp")->ops()) {
          // The gradient and parameter buckets (DP_SYNC), not the loss
          // reported per microbatch.
          if (!op.has_collective() || op.phase() != ir::DP_SYNC) continue;
          if (op.collective().kind() == ir::ALL_GATHER) {
            gathered += op.collective().bytes();
          } else {
            reduced += op.collective().bytes();
          }
        }
        for (const auto& op : find_stream(cls, "compute")->ops())
          if (op.has_compute() && op.compute().role() == ir::ROLE_OPTIMIZER_STEP) updated += op.compute().shape(0);
        EXPECT_EQ(reduced, cls.memory().gradients_bytes()) << cls.name();
        if (var.s.distributed_optimizer) {
          EXPECT_EQ(gathered, cls.memory().gradients_bytes() / 2) << cls.name();
        }
        grad_bytes += reduced;
        optimizer_updates += updated;
        const int64_t trained = cls.memory().gradients_bytes() / 4;
        EXPECT_GE(updated, var.s.distributed_optimizer ? trained / dp : trained);
        EXPECT_LE(updated, var.s.distributed_optimizer ? trained / dp + 2 + static_cast<int64_t>(var.encoders.size()) : trained);
      }
      // And the encoders' share carries their module.
      const auto ls = mllm(var.s, var.encoders, kind);
      int64_t encoder_reduced = 0;
      for_each_op(p, [&](int, const ir::Stream& stream, const ir::Op& op) {
        if (stream.kind() == ir::DP_COMM && op.has_collective() && op.collective().kind() != ir::ALL_GATHER &&
            op.module() > 0)
          encoder_reduced += op.collective().bytes();
      });
      int64_t expected = 0;
      for (int e = 0; e < static_cast<int>(var.encoders.size()); ++e) {
        const auto& enc = var.encoders[static_cast<size_t>(e)];
        expected += model::projector_parameters(model::projector_shape(ls.spec, e, var.s.micro_batch, shard_of(var.s)));
        if (!enc.frozen)
          expected += enc.layers * model::encoder_layer_parameters(ls.spec, e, shard_of(var.s)) +
                      model::patch_embedding_parameters(ls.spec, e) + model::encoder_final_norm_parameters(ls.spec, e);
      }
      EXPECT_EQ(encoder_reduced, 4 * expected);
    }
  }
}

TEST(MegatronMllm, ProgramInfoIsTheLlmsWithThePlacement) {
  for (auto kind : {MEGATRON_BASELINE, MEGATRON_BALANCED, MEGATRON_LAYER_SPLIT}) {
    SCOPED_TRACE(scenario::PlacementKind_Name(kind));
    Small s;
    const ir::Program p = build(s, {SmallEncoder{}}, kind);
    const ir::Program llm = compile(make_scenario(s));
    EXPECT_EQ(p.info().placement(), kind);
    EXPECT_EQ(p.info().modules_size(), 0);  // the placement layer adds them
    EXPECT_EQ(p.info().model_flops_per_iteration(), llm.info().model_flops_per_iteration());
    EXPECT_EQ(p.info().hardware_flops_per_iteration(), llm.info().hardware_flops_per_iteration());
    EXPECT_EQ(p.info().num_ranks(), llm.info().num_ranks());
    EXPECT_EQ(p.info().num_microbatches(), llm.info().num_microbatches());
    EXPECT_EQ(p.groups_size(), llm.groups_size());
    if (kind == MEGATRON_BALANCED) {
      EXPECT_EQ(p.info().schedule(), scenario::INTERLEAVED_1F1B);
      EXPECT_EQ(p.info().virtual_stages(), 2);
    } else {
      EXPECT_EQ(p.info().schedule(), s.schedule);
      EXPECT_EQ(p.info().virtual_stages(), 1);
    }
  }
}

TEST(MegatronMllm, CompilingTwiceGivesIdenticalPrograms) {
  for (auto kind : {MEGATRON_BASELINE, MEGATRON_BALANCED, MEGATRON_LAYER_SPLIT}) {
    for (const auto& var : variants()) {
      SCOPED_TRACE(scenario::PlacementKind_Name(kind) + " " + var.name);
      const auto ls = mllm(var.s, var.encoders, kind);
      const auto analytic = cost::make_analytic_cost_model(ls.spec.cluster(), scenario::BF16);
      EXPECT_EQ(serialized(compile_megatron_mllm(ls, kind, *analytic)),
                serialized(compile_megatron_mllm(ls, kind, *analytic)));
    }
  }
}

TEST(MegatronMllm, ClearErrors) {
  auto expect_error = [](const std::function<void()>& f, const std::string& what) {
    try {
      f();
      ADD_FAILURE() << "no error, expected: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  Small s;
  // Balanced: interleaving needs pp ≥ 2 and ≥ 2 chunks, and a chain long
  // enough for every virtual stage.
  Small one = s;
  one.pp = 1;
  expect_error(
      [&] {
        auto ls = make_mllm_scenario(one, {SmallEncoder{}}, MEGATRON_BALANCED, 2);
        compile_megatron_mllm(ls, MEGATRON_BALANCED, trivial());
      },
      "needs pp ≥ 2");
  expect_error(
      [&] {
        auto ls = make_mllm_scenario(s, {SmallEncoder{}}, MEGATRON_BALANCED, 0);  // parallel.virtual_stages = 1
        compile_megatron_mllm(ls, MEGATRON_BALANCED, trivial());
      },
      "at least 2 model chunks per pipeline rank");
  expect_error(
      [&] {
        auto ls = make_mllm_scenario(s, {SmallEncoder{}}, MEGATRON_BALANCED, 5);  // 8 links, 10 stages
        compile_megatron_mllm(ls, MEGATRON_BALANCED, trivial());
      },
      "the encoder + LLM chain has 8 layers, fewer than pp × virtual stages = 10");
  Small odd = s;
  odd.global_batch = 12;  // 3 microbatches over pp = 2
  expect_error(
      [&] {
        auto ls = make_mllm_scenario(odd, {SmallEncoder{}}, MEGATRON_BALANCED, 2);
        compile_megatron_mllm(ls, MEGATRON_BALANCED, trivial());
      },
      "multiple of pp = 2");
  // The LLM's CP must split the encoder's image sequences.
  Small cp = s;
  cp.cp = 2;
  cp.dp = 1;
  cp.global_batch = 8;
  SmallEncoder odd_tokens;
  odd_tokens.tokens_per_image = 63;
  expect_error(
      [&] {
        auto ls = make_mllm_scenario(cp, {odd_tokens}, MEGATRON_BASELINE);
        compile_megatron_mllm(ls, MEGATRON_BASELINE, trivial());
      },
      "cp=2 (the LLM's, which the Megatron placements give the encoders) must divide encoder 0's 63 tokens");
  expect_error(
      [&] {
        auto ls = make_mllm_scenario(s, {SmallEncoder{}}, scenario::OPTIMUS);
        compile_megatron_mllm(ls, scenario::OPTIMUS, trivial());
      },
      "not OPTIMUS");
  expect_error([&] { compile_megatron_mllm(make_scenario(s), MEGATRON_BASELINE, trivial()); },
               "need at least one encoder");
}

// ---------------------------------------------------------------- balanced: the partition

// Every composition of n links into `parts` non-empty parts.
void compositions(int64_t n, int32_t parts, std::vector<int64_t>& cur,
                  const std::function<void(const std::vector<int64_t>&)>& f) {
  if (parts == 1) {
    cur.push_back(n);
    f(cur);
    cur.pop_back();
    return;
  }
  for (int64_t first = 1; first <= n - (parts - 1); ++first) {
    cur.push_back(first);
    compositions(n - first, parts - 1, cur, f);
    cur.pop_back();
  }
}

int64_t brute_force_best(const std::vector<int64_t>& times, int32_t parts) {
  int64_t best = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> cur;
  compositions(static_cast<int64_t>(times.size()), parts, cur,
               [&](const std::vector<int64_t>& sizes) { best = std::min(best, max_part_time(times, sizes)); });
  return best;
}

TEST(MegatronBalanced, PartitionOfAHandCheckedChain) {
  // [5 | 1 1 1 | 5 1]: no 3-way split gets below 6 (each 5 needs a stage, the
  // three 1s between them join one side); of the two optima ({1,3,2} and
  // {2,2,2}) the earliest cut of the first part wins.
  EXPECT_EQ(partition_chain({5, 1, 1, 1, 5, 1}, 3), (std::vector<int64_t>{1, 3, 2}));
  EXPECT_EQ(max_part_time({5, 1, 1, 1, 5, 1}, {1, 3, 2}), 6);
  EXPECT_EQ(partition_chain({4, 4, 4, 4}, 4), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(partition_chain({7}, 1), (std::vector<int64_t>{1}));
  EXPECT_EQ(partition_chain({1, 1, 1, 10}, 2), (std::vector<int64_t>{3, 1}));
  EXPECT_THROW(partition_chain({1, 2}, 3), Error);
  EXPECT_THROW(partition_chain({1, 2}, 0), Error);
}

TEST(MegatronBalanced, PartitionIsOptimalAgainstBruteForce) {
  std::mt19937_64 rng(20240611);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 10);
    const int32_t parts = 1 + static_cast<int32_t>(rng() % n);
    std::vector<int64_t> times(static_cast<size_t>(n));
    // Mostly distinct values, sometimes many ties.
    for (auto& t : times) t = trial % 3 == 0 ? 1 + static_cast<int64_t>(rng() % 3) : 1 + static_cast<int64_t>(rng() % 1000);
    const auto sizes = partition_chain(times, parts);
    ASSERT_EQ(static_cast<int32_t>(sizes.size()), parts);
    int64_t total = 0;
    for (int64_t size : sizes) {
      EXPECT_GE(size, 1);  // every virtual stage gets at least one layer
      total += size;
    }
    EXPECT_EQ(total, n);
    EXPECT_EQ(max_part_time(times, sizes), brute_force_best(times, parts)) << "trial " << trial;
    EXPECT_EQ(partition_chain(times, parts), sizes);  // deterministic
  }
}

// The (module, layer) → virtual stage map a compiled balanced program
// realises, from its layer kernels (virtual stage = chunk · pp + rank).
std::map<std::pair<int32_t, int64_t>, std::set<int32_t>> placed_layers(const ir::Program& p, int32_t pp) {
  std::map<std::pair<int32_t, int64_t>, std::set<int32_t>> out;
  for_each_op(p, [&](int c, const ir::Stream&, const ir::Op& op) {
    if (op.has_compute() && op.layer() >= 0) out[{op.module(), op.layer()}].insert(op.chunk() * pp + c);
  });
  return out;
}

// Chain order: encoder 0's layers, encoder 1's, …, the LLM's.
std::vector<std::pair<int32_t, int64_t>> chain_order(const Small& s, const std::vector<SmallEncoder>& encoders) {
  std::vector<std::pair<int32_t, int64_t>> out;
  for (size_t e = 0; e < encoders.size(); ++e)
    for (int64_t l = 0; l < encoders[e].layers; ++l) out.push_back({static_cast<int32_t>(e + 1), l});
  for (int64_t l = 0; l < s.layers; ++l) out.push_back({0, l});
  return out;
}

TEST(MegatronBalanced, OpsFollowTheChainPartition) {
  for (const auto& var : variants()) {
    SCOPED_TRACE(var.name);
    const ir::Program p = build(var.s, var.encoders, MEGATRON_BALANCED);
    const int32_t pp = static_cast<int32_t>(var.s.pp), stages = pp * 2;
    const auto placed = placed_layers(p, pp);
    int32_t previous = 0;
    std::set<int32_t> used;
    for (const auto& key : chain_order(var.s, var.encoders)) {
      ASSERT_EQ(placed.count(key), 1u) << key.first << ":" << key.second;
      ASSERT_EQ(placed.at(key).size(), 1u) << "layer on several virtual stages";
      const int32_t vs = *placed.at(key).begin();
      EXPECT_GE(vs, previous) << "chain order broken at " << key.first << ":" << key.second;
      previous = vs;
      used.insert(vs);
    }
    EXPECT_EQ(static_cast<int32_t>(used.size()), stages);  // every virtual stage holds ≥ 1 layer
    // Pre / post work sits with the module's first / last layer.
    for_each_op(p, [&](int c, const ir::Stream&, const ir::Op& op) {
      if (!op.has_compute() || op.layer() >= 0 || op.phase() == ir::OPTIMIZER_STEP) return;
      const int32_t vs = op.chunk() * pp + c;
      const int64_t last = op.module() == 0 ? var.s.layers - 1 : var.encoders[op.module() - 1].layers - 1;
      const auto role = op.compute().role();
      const bool pre = role == ir::ROLE_EMBEDDING;
      const bool post = op.module() == 0 ? (role == ir::ROLE_LOGITS || role == ir::ROLE_LOSS)
                                         : (role == ir::ROLE_FC1 || role == ir::ROLE_FINAL_NORM);
      if (pre) {
        EXPECT_EQ(vs, *placed.at({op.module(), 0}).begin());
      }
      if (post) {
        EXPECT_EQ(vs, *placed.at({op.module(), last}).begin());
      }
    });
    // The partition is recorded in the class names.
    for (int32_t r = 0; r < pp; ++r) {
      const std::string& name = p.classes(r).name();
      EXPECT_EQ(name.rfind("pp" + std::to_string(r) + " [vs" + std::to_string(r) + " ", 0), 0u) << name;
    }
    EXPECT_NE(p.classes(0).name().find("enc0:patch+L0"), std::string::npos) << p.classes(0).name();
    EXPECT_NE(p.classes(pp - 1).name().find("+head]"), std::string::npos) << p.classes(pp - 1).name();
  }
}

// The compiled partition minimises the slowest virtual stage over every
// possible partition of the chain, timed as the compiler times it.
TEST(MegatronBalanced, CompiledPartitionIsOptimal) {
  // A wider encoder with a heavy first / last layer (patch embedding,
  // projector): with one encoder the optimum is no even split.
  SmallEncoder enc;
  enc.layers = 4;
  enc.hidden = 512;
  enc.heads = 8;
  enc.ffn = 2048;
  enc.images_per_sample = 2;
  SmallEncoder second;
  second.layers = 2;
  second.name = "vit-b";
  Small s;
  s.layers = 6;
  s.seq = 256;  // room for both encoders' tokens
  s.sp = true;
  for (bool two : {false, true}) {
    SCOPED_TRACE(two ? "two encoders" : "one encoder");
    std::vector<SmallEncoder> encoders{enc};
    if (two) encoders.push_back(second);
    const auto ls = mllm(s, encoders, MEGATRON_BALANCED);
    const auto analytic = cost::make_analytic_cost_model(ls.spec.cluster(), scenario::BF16);
    const ir::Program p = compile_megatron_mllm(ls, MEGATRON_BALANCED, *analytic);
    // The chain's link times, as the compiler computes them (TP group of 2
    // on one node, no CP).
    const PipelinePlan plan = pipeline_plan(ls);
    StageInputs base = llm_stage_inputs(ls, plan, 2, false);
    for (int e = 0; e < static_cast<int>(encoders.size()); ++e)
      base.encoders.push_back(encoder_work(ls.spec, e, s.micro_batch, shard_of(s), s.recompute));
    ChainGroups groups;  // TP 2 on one node, no CP; no MoE groups
    groups.tp = {2, 1, 2};
    groups.cp = {1, 1, 1};
    const auto chain = layer_chain(base, s.layers, *analytic, groups);
    std::vector<int64_t> times;
    for (const auto& link : chain) times.push_back(link.time_ns);
    // The compiled sizes, from where the layers landed.
    const auto placed = placed_layers(p, static_cast<int32_t>(s.pp));
    std::vector<int64_t> sizes(static_cast<size_t>(s.pp * 2), 0);
    for (const auto& key : chain_order(s, encoders)) ++sizes[static_cast<size_t>(*placed.at(key).begin())];
    const int64_t best = brute_force_best(times, static_cast<int32_t>(s.pp * 2));
    EXPECT_EQ(max_part_time(times, sizes), best);
    std::string line;
    for (int64_t t : times) line += std::to_string(t / 1000) + " ";
    std::printf("  link times (µs): %s→ sizes", line.c_str());
    for (int64_t size : sizes) std::printf(" %lld", static_cast<long long>(size));
    std::printf(", slowest virtual stage %.1f µs\n", static_cast<double>(best) / 1e3);
    if (two) continue;
    // The case discriminates: an even split of the links is worse.
    const int64_t n = static_cast<int64_t>(times.size()), k = s.pp * 2;
    std::vector<int64_t> even(static_cast<size_t>(k), n / k);
    for (int64_t i = 0; i < n % k; ++i) ++even[static_cast<size_t>(i)];
    EXPECT_GT(max_part_time(times, even), best);
  }
}

// p2p messages: inside an encoder its hidden state (÷ tp with SP) plus the
// outputs of encoders already finished; after a projector those outputs;
// in the LLM its hidden state. Gradients coming back have the same size.
TEST(MegatronBalanced, PipelineMessagesAreTheTensorsCrossingEachBoundary) {
  SmallEncoder a;
  a.layers = 8;
  a.hidden = 256;
  a.ffn = 1024;
  SmallEncoder b = a;
  b.name = "vit-b";
  b.hidden = 192;
  b.heads = 6;
  b.ffn = 768;
  b.token_merge = 2;
  Small s;
  s.sp = true;
  s.layers = 4;
  const std::vector<SmallEncoder> encoders{a, b};
  const auto ls = mllm(s, encoders, MEGATRON_BALANCED, 3);
  const ir::Program p = compile_megatron_mllm(ls, MEGATRON_BALANCED, trivial());
  const int32_t pp = static_cast<int32_t>(s.pp), stages = pp * 3;
  const auto placed = placed_layers(p, pp);
  // Last (module, layer) of each virtual stage, in chain order.
  std::vector<std::pair<int32_t, int64_t>> last(static_cast<size_t>(stages), {-1, -1});
  for (const auto& key : chain_order(s, encoders)) last[static_cast<size_t>(*placed.at(key).begin())] = key;
  const int64_t tp = s.tp, mb = s.micro_batch;
  auto encoder_hidden = [&](int e) {
    const auto& enc = encoders[static_cast<size_t>(e)];
    return mb * enc.images_per_sample * enc.tokens_per_image * enc.hidden * 2 / tp;
  };
  auto encoder_output = [&](int e) {
    const auto& enc = encoders[static_cast<size_t>(e)];
    return mb * enc.images_per_sample * enc.tokens_per_image / enc.token_merge * s.hidden * 2 / tp;
  };
  auto expected = [&](int32_t k) -> int64_t {
    const auto [module, layer] = last[static_cast<size_t>(k)];
    if (module == 0) return mb * s.seq * s.hidden * 2 / tp;
    const int e = module - 1;
    int64_t carried = 0;
    for (int before = 0; before < e; ++before) carried += encoder_output(before);
    if (layer == encoders[static_cast<size_t>(e)].layers - 1) return carried + encoder_output(e);
    return carried + encoder_hidden(e);
  };
  int inside_encoder = 0, checked = 0;
  for (int32_t r = 0; r < pp; ++r) {
    for (const char* name : {"pp_send_fwd", "pp_send_bwd"}) {
      const bool forward = std::string(name) == "pp_send_fwd";
      for (const auto& op : find_stream(p.classes(r), name)->ops()) {
        if (!op.has_send()) continue;
        const int32_t vs = op.chunk() * pp + r;
        const int32_t boundary = forward ? vs : vs - 1;  // the tensor between `boundary` and boundary + 1
        EXPECT_EQ(op.send().bytes(), expected(boundary)) << "virtual stage " << vs << " " << name;
        ++checked;
        if (forward && last[static_cast<size_t>(boundary)].first > 0) ++inside_encoder;
      }
    }
  }
  EXPECT_EQ(checked, 2 * (stages - 1) * microbatches(s));
  EXPECT_GT(inside_encoder, 0);  // the case exercises encoder boundaries
}

// ---------------------------------------------------------------- layer split

// Megatron's count-based split: num_layers / stages each where that divides,
// else the first stages one more.
TEST(MegatronLayerSplit, CountPartitionOfHandComputedChains) {
  EXPECT_EQ(partition_by_count(12, 4), (std::vector<int64_t>{3, 3, 3, 3}));
  EXPECT_EQ(partition_by_count(10, 4), (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(partition_by_count(7, 2), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(partition_by_count(5, 5), (std::vector<int64_t>{1, 1, 1, 1, 1}));
  EXPECT_THROW(partition_by_count(3, 4), Error);
  EXPECT_THROW(partition_by_count(3, 0), Error);
}

// Encoder 3 layers + LLM 4 = 7 links over pp 2: {4, 3}. Virtual stage 0 holds
// the encoder (patch embedding … projector) and LLM layer 0 (with the
// embedding), stage 1 LLM layers 1-3 and the head; interleaved (pp 2 × v 2,
// 4 + 4 = 8 links): 2 each.
TEST(MegatronLayerSplit, OpsFollowTheCountSplit) {
  SmallEncoder enc;
  enc.layers = 3;
  Small s;
  const ir::Program p = build(s, {enc}, MEGATRON_LAYER_SPLIT);
  const auto placed = placed_layers(p, 2);
  for (int32_t l = 0; l < 3; ++l) EXPECT_EQ(placed.at({1, l}), std::set<int32_t>{0}) << "enc L" << l;
  EXPECT_EQ(placed.at({0, 0}), std::set<int32_t>{0});
  for (int32_t l = 1; l < 4; ++l) EXPECT_EQ(placed.at({0, l}), std::set<int32_t>{1}) << "llm L" << l;
  EXPECT_EQ(p.classes(0).name(), "pp0 [vs0 enc0:patch+L0-2+proj llm:emb+L0]");
  EXPECT_EQ(p.classes(1).name(), "pp1 [vs1 llm:L1-3+head]");
  EXPECT_EQ(p.info().schedule(), scenario::ONE_F_ONE_B);

  Small interleaved;
  interleaved.schedule = scenario::INTERLEAVED_1F1B;
  interleaved.v = 2;
  const ir::Program q = build(interleaved, {SmallEncoder{}}, MEGATRON_LAYER_SPLIT);
  const auto at = placed_layers(q, 2);
  const std::vector<std::pair<int32_t, int32_t>> order = {{1, 0}, {1, 1}, {1, 2}, {1, 3},
                                                          {0, 0}, {0, 1}, {0, 2}, {0, 3}};
  for (size_t i = 0; i < order.size(); ++i)
    EXPECT_EQ(at.at(order[i]), std::set<int32_t>{static_cast<int32_t>(i / 2)}) << i;
  EXPECT_EQ(q.info().schedule(), scenario::INTERLEAVED_1F1B);
}

// With the encoder's work (almost) free, the layer split is the LLM alone
// with the LLM's share of each stage as its layers_per_stage: enc 2 + LLM 6
// links over pp 2 → {4, 4}, the LLM's layers {2, 4}. (It is not the LLM's even
// split: counting encoder layers moves LLM layers off the first stage.)
TEST(MegatronLayerSplit, ZeroEncoderWorkGivesTheLlmWithTheSameLayerSplit) {
  SmallEncoder enc;
  enc.layers = 2;
  Small s;
  s.layers = 6;
  s.sp = true;
  ir::Program p = build(s, {enc}, MEGATRON_LAYER_SPLIT);
  const int64_t encoder_ops = make_encoder_work_free(p);
  ASSERT_GT(encoder_ops, 0);
  auto llm = make_scenario(s);
  llm.spec.mutable_parallel()->add_layers_per_stage(2);
  llm.spec.mutable_parallel()->add_layers_per_stage(4);
  const int64_t t = end_time(p), t_llm = end_time(compile(llm));
  EXPECT_GE(t, t_llm);
  EXPECT_LE(t, t_llm + encoder_ops);
}

TEST(MegatronLayerSplit, ChainShorterThanTheStagesNamesTheField) {
  SmallEncoder enc;
  enc.layers = 1;
  Small s;
  s.layers = 2;
  s.pp = 4;
  s.gpus_per_node = 4;
  s.global_batch = 32;
  auto ls = make_mllm_scenario(s, {enc}, MEGATRON_LAYER_SPLIT);
  try {
    compile_megatron_mllm(ls, MEGATRON_LAYER_SPLIT, trivial());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.pp"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3 layers, fewer than pp × virtual stages = 4"), std::string::npos)
        << e.what();
  }
}

// ---------------------------------------------------------------- shipped scenarios

TEST(MegatronMllm, ShippedSmallScenarioBaselineVersusBalanced) {
  const auto ls =
      scenario::load_scenario(std::string(LACUNA_SOURCE_DIR) + "/scenarios/mllm/optimus-small-vit3b-gpt11b-8xa100.pbtxt");
  const auto analytic = cost::make_analytic_cost_model(ls.spec.cluster(), ls.spec.training().precision());
  const ir::Program base = compile_megatron_mllm(ls, MEGATRON_BASELINE, *analytic);
  const ir::Program balanced = compile_megatron_mllm(ls, MEGATRON_BALANCED, *analytic);
  const int64_t t_base = end_time(base, *analytic, true), t_balanced = end_time(balanced, *analytic, true);
  std::printf("  %s: baseline %.1f ms, balanced %.1f ms\n", ls.spec.name().c_str(), t_base / 1e6, t_balanced / 1e6);
  for (const auto& c : balanced.classes()) std::printf("    %s\n", c.name().c_str());
  EXPECT_GT(t_base, 0);
  EXPECT_GT(t_balanced, 0);
  // Balancing the 48 + 80 layer chain over 10 virtual stages relieves the
  // overloaded first stage of the baseline.
  EXPECT_LT(t_balanced, t_base);
}

}  // namespace
}  // namespace lacuna::compiler
