// Heterogeneous programs run through the engine: no deadlock (full and
// fold), encoder outputs consumed only after they were produced, gradients
// returned over the edge that carried the activation, and free encoder work
// leaves the LLM's iteration as it was.
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "sim/compiler/compile.h"
#include "sim/cost/cost_model.h"
#include "sim/engine/simulator.h"
#include "sim/placement/hetero_compile.h"
#include "sim/placement/hetero_plan.h"
#include "sim/placement/hetero_test_support.h"
#include "sim/placement/heterogeneous.h"
#include "sim/placement/modules.h"

namespace lacuna::placement {
namespace {

using compiler::testing::Small;
using compiler::testing::TrivialCost;
using testing::EncoderSpec;
using testing::make_mllm;

struct Case {
  std::string name;
  Small llm;
  std::vector<EncoderSpec> encoders;
  bool offload = false;
};

Small llm_base() {
  Small s;  // tp 2, pp 2, dp 2: 8 ranks, 4 microbatches of 2 samples per pipeline
  return s;
}

std::vector<Case> colocated_cases() {
  std::vector<Case> out;
  {
    Case c{"colocated fan-in (dp 8 vs 2)", llm_base(), {EncoderSpec{}}};
    out.push_back(c);
  }
  {
    Case c{"colocated fan-in, encoder tp 2 + SP, full recompute", llm_base(), {}};
    EncoderSpec e;
    e.tp = 2;
    e.dp = 4;
    e.sp = true;
    e.recompute = scenario::RECOMPUTE_FULL;
    c.encoders = {e};
    out.push_back(c);
  }
  {
    Case c{"colocated equal dp, LLM order tp-cp-pp-dp", llm_base(), {}};
    c.llm.rank_order = "tp-cp-pp-dp";
    EncoderSpec e;
    e.tp = 4;
    e.dp = 2;
    c.encoders = {e};
    out.push_back(c);
  }
  {
    Case c{"colocated fan-out (dp 2 vs 4)", llm_base(), {}};
    c.llm.tp = 1;
    c.llm.dp = 4;
    c.llm.rank_order = "tp-cp-pp-dp";
    EncoderSpec e;
    e.tp = 4;
    e.dp = 2;
    c.encoders = {e};
    out.push_back(c);
  }
  {
    Case c{"colocated two encoders, one frozen, offload", llm_base(), {}};
    EncoderSpec a;
    EncoderSpec b;
    b.frozen = true;
    b.dp = 4;
    b.tp = 2;
    b.layers = 4;
    c.encoders = {a, b};
    c.offload = true;
    out.push_back(c);
  }
  {
    Case c{"colocated, LLM pp 1 cp 2 dp 2 (ZB-H1), encoder tp 2 dp 4", llm_base(), {}};
    c.llm.pp = 1;
    c.llm.cp = 2;
    c.llm.schedule = scenario::ZB_H1;
    EncoderSpec e;
    e.tp = 2;
    e.dp = 4;
    c.encoders = {e};
    out.push_back(c);
  }
  {
    Case c{"colocated, encoder cp 2, interleaved LLM", llm_base(), {}};
    c.llm.schedule = scenario::INTERLEAVED_1F1B;
    c.llm.v = 2;
    EncoderSpec e;
    e.cp = 2;
    e.dp = 4;
    c.encoders = {e};
    out.push_back(c);
  }
  // Encoder pipelines on the LLM's GPUs (GPipe phases, a bridge to the
  // LLM's first stage).
  {
    Case c{"colocated encoder pp 2, fan-in (tp 1 pp 2 dp 4)", llm_base(), {}};
    EncoderSpec e;
    e.pp = 2;
    e.dp = 4;
    c.encoders = {e};
    out.push_back(c);
  }
  {
    Case c{"colocated encoder pp 2, equal dp, the LLM's own layout", llm_base(), {}};
    EncoderSpec e;
    e.tp = 2;
    e.pp = 2;
    e.dp = 2;
    c.encoders = {e};
    out.push_back(c);
  }
  {
    Case c{"colocated encoder pp 2 tp 2 + SP, fan-out (dp 2 vs 4)", llm_base(), {}};
    c.llm.tp = 1;
    c.llm.dp = 4;
    c.llm.rank_order = "tp-cp-pp-dp";
    EncoderSpec e;
    e.tp = 2;
    e.pp = 2;
    e.dp = 2;
    e.sp = true;
    c.encoders = {e};
    out.push_back(c);
  }
  {
    Case c{"colocated two encoders with pp 2, one frozen, interleaved LLM", llm_base(), {}};
    c.llm.schedule = scenario::INTERLEAVED_1F1B;
    c.llm.v = 2;
    EncoderSpec a;
    a.pp = 2;
    a.dp = 4;
    EncoderSpec b;
    b.frozen = true;
    b.pp = 2;
    b.tp = 2;
    b.dp = 2;
    b.layers = 4;
    c.encoders = {a, b};
    out.push_back(c);
  }
  return out;
}

std::vector<Case> island_cases() {
  std::vector<Case> out;
  auto island = [](int64_t tp, int64_t pp, int64_t dp) {
    EncoderSpec e;
    e.tp = tp;
    e.pp = pp;
    e.dp = dp;
    e.first_rank = 8;
    return e;
  };
  out.push_back({"island equal dp", llm_base(), {island(1, 1, 2)}});
  out.push_back({"island fan-in (4 shards, 2 replicas)", llm_base(), {island(1, 1, 4)}});
  out.push_back({"island fan-out (1 shard, 2 replicas)", llm_base(), {island(1, 1, 1)}});
  out.push_back({"island tp 2 pp 2", llm_base(), {island(2, 2, 2)}});
  {
    Case c{"island tp 2 + SP, frozen, pp 2", llm_base(), {island(2, 2, 1)}};
    c.encoders[0].sp = true;
    c.encoders[0].frozen = true;
    out.push_back(c);
  }
  {
    Case c{"island, interleaved LLM", llm_base(), {island(1, 1, 2)}};
    c.llm.schedule = scenario::INTERLEAVED_1F1B;
    c.llm.v = 2;
    out.push_back(c);
  }
  {
    Case c{"island, ZB-H1 LLM", llm_base(), {island(1, 2, 2)}};
    c.llm.schedule = scenario::ZB_H1;
    out.push_back(c);
  }
  {
    Case c{"island, GPipe LLM, encoder cp 2", llm_base(), {island(1, 1, 2)}};
    c.llm.schedule = scenario::GPIPE;
    c.encoders[0].cp = 2;
    out.push_back(c);
  }
  {
    Case c{"two islands join at LLM stage 0", llm_base(), {island(1, 1, 2), island(2, 1, 1)}};
    c.encoders[1].first_rank = 10;
    out.push_back(c);
  }
  {
    Case c{"island, LLM pp 1 (stage 0 is the last stage)", llm_base(), {island(2, 1, 2)}};
    c.llm.pp = 1;
    c.llm.dp = 4;
    c.encoders[0].dp = 4;
    out.push_back(c);
  }
  {
    Case c{"island, LLM tp 1 cp 2 (CP broadcast)", llm_base(), {island(1, 1, 4)}};
    c.llm.tp = 1;
    c.llm.cp = 2;
    c.llm.global_batch = 16;
    out.push_back(c);
  }
  return out;
}

ir::Program compile_case(const Case& c) {
  const auto sc = make_mllm(c.llm, c.encoders, c.offload);
  const TrivialCost cost;
  return compile_heterogeneous(sc, cost);
}

TEST(HeterogeneousSimulate, NoDeadlockFullAndFold) {
  const TrivialCost cost;
  std::vector<Case> cases = colocated_cases();
  for (auto& c : island_cases()) cases.push_back(c);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const ir::Program p = compile_case(c);
    engine::Simulator full(p, cost);
    const auto r = full.run();
    EXPECT_GT(r.end_time.count(), 0);
    EXPECT_EQ(static_cast<int>(r.simulated_ranks.size()), p.ranks_size());
    engine::Simulator folded(p, cost, {.fold = true});
    const auto f = folded.run();
    EXPECT_LT(f.simulated_ranks.size(), r.simulated_ranks.size());
    // Ranks of one class are interchangeable here (same node shapes), so one
    // representative each reproduces the iteration.
    EXPECT_EQ(f.end_time, r.end_time);
  }
}

// Every compute / communication op's span, by rank.
struct Span {
  int32_t rank, module, microbatch, chunk;
  ir::Phase phase;
  bool compute;
  int64_t start, end;
  std::string stream;
};

class Recorder : public engine::Observer {
 public:
  explicit Recorder(const ir::Program& p) : p_(p) {}
  void on_op_end(const engine::OpSpan& s) override {
    if (s.ir->has_record() || s.ir->has_wait()) return;
    const auto& cls = p_.classes(p_.ranks(s.rank).class_id());
    spans.push_back({s.rank, s.ir->module(), s.ir->microbatch(), s.ir->chunk(), s.ir->phase(), s.ir->has_compute(),
                     s.start.count(), s.end.count(), cls.streams(s.stream).name()});
  }
  std::vector<Span> spans;

