#include "sim/compiler/compile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "sim/compiler/class_builder.h"
#include "sim/compiler/compiler_test_support.h"
#include "sim/compiler/rank_layout.h"
#include "sim/core/error.h"

namespace lacuna::compiler {
namespace {

using testing::find_stream;
using testing::make_scenario;
using testing::Small;

ir::Program build(const Small& s) { return lacuna::compiler::compile(make_scenario(s)); }

// (phase, microbatch, chunk, layer) of every compute kernel of a class.
std::multiset<std::tuple<int, int, int, int>> kernels_by_pass(const ir::RankClass& c, ir::Phase phase) {
  std::multiset<std::tuple<int, int, int, int>> out;
  for (const auto& op : find_stream(c, "compute")->ops())
    if (op.has_compute() && op.phase() == phase && op.layer() >= 0)
      out.insert({op.phase(), op.microbatch(), op.chunk(), op.layer()});
  return out;
}

std::set<std::tuple<int, int, int>> units(const ir::RankClass& c, ir::Phase phase) {
  std::set<std::tuple<int, int, int>> out;
  for (const auto& [p, mb, chunk, layer] : kernels_by_pass(c, phase)) out.insert({mb, chunk, layer});
  return out;
}

const Small kSchedules[] = {
    [] { Small s; s.schedule = scenario::GPIPE; return s; }(),
    [] { Small s; s.schedule = scenario::ONE_F_ONE_B; return s; }(),
    [] { Small s; s.schedule = scenario::INTERLEAVED_1F1B; s.v = 2; return s; }(),
    [] { Small s; s.schedule = scenario::ZB_H1; return s; }(),
};

TEST(Compile, EveryForwardHasItsBackwardInputAndWeight) {
  for (const Small& s : kSchedules) {
    const ir::Program p = build(s);
    ASSERT_EQ(p.classes_size(), s.pp);
    const int64_t m = s.global_batch / (s.micro_batch * s.dp);
    std::set<int> layers_seen;
    for (const auto& c : p.classes()) {
      const auto f = units(c, ir::FORWARD);
      EXPECT_EQ(f, units(c, ir::BACKWARD_INPUT)) << scenario::ScheduleKind_Name(s.schedule);
      EXPECT_EQ(f, units(c, ir::BACKWARD_WEIGHT)) << scenario::ScheduleKind_Name(s.schedule);
      EXPECT_EQ(static_cast<int64_t>(f.size()), m * s.layers / s.pp);
      for (const auto& [mb, chunk, layer] : f) layers_seen.insert(layer);
    }
    EXPECT_EQ(static_cast<int64_t>(layers_seen.size()), s.layers);
  }
}

TEST(Compile, InterleavedChunksHoldTheirVirtualStagesLayers) {
  Small s = kSchedules[2];
  const ir::Program p = build(s);
  // 4 layers, pp 2, v 2: virtual stage k = chunk·2 + rank holds layer k.
  for (int r = 0; r < 2; ++r)
    for (const auto& [mb, chunk, layer] : units(p.classes(r), ir::FORWARD)) EXPECT_EQ(layer, chunk * 2 + r);
}

std::map<std::pair<ir::Phase, ir::CollectiveKind>, int> tp_collectives_of_one_layer(const ir::Program& p) {
  std::map<std::pair<ir::Phase, ir::CollectiveKind>, int> out;
  const ir::Stream* tp = find_stream(p.classes(0), "tp");
  if (tp == nullptr) return out;
  for (const auto& op : tp->ops())
    if (op.has_collective() && op.layer() == 0 && op.microbatch() == 0)
      out[{op.phase(), op.collective().kind()}]++;
  return out;
}

TEST(Compile, TensorParallelCollectivesPerLayer) {
  Small s;
  EXPECT_EQ(tp_collectives_of_one_layer(build(s)),
            (std::map<std::pair<ir::Phase, ir::CollectiveKind>, int>{
                {{ir::FORWARD, ir::ALL_REDUCE}, 2}, {{ir::BACKWARD_INPUT, ir::ALL_REDUCE}, 2}}));
  s.sp = true;
  // Backward: the gradients' two all-gathers (before FC2-B and
  // projection-B), and the two column-parallel inputs gathered again for
  // QKV's and FC1's weight gradients (Megatron keeps only the sequence shard).
  EXPECT_EQ(tp_collectives_of_one_layer(build(s)),
            (std::map<std::pair<ir::Phase, ir::CollectiveKind>, int>{{{ir::FORWARD, ir::ALL_GATHER}, 2},
                                                                    {{ir::FORWARD, ir::REDUCE_SCATTER}, 2},
                                                                    {{ir::BACKWARD_INPUT, ir::ALL_GATHER}, 4},
                                                                    {{ir::BACKWARD_INPUT, ir::REDUCE_SCATTER}, 2}}));
  s.recompute = scenario::RECOMPUTE_FULL;
  auto full = tp_collectives_of_one_layer(build(s));
  EXPECT_EQ(full[std::make_pair(ir::RECOMPUTE, ir::ALL_GATHER)], 2);
  EXPECT_EQ(full[std::make_pair(ir::RECOMPUTE, ir::REDUCE_SCATTER)], 2);
  EXPECT_EQ(full[std::make_pair(ir::FORWARD, ir::ALL_GATHER)], 2);
  s.tp = 1;
  s.sp = false;
  EXPECT_EQ(find_stream(build(s).classes(0), "tp"), nullptr);
}

TEST(Compile, ComputeWaitsForEachTensorParallelResultBeforeUsingIt) {
  Small s;
  s.sp = true;
  const ir::Program p = build(s);
  // Stage 1 (layers 2, 3): no embedding whose reduction the first layer waits for.
  const auto& ops = find_stream(p.classes(1), "compute")->ops();
  // Forward TP communication is on the critical path: the compute stream
  // records, and the very next op waits for the collective's result.
  int records = 0, waits = 0;
  for (int i = 0; i < ops.size(); ++i) {
    if (ops[i].phase() != ir::FORWARD || ops[i].layer() != 2 || ops[i].microbatch() != 0) continue;
    if (ops[i].has_record()) {
      ++records;
      ASSERT_LT(i + 1, ops.size());
      EXPECT_TRUE(ops[i + 1].has_wait()) << "forward TP communication is on the critical path";
    }
    waits += ops[i].has_wait();
  }
  EXPECT_EQ(records, 4);
  EXPECT_EQ(waits, 4);
}

TEST(Compile, ContextParallelGathersKeysAndValuesPerLayer) {
  Small s;
  s.cp = 2;
  s.tp = 2;
  s.dp = 1;
  s.global_batch = 8;
  const ir::Program p = build(s);
  const ir::Stream* cp = find_stream(p.classes(0), "cp");
  ASSERT_NE(cp, nullptr);
  int ag = 0, rs = 0;
  for (const auto& op : cp->ops()) {
    if (!op.has_collective() || op.layer() != 0 || op.microbatch() != 0) continue;
    EXPECT_EQ(op.collective().group_slot(), kSlotCp);
    // K and V of the whole sequence on this TP shard: 2·b·s·(kv/tp)·d·2 bytes.
    EXPECT_EQ(op.collective().bytes(), 2 * 2 * 128 * (8 / 2) * 32 * 2);
    ag += op.collective().kind() == ir::ALL_GATHER;
    rs += op.collective().kind() == ir::REDUCE_SCATTER;
  }
  EXPECT_EQ(ag, 1);
  EXPECT_EQ(rs, 1);
}

// Σ FLOPs of all compute ops of all ranks, from the classes.
double class_flops(const ir::Program& p) {
  std::map<int, int> members;
  for (const auto& b : p.ranks()) members[b.class_id()]++;
  double total = 0;
  for (int c = 0; c < p.classes_size(); ++c)
    for (const auto& st : p.classes(c).streams())
      for (const auto& op : st.ops())
        if (op.has_compute()) total += op.compute().flops() * members[c];
  return total;
}

double layer_gemm_flops(const ir::Program& p) {
  double total = 0;
  for (const auto& c : p.classes())
    for (const auto& op : find_stream(c, "compute")->ops())
      if (op.has_compute() && op.compute().op_class() == ir::GEMM && op.layer() >= 0) total += op.compute().flops();
  return total;
}

// What the kernels execute (causal attention is half of s², FlashAttention's
// backward 2.5× its forward) and what MFU/HFU count (Megatron/SAR convention).
TEST(Compile, ExecutedAndConventionFlopsMatchTheClosedForms) {
  Small s;
  s.sp = true;
  const double B = static_cast<double>(s.global_batch), sq = s.seq, h = s.hidden, L = s.layers, V = s.vocab;
  const double gemm = 24 * sq * h * h;  // per sequence and layer, forward (FFN 4h, MHA)
  const double attn = 2 * sq * sq * h;  // causal: half of 4·s²·h
  const double logits = 2 * sq * h * V;
  const double none = B * (L * (3 * gemm + 3.5 * attn) + 3 * logits);  // FA2 backward = 2.5× forward

  const ir::Program p = build(s);
  EXPECT_NEAR(class_flops(p) / none, 1.0, 1e-12);
  const double eq7 = 72 * B * sq * L * h * h * (1 + sq / (6 * h) + V / (12 * h * L));
  EXPECT_NEAR(p.info().model_flops_per_iteration() / eq7, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(p.info().hardware_flops_per_iteration(), p.info().model_flops_per_iteration());

  s.recompute = scenario::RECOMPUTE_SELECTIVE;
  const ir::Program selective = build(s);
  EXPECT_NEAR(class_flops(selective) / (none + B * L * attn), 1.0, 1e-12);
  EXPECT_NEAR(selective.info().hardware_flops_per_iteration() / (eq7 + B * L * 4 * sq * sq * h), 1.0, 1e-12);

  s.recompute = scenario::RECOMPUTE_FULL;
  const ir::Program full = build(s);
  EXPECT_NEAR(class_flops(full) / (none + B * L * (gemm + attn)), 1.0, 1e-12);
  const double eq3 = 96 * B * sq * L * h * h * (1 + sq / (6 * h) + V / (16 * L * h));  // PTD-P eq. 3
  EXPECT_NEAR(full.info().hardware_flops_per_iteration() / eq3, 1.0, 1e-12);
  EXPECT_GT(full.info().hardware_flops_per_iteration(), full.info().model_flops_per_iteration());
  // The layers' linear GEMMs run 4 passes instead of 3.
  s.recompute = scenario::RECOMPUTE_NONE;
  EXPECT_NEAR(layer_gemm_flops(full) / layer_gemm_flops(build(s)), 4.0 / 3.0, 1e-12);
}

// Megatron-LM's unfused core attention: the four batched GEMMs compute the
// whole s² (no causal skipping), backward = 2 × forward; HFU / MFU unchanged.
TEST(Compile, UnfusedAttentionExecutesTheFullScoreMatrix) {
  Small s;
  s.sp = true;
  s.unfused_attention = true;
  s.hidden_dropout = 0.1;
  s.attention_dropout = 0.1;
  const double B = static_cast<double>(s.global_batch), sq = s.seq, h = s.hidden, L = s.layers, V = s.vocab;
  const double gemm = 24 * sq * h * h;
  const double attn = 4 * sq * sq * h;  // QKᵀ + P·V over all s² scores
  const double logits = 2 * sq * h * V;
  const ir::Program p = build(s);
  EXPECT_NEAR(class_flops(p) / (B * (L * 3 * (gemm + attn) + 3 * logits)), 1.0, 1e-12);
  const double eq7 = 72 * B * sq * L * h * h * (1 + sq / (6 * h) + V / (12 * h * L));
  EXPECT_NEAR(p.info().model_flops_per_iteration() / eq7, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(p.info().hardware_flops_per_iteration(), p.info().model_flops_per_iteration());
  for (const auto& c : p.classes())
    for (const auto& op : find_stream(c, "compute")->ops())
      if (op.has_compute()) EXPECT_NE(op.compute().op_class(), ir::ATTENTION);

  s.recompute = scenario::RECOMPUTE_SELECTIVE;
  const ir::Program selective = build(s);
  EXPECT_NEAR(class_flops(selective) / (B * (L * (3 * gemm + 4 * attn) + 3 * logits)), 1.0, 1e-12);
}

// The unfused path keeps the softmax output, dropout mask and dropout output
// per score (SAR's 5·a·s²·b / t bytes per layer) unless recomputed.
TEST(Compile, UnfusedAttentionKeepsTheScoresBetweenForwardAndBackward) {
  auto allocated = [](const ir::Program& p) {
    int64_t total = 0;
    for (const auto& op : find_stream(p.classes(0), "compute")->ops())
      if (op.has_compute() && op.compute().memory_delta_bytes() > 0) total += op.compute().memory_delta_bytes();
    return total;
  };
  Small s;
  const ir::Program flash = build(s);
  s.unfused_attention = true;
  const ir::Program unfused = build(s);
  const int64_t layer_passes = static_cast<int64_t>(units(unfused.classes(0), ir::FORWARD).size());
  ASSERT_GT(layer_passes, 0);
  EXPECT_EQ(allocated(unfused) - allocated(flash), layer_passes * 5 * s.heads * s.seq * s.seq * s.micro_batch / s.tp);
  s.recompute = scenario::RECOMPUTE_SELECTIVE;
  const ir::Program selective = build(s);
  s.unfused_attention = false;
  EXPECT_EQ(allocated(selective), allocated(build(s)));
}

TEST(Compile, MemoryDeltasBalancePerClass) {
  for (auto recompute : {scenario::RECOMPUTE_NONE, scenario::RECOMPUTE_SELECTIVE, scenario::RECOMPUTE_FULL})
    for (const Small& base : kSchedules) {
      Small s = base;
      s.recompute = recompute;
      s.sp = true;
      const ir::Program p = build(s);
      for (const auto& c : p.classes()) {
        int64_t live = 0, peak = 0;
        for (const auto& op : find_stream(c, "compute")->ops()) {
          if (!op.has_compute()) continue;
          live += op.compute().memory_delta_bytes();
          EXPECT_GE(live, 0) << c.name() << " frees more than it allocated";
          peak = std::max(peak, live);
        }
        EXPECT_EQ(live, 0) << c.name();
        EXPECT_GT(peak, 0);
        EXPECT_GT(c.memory().weights_bytes(), 0);
        EXPECT_GT(c.memory().optimizer_bytes(), 0);
      }
    }
}

TEST(Compile, DataParallelCommunicationPerChunk) {
  Small s = kSchedules[2];  // interleaved, 2 chunks
  const ir::Program p = build(s);
  for (const auto& c : p.classes()) {
    const ir::Stream* dp = find_stream(c, "dp");
    ASSERT_NE(dp, nullptr);
    std::map<ir::CollectiveKind, std::vector<int64_t>> bytes;
    for (const auto& op : dp->ops())
      if (op.has_collective()) {
        EXPECT_EQ(op.collective().group_slot(), kSlotDpCp);
        // The buckets; the last stage also reduces each microbatch's loss.
        if (op.phase() == ir::DP_SYNC) bytes[op.collective().kind()].push_back(op.collective().bytes());
      }
    ASSERT_EQ(bytes[ir::ALL_GATHER].size(), 2u);
    ASSERT_EQ(bytes[ir::REDUCE_SCATTER].size(), 2u);
    // bf16 parameters gathered, fp32 gradients reduced: 2 vs 4 bytes/param;
    // gradients go out in reverse chunk order (backward finishes chunk 1 first).
    EXPECT_EQ(bytes[ir::REDUCE_SCATTER][1], 2 * bytes[ir::ALL_GATHER][0]);
    EXPECT_EQ(bytes[ir::REDUCE_SCATTER][0], 2 * bytes[ir::ALL_GATHER][1]);
    // The step ends with Adam and the fp32 → bf16 copy, after waiting for
    // every DP collective.
    const auto& ops = find_stream(c, "compute")->ops();
    std::vector<const ir::Op*> kernels;
    for (const auto& op : ops)
      if (op.has_compute()) kernels.push_back(&op);
    EXPECT_EQ(kernels[kernels.size() - 1]->compute().role(), ir::ROLE_PARAM_COPY);
    EXPECT_EQ(kernels[kernels.size() - 2]->compute().role(), ir::ROLE_OPTIMIZER_STEP);
    int last_dp_wait = -1, first_step = -1;
    for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
      if (ops[i].has_wait() && ops[i].wait().event() == static_cast<int32_t>(EventId::kDpToCompute)) last_dp_wait = i;
      if (first_step < 0 && ops[i].has_compute() && ops[i].compute().role() == ir::ROLE_OPTIMIZER_STEP) first_step = i;
    }
    EXPECT_LT(last_dp_wait, first_step);
  }
  s.distributed_optimizer = false;
  const ir::Program plain = build(s);
  int all_reduce = 0;
  for (const auto& op : find_stream(plain.classes(0), "dp")->ops())
    if (op.has_collective() && op.phase() == ir::DP_SYNC) {
      EXPECT_EQ(op.collective().kind(), ir::ALL_REDUCE);
      ++all_reduce;
    }
  EXPECT_EQ(all_reduce, 2);
  s.dp = 1;
  s.global_batch = 8;
  const ir::Program single = build(s);
  EXPECT_EQ(find_stream(single.classes(0), "dp"), nullptr);
  int adam = 0;
  for (const auto& op : find_stream(single.classes(0), "compute")->ops())
    adam += op.has_compute() && op.compute().role() == ir::ROLE_OPTIMIZER_STEP;
  EXPECT_EQ(adam, 1);
}

TEST(Compile, PipelineSendsAndReceivesPairUp) {
  for (const Small& s : kSchedules) {
    const ir::Program p = build(s);
    // Per (class, stream) the tags in order; class r's sends to next must be
    // class r+1's receives from prev, in the same order.
    auto tags = [&](int cls, const char* stream) {
      std::vector<int64_t> t;
      if (const ir::Stream* st = find_stream(p.classes(cls), stream))
        for (const auto& op : st->ops()) {
          if (op.has_send()) t.push_back(op.send().tag());
          if (op.has_recv()) t.push_back(op.recv().tag());
        }
      return t;
    };
    for (int r = 0; r < s.pp; ++r) {
      const int next = (r + 1) % s.pp;
      EXPECT_EQ(tags(r, "pp_send_fwd"), tags(next, "pp_recv_fwd")) << r;
      EXPECT_EQ(tags(next, "pp_send_bwd"), tags(r, "pp_recv_bwd")) << r;
    }
  }
}

TEST(Compile, ProgramInfo) {
  Small s;
  s.sp = true;
  s.recompute = scenario::RECOMPUTE_SELECTIVE;
  const ir::Program p = build(s);
  const auto& i = p.info();
  EXPECT_EQ(i.num_ranks(), 8);
  EXPECT_EQ(i.tokens_per_iteration(), 16 * 128);
  EXPECT_EQ(i.num_microbatches(), 4);
  EXPECT_DOUBLE_EQ(i.peak_flops_per_gpu(), 989e12);
  EXPECT_EQ(i.schedule(), scenario::ONE_F_ONE_B);
  EXPECT_TRUE(i.sequence_parallel());
  EXPECT_EQ(i.recompute(), scenario::RECOMPUTE_SELECTIVE);
  EXPECT_EQ(p.cluster().gpus_per_node(), 8);
  EXPECT_EQ(i.scenario_file(), "test.pbtxt");
}

TEST(Compile, RefusesProgramsThatAreTooLarge) {
  Small s;
  s.layers = 64;
  s.pp = 1;
  s.tp = 1;
  s.dp = 1;
  s.global_batch = 40000;
  s.micro_batch = 1;
  try {
    build(s);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.problem(), ::testing::HasSubstr("ops"));
    EXPECT_THAT(e.fix(), ::testing::HasSubstr("microbatches"));
  }
}

TEST(Compile, RejectsLayersThatDoNotSplit) {
  Small s;
  s.layers = 5;
  EXPECT_THROW(build(s), Error);
}

}  // namespace
}  // namespace lacuna::compiler
