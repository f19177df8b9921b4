// Synthetic pipelines run on the engine: closed-form bubbles, the Zero Bubble
// paper's Table 5, and timeline invariants over random shapes.
#include "sim/schedule/synthetic.h"
#include "sim/schedule/synthetic_test_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <tuple>

#include "sim/core/error.h"
#include "sim/engine/simulator.h"

namespace lacuna::schedule {
namespace {

using lacuna::scenario::GPIPE;
using lacuna::scenario::INTERLEAVED_1F1B;
using lacuna::scenario::ONE_F_ONE_B;
using lacuna::scenario::ScheduleKind;
using lacuna::scenario::ZB_H1;

using synthetic_support::NoCostModel;

struct Span {
  TimeNs start, end;
};
using PassKey = std::tuple<int, ir::Phase, int, int>;  // rank, phase, microbatch, chunk

class Recorder : public engine::Observer {
 public:
  void on_op_end(const engine::OpSpan& s) override {
    if (!s.ir->has_compute()) return;
    passes[{s.rank, s.ir->phase(), s.ir->microbatch(), s.ir->chunk()}] = {s.start, s.end};
    order[s.rank].push_back(s.ir->phase());
  }
  void on_transfer(const engine::OpSpan& send, const engine::OpSpan&) override {
    ++transfers;
    transfer_time += send.end - send.start;
  }
  std::map<PassKey, Span> passes;
  std::map<int, std::vector<ir::Phase>> order;  // compute phases per rank, in end order
  int transfers = 0;
  TimeNs transfer_time;
};

struct SimRun {
  TimeNs end;
  Recorder rec;
};

SimRun simulate(const SyntheticPipeline& pipeline) {
  const ir::Program program = build_synthetic_program(pipeline);
  NoCostModel cost;
  engine::Simulator sim(program, cost);
  SimRun run;
  sim.add_observer(&run.rec);
  run.end = sim.run().end_time;
  return run;
}

SyntheticPipeline pipeline(ScheduleKind kind, int p, int v, int m, StageTimes t, TimeNs p2p = TimeNs::zero()) {
  SyntheticPipeline sp;
  sp.kind = kind;
  sp.shape = {.pp = p, .virtual_stages = v, .microbatches = m};
  sp.per_stage = {t};
  sp.p2p = p2p;
  return sp;
}

// ---------------------------------------------------------------- a. closed-form bubbles

TEST(SyntheticBubble, GPipeAndOneFOneBLoseExactlyPMinusOneOverM) {
  // Stage times t_f = 120, t_b = 240 (B 130 + W 110), communication free.
  const StageTimes t{TimeNs(120), TimeNs(130), TimeNs(110)};
  const int64_t per_mb = 120 + 130 + 110;
  for (ScheduleKind kind : {GPIPE, ONE_F_ONE_B}) {
    for (auto [p, m] : {std::pair{2, 2}, {4, 4}, {4, 8}, {8, 8}, {8, 64}, {3, 30}, {16, 16}, {5, 3}}) {
      SCOPED_TRACE(lacuna::scenario::ScheduleKind_Name(kind) + " p=" + std::to_string(p) + " m=" + std::to_string(m));
      const SimRun run = simulate(pipeline(kind, p, 1, m, t));
      const int64_t ideal = m * per_mb;
      // (T − ideal)/ideal = (p−1)/m  ⇔  T − ideal = (p−1)·(t_f + t_b): exact in ns.
      EXPECT_EQ(run.end.count() - ideal, (p - 1) * per_mb);
    }
  }
}

TEST(SyntheticBubble, InterleavedLosesPMinusOneOverVM) {
  // Whole-stage times 120 / 240 split evenly over v chunks (divisible for v ≤ 4).
  for (auto [p, m, v] : {std::tuple{2, 2, 2}, {4, 4, 2}, {4, 8, 2}, {4, 16, 4}, {8, 8, 2}, {8, 32, 3}, {3, 9, 3},
                         {8, 64, 4}}) {
    SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) + " v=" + std::to_string(v));
    const StageTimes chunk{TimeNs(120 / v), TimeNs(120 / v), TimeNs(120 / v)};
    const SimRun run = simulate(pipeline(INTERLEAVED_1F1B, p, v, m, chunk));
    const int64_t stage_per_mb = 360;
    const int64_t ideal = m * stage_per_mb;
    // (T − ideal)/ideal = (p−1)/(v·m)  ⇔  v·(T − ideal) = (p−1)·(t_f + t_b).
    EXPECT_EQ(v * (run.end.count() - ideal), (p - 1) * stage_per_mb);
  }
}