 private:
  const ir::Program& p_;
};

bool pass_phase(ir::Phase ph) { return ph >= ir::FORWARD && ph <= ir::RECOMPUTE; }

// Over the compute spans of `rank` matching `pred`: the earliest start and
// the latest end (INT64 max / min when none).
template <class Pred>
std::pair<int64_t, int64_t> extent(const std::vector<Span>& spans, int32_t rank, Pred pred) {
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (const auto& s : spans)
    if (s.rank == rank && s.compute && s.stream == "compute" && pred(s)) {
      lo = std::min(lo, s.start);
      hi = std::max(hi, s.end);
    }
  return {lo, hi};
}

int32_t slot_named(const ir::Program& p, const std::string& name, bool peer) {
  const auto& slots = peer ? p.peer_slots() : p.group_slots();
  for (int32_t i = 0; i < slots.size(); ++i)
    if (slots.Get(i).name() == name) return i;
  return -1;
}

TEST(HeterogeneousSimulate, IslandOutputsConsumedOnlyAfterProducedAndGradientsAfterTheLlm) {
  const TrivialCost cost;
  for (const auto& c : island_cases()) {
    SCOPED_TRACE(c.name);
    const ir::Program p = compile_case(c);
    engine::Simulator sim(p, cost);
    Recorder rec(p);
    sim.add_observer(&rec);
    sim.run();
    const int32_t world = static_cast<int32_t>(c.llm.tp * c.llm.cp * c.llm.pp * c.llm.dp);
    const int32_t m = p.info().num_microbatches();
    int checked = 0;
    for (size_t e = 0; e < c.encoders.size(); ++e) {
      const int32_t module = static_cast<int32_t>(e) + 1;
      // Producers of each replica: the encoder leaders its leader talks to.
      std::map<int32_t, std::set<int32_t>> producers;  // replica → encoder leader ranks
      for (int32_t q = 0;; ++q) {
        const int32_t slot = slot_named(p, "bnd" + std::to_string(e) + "_peer" + std::to_string(q), true);
        if (slot < 0) break;
        for (int32_t r = 0; r < world; ++r)
          if (p.ranks(r).peer(slot) >= 0) producers[p.ranks(r).coord().dp()].insert(p.ranks(r).peer(slot));
      }
      ASSERT_EQ(static_cast<int64_t>(producers.size()), c.llm.dp);
      for (int32_t r = 0; r < world; ++r) {
        const auto& coord = p.ranks(r).coord();
        if (coord.pp() != 0) continue;
        const bool leader = coord.tp() == 0 && coord.cp() == 0;
        for (int32_t i = 0; i < m; ++i) {
          const auto consumer = extent(rec.spans, r, [&](const Span& s) {
            return s.module == 0 && s.phase == ir::FORWARD && s.chunk == 0 && s.microbatch == i;
          });
          const auto gradient = extent(rec.spans, r, [&](const Span& s) {
            return s.module == 0 && s.phase == ir::BACKWARD_INPUT && s.chunk == 0 && s.microbatch == i;
          });
          for (int32_t src : producers[coord.dp()]) {
            const auto produced = extent(rec.spans, src, [&](const Span& s) {
              return s.module == module && s.phase == ir::FORWARD && s.microbatch == i;
            });
            EXPECT_GE(consumer.first, produced.second) << "rank " << r << " microbatch " << i << " from " << src;
            ++checked;
            if (!leader) continue;
            // The encoder's backward of i starts after the LLM produced i's
            // gradient on this leader.
            const auto backward = extent(rec.spans, src, [&](const Span& s) {
              return s.module == module && pass_phase(s.phase) && s.phase != ir::FORWARD && s.microbatch == i;
            });
            EXPECT_GE(backward.first, gradient.second) << "leader " << r << " microbatch " << i << " to " << src;
          }
        }
      }
    }
    EXPECT_GT(checked, 0);
  }
}

TEST(HeterogeneousSimulate, ColocatedLlmStartsAfterEncoderForwardAndEncoderBackwardAfterLlm) {
  const TrivialCost cost;
  for (const auto& c : colocated_cases()) {
    SCOPED_TRACE(c.name);
    const auto sc = make_mllm(c.llm, c.encoders, c.offload);
    const auto plan = hetero::make_plan(sc);
    const ir::Program p = compile_case(c);
    engine::Simulator sim(p, cost);
    Recorder rec(p);
    sim.add_observer(&rec);
    sim.run();
    for (const auto& enc : plan.encoders) {
      for (int32_t d = 0; d < plan.llm.dims.dp; ++d) {
        // Shards feeding replica d.
        std::vector<int32_t> feeders;
        for (int32_t k = 0; k < enc.dims.dp; ++k) {
          const bool feeds = enc.relation == hetero::DpRelation::kFanOut
                                 ? hetero::colocated_shard_of_replica(plan, enc, d) == k
                                 : hetero::colocated_replica_of_shard(plan, enc, k) == d;
          if (feeds)  // the ranks holding the output: the encoder's last stage
            for (int32_t r : hetero::encoder_shard_ranks(enc, k, enc.dims.pp - 1)) feeders.push_back(r);
        }
        ASSERT_FALSE(feeders.empty());
        int64_t produced = 0, llm_done = 0;
        for (int32_t r : feeders)
          produced = std::max(produced, extent(rec.spans, r, [&](const Span& s) {
                                          return s.module == enc.module && s.phase == ir::FORWARD;
                                        }).second);
        for (int32_t r : hetero::llm_replica_ranks(plan.llm, d)) {
          if (p.ranks(r).coord().pp() != 0) continue;
          const auto llm = extent(rec.spans, r, [](const Span& s) { return s.module == 0 && pass_phase(s.phase); });
          EXPECT_GE(llm.first, produced) << "LLM rank " << r;
          // … and after the forward transform delivered the packed tensor.
          for (const auto& s : rec.spans) {
            if (s.rank != r || s.stream != "boundary" || s.phase != ir::FORWARD || s.module != enc.module) continue;
            EXPECT_GE(llm.first, s.end) << "LLM rank " << r << " before the boundary gather ended";
          }
          llm_done = std::max(llm_done, llm.second);
        }
        for (int32_t r : feeders) {
          const auto bwd = extent(rec.spans, r, [&](const Span& s) {
            return s.module == enc.module && pass_phase(s.phase) && s.phase != ir::FORWARD;
          });
          EXPECT_GE(bwd.first, llm_done) << "encoder rank " << r;
        }
      }
    }
  }
}

TEST(HeterogeneousSimulate, FreeEncoderWorkLeavesTheLlmIteration) {
  const TrivialCost cost;
  std::vector<Case> cases = colocated_cases();
  for (auto& c : island_cases()) cases.push_back(c);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto sc = make_mllm(c.llm, c.encoders, c.offload);
    const ir::Program alone = compiler::compile(llm_only(sc));
    ir::Program p = compile_case(c);
    testing::make_encoder_work_free(p);
    const int64_t llm = engine::Simulator(alone, cost).run().end_time.count();
    const int64_t het = engine::Simulator(p, cost).run().end_time.count();
    // Each encoder op now takes 1 ns: the LLM's iteration grows by at most
    // the encoder ops on its critical path (colocated: phases 1 and 3;
    // islands: the boundary hand-offs).
    EXPECT_GE(het, llm);
    EXPECT_LE(het, llm + testing::ops_of_module_above_zero(p));
  }
}

