// Fluid solver throughput: activities started and ended per second.
//  BM_FluidAlone: every activity alone on its links (a TP collective inside
//    one node): the no-solve path.
//  BM_FluidRailChurn/N: one rail of N nodes carrying a long ring activity over
//    every NIC plus point-to-point activities starting and ending between
//    neighbours: every change re-solves the whole rail (the DP + PP pattern
//    of a Megatron job).
// Each iteration ends one activity and starts another at the same time, then
// settles (as the engine's settle event does): one solve per iteration.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "sim/network/fluid.h"

namespace lacuna::network {
namespace {

void BM_FluidAlone(benchmark::State& state) {
  const int nodes = 64, gpus = 8;
  std::vector<double> caps(static_cast<size_t>(nodes * gpus * 2), 369e9);
  FluidNetwork net(caps, std::vector<uint8_t>(caps.size(), 1));
  std::vector<std::vector<Usage>> usage(nodes);
  for (int n = 0; n < nodes; ++n) {
    for (int g = 0; g < gpus * 2; ++g) usage[n].push_back(Usage{static_cast<LinkId>(n * gpus * 2 + g), 1.75});
  }
  TimeNs now;
  std::vector<FlowId> live(nodes);
  for (int n = 0; n < nodes; ++n) live[n] = net.add(now, 1e6, usage[n]);
  net.settle(now);
  net.clear_reports();
  int64_t ops = 0;
  int n = 0;
  for (auto _ : state) {
    now += 1_us;
    net.remove(now, live[n]);
    live[n] = net.add(now, 1e6, usage[n]);
    net.settle(now);
    net.clear_reports();
    n = (n + 1) % nodes;
    ops += 2;
  }
  state.SetItemsProcessed(ops);
}
BENCHMARK(BM_FluidAlone);

void BM_FluidRailChurn(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  // Per node: NIC up (2n), NIC down (2n + 1).
  std::vector<double> caps(static_cast<size_t>(2 * nodes), 47.5e9);
  FluidNetwork net(caps, std::vector<uint8_t>(caps.size(), 1));
  std::vector<Usage> ring;
  for (int i = 0; i < 2 * nodes; ++i) ring.push_back(Usage{static_cast<LinkId>(i), 2.0 * (nodes - 1) / nodes});
  std::vector<std::vector<Usage>> p2p(nodes);
  for (int i = 0; i < nodes; ++i) {
    p2p[i] = {Usage{static_cast<LinkId>(2 * i), 1.0}, Usage{static_cast<LinkId>(2 * ((i + 1) % nodes) + 1), 1.0}};
  }
  TimeNs now;
  net.add(now, 1e15, ring);
  std::mt19937 rng(1);
  std::vector<FlowId> live;
  std::vector<int> where;
  for (int i = 0; i < nodes; ++i) {
    live.push_back(net.add(now, 1e12, p2p[i]));
    where.push_back(i);
  }
  net.settle(now);
  net.clear_reports();
  int64_t ops = 0;
  for (auto _ : state) {
    now += 1_us;
    const size_t k = rng() % live.size();
    net.remove(now, live[k]);
    where[k] = static_cast<int>(rng() % static_cast<unsigned>(nodes));
    live[k] = net.add(now, 1e12, p2p[where[k]]);
    net.settle(now);
    net.clear_reports();
    ops += 2;
  }
  state.SetItemsProcessed(ops);
  state.counters["flows_per_solve"] =
      static_cast<double>(net.counters().solved_flows) / static_cast<double>(std::max<uint64_t>(1, net.counters().solves));
}
BENCHMARK(BM_FluidRailChurn)->Arg(8)->Arg(48)->Arg(384);

}  // namespace
}  // namespace lacuna::network
