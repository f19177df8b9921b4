// Compiled programs run through the engine: no deadlock, no mismatched
// communication, for every schedule and communication feature.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "sim/compiler/compile.h"
#include "sim/compiler/compiler_test_support.h"
#include "sim/engine/simulator.h"

namespace lacuna::compiler {
namespace {

using testing::make_scenario;
using testing::Small;

struct Variant {
  const char* name;
  Small s;
};

std::vector<Variant> variants() {
  std::vector<Variant> out;
  for (auto [name, kind, v] : {std::tuple{"gpipe", scenario::GPIPE, 1}, std::tuple{"1f1b", scenario::ONE_F_ONE_B, 1},
                               std::tuple{"interleaved", scenario::INTERLEAVED_1F1B, 2},
                               std::tuple{"zb-h1", scenario::ZB_H1, 1}}) {
    Small s;
    s.schedule = kind;
    s.v = v;
    out.push_back({name, s});
    s.sp = true;
    out.push_back({name, s});
    Small r = s;
    r.recompute = scenario::RECOMPUTE_FULL;
    r.overlap_grad = false;
    r.overlap_param = false;
    out.push_back({name, r});
    Small c = s;
    c.cp = 2;
    c.dp = 1;
    c.global_batch = 8;
    c.recompute = scenario::RECOMPUTE_SELECTIVE;
    c.rank_order = "tp-dp-pp-cp";
    out.push_back({name, c});
    Small d = s;
    d.distributed_optimizer = false;
    d.parallel_attn = true;
    d.pp = 4;
    d.layers = 8;
    d.global_batch = 32;
    d.gpus_per_node = 4;
    out.push_back({name, d});
  }
  return out;
}

TEST(CompileSimulate, SmallProgramsRunToCompletion) {
  const testing::TrivialCost cost;
  for (const auto& [name, s] : variants()) {
    SCOPED_TRACE(std::string(name) + " sp=" + std::to_string(s.sp) + " cp=" + std::to_string(s.cp) +
                 " pp=" + std::to_string(s.pp) + " recompute=" + std::to_string(s.recompute));
    const ir::Program p = compile(make_scenario(s));
    engine::Simulator full(p, cost);
    const auto r = full.run();
    EXPECT_GT(r.end_time.count(), 0);
    EXPECT_EQ(static_cast<int>(r.simulated_ranks.size()), p.info().num_ranks());
    // Ranks of one class are symmetric: one representative each gives the
    // same iteration.
    engine::Simulator folded(p, cost, {.fold = true});
    const auto f = folded.run();
    EXPECT_EQ(f.end_time, r.end_time);
    EXPECT_LE(f.simulated_ranks.size(), r.simulated_ranks.size());
  }
}

TEST(CompileSimulate, PipelineBubbleShrinksWithInterleaving) {
  const testing::TrivialCost cost;
  Small s;
  s.pp = 4;
  s.layers = 8;
  s.tp = 1;
  s.dp = 1;
  s.global_batch = 16;
  s.micro_batch = 1;
  s.gpus_per_node = 4;
  const auto plain = engine::Simulator(compile(make_scenario(s)), cost).run().end_time;
  s.schedule = scenario::INTERLEAVED_1F1B;
  s.v = 2;
  const auto interleaved = engine::Simulator(compile(make_scenario(s)), cost).run().end_time;
  EXPECT_LT(interleaved, plain);
}

TEST(CompileSimulate, Gpt3On3072GpusCompilesToEightClasses) {
  const auto t0 = std::chrono::steady_clock::now();
  const ir::Program p = compile(make_scenario(testing::gpt3_3072()));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(p.info().num_ranks(), 3072);
  ASSERT_EQ(p.ranks_size(), 3072);
  ASSERT_EQ(p.classes_size(), 8);
  EXPECT_EQ(p.info().num_microbatches(), 16);
  for (const auto& c : p.classes()) {
    const int64_t ops = testing::total_ops(c);
    EXPECT_GE(ops, 10'000) << c.name();
    EXPECT_LE(ops, 25'000) << c.name();
    std::printf("  %s: %lld ops, %d streams\n", c.name().c_str(), static_cast<long long>(ops), c.streams_size());
  }
  const auto bytes = p.ByteSizeLong();
  std::printf("  GPT-3 175B / 3072 GPUs: compiled in %.3f s, program %.1f MB\n", seconds, bytes / 1e6);
  EXPECT_LT(seconds, 10.0);
  // 3,072 ranks · 8 pipeline stages: TP groups of 8, DP groups of 48 (with
  // cp = 1 the dp_cp slot binds to the same DP groups), one embedding pair
  // per (tp, dp) between the first and last stage, and with the distributed
  // optimizer one world group for the gradient norm.
  EXPECT_EQ(p.groups_size(), 3072 / 8 + 3072 / 48 + 8 * 48 + 1);
}

TEST(CompileSimulate, Gpt3On3072GpusSimulatesFolded) {
  const ir::Program p = compile(make_scenario(testing::gpt3_3072()));
  const auto cost = cost::make_analytic_cost_model(p.cluster(), scenario::BF16);
  const auto t0 = std::chrono::steady_clock::now();
  engine::Simulator sim(p, *cost, {.fold = true});
  const auto r = sim.run();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double iteration = r.end_time.seconds();
  const double mfu = p.info().model_flops_per_iteration() / (iteration * 3072 * p.info().peak_flops_per_gpu());
  std::printf("  GPT-3 175B / 3072 GPUs: iteration %.3f s, MFU %.1f %%, simulated %zu ranks in %.2f s\n", iteration,
              100 * mfu, r.simulated_ranks.size(), seconds);
  EXPECT_GT(mfu, 0.0);
  EXPECT_LT(mfu, 1.0);  // no iteration beats the GPUs' peak
}

}  // namespace
}  // namespace lacuna::compiler