TEST(HeterogeneousSimulate, OffloadCopiesRunOutsideTheEncoderPhasesAndCostTime) {
  const TrivialCost cost;
  Case c{"offload", llm_base(), {EncoderSpec{}}, true};
  const ir::Program p = compile_case(c);
  engine::Simulator sim(p, cost);
  Recorder rec(p);
  sim.add_observer(&rec);
  const int64_t fast = sim.run().end_time.count();
  for (int32_t r = 0; r < p.ranks_size(); ++r) {
    std::vector<Span> copies;
    for (const auto& s : rec.spans)
      if (s.rank == r && s.stream == "enc_offload") copies.push_back(s);
    ASSERT_EQ(copies.size(), 2u);
    const auto enc_fwd = extent(rec.spans, r, [](const Span& s) { return s.module == 1 && s.phase == ir::FORWARD; });
    const auto enc_bwd = extent(
        rec.spans, r, [](const Span& s) { return s.module == 1 && pass_phase(s.phase) && s.phase != ir::FORWARD; });
    const auto llm_fwd = extent(rec.spans, r, [](const Span& s) { return s.module == 0 && s.phase == ir::FORWARD; });
    EXPECT_GE(copies[0].start, enc_fwd.second);  // out: after the encoder forward
    EXPECT_GE(copies[1].start, llm_fwd.second);  // back: after the LLM's last forward
    EXPECT_LE(copies[1].end, enc_bwd.first);     // … and before the encoder backward
  }
  // A slow host link exposes the copies.
  const auto slow = make_mllm(c.llm, c.encoders, true, 0.001);
  const int64_t exposed = engine::Simulator(compile_heterogeneous(slow, cost), cost).run().end_time.count();
  EXPECT_GT(exposed, fast);
}

