// The executed op graph and its critical path against brute force: on small
// random programs every source-to-sink path is enumerated; the longest is the
// iteration time, the recorded critical path is one of them, every node's
// slack is the iteration time minus the longest path through it, and the
// pruned recorder finds the same path as the whole graph.
#include "sim/report/observers/op_graph_recorder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "sim/engine/pipeline_program.h"
#include "sim/engine/simulator.h"
#include "sim/report/analyses/slack.h"

namespace lacuna::report {
namespace {

using engine::testing::add_class;
using engine::testing::add_collective;
using engine::testing::add_compute;
using engine::testing::add_group;
using engine::testing::add_rank;
using engine::testing::add_record;
using engine::testing::add_wait;
using engine::testing::ClosedFormCost;
using engine::testing::PipelineSpec;

struct Recorded {
  TimeNs end;
  OpGraph graph;
  CriticalPath path;         // from the whole graph
  CriticalPath pruned_path;  // from the pruned recorder
  uint64_t pruned_peak = 0;
  uint64_t pruned_created = 0;
};

Recorded record(const ir::Program& p, engine::SimulationOptions options = {}) {
  ClosedFormCost cost;
  engine::Simulator sim(p, cost, options);
  OpGraphRecorder whole(OpGraphRecorder::kAlways), pruned(0);
  sim.add_observer(&whole);
  sim.add_observer(&pruned);
  Recorded r;
  r.end = sim.run().end_time;
  r.graph = *whole.graph();
  r.path = whole.path();
  r.pruned_path = pruned.path();
  r.pruned_peak = pruned.peak_live_nodes();
  r.pruned_created = pruned.nodes_created();
  return r;
}

// Every source-to-sink path, enumerated: the longest, how many, and for each
// node the longest path through it. Gives up (paths = 0) beyond `limit`.
struct Enumeration {
  int64_t longest = 0;
  uint64_t paths = 0;
  std::vector<int64_t> through;
};

Enumeration enumerate(const OpGraph& g, uint64_t limit) {
  const size_t n = g.nodes.size();
  std::vector<std::vector<uint32_t>> out(n);
  std::vector<bool> has_in(n, false);
  for (const auto& [a, b] : g.edges) {
    out[a].push_back(b);
    has_in[b] = true;
  }
  // Count first (memoized), so that an explosion is skipped, not waited for.
  std::vector<uint64_t> count(n, 0);
  std::function<uint64_t(uint32_t)> paths_from = [&](uint32_t v) -> uint64_t {
    if (count[v] != 0) return count[v];
    uint64_t c = out[v].empty() ? 1 : 0;
    for (uint32_t w : out[v]) c = std::min<uint64_t>(c + paths_from(w), limit + 1);
    return count[v] = c;
  };
  uint64_t total = 0;
  for (uint32_t v = 0; v < n; ++v) {
    if (!has_in[v]) total = std::min<uint64_t>(total + paths_from(v), limit + 1);
  }
  Enumeration e;
  if (total > limit) return e;
  e.through.assign(n, 0);
  std::vector<uint32_t> stack;
  std::function<void(uint32_t, int64_t)> walk = [&](uint32_t v, int64_t length) {
    stack.push_back(v);
    length += g.nodes[v].duration().count();
    if (out[v].empty()) {
      ++e.paths;
      e.longest = std::max(e.longest, length);
      for (uint32_t u : stack) e.through[u] = std::max(e.through[u], length);
    }
    for (uint32_t w : out[v]) walk(w, length);
    stack.pop_back();
  };
  for (uint32_t v = 0; v < n; ++v) {
    if (!has_in[v]) walk(v, 0);
  }
  return e;
}

// The checks every recorded run must pass; returns whether brute force ran.
bool check(const Recorded& r, const std::string& what) {
  SCOPED_TRACE(what);
  const OpGraph& g = r.graph;
  std::set<std::pair<uint32_t, uint32_t>> edges(g.edges.begin(), g.edges.end());
  // Every binding predecessor is an edge of the graph and ended when its node started.
  for (uint32_t v = 0; v < g.nodes.size(); ++v) {
    const uint32_t u = g.nodes[v].pred;
    if (u == kNoNode) {
      EXPECT_EQ(g.nodes[v].start, TimeNs::zero()) << "node " << v;
      continue;
    }
    EXPECT_TRUE(edges.count({u, v})) << "binding edge " << u << " -> " << v << " is not in the graph";
    EXPECT_EQ(g.nodes[u].end, g.nodes[v].start) << "binding edge " << u << " -> " << v << " is not tight";
  }
  // The critical path covers the iteration back to back.
  EXPECT_EQ(r.path.length, r.end);
  TimeNs t = TimeNs::zero(), sum = TimeNs::zero();
  for (const PathStep& s : r.path.steps) {
    EXPECT_EQ(s.start, t);
    t = s.end;
    sum += s.duration();
  }
  EXPECT_EQ(t, r.end);
  EXPECT_EQ(sum, r.end);
  // The pruned recorder finds the same path, keeping fewer nodes.
  EXPECT_EQ(r.pruned_path.length, r.path.length);
  EXPECT_EQ(r.pruned_path.steps.size(), r.path.steps.size());
  for (size_t i = 0; i < std::min(r.path.steps.size(), r.pruned_path.steps.size()); ++i) {
    const PathStep& a = r.path.steps[i];
    const PathStep& b = r.pruned_path.steps[i];
    EXPECT_TRUE(a.kind == b.kind && a.rank == b.rank && a.stream == b.stream && a.op == b.op && a.start == b.start &&
                a.end == b.end)
        << "step " << i;
  }
  EXPECT_LE(r.pruned_peak, r.pruned_created);

  // Earliest times reproduce the simulation; slack is >= 0, 0 on the path.
  const GraphTiming timing = time_graph(g);
  EXPECT_EQ(timing.longest, r.end);
  EXPECT_EQ(timing.mismatched_starts, 0u);
  for (uint32_t v = 0; v < g.nodes.size(); ++v) {
    EXPECT_GE(timing.slack[v], TimeNs::zero()) << "node " << v;
  }
  // The path's nodes: follow the binding chain from a node that ends last.
  for (uint32_t v = 0; v < g.nodes.size(); ++v) {
    if (g.nodes[v].end != r.end) continue;
    for (uint32_t u = v; u != kNoNode; u = g.nodes[u].pred) EXPECT_EQ(timing.slack[u], TimeNs::zero()) << "node " << u;
    break;
  }

  // Brute force.
  const Enumeration e = enumerate(g, 1000000);
  if (e.paths == 0) return false;
  EXPECT_EQ(e.longest, r.end.count());
  for (uint32_t v = 0; v < g.nodes.size(); ++v) {
    EXPECT_EQ(timing.slack[v].count(), r.end.count() - e.through[v]) << "node " << v;
  }
  return true;
}

ir::Program random_program(uint64_t seed, bool host) {
  std::mt19937_64 rng(seed);
  PipelineSpec spec;
  spec.tp = 1 + static_cast<int32_t>(rng() % 2);
  spec.pp = 1 + static_cast<int32_t>(rng() % 3);
  spec.dp = 1 + static_cast<int32_t>(rng() % 2);
  spec.microbatches = 1 + static_cast<int32_t>(rng() % 2);
  spec.layers_per_stage = 1 + static_cast<int32_t>(rng() % 2);
  spec.fixed_comm = rng() % 2 == 0;
  spec.seed = seed;
  ir::Program p = engine::testing::make_pipeline_program(spec);
  const auto slow = static_cast<int32_t>(rng() % static_cast<uint64_t>(p.ranks_size()));
  p.mutable_ranks(slow)->set_compute_time_scale(1.0 + static_cast<double>(rng() % 30) / 10.0);
  if (host) engine::testing::add_random_host_costs(p, seed, 3000, 4);
  return p;
}

TEST(OpGraph, CriticalPathIsABruteForceLongestPathOnRandomPrograms) {
  // Programs whose paths are too many to enumerate are still checked
  // otherwise; seeds go on until 20 were enumerated.
  int enumerated = 0;
  for (uint64_t seed = 1; seed <= 80 && enumerated < 20; ++seed) {
    const Recorded r = record(random_program(seed, /*host=*/seed % 2 == 0));
    enumerated += check(r, "seed " + std::to_string(seed)) ? 1 : 0;
  }
  EXPECT_EQ(enumerated, 20);
}

TEST(OpGraph, HoldsUnderInterferenceAndFold) {
  for (uint64_t seed = 31; seed <= 40; ++seed) {
    const ir::Program p = random_program(seed, seed % 2 == 1);
    check(record(p, {.compute_slowdown_under_comm = 0.5}), "interference, seed " + std::to_string(seed));
    check(record(p, {.fold = true}), "fold, seed " + std::to_string(seed));
  }
}

// Three ranks share one compute slot: each compute op after the first waits
// for the one before to release it, so the path runs through all of them.
TEST(OpGraph, ComputeSlotWaitsBindToTheReleasingOp) {
  ir::Program p;
  for (int r = 0; r < 3; ++r) {
    auto* c = add_class(p, "r" + std::to_string(r), 0, {"main"});
    add_compute(c->mutable_streams(0), 0, 100.0 * (r + 1));  // cost model: flops ns
    add_compute(c->mutable_streams(0), 0, 50.0);
    add_rank(p, r);
  }
  const Recorded r = record(p, {.compute_slots = 1});
  EXPECT_EQ(r.end, TimeNs(100 + 200 + 300 + 3 * 50));
  check(r, "one slot");
  EXPECT_EQ(r.path.steps.size(), 6u) << "every compute op holds the only slot in turn";
}

// A wait whose record came long before it still depends on that record (an
// edge that does not bind): delaying the record by more than the gap would
// delay the wait, so the record's slack is the gap.
TEST(OpGraph, WaitThatDidNotBlockKeepsItsRecordEdge) {
  ir::Program p;
  auto* c = add_class(p, "solo", 1, {"main", "side"});
  add_compute(c->mutable_streams(1), 100);
  add_record(c->mutable_streams(1), 0);
  add_compute(c->mutable_streams(0), 400);
  add_wait(c->mutable_streams(0), 0, 1);
  add_compute(c->mutable_streams(0), 50);
  add_rank(p, 0);
  const Recorded r = record(p);
  EXPECT_EQ(r.end, TimeNs(450));
  check(r, "early record");
  const GraphTiming t = time_graph(r.graph);
  for (uint32_t v = 0; v < r.graph.nodes.size(); ++v) {
    const GraphNode& n = r.graph.nodes[v];
    if (n.stream == 1) EXPECT_EQ(t.slack[v], TimeNs(300)) << "side stream op " << n.op;
  }
}

// One rank of a collective arrives 70 ns late: the path runs through its
// compute, then the collective.
TEST(OpGraph, CollectiveBindsToTheLastArrival) {
  ir::Program p;
  p.add_group_slots()->set_name("world");
  const int32_t g = add_group(p, ir::WORLD, {0, 1, 2});
  const int64_t compute[] = {30, 100, 20};
  for (int r = 0; r < 3; ++r) {
    auto* c = add_class(p, "r" + std::to_string(r), 0, {"main"});
    add_compute(c->mutable_streams(0), compute[r]);
    add_collective(c->mutable_streams(0), ir::ALL_REDUCE, 0, 1000, 5);
    add_rank(p, r, {g});
  }
  const Recorded r = record(p);
  check(r, "late rank 1");
  ASSERT_EQ(r.path.steps.size(), 2u);
  EXPECT_EQ(r.path.steps[0].rank, 1);
  EXPECT_EQ(r.path.steps[0].kind, NodeKind::kCompute);
  EXPECT_EQ(r.path.steps[1].kind, NodeKind::kCollective);
  EXPECT_EQ(r.path.steps[1].end, TimeNs(105));
}

TEST(OpGraph, PathsRepeatExactly) {
  const ir::Program p = random_program(7, true);
  const Recorded a = record(p), b = record(p);
  ASSERT_EQ(a.path.steps.size(), b.path.steps.size());
  for (size_t i = 0; i < a.path.steps.size(); ++i) {
    EXPECT_EQ(a.path.steps[i].rank, b.path.steps[i].rank);
    EXPECT_EQ(a.path.steps[i].op, b.path.steps[i].op);
    EXPECT_EQ(a.path.steps[i].end, b.path.steps[i].end);
  }
  EXPECT_EQ(a.graph.edges, b.graph.edges);
}

}  // namespace
}  // namespace lacuna::report