TEST(SyntheticBubble, ZbH1LosesPMinusOneTimesFPlusBMinusW) {
  for (StageTimes t : {StageTimes{TimeNs(100), TimeNs(100), TimeNs(100)},
                       StageTimes{TimeNs(100), TimeNs(110), TimeNs(70)}}) {
    const int64_t f = t.forward.count(), b = t.backward_input.count(), w = t.backward_weight.count();
    for (auto [p, m] : {std::pair{2, 2}, {4, 4}, {4, 8}, {8, 24}, {3, 30}, {16, 32}}) {
      SCOPED_TRACE("F=" + std::to_string(f) + " B=" + std::to_string(b) + " W=" + std::to_string(w) +
                   " p=" + std::to_string(p) + " m=" + std::to_string(m));
      const SimRun run = simulate(pipeline(ZB_H1, p, 1, m, t));
      EXPECT_EQ(run.end.count() - m * (f + b + w), (p - 1) * (f + b - w));
    }
  }
}

// ---------------------------------------------------------------- b. Zero Bubble Table 9 → Table 5

struct ZbRow {
  const char* model;
  int layers;  // transformer layers, Zero Bubble Table 3
  int p, m;
  double f, b, w, comm;                  // ms, Table 9
  double one_f_one_b, interleaved, zbh1;  // published bubble rates, Table 5
};

constexpr ZbRow kZbRows[] = {
    {"1.5B", 22, 8, 24, 18.522, 18.086, 9.337, 0.601, 0.2431, 0.1055, 0.1585},
    {"1.5B", 22, 8, 32, 18.513, 18.086, 9.331, 0.626, 0.1985, 0.0818, 0.1242},
    {"1.5B", 22, 8, 64, 18.546, 18.097, 9.321, 0.762, 0.1240, 0.0443, 0.0674},
    {"6.2B", 30, 8, 24, 29.718, 29.444, 19.927, 0.527, 0.2347, 0.0808, 0.1323},
    {"14.6B", 46, 16, 48, 11.347, 11.248, 8.132, 0.377, 0.2552, 0.1104, 0.1397},
    {"28.3B", 62, 32, 96, 10.419, 10.207, 7.715, 0.408, 0.2646, 0.1493, 0.1421},
};

// The paper's bubble rate: (cost − m·(T_F + T_B + T_W)) / cost.
double bubble_rate(const ZbRow& row, int v, ScheduleKind kind, bool with_comm) {
  const StageTimes t{TimeNs::from_ms(row.f / v), TimeNs::from_ms(row.b / v), TimeNs::from_ms(row.w / v)};
  const SimRun run = simulate(
      pipeline(kind, row.p, v, row.m, t, with_comm ? TimeNs::from_ms(row.comm) : TimeNs::zero()));
  const double ideal = static_cast<double>(row.m * v) * static_cast<double>((t.forward + t.backward_input + t.backward_weight).count());
  const double cost = static_cast<double>(run.end.count());
  return (cost - ideal) / cost;
}

TEST(ZeroBubbleTable5, OneFOneBAndZbH1MatchThePublishedBubbleRates) {
  // Requirement: within 0.01. With T_comm as overlapped latency between
  // dependent passes (the paper's model), both columns agree to the 4
  // published digits, so the check is tighter.
  for (const ZbRow& row : kZbRows) {
    SCOPED_TRACE(std::string(row.model) + " p=" + std::to_string(row.p) + " m=" + std::to_string(row.m));
    EXPECT_NEAR(bubble_rate(row, 1, ONE_F_ONE_B, true), row.one_f_one_b, 0.0006);
    EXPECT_NEAR(bubble_rate(row, 1, ZB_H1, true), row.zbh1, 0.0006);
  }
}