// Iteration times on the analytic cost model (H100-like test cluster), for
// the record: colocated adds the encoder's forward and backward around the
// LLM; an island adds GPUs and overlaps the encoder with the LLM.
TEST(HeterogeneousSimulate, IterationTimesAgainstLlmOnly) {
  Small llm = llm_base();
  llm.layers = 8;
  llm.hidden = 1024;
  llm.heads = 16;
  llm.kv_heads = 16;
  llm.ffn = 4096;
  llm.seq = 1024;
  llm.global_batch = 32;  // 8 microbatches per pipeline
  EncoderSpec enc;
  enc.layers = 8;
  enc.hidden = 512;
  enc.heads = 8;
  enc.ffn = 2048;
  enc.tokens_per_image = 256;
  enc.images_per_sample = 2;
  const auto cost_model = cost::make_analytic_cost_model(make_mllm(llm, {enc}).spec.cluster(), scenario::BF16);
  const auto time = [&](const ir::Program& p) {
    return engine::Simulator(p, *cost_model, {.fold = true}).run().end_time.count();
  };
  const auto colocated = make_mllm(llm, {enc});
  const int64_t t_llm = time(compiler::compile(llm_only(colocated)));
  const int64_t t_col = time(compile_heterogeneous(colocated, *cost_model));
  EncoderSpec isl = enc;
  isl.dp = 2;
  isl.first_rank = 8;
  const int64_t t_isl = time(compile_heterogeneous(make_mllm(llm, {isl}), *cost_model));
  std::printf("LLM only %.3f ms, colocated %.3f ms, island (+2 GPUs) %.3f ms\n", t_llm / 1e6, t_col / 1e6, t_isl / 1e6);
  EXPECT_GT(t_col, t_llm);
  EXPECT_GE(t_isl, t_llm);
}

}  // namespace
}  // namespace lacuna::placement
