// The heterogeneous placement's compiled programs, read back: boundary bytes
// against the closed form, the colocated mapping of shards to replicas,
// leader pairs, the graph-aware encoder schedule, memory, and the errors a
// layout pair that cannot map gets.
#include "sim/placement/heterogeneous.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "sim/compiler/compile.h"
#include "sim/cost/memory.h"
#include "sim/model/mllm.h"
#include "sim/placement/hetero_compile.h"
#include "sim/placement/hetero_plan.h"
#include "sim/placement/hetero_test_support.h"
#include "sim/placement/modules.h"

namespace lacuna::placement {
namespace {

using compiler::testing::Small;
using compiler::testing::TrivialCost;
using testing::EncoderSpec;
using testing::make_mllm;

ir::Program compile(const scenario::LoadedScenario& sc) {
  const TrivialCost cost;
  return compile_heterogeneous(sc, cost);
}

EncoderSpec island(int64_t tp, int64_t pp, int64_t dp, int64_t first_rank = 8) {
  EncoderSpec e;
  e.tp = tp;
  e.pp = pp;
  e.dp = dp;
  e.first_rank = first_rank;
  return e;
}

// (samples per LLM DP rank) × vision tokens × LLM hidden × 2 bytes.
int64_t closed_form(const Small& llm, const EncoderSpec& e) {
  const int64_t vision_tokens = e.images_per_sample * e.tokens_per_image / e.token_merge;
  return llm.global_batch / llm.dp * vision_tokens * llm.hidden * 2;
}

const ir::Stream* stream(const ir::RankClass& c, const std::string& name) {
  for (const auto& s : c.streams())
    if (s.name() == name) return &s;
  return nullptr;
}

// Sum of forward-boundary bytes each LLM rank receives (p2p on the
// boundary streams) or gathers (colocated collectives), per rank.
std::map<int32_t, int64_t> received_forward_bytes(const ir::Program& p) {
  std::map<int32_t, int64_t> out;
  for (const auto& r : testing::resolve_p2p(p, ir::BOUNDARY, false))
    if (r.channel == hetero::kBoundaryFwdChannel) out[r.dst] += r.bytes;
  return out;
}

// ---------------------------------------------------------------- boundary bytes

TEST(Heterogeneous, IslandBoundaryBytesMatchClosedFormForEveryDpRelation) {
  const Small llm;  // tp 2 pp 2 dp 2, global batch 16, micro-batch 2
  for (const auto& [label, enc] : {std::pair{"equal", island(1, 1, 2)}, std::pair{"fan-in", island(1, 1, 4)},
                                   std::pair{"fan-out", island(1, 1, 1)}, std::pair{"tp2 pp2", island(2, 2, 2)}}) {
    SCOPED_TRACE(label);
    const auto sc = make_mllm(llm, {enc});
    const ir::Program p = compile(sc);
    const auto got = received_forward_bytes(p);
    // Only the leader of each replica (stage 0, tp 0, cp 0) receives, and
    // it receives the replica's whole share.
    const compiler::RankLayout layout({2, 1, 2, 2}, "");
    std::set<int32_t> leaders;
    for (int32_t d = 0; d < 2; ++d) {
      ir::Coordinates c;
      c.set_dp(d);
      leaders.insert(layout.rank(c));
    }
    ASSERT_EQ(got.size(), leaders.size());
    for (const auto& [rank, bytes] : got) {
      EXPECT_TRUE(leaders.count(rank)) << "rank " << rank;
      EXPECT_EQ(bytes, closed_form(llm, enc)) << "rank " << rank;
      EXPECT_EQ(bytes, model::boundary_bytes(sc.spec, llm.global_batch / llm.dp));
    }
    // The gradient going back has the same size.
    int64_t back = 0, forward = 0;
    for (const auto& s : testing::resolve_p2p(p, ir::BOUNDARY, true))
      (s.channel == hetero::kBoundaryBwdChannel ? back : forward) += s.bytes;
    EXPECT_EQ(back, forward);
    EXPECT_EQ(forward, closed_form(llm, enc) * llm.dp);
  }
}

TEST(Heterogeneous, IslandPairCountFollowsDpRelationNotTp) {
  const Small llm;
  // Leader pairs: max(dp_e, dp_llm) edges whatever the TP sizes (the paper:
  // "scales with the DP relation, not TP_u × TP_v").
  for (const auto& [enc, pairs] : {std::pair{island(1, 1, 2), 2}, std::pair{island(2, 1, 2), 2},
                                   std::pair{island(1, 1, 4), 4}, std::pair{island(2, 1, 1), 2}}) {
    const ir::Program p = compile(make_mllm(llm, {enc}));
    std::set<std::pair<int32_t, int32_t>> edges;
    for (const auto& s : testing::resolve_p2p(p, ir::BOUNDARY, true))
      if (s.channel == hetero::kBoundaryFwdChannel) edges.insert({s.src, s.dst});
    EXPECT_EQ(static_cast<int>(edges.size()), pairs) << "encoder tp " << enc.tp << " dp " << enc.dp;
  }
}

TEST(Heterogeneous, ColocatedFanInGathersReplicaShareAmongReplicaRanks) {
  const Small llm;        // replicas {0,1,4,5} and {2,3,6,7}
  const EncoderSpec enc;  // tp 1, dp 8: four shards per replica
  const auto sc = make_mllm(llm, {enc});
  const ir::Program p = compile(sc);
  const auto plan = hetero::make_plan(sc);
  int32_t slot = -1;
  for (int32_t i = 0; i < p.group_slots_size(); ++i)
    if (p.group_slots(i).name() == "bnd0_fwd") slot = i;
  ASSERT_GE(slot, 0);
  EXPECT_EQ(p.group_slots(slot).kind(), ir::BOUNDARY_GROUP);
  for (int32_t r = 0; r < p.ranks_size(); ++r) {
    const auto& b = p.ranks(r);
    const auto& g = p.groups(b.group(slot));
    const std::vector<int32_t> ranks(g.ranks().begin(), g.ranks().end());
    EXPECT_EQ(ranks, hetero::llm_replica_ranks(plan.llm, b.coord().dp())) << "rank " << r;
    // The shards whose ranks lie in replica d are the ones it gathers.
    const int32_t shard = r;  // tp 1: encoder shard k is rank k
    EXPECT_EQ(hetero::colocated_replica_of_shard(plan, plan.encoders[0], shard), b.coord().dp());
    const auto& cls = p.classes(b.class_id());
    const ir::Stream* bnd = stream(cls, "boundary");
    ASSERT_NE(bnd, nullptr);
    int64_t gathered = 0;
    for (const auto& op : bnd->ops())
      if (op.has_collective() && op.phase() == ir::FORWARD) {
        EXPECT_EQ(op.collective().kind(), ir::ALL_GATHER);
        gathered += op.collective().bytes();
      }
    EXPECT_EQ(gathered, closed_form(llm, enc));
  }
}

TEST(Heterogeneous, ColocatedEqualAndFanOutMoveNothingForward) {
  {
    Small llm;
    llm.rank_order = "tp-cp-pp-dp";  // replica d = ranks 4d … 4d + 3
    EncoderSpec enc;
    enc.tp = 4;
    enc.dp = 2;
    const auto sc = make_mllm(llm, {enc});
    const ir::Program p = compile(sc);
    const auto plan = hetero::make_plan(sc);
    EXPECT_EQ(plan.encoders[0].relation, hetero::DpRelation::kEqual);
    for (const auto& c : p.classes()) {
      const ir::Stream* bnd = stream(c, "boundary");
      ASSERT_NE(bnd, nullptr);  // the backward broadcast from stage 0 (pp 2)
      for (const auto& op : bnd->ops())
        if (op.has_collective()) {
          EXPECT_EQ(op.phase(), ir::BACKWARD_INPUT);
          EXPECT_EQ(op.collective().kind(), ir::BROADCAST);
          EXPECT_EQ(op.collective().bytes(), closed_form(llm, enc));
        }
    }
  }
  {
    Small llm;
    llm.tp = 1;
    llm.dp = 4;
    llm.rank_order = "tp-cp-pp-dp";
    EncoderSpec enc;
    enc.tp = 4;
    enc.dp = 2;  // each shard's ranks = two whole replicas
    const auto sc = make_mllm(llm, {enc});
    const ir::Program p = compile(sc);
    const auto plan = hetero::make_plan(sc);
    EXPECT_EQ(plan.encoders[0].relation, hetero::DpRelation::kFanOut);
    for (int32_t d = 0; d < 4; ++d) EXPECT_EQ(hetero::colocated_shard_of_replica(plan, plan.encoders[0], d), d / 2);
    for (const auto& c : p.classes()) {
      const ir::Stream* bnd = stream(c, "boundary");
      ASSERT_NE(bnd, nullptr);
      int n = 0;
      for (const auto& op : bnd->ops())
        if (op.has_collective()) {
          ++n;
          // Backward: the two replicas' gradients gathered among the shard.
          EXPECT_EQ(op.phase(), ir::BACKWARD_INPUT);
          EXPECT_EQ(op.collective().kind(), ir::ALL_GATHER);
          EXPECT_EQ(op.collective().bytes(), 2 * closed_form(llm, enc));
        }
      EXPECT_EQ(n, 1);
    }
  }
}

TEST(Heterogeneous, ColocatedSplitOutputIsGatheredFirst) {
  Small llm;
  llm.rank_order = "tp-cp-pp-dp";
  EncoderSpec enc;
  enc.tp = 4;
  enc.dp = 2;
  enc.sp = true;  // the projector's output is sequence-sharded over TP
  const ir::Program p = compile(make_mllm(llm, {enc}));
  const ir::Stream* bnd = stream(p.classes(0), "boundary");
  ASSERT_NE(bnd, nullptr);
  const auto it = std::find_if(bnd->ops().begin(), bnd->ops().end(),
                               [](const ir::Op& op) { return op.has_collective() && op.phase() == ir::FORWARD; });
  ASSERT_NE(it, bnd->ops().end());
  EXPECT_EQ(it->collective().kind(), ir::ALL_GATHER);
  EXPECT_EQ(it->collective().bytes(), closed_form(llm, enc));
}

// ---------------------------------------------------------------- gradients

TEST(Heterogeneous, EveryGradientReturnsToTheRankThatSentTheActivation) {
  const Small llm;
  for (const auto& encs : std::vector<std::vector<EncoderSpec>>{
           {island(1, 1, 4)}, {island(1, 1, 1)}, {island(2, 2, 2)}, {island(1, 1, 2), island(2, 1, 1, 10)}}) {
    const ir::Program p = compile(make_mllm(llm, encs));
    const auto sends = testing::resolve_p2p(p, ir::BOUNDARY, true);
    const auto recvs = testing::resolve_p2p(p, ir::BOUNDARY, false);
    // Every send has its receive (same pair, channel, tag, bytes).
    std::multiset<testing::ResolvedSend> s(sends.begin(), sends.end()), r(recvs.begin(), recvs.end());
    EXPECT_EQ(s, r);
    const int64_t m = p.info().num_microbatches();
    const int64_t e_count = static_cast<int64_t>(encs.size());
    std::multiset<std::tuple<int32_t, int32_t, int64_t, int64_t, int64_t>> forward, backward;
    for (const auto& x : sends) {
      const int64_t dir = x.tag / (e_count * m);
      const int64_t e = (x.tag / m) % e_count;
      const int64_t mb = x.tag % m;
      EXPECT_EQ(x.module, e + 1);
      if (x.channel == hetero::kBoundaryFwdChannel) {
        EXPECT_EQ(dir, 0);
        EXPECT_LT(x.dst, 8) << "activations go to the LLM";
        forward.insert({x.src, x.dst, e, mb, x.bytes});
      } else {
        EXPECT_EQ(dir, 1);
        EXPECT_LT(x.src, 8) << "gradients come from the LLM";
        backward.insert({x.dst, x.src, e, mb, x.bytes});  // reversed: producer first
      }
    }
    EXPECT_EQ(forward.size(), static_cast<size_t>(m) * (forward.size() / static_cast<size_t>(m)));
    EXPECT_EQ(forward, backward);
  }
}

// ---------------------------------------------------------------- structure

TEST(Heterogeneous, LlmProgramUnchangedUnderTheEncoderOps) {
  const Small llm;
  const auto sc = make_mllm(llm, {EncoderSpec{}});
  const ir::Program alone = compiler::compile(llm_only(sc));
  for (const auto& encs : std::vector<std::vector<EncoderSpec>>{{EncoderSpec{}}, {island(2, 2, 2)}}) {
    const ir::Program p = compile(make_mllm(llm, encs));
    for (int32_t r = 0; r < alone.ranks_size(); ++r) {
      const auto& a = alone.classes(alone.ranks(r).class_id());
      const auto& h = p.classes(p.ranks(r).class_id());
      for (const auto& s : a.streams()) {
        const ir::Stream* hs = stream(h, s.name());
        ASSERT_NE(hs, nullptr) << s.name();
        std::vector<std::string> mine;
        for (const auto& op : hs->ops())
          if (op.module() == 0) mine.push_back(op.SerializeAsString());
        ASSERT_EQ(mine.size(), static_cast<size_t>(s.ops_size())) << "rank " << r << " stream " << s.name();
        for (int32_t i = 0; i < s.ops_size(); ++i)
          EXPECT_EQ(mine[static_cast<size_t>(i)], s.ops(i).SerializeAsString());
      }
      // Ops of new streams all belong to encoders.
      for (const auto& s : h.streams()) {
        if (stream(a, s.name()) != nullptr) continue;
        for (const auto& op : s.ops()) EXPECT_GT(op.module(), 0) << s.name();
      }
    }
  }
}

TEST(Heterogeneous, ColocatedThreePhasesAroundTheLlm) {
  const Small llm;
  const ir::Program p = compile(make_mllm(llm, {EncoderSpec{}}));
  for (const auto& c : p.classes()) {
    const ir::Stream* compute = stream(c, "compute");
    ASSERT_NE(compute, nullptr);
    int32_t first_llm = -1, last_llm_pass = -1, first_enc_bwd = -1, last_enc_fwd = -1, llm_opt = -1, enc_opt = -1;
    for (int32_t i = 0; i < compute->ops_size(); ++i) {
      const auto& op = compute->ops(i);
      const bool pass = op.phase() >= ir::FORWARD && op.phase() <= ir::RECOMPUTE;
      if (op.module() == 0) {
        if (first_llm < 0) first_llm = i;
        if (pass && op.has_compute()) last_llm_pass = i;
        if (op.phase() == ir::OPTIMIZER_STEP && op.has_compute()) llm_opt = i;
      } else if (op.has_compute()) {
        if (op.phase() == ir::FORWARD) last_enc_fwd = i;
        if (op.phase() != ir::FORWARD && op.phase() != ir::OPTIMIZER_STEP && first_enc_bwd < 0) first_enc_bwd = i;
        if (op.phase() == ir::OPTIMIZER_STEP) enc_opt = i;
      }
    }
    EXPECT_LT(last_enc_fwd, first_llm) << c.name();
    EXPECT_GT(first_enc_bwd, last_llm_pass) << c.name();
    EXPECT_GT(enc_opt, llm_opt) << c.name();
    // Both reductions done before either optimizer: the encoder's DP wait
    // precedes the LLM's optimizer kernel.
    bool enc_dp_wait_before_llm_opt = false;
    for (int32_t i = first_enc_bwd; i < llm_opt; ++i)
      if (compute->ops(i).module() > 0 && compute->ops(i).has_wait() && compute->ops(i).phase() == ir::OPTIMIZER_STEP)
        enc_dp_wait_before_llm_opt = true;
    EXPECT_TRUE(enc_dp_wait_before_llm_opt) << c.name();
  }
}

TEST(Heterogeneous, EveryEncoderMicrobatchForwardAndBackwardOnce) {
  const Small llm;  // 16 samples
  EncoderSpec staged;  // colocated encoder pipeline
  staged.pp = 2;
  staged.dp = 4;
  for (const auto& enc : {EncoderSpec{}, island(1, 1, 4), island(1, 2, 1), staged}) {
    const auto sc = make_mllm(llm, {enc});
    const auto plan = hetero::make_plan(sc);
    const ir::Program p = compile(sc);
    // Encoder samples processed over all encoder ranks of stage 0 / tp 0:
    // each sample exactly once in forward and once in backward.
    int64_t fwd_samples = 0, bwd_samples = 0;
    const auto& e = plan.encoders[0];
    for (int32_t r = 0; r < p.ranks_size(); ++r) {
      const auto& b = p.ranks(r);
      if (e.colocated ? false : r < 8) continue;
      const ir::Coordinates c = e.colocated ? compiler::RankLayout(e.dims, e.rank_order).coordinates(r) : b.coord();
      if (c.tp() != 0 || c.cp() != 0 || c.pp() != 0) continue;
      std::set<int32_t> f, g;
      for (const auto& op : stream(p.classes(b.class_id()), "compute")->ops())
        if (op.module() == 1 && op.has_compute() && op.compute().role() == ir::ROLE_EMBEDDING) {
          (op.phase() == ir::FORWARD ? f : g).insert(op.microbatch());
        }
      fwd_samples += static_cast<int64_t>(f.size()) * e.microbatch_samples;
      bwd_samples += static_cast<int64_t>(g.size()) * e.microbatch_samples;
    }
    EXPECT_EQ(fwd_samples, llm.global_batch) << "encoder dp " << enc.dp;
    EXPECT_EQ(bwd_samples, llm.global_batch) << "encoder dp " << enc.dp;
  }
}

// A colocated encoder with pp > 1: each rank runs its own stage's layers,
// activations and gradients cross between neighbouring stages of one shard
// (every send has its receive), and the bridge joins exactly the LLM's
// first-stage ranks of a replica with the last-stage ranks of the shards
// feeding it, carrying the replica's embeddings.
TEST(Heterogeneous, ColocatedEncoderPipelineStagesAndBridge) {
  const Small llm;  // tp 2 pp 2 dp 2: replicas {0,1,4,5} and {2,3,6,7}
  EncoderSpec enc;
  enc.pp = 2;
  enc.dp = 4;
  enc.layers = 4;  // two per stage
  const auto sc = make_mllm(llm, {enc});
  const auto plan = hetero::make_plan(sc);
  const ir::Program p = compile(sc);
  const auto& e = plan.encoders[0];
  const compiler::RankLayout el(e.dims, e.rank_order);
  for (int32_t r = 0; r < p.ranks_size(); ++r) {
    const int32_t stage = el.coordinates(r).pp();
    bool embedding = false;
    for (const auto& op : stream(p.classes(p.ranks(r).class_id()), "compute")->ops()) {
      if (op.module() != 1 || !op.has_compute()) continue;
      if (op.layer() >= 0) {
        EXPECT_GE(op.layer(), 2 * stage) << "rank " << r;
        EXPECT_LT(op.layer(), 2 * stage + 2) << "rank " << r;
      }
      embedding = embedding || op.compute().role() == ir::ROLE_EMBEDDING;
    }
    EXPECT_EQ(embedding, stage == 0) << "the patch embedding runs on the first stage only, rank " << r;
  }
  auto sends = testing::resolve_p2p(p, ir::ENCODER_COMM, true);
  auto recvs = testing::resolve_p2p(p, ir::ENCODER_COMM, false);
  std::sort(sends.begin(), sends.end());
  std::sort(recvs.begin(), recvs.end());
  EXPECT_EQ(sends, recvs);
  // Forward and backward of every microbatch between the two stages of each shard.
  EXPECT_EQ(static_cast<int64_t>(sends.size()), 2 * e.dims.dp * int64_t{e.microbatches});
  for (const auto& m : sends) {
    const auto a = el.coordinates(m.src), b = el.coordinates(m.dst);
    EXPECT_EQ(a.dp(), b.dp());
    EXPECT_EQ(std::abs(a.pp() - b.pp()), 1);
    EXPECT_EQ(m.channel, hetero::encoder_pp_channel(0, a.pp() < b.pp()));
  }
  int32_t slot = -1;
  for (int32_t i = 0; i < p.group_slots_size(); ++i)
    if (p.group_slots(i).name() == "bnd0_fwd") slot = i;
  ASSERT_GE(slot, 0);
  for (int32_t r = 0; r < p.ranks_size(); ++r) {
    const auto& b = p.ranks(r);
    const bool llm_first = b.coord().pp() == 0, enc_last = el.coordinates(r).pp() == 1;
    if (!llm_first && !enc_last) {
      EXPECT_EQ(b.group(slot), -1) << "rank " << r;
      continue;
    }
    ASSERT_GE(b.group(slot), 0) << "rank " << r;
    const int32_t d = b.coord().dp();
    std::vector<int32_t> want;
    for (int32_t q : hetero::llm_replica_ranks(plan.llm, d))
      if (p.ranks(q).coord().pp() == 0 || el.coordinates(q).pp() == 1) want.push_back(q);
    const auto& g = p.groups(b.group(slot));
    EXPECT_EQ(std::vector<int32_t>(g.ranks().begin(), g.ranks().end()), want) << "rank " << r;
    int64_t bytes = 0;
    for (const auto& op : stream(p.classes(b.class_id()), "boundary")->ops())
      if (op.has_collective() && op.phase() == ir::FORWARD) {
        EXPECT_EQ(op.collective().kind(), ir::BROADCAST);
        bytes += op.collective().bytes();
      }
    EXPECT_EQ(bytes, closed_form(llm, enc)) << "rank " << r;
  }
}

// The encoder stages' pass order: 1F1B with warm-up = distance to the sink.
std::vector<std::string> passes(const ir::Stream& compute) {
  std::vector<std::string> out;
  std::string last;
  for (const auto& op : compute.ops()) {
    if (op.module() == 0 || !op.has_compute()) continue;
    if (op.phase() == ir::OPTIMIZER_STEP) continue;
    const std::string p = std::string(op.phase() == ir::FORWARD ? "F" : "B") + std::to_string(op.microbatch());
    if (p != last) out.push_back(p);
    last = p;
  }
  return out;
}

TEST(Heterogeneous, GraphAwareOneFOneBWarmupFollowsDistanceToSink) {
  const Small llm;  // LLM pp 2, 4 microbatches
  const auto sc = make_mllm(llm, {island(1, 2, 2)});
  const ir::Program p = compile(sc);
  std::map<std::string, std::vector<std::string>> by_class;
  for (const auto& c : p.classes()) by_class[c.name()] = passes(*stream(c, "compute"));
  // Last encoder stage: distance 0 + pp_llm = 2; first: 3.
  EXPECT_EQ(by_class["enc0_pp1_boundary_leader"],
            (std::vector<std::string>{"F0", "F1", "F2", "B0", "F3", "B1", "B2", "B3"}));
  EXPECT_EQ(by_class["enc0_pp0"], (std::vector<std::string>{"F0", "F1", "F2", "F3", "B0", "B1", "B2", "B3"}));

  // Interleaved LLM stage 0 consumes all pp·(v − 1) + … chunk-0 forwards
  // before its first chunk-0 backward: the encoder runs ahead accordingly
  // instead of waiting for a gradient that cannot come yet.
  Small inter = llm;
  inter.schedule = scenario::INTERLEAVED_1F1B;
  inter.v = 2;
  inter.global_batch = 32;  // 8 microbatches
  const ir::Program q = compile(make_mllm(inter, {island(1, 1, 2)}));
  bool found = false;
  for (const auto& c : q.classes()) {
    if (c.name() != "enc0_pp0_boundary_leader") continue;
    found = true;
    // Plain 1F1B (warm-up 2) would wait for gradient 0 after F2; LLM stage 0
    // returns it only after its 4th chunk-0 forward, the 3rd after its 6th.
    EXPECT_EQ(passes(*stream(c, "compute")),
              (std::vector<std::string>{"F0", "F1", "F2", "F3", "B0", "B1", "F4", "F5", "B2", "B3", "F6", "F7", "B4",
                                        "B5", "B6", "B7"}));
  }
  EXPECT_TRUE(found);
}

TEST(Heterogeneous, IslandRanksAndModules) {
  const Small llm;
  const auto sc = make_mllm(llm, {island(2, 2, 2)});
  const ir::Program p = compile(sc);
  EXPECT_EQ(p.info().num_ranks(), 8 + 8);
  EXPECT_EQ(p.ranks_size(), 16);
  ASSERT_EQ(p.info().modules_size(), 2);
  EXPECT_EQ(p.info().placement(), scenario::HETEROGENEOUS);
  EXPECT_EQ(p.info().modules(1).first_rank(), 8);
  EXPECT_EQ(p.info().modules(1).num_ranks(), 8);
  EXPECT_TRUE(p.info().modules(1).is_encoder());
  for (int32_t r = 8; r < 16; ++r) {
    EXPECT_EQ(p.ranks(r).node(), r / 8);
    EXPECT_EQ(p.ranks(r).local_gpu(), r % 8);
    EXPECT_EQ(p.ranks(r).coord().pp(), (r - 8) / 4);  // tp-cp-dp-pp on the island
    for (const auto& op : stream(p.classes(p.ranks(r).class_id()), "compute")->ops()) EXPECT_EQ(op.module(), 1);
  }
  // MFU numerator covers both modules.
  const ir::Program alone = compiler::compile(llm_only(sc));
  EXPECT_DOUBLE_EQ(p.info().model_flops_per_iteration(),
                   alone.info().model_flops_per_iteration() +
                       model::encoder_model_flops_per_iteration(sc.spec, 0, llm.global_batch));
}

TEST(Heterogeneous, CompileIsDeterministic) {
  const Small llm;
  for (const auto& encs : std::vector<std::vector<EncoderSpec>>{{EncoderSpec{}}, {island(2, 2, 2)}}) {
    const auto sc = make_mllm(llm, encs, true);
    // Deterministic serialization (the cluster's efficiency map would
    // otherwise serialize in hash order).
    auto bytes = [](const ir::Program& p) {
      std::string out;
      google::protobuf::io::StringOutputStream stream(&out);
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      p.SerializeToCodedStream(&coded);
      return out;
    };
    const std::string a = bytes(compile(sc)), b = bytes(compile(sc));
    EXPECT_GT(a.size(), 1000u);
    EXPECT_TRUE(a == b) << "two compiles of one scenario differ";
  }
}

// ---------------------------------------------------------------- memory

int64_t class_delta_sum(const ir::RankClass& c) {
  int64_t sum = 0;
  for (const auto& s : c.streams())
    for (const auto& op : s.ops())
      if (op.has_compute()) sum += op.compute().memory_delta_bytes();
  return sum;
}

TEST(Heterogeneous, MemoryBaselineHoldsEncoderStateShardedOverEncoderDp) {
  // dp 8 × tp 1 (fan-in) and dp 2 × tp 4 (equal; the LLM's replicas made
  // contiguous so that the shards map).
  for (const int64_t dp : {8, 2}) {
    SCOPED_TRACE("encoder dp " + std::to_string(dp));
    Small l;
    EncoderSpec enc;
    enc.dp = dp;
    enc.tp = 8 / dp;
    if (dp == 2) l.rank_order = "tp-cp-pp-dp";
    const auto sc = make_mllm(l, {enc});
    const ir::Program p = compile(sc);
    const ir::Program a = compiler::compile(llm_only(sc));
    const auto plan = hetero::make_plan(sc);
    const auto params = hetero::stage_parameters(sc.spec, plan.encoders[0], 0);
    // Unsharded, a rank holds the whole encoder (layers, patch embedding,
    // final norm, projector).
    if (enc.tp == 1) {
      EXPECT_EQ(params.trained, model::encoder_parameters(sc.spec, 0));
    } else {
      EXPECT_LT(params.trained, model::encoder_parameters(sc.spec, 0));
    }
    for (int32_t k = 0; k < p.classes_size(); ++k) {
      const auto& m = p.classes(k).memory();
      const auto& am = a.classes(k).memory();
      // bf16 weights and fp32 gradients whole; fp32 master + Adam state
      // (12 B/param) sharded over the encoder's own DP.
      EXPECT_EQ(m.weights_bytes() - am.weights_bytes(), 2 * params.trained);
      EXPECT_EQ(m.gradients_bytes() - am.gradients_bytes(), 4 * params.trained);
      EXPECT_EQ(m.optimizer_bytes() - am.optimizer_bytes(), (12 * params.trained + dp - 1) / dp);
      EXPECT_EQ(class_delta_sum(p.classes(k)), 0) << p.classes(k).name();
    }
  }
}

TEST(Heterogeneous, IslandMemoryAndFrozenEncoder) {
  const Small llm;
  EncoderSpec enc = island(1, 1, 2);
  enc.frozen = true;
  const auto sc = make_mllm(llm, {enc});
  const ir::Program p = compile(sc);
  const auto plan = hetero::make_plan(sc);
  const auto params = hetero::stage_parameters(sc.spec, plan.encoders[0], 0);
  EXPECT_GT(params.frozen, 0);
  const auto& c = p.classes(p.ranks(8).class_id());
  const auto st = cost::model_state_bytes(params.trained, 2, true);
  EXPECT_EQ(c.memory().weights_bytes(), st.weights.count() + 2 * params.frozen);
  EXPECT_EQ(c.memory().optimizer_bytes(), st.optimizer.count());
  EXPECT_EQ(class_delta_sum(c), 0);
  // Frozen: no encoder-layer backward; the projector still trains and its
  // gradients alone are reduced.
  for (const auto& op : stream(c, "compute")->ops()) {
    if (!op.has_compute() || op.phase() == ir::FORWARD || op.phase() == ir::OPTIMIZER_STEP) continue;
    EXPECT_EQ(op.layer(), -1);
    EXPECT_TRUE(op.compute().op_class() == ir::GEMM || op.compute().op_class() == ir::GELU)
        << "frozen: only the projector's GEMMs and GELU run backward";
  }
  const ir::Stream* dp = stream(c, "enc_dp");
  ASSERT_NE(dp, nullptr);
  int64_t reduced = 0;
  for (const auto& op : dp->ops())
    if (op.has_collective() && op.collective().kind() == ir::REDUCE_SCATTER) reduced += op.collective().bytes();
  EXPECT_EQ(reduced, 4 * params.trained);
}

TEST(Heterogeneous, OffloadCopiesEncoderStateOutAndBack) {
  const Small llm;
  const auto sc = make_mllm(llm, {EncoderSpec{}}, true, 32);
  const ir::Program p = compile(sc);
  const auto plan = hetero::make_plan(sc);
  const auto params = hetero::stage_parameters(sc.spec, plan.encoders[0], 0);
  const auto st = cost::model_state_bytes(params.trained, 8, true);
  const int64_t bytes = (st.weights + st.optimizer).count();
  for (const auto& c : p.classes()) {
    const ir::Stream* off = stream(c, "enc_offload");
    ASSERT_NE(off, nullptr);
    std::vector<int64_t> deltas;
    for (const auto& op : off->ops())
      if (op.has_compute()) {
        deltas.push_back(op.compute().memory_delta_bytes());
        EXPECT_EQ(op.compute().fixed_duration_ns(), hetero::host_copy_ns(bytes, 32));
      }
    EXPECT_EQ(deltas, (std::vector<int64_t>{-bytes, bytes}));
    EXPECT_EQ(class_delta_sum(c), 0);
  }
  EXPECT_EQ(hetero::host_copy_ns(64'000, 64), 1000);  // 64 kB at 64 GB/s: 1 µs
}

// ---------------------------------------------------------------- errors

std::string error_of(const scenario::LoadedScenario& sc) {
  try {
    compile(sc);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Heterogeneous, LayoutsThatCannotMapAreClearErrors) {
  const Small llm;
  auto expect = [&](std::vector<EncoderSpec> encs, const std::string& needle, Small l = Small{}) {
    const std::string what = error_of(make_mllm(l, encs));
    EXPECT_NE(what.find(needle), std::string::npos) << "got: " << what;
  };
  {
    EncoderSpec e;
    e.dp = 3;  // 8 ranks? tp 1 × dp 3 = 3 ranks
    expect({e}, "exactly the LLM's ranks");
  }
  {
    EncoderSpec e = island(1, 1, 3);
    expect({e}, "must divide one another");
  }
  {
    EncoderSpec e;
    e.tp = 4;
    e.dp = 2;  // default order: shard {0..3} spans replicas {0,1,4,5} and {2,3,6,7}
    expect({e}, "spans LLM data-parallel replicas");
  }
  {
    // Encoder pipeline: stage 0 of shard 0 is rank 0 (replica 0), but its
    // later stages (ranks 2, 4, 6) reach into replica 1.
    EncoderSpec e;
    e.pp = 4;
    e.dp = 2;
    e.layers = 4;
    expect({e}, "spans LLM data-parallel replicas");
  }
  {
    EncoderSpec e = island(1, 1, 2, 4);
    expect({e}, "overlaps the LLM's ranks");
  }
  {
    EncoderSpec e = island(1, 1, 2, 9);
    expect({e}, "would be idle");
  }
  { expect({EncoderSpec{}, island(1, 1, 2)}, "mixing colocated and non-colocated"); }
  {
    EncoderSpec e = island(1, 1, 8);  // 4 shards per replica, micro-batch 2
    expect({e}, "does not divide it");
  }
  {
    EncoderSpec e;
    e.tp = 3;
    expect({e}, "must divide its attention heads");
  }
  {
    EncoderSpec e = island(1, 2, 2);
    e.layers = 3;
    expect({e}, "must divide its 3 layers");
  }
  {
    auto sc = make_mllm(llm, {island(1, 1, 2)});
    sc.spec.mutable_cluster()->set_num_nodes(1);
    const std::string what = error_of(sc);
    EXPECT_NE(what.find("needs 10 GPUs"), std::string::npos) << what;
  }
  {
    auto sc = make_mllm(llm, {EncoderSpec{}}, true, -1);
    EXPECT_NE(error_of(sc).find("host_link_gb_per_s"), std::string::npos);
  }
  {
    auto sc = make_mllm(llm, {EncoderSpec{}});
    sc.spec.mutable_model()->mutable_encoders(0)->mutable_layout()->set_virtual_stages(2);
    EXPECT_NE(error_of(sc).find("virtual pipeline stages"), std::string::npos);
  }
  {
    auto sc = make_mllm(llm, {EncoderSpec{}});
    sc.spec.mutable_model()->mutable_encoders(0)->mutable_layout()->set_rank_order("tp-dp");
    EXPECT_NE(error_of(sc).find("not a permutation"), std::string::npos);
  }
}

}  // namespace
}  // namespace lacuna::placement