TEST(ZeroBubbleTable5, OneFOneBNeedsCommunicationToReachThePublishedRate) {
  // Why the 1F1B column needs T_comm: its steady state is a round trip
  // through all stages, so each microbatch costs F + B + W + 2·T_comm.
  for (const ZbRow& row : kZbRows) {
    SCOPED_TRACE(std::string(row.model) + " m=" + std::to_string(row.m));
    const double free = bubble_rate(row, 1, ONE_F_ONE_B, false);
    EXPECT_NEAR(free, static_cast<double>(row.p - 1) / (row.m + row.p - 1), 1e-6);
    EXPECT_LT(free, row.one_f_one_b - 0.002);
  }
}

// 1F1B-I: the paper's interleaved baseline splits each stage into as many
// chunks as it has layer-equivalents. Its models have 22/30/46/62 layers plus
// the embedding and the output layer counted as one layer each (so that every
// stage holds the same work): v = (layers + 2) / p = 3, 3, 3, 4, 3, 2. This v
// is read off the model shape, the same rule for every row, not fitted. The
// layer counts were recalled from the paper's Table 3 and not re-read from the
// primary source in this session (docs/schedules.md).
int zb_interleaved_chunks(const ZbRow& row) { return (row.layers + 2) / row.p; }

TEST(ZeroBubbleTable5, InterleavedWithOneLayerPerChunkMatchesThePublishedRates) {
  for (const ZbRow& row : kZbRows) {
    SCOPED_TRACE(std::string(row.model) + " p=" + std::to_string(row.p) + " m=" + std::to_string(row.m));
    ASSERT_EQ((row.layers + 2) % row.p, 0);
    const int v = zb_interleaved_chunks(row);
    EXPECT_NEAR(bubble_rate(row, v, INTERLEAVED_1F1B, true), row.interleaved, 0.01);
  }
}

// Without communication the interleaved bubble is (p−1)(F+B+W)/v per stage,
// and T_comm only adds to it.
TEST(ZeroBubbleTable5, InterleavedFollowsTheClosedFormWithoutCommunication) {
  for (const ZbRow& row : kZbRows) {
    SCOPED_TRACE(std::string(row.model) + " m=" + std::to_string(row.m));
    for (int v : {2, zb_interleaved_chunks(row)}) {
      const double free = bubble_rate(row, v, INTERLEAVED_1F1B, false);
      const double stage = row.f + row.b + row.w;
      const double cost = row.m * stage + (row.p - 1) * stage / v;
      EXPECT_NEAR(free, (cost - row.m * stage) / cost, 1e-5);
      EXPECT_GT(bubble_rate(row, v, INTERLEAVED_1F1B, true), free);
    }
  }
}

TEST(ZeroBubbleTable5, PrintsTheReproduction) {
  for (const ZbRow& row : kZbRows) {
    const int v = zb_interleaved_chunks(row);
    std::printf("  %-5s p=%-2d m=%-2d  1F1B %.4f (pub %.4f)  1F1B-I v=%d %.4f (pub %.4f)  ZB-H1 %.4f (pub %.4f)\n",
                row.model, row.p, row.m, bubble_rate(row, 1, ONE_F_ONE_B, true), row.one_f_one_b, v,
                bubble_rate(row, v, INTERLEAVED_1F1B, true), row.interleaved, bubble_rate(row, 1, ZB_H1, true),
                row.zbh1);
  }
}

// ---------------------------------------------------------------- c. invariants over random shapes

