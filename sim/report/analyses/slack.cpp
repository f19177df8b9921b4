#include "sim/report/analyses/slack.h"

#include <functional>
#include <limits>

#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/dag_shortest_paths.hpp>
#include <boost/graph/exception.hpp>
#include <boost/graph/reverse_graph.hpp>
#include <boost/property_map/property_map.hpp>
#include <boost/range/iterator_range.hpp>

#include "sim/core/error.h"

namespace lacuna::report {

namespace {

// Compressed sparse rows with in-edges: about 20 bytes per edge and 8 per
// vertex, for graphs of millions of ops.
using Graph = boost::compressed_sparse_row_graph<boost::bidirectionalS, boost::no_property, boost::no_property,
                                                 boost::no_property, uint32_t, uint32_t>;

constexpr int64_t kUnreached = std::numeric_limits<int64_t>::min();

// Longest paths from `s` with dag_shortest_paths: compare by >, unreached is
// the lowest value and absorbs in sums.
template <class G, class WeightMap>
std::vector<int64_t> longest_from(const G& g, typename boost::graph_traits<G>::vertex_descriptor s, WeightMap w,
                                  size_t n) {
  std::vector<int64_t> dist(n, kUnreached);
  auto combine = [](int64_t a, int64_t b) { return a == kUnreached || b == kUnreached ? kUnreached : a + b; };
  try {
    boost::dag_shortest_paths(
        g, s,
        boost::weight_map(w)
            .distance_map(boost::make_iterator_property_map(dist.begin(), get(boost::vertex_index, g)))
            .distance_compare(std::greater<int64_t>())
            .distance_combine(combine)
            .distance_inf(kUnreached)
            .distance_zero(int64_t{0}));
  } catch (const boost::not_a_dag&) {
    throw InternalError("internal: the executed op graph has a cycle");
  }
  return dist;
}

}  // namespace

GraphTiming time_graph(const OpGraph& og) {
  const size_t n = og.nodes.size();
  const uint32_t first = static_cast<uint32_t>(n), sink = static_cast<uint32_t>(n + 1);
  // Every node hangs between a virtual source and sink: a node without
  // predecessors can start at 0, one without successors ends the iteration.
  std::vector<uint8_t> has_in(n, 0), has_out(n, 0);
  for (const auto& [from, to] : og.edges) {
    has_out[from] = 1;
    has_in[to] = 1;
  }
  std::vector<std::pair<uint32_t, uint32_t>> edges = og.edges;
  for (uint32_t v = 0; v < n; ++v) {
    if (!has_in[v]) edges.emplace_back(first, v);
    if (!has_out[v]) edges.emplace_back(v, sink);
  }
  if (n == 0) edges.emplace_back(first, sink);
  const Graph g(boost::edges_are_unsorted_multi_pass, edges.begin(), edges.end(), n + 2);
  edges = {};

  // Edge u → v weighs u's duration: v starts no earlier than u ends.
  auto duration = [&](uint32_t v) { return v < n ? og.nodes[v].duration().count() : int64_t{0}; };
  std::vector<int64_t> weight(num_edges(g));
  const auto index = get(boost::edge_index, g);
  for (const auto& e : boost::make_iterator_range(boost::edges(g))) weight[get(index, e)] = duration(static_cast<uint32_t>(boost::source(e, g)));
  const auto w = boost::make_iterator_property_map(weight.begin(), index);

  GraphTiming t;
  const std::vector<int64_t> earliest = longest_from(g, first, w, n + 2);
  t.longest = TimeNs(earliest[sink]);
  for (uint32_t v = 0; v < n; ++v) {
    if (earliest[v] != og.nodes[v].start.count()) ++t.mismatched_starts;
  }
  // Tails: longest paths from the sink in the reversed graph, where the
  // reversed edge v → u still weighs u's duration, so tail(u) includes it.
  const boost::reverse_graph<Graph> reversed(g);
  const std::vector<int64_t> tail =
      longest_from(reversed, sink, boost::make_iterator_property_map(weight.begin(), get(boost::edge_index, reversed)),
                   n + 2);
  t.slack.resize(n);
  for (uint32_t v = 0; v < n; ++v) t.slack[v] = TimeNs(t.longest.count() - tail[v] - og.nodes[v].start.count());
  return t;
}

}  // namespace lacuna::report
