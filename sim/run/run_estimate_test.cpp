// The run-level estimate (sim/run/run_estimate.h): samples multiply the
// engine's state only when they really run side by side, the flow network adds
// its per-rank state, and the refusal names the option and the parts.
#include "sim/run/run_estimate.h"

#include <gtest/gtest.h>

#include "sim/core/error.h"
#include "sim/engine/pipeline_program.h"

namespace lacuna::run {
namespace {

using engine::testing::make_pipeline_program;
using engine::testing::PipelineSpec;

ir::Program program() {
  PipelineSpec spec;
  spec.tp = 2;
  spec.pp = 2;
  spec.dp = 2;
  return make_pipeline_program(spec);
}

TEST(RunEstimateRun, SamplesRunSideBySideOnlyWhenTheProgramDraws) {
  ir::Program p = program();
  engine::SimulationOptions base;
  SamplingPlan sampling;
  sampling.samples = 8;
  sampling.jobs = 3;
  const RunEstimate one = estimate_run(p, base, SamplingPlan{}, NetworkMode::kAnalytic);
  const RunEstimate fixed = estimate_run(p, base, sampling, NetworkMode::kAnalytic);
  EXPECT_EQ(fixed.concurrent_runs, 1) << "without randomness the observed run stands for all samples";
  EXPECT_EQ(fixed.events, one.events);
  EXPECT_EQ(fixed.total(), one.total());

  p.mutable_variability()->set_gpu_speed_cv(0.05);
  const RunEstimate drawn = estimate_run(p, base, sampling, NetworkMode::kAnalytic);
  EXPECT_EQ(drawn.concurrent_runs, 3) << "-j 3 bounds the samples in flight";
  EXPECT_EQ(drawn.events, 8 * drawn.engine.events);
  EXPECT_EQ(drawn.engine_state.count(), 3 * drawn.engine.state.count());
  EXPECT_GT(drawn.sample_programs.count(), 0) << "each sample copies the program";
  EXPECT_EQ(drawn.accounting, one.accounting) << "only the observed run is accounted";
}

TEST(RunEstimateRun, TheFlowNetworkAddsItsStatePerGpuAndPerSimulatedRank) {
  const ir::Program p = program();
  engine::SimulationOptions base;
  const RunEstimate analytic = estimate_run(p, base, SamplingPlan{}, NetworkMode::kAnalytic);
  const RunEstimate flow = estimate_run(p, base, SamplingPlan{}, NetworkMode::kFlow);
  EXPECT_EQ(analytic.network.count(), 0);
  EXPECT_EQ(flow.network.count(), (kFlowBytesPerClusterGpu + kFlowBytesPerSimulatedRank) * p.ranks_size());
  EXPECT_EQ(flow.total() - analytic.total(), flow.network);
  engine::SimulationOptions folded;
  folded.fold = true;
  const RunEstimate f = estimate_run(p, folded, SamplingPlan{}, NetworkMode::kFlow);
  EXPECT_EQ(f.network.count(), kFlowBytesPerClusterGpu * p.ranks_size() + kFlowBytesPerSimulatedRank * f.engine.simulated_ranks)
      << "a folded run still builds the whole cluster's links";
}

TEST(RunEstimateRun, ARunOverTheLimitIsRefusedByName) {
  const RunEstimate e = estimate_run(program(), {}, SamplingPlan{}, NetworkMode::kFlow);
  const Bytes resident(1'000'000);
  EXPECT_NO_THROW(check_run_memory(e, resident, Bytes::zero(), "--max-memory-gb")) << "0: no limit";
  EXPECT_NO_THROW(check_run_memory(e, resident, Bytes(resident + e.total()), "--max-memory-gb"));
  try {
    check_run_memory(e, resident, Bytes(resident + e.total() - Bytes(1)), "--max-memory-gb");
    FAIL() << "one byte over the limit must be refused";
  } catch (const Error& err) {
    const std::string m = err.what();
    EXPECT_NE(m.find("--max-memory-gb"), std::string::npos) << m;
    EXPECT_NE(m.find("engine state"), std::string::npos) << m;
    EXPECT_NE(m.find("for 8 of 8 ranks"), std::string::npos) << m;
    EXPECT_NE(m.find("`fold`"), std::string::npos) << m;
  }
}

TEST(RunEstimateRun, TheLimitFromTheCommandLine) {
  EXPECT_EQ(memory_limit_from_gb(0), Bytes::zero());
  EXPECT_EQ(memory_limit_from_gb(2.5), Bytes(2'500'000'000));
  EXPECT_EQ(memory_limit_from_gb(-1), default_memory_limit());
  EXPECT_GT(default_memory_limit().count(), 0) << "Linux reports its physical memory";
  EXPECT_GT(resident_bytes().count(), 0) << "this process holds something";
}

}  // namespace
}  // namespace lacuna::run