// Independent timing of the same schedule: every pass starts when its rank is
// free and its producer on the neighbouring virtual stage ended + p2p. Equal to
// the engine's run whenever p2p ≤ every pass time (transfers never queue).
TimeNs reference_makespan(const SyntheticPipeline& sp) {
  const auto sched = build_schedule(sp.kind, sp.shape);
  const int p = sp.shape.pp, stages = p * sp.shape.virtual_stages;
  std::map<std::tuple<int, int, int>, TimeNs> end;  // (kind 0 F / 1 B / 2 W, mb, stage)
  std::vector<size_t> next(p, 0);
  std::vector<TimeNs> free_at(p);
  size_t left = 0;
  for (const auto& r : sched) left += r.size();
  while (left > 0) {
    bool progress = false;
    for (int r = 0; r < p; ++r) {
      const StageTimes& t = sp.per_stage.size() == 1 ? sp.per_stage[0] : sp.per_stage[r];
      while (next[r] < sched[r].size()) {
        const Action& a = sched[r][next[r]];
        const int vs = virtual_stage(sp.shape, r, a.chunk);
        int kind = a.pass == Pass::kForward ? 0 : a.pass == Pass::kBackwardWeight ? 2 : 1;
        TimeNs ready = free_at[r], duration = t.forward;
        std::tuple<int, int, int> dep{-1, 0, 0};
        if (kind == 0 && vs > 0) dep = {0, a.microbatch, vs - 1};
        if (kind == 1 && vs < stages - 1) dep = {1, a.microbatch, vs + 1};
        if (kind == 1) duration = t.backward_input + (a.pass == Pass::kBackward ? t.backward_weight : TimeNs(0));
        if (kind == 2) duration = t.backward_weight;
        if (std::get<0>(dep) >= 0) {
          auto it = end.find(dep);
          if (it == end.end()) break;
          ready = std::max(ready, TimeNs(it->second + sp.p2p));
        }
        free_at[r] = ready + duration;
        end[{kind, a.microbatch, vs}] = free_at[r];
        ++next[r];
        --left;
        progress = true;
      }
    }
    if (!progress) {
      ADD_FAILURE() << "reference schedule deadlocks";
      return TimeNs::zero();
    }
  }
  return *std::max_element(free_at.begin(), free_at.end());
}

TEST(SyntheticInvariants, RandomShapesRespectDependenciesAndBounds) {
  std::mt19937 rng(7);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (ScheduleKind kind : {GPIPE, ONE_F_ONE_B, INTERLEAVED_1F1B, ZB_H1}) {
    for (int iter = 0; iter < 25; ++iter) {
      SyntheticPipeline sp;
      sp.kind = kind;
      sp.shape.pp = uni(kind == INTERLEAVED_1F1B ? 2 : 1, 8);
      sp.shape.virtual_stages = kind == INTERLEAVED_1F1B ? uni(2, 3) : 1;
      sp.shape.microbatches = kind == INTERLEAVED_1F1B ? sp.shape.pp * uni(1, 4) : uni(1, 20);
      int64_t shortest = 1 << 30;
      for (int r = 0; r < sp.shape.pp; ++r) {
        StageTimes t{TimeNs(uni(50, 150)), TimeNs(uni(50, 200)), TimeNs(uni(20, 120))};
        shortest = std::min({shortest, t.forward.count(), t.backward_input.count()});
        sp.per_stage.push_back(t);
      }
      sp.p2p = TimeNs(iter % 3 == 0 ? 0 : uni(1, static_cast<int>(shortest)));
      const int p = sp.shape.pp, v = sp.shape.virtual_stages, m = sp.shape.microbatches, stages = p * v;
      SCOPED_TRACE(lacuna::scenario::ScheduleKind_Name(kind) + " p=" + std::to_string(p) + " v=" +
                   std::to_string(v) + " m=" + std::to_string(m) + " p2p=" + std::to_string(sp.p2p.count()));

      SimRun run;
      ASSERT_NO_THROW(run = simulate(sp));  // no deadlock, tags matched
      EXPECT_EQ(run.end, reference_makespan(sp));

      // One transfer per stage boundary per microbatch, each way.
      EXPECT_EQ(run.rec.transfers, 2 * (stages - 1) * m);

      auto pass = [&](int stage, ir::Phase phase, int mb) {
        return run.rec.passes.at({stage % p, phase, mb, stage / p});
      };
      for (int mb = 0; mb < m; ++mb) {
        for (int vs = 0; vs < stages; ++vs) {
          const Span f = pass(vs, ir::FORWARD, mb), b = pass(vs, ir::BACKWARD_INPUT, mb),
                     w = pass(vs, ir::BACKWARD_WEIGHT, mb);
          EXPECT_LE(f.end, b.start);
          EXPECT_LE(b.end, w.start);
          if (vs > 0) {
            EXPECT_GE(f.start, pass(vs - 1, ir::FORWARD, mb).end + sp.p2p);
          }
          if (vs + 1 < stages) {
            // Split backward sends after B; unsplit after W.
            const ir::Phase sender = kind == ZB_H1 ? ir::BACKWARD_INPUT : ir::BACKWARD_WEIGHT;
            EXPECT_GE(b.start, pass(vs + 1, sender, mb).end + sp.p2p);
          }
        }
      }
      // Activations in flight on each rank, in the order its passes ran.
      for (int r = 0; r < p; ++r) {
        int held = 0, peak = 0;
        for (ir::Phase ph : run.rec.order[r]) {
          if (ph == ir::FORWARD) peak = std::max(peak, ++held);
          if (ph == ir::BACKWARD_INPUT) --held;
        }
        int bound = m;
        if (kind == ONE_F_ONE_B || kind == ZB_H1) bound = std::min(p - r, m);
        if (kind == INTERLEAVED_1F1B) bound = std::min((p - r - 1) * 2 + (v - 1) * p + 1, m * v);
        EXPECT_LE(peak, bound) << "rank " << r;
      }
    }
  }
}

