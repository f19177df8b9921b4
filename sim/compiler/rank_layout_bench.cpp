// The rank layout at scale (issue 17: compile linear in ranks): TP 8, PP 8
// and DP = state.range(0), the GPT-3 175B plan grown to 65,536, 262,144 and
// 999,424 GPUs. items_per_second = ranks laid out per second, which stays
// flat when the layout is linear in ranks.
#include <benchmark/benchmark.h>

#include "sim/compiler/rank_layout.h"

namespace lacuna::compiler {
namespace {

void BM_RankLayout(benchmark::State& state) {
  const ParallelDims dims{8, 1, static_cast<int32_t>(state.range(0)), 8};
  const RankLayout layout(dims, "tp-cp-dp-pp");
  for (auto _ : state) {
    ir::Program program;
    add_rank_layout(layout, 8, program, /*world_grad_norm=*/false);
    benchmark::DoNotOptimize(program.groups_size());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * dims.world());
}
BENCHMARK(BM_RankLayout)->Arg(1024)->Arg(4096)->Arg(15616)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace lacuna::compiler