TEST(SyntheticInvariants, RunsAreDeterministic) {
  SyntheticPipeline sp = pipeline(INTERLEAVED_1F1B, 4, 2, 8, {TimeNs(70), TimeNs(90), TimeNs(40)}, TimeNs(13));
  const SimRun a = simulate(sp), b = simulate(sp);
  EXPECT_EQ(a.end, b.end);
  ASSERT_EQ(a.rec.passes.size(), b.rec.passes.size());
  for (const auto& [key, span] : a.rec.passes) {
    EXPECT_EQ(span.start, b.rec.passes.at(key).start);
    EXPECT_EQ(span.end, b.rec.passes.at(key).end);
  }
}

// ---------------------------------------------------------------- program structure and errors

TEST(SyntheticProgram, DescribesTheRunAndItsPeers) {
  const ir::Program prog =
      build_synthetic_program(pipeline(INTERLEAVED_1F1B, 3, 2, 6, {TimeNs(10), TimeNs(10), TimeNs(10)}, TimeNs(2)));
  EXPECT_EQ(prog.info().num_ranks(), 3);
  EXPECT_EQ(prog.info().pp(), 3);
  EXPECT_EQ(prog.info().virtual_stages(), 2);
  EXPECT_EQ(prog.info().num_microbatches(), 6);
  EXPECT_EQ(prog.info().schedule(), INTERLEAVED_1F1B);
  ASSERT_EQ(prog.peer_slots_size(), 2);
  EXPECT_EQ(prog.peer_slots(0).name(), "pp_next");
  ASSERT_EQ(prog.ranks_size(), 3);
  EXPECT_THAT(prog.ranks(2).peer(), ::testing::ElementsAre(0, 1));  // cyclic
  EXPECT_THAT(prog.ranks(0).peer(), ::testing::ElementsAre(1, 2));
  for (const ir::RankClass& cls : prog.classes()) {
    ASSERT_EQ(cls.streams_size(), 5);
    EXPECT_EQ(cls.streams(0).kind(), ir::COMPUTE);
    for (const ir::Op& op : cls.streams(0).ops()) {
      if (op.has_compute()) {
        EXPECT_GT(op.compute().fixed_duration_ns(), 0);
      }
    }
  }
  // Rank 0 receives activations only for its chunk 1 (virtual stage 3), never for stage 0.
  int recvs = 0;
  for (const ir::Op& op : prog.classes(0).streams(2).ops()) {
    if (op.has_recv()) {
      ++recvs;
      EXPECT_EQ(op.chunk(), 1);
    }
  }
  EXPECT_EQ(recvs, 6);
}

TEST(SyntheticProgram, RejectsBadTimes) {
  SyntheticPipeline sp = pipeline(ONE_F_ONE_B, 4, 1, 8, {TimeNs(10), TimeNs(0), TimeNs(10)});
  EXPECT_THROW(build_synthetic_program(sp), Error);
  sp.per_stage = {{TimeNs(1), TimeNs(1), TimeNs(1)}, {TimeNs(1), TimeNs(1), TimeNs(1)}};
  EXPECT_THROW(build_synthetic_program(sp), Error);  // 2 entries for 4 ranks
  sp.per_stage.resize(1);
  sp.p2p = TimeNs(-1);
  EXPECT_THROW(build_synthetic_program(sp), Error);
  sp.p2p = TimeNs(0);
  sp.shape.virtual_stages = 2;
  EXPECT_THROW(build_synthetic_program(sp), Error);  // shape errors come from build_schedule
}

}  // namespace
}  // namespace lacuna::schedule
