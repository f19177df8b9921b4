#include "sim/schedule/in_flight_1f1b.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/schedule/synthetic_test_support.h"
#include "sim/schedule/validate_actions.h"

namespace lacuna::schedule {
namespace {

// When the synthetic pipeline (equal stages: forward f, backward b split
// evenly into input and weight gradient, each transfer p2p) running the
// schedule with counts `k` ends.
int64_t end_ns(int32_t pp, int32_t m, const std::vector<int32_t>& k, int64_t f, int64_t b, int64_t p2p = 0) {
  const PipelineShape shape{.pp = pp, .virtual_stages = 1, .microbatches = m};
  SyntheticPipeline p;
  p.shape = shape;
  p.per_stage = {{TimeNs(f), TimeNs(b - b / 2), TimeNs(b / 2)}};
  p.p2p = TimeNs(p2p);
  p.order = to_schedule(in_flight_1f1b_schedule(pp, m, k), shape, "1f1b.txt");
  return synthetic_support::synthetic_end_ns(p);
}

std::vector<int32_t> capped(int32_t pp, int32_t m, int32_t cap) {
  std::vector<int32_t> k = megatron_1f1b_in_flight(pp, m);
  for (int32_t& c : k) c = std::min(c, cap);
  return k;
}

// pp 3 over 4 microbatches: Megatron-LM's counts (3, 2, 1) and a cap of 2.
TEST(InFlight1F1B, ClosedFormOrder) {
  EXPECT_EQ(megatron_1f1b_in_flight(3, 4), (std::vector<int32_t>{3, 2, 1}));
  EXPECT_EQ(megatron_1f1b_in_flight(4, 2), (std::vector<int32_t>{2, 2, 2, 1}));
  EXPECT_EQ(format_schedule(in_flight_1f1b_schedule(3, 4, {3, 2, 1})),
            "rank 0: 0F0 0F1 0F2 0B0 0F3 0B1 0B2 0B3\n"
            "rank 1: 1F0 1F1 1B0 1F2 1B1 1F3 1B2 1B3\n"
            "rank 2: 2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3\n");
  EXPECT_EQ(format_schedule(in_flight_1f1b_schedule(3, 4, {2, 2, 1})),
            "rank 0: 0F0 0F1 0B0 0F2 0B1 0F3 0B2 0B3\n"
            "rank 1: 1F0 1F1 1B0 1F2 1B1 1F3 1B2 1B3\n"
            "rank 2: 2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3\n");
}

// Megatron-LM's counts give exactly the built-in 1F1B's order.
TEST(InFlight1F1B, MegatronCountsAreTheBuiltInSchedule) {
  for (const auto& [pp, m] : {std::pair{1, 1}, {2, 1}, {2, 5}, {4, 3}, {4, 8}, {8, 16}, {5, 2}}) {
    SCOPED_TRACE(fmt::format("pp {} m {}", pp, m));
    const PipelineShape shape{.pp = pp, .virtual_stages = 1, .microbatches = m};
    EXPECT_EQ(in_flight_1f1b_schedule(pp, m, megatron_1f1b_in_flight(pp, m)),
              to_actions(build_schedule(scenario::ONE_F_ONE_B, shape), shape));
  }
}

// Each refusal names the rank and the reason.
TEST(InFlight1F1B, RefusesCountsThatCannotRun) {
  auto problem = [](int32_t pp, int32_t m, const std::vector<int32_t>& k) -> std::string {
    try {
      in_flight_1f1b_schedule(pp, m, k);
    } catch (const Error& e) {
      return e.problem();
    }
    return "accepted";
  };
  EXPECT_NE(problem(3, 4, {3, 2}).find("2 in-flight counts given for 3 pipeline ranks"), std::string::npos);
  EXPECT_NE(problem(3, 4, {3, 0, 0}).find("rank 1 would hold 0 microbatches in flight, outside [1, 4]"),
            std::string::npos);
  EXPECT_NE(problem(3, 4, {5, 2, 1}).find("rank 0 would hold 5"), std::string::npos);
  EXPECT_NE(problem(3, 4, {2, 3, 1}).find("rank 1 would hold 3 microbatches in flight but rank 0 upstream only 2"),
            std::string::npos);
  EXPECT_NE(problem(3, 4, {2, 3, 1}).find("deadlock"), std::string::npos);
  EXPECT_NE(problem(0, 4, {}).find("at least one rank"), std::string::npos);
  EXPECT_EQ(problem(3, 4, {4, 4, 4}), "accepted");
}

// Every accepted list of counts validates (each forward has its backward,
// no deadlock) and round-trips through text; each rank runs each microbatch's
// forward and backward once and holds at most its count of them at a time.
TEST(InFlight1F1B, EveryNonIncreasingListValidates) {
  for (int32_t pp : {1, 2, 3, 4})
    for (int32_t m : {1, 2, 3, 5}) {
      // Every non-increasing list over [1, m]: count up in base m.
      std::vector<int32_t> k(static_cast<size_t>(pp), 1);
      for (;;) {
        if (std::is_sorted(k.rbegin(), k.rend())) {
          SCOPED_TRACE(fmt::format("pp {} m {} k {}", pp, m, fmt::join(k, ",")));
          const PipelineShape shape{.pp = pp, .virtual_stages = 1, .microbatches = m};
          const ActionSchedule s = in_flight_1f1b_schedule(pp, m, k);
          EXPECT_NO_THROW(validate_actions(s, shape, "1f1b.txt"));
          EXPECT_EQ(parse_schedule(format_schedule(s), "1f1b.txt"), s);
          for (int32_t r = 0; r < pp; ++r) {
            int32_t held = 0, peak = 0;
            for (const auto& a : s[static_cast<size_t>(r)]) {
              held += a->type == ActionType::kForward ? 1 : -1;
              peak = std::max(peak, held);
            }
            EXPECT_EQ(held, 0);
            EXPECT_EQ(peak, k[static_cast<size_t>(r)]);
            EXPECT_EQ(s[static_cast<size_t>(r)].size(), 2u * static_cast<size_t>(m));
          }
        }
        size_t d = 0;
        while (d < k.size() && k[d] == m) k[d++] = 1;
        if (d == k.size()) break;
        ++k[d];
      }
    }
}

// On the engine, with free transfers and equal stages, a cap of K
// microbatches in flight on every rank (K' = min(K, m, pp)) runs
// ((pp + K' − 1) + (m − K')(pp − K' + 1))·(f + b): Megatron-LM's
// (m + pp − 1)(f + b) at K ≥ pp, one microbatch at a time, m·pp·(f + b), at
// K = 1. Past the first K', each microbatch adds (pp − K' + 1)(f + b): the
// strict alternation of forward and backward makes a rank that holds fewer
// than pp − r wait for each backward. Found on the engine and checked here on
// every shape listed, at four ratios of f to b.
TEST(InFlight1F1B, CappedCountsRunToTheClosedForm) {
  for (const auto& [f, b] : {std::pair<int64_t, int64_t>{100, 200}, {100, 300}, {170, 130}, {50, 400}})
    for (int32_t pp : {1, 2, 3, 4, 5, 8, 11})
      for (int32_t m : {1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 23})
        for (int32_t cap = 1; cap <= pp + 1; ++cap) {
          SCOPED_TRACE(fmt::format("f {} b {} pp {} m {} cap {}", f, b, pp, m, cap));
          const int64_t k = std::min({cap, m, pp});
          EXPECT_EQ(end_ns(pp, m, capped(pp, m, cap), f, b), ((pp + k - 1) + (m - k) * (pp - k + 1)) * (f + b));
        }
}

// More in flight upstream lets a rank run ahead of its neighbour: with a
// transfer time it hides the transfers (every forward first is GPipe, whose
// exposed transfers are the fill's and the drain's alone), and with free
// transfers it costs nothing; a count equal on every rank holds the last
// ranks' backwards back behind forwards they do not need yet.
TEST(InFlight1F1B, MoreInFlightHidesTransfers) {
  const std::vector<int32_t> megatron{4, 3, 2, 1}, deeper{6, 5, 4, 3}, all{8, 8, 8, 8}, flat{4, 4, 4, 4};
  const int64_t f = 100, b = 200;
  EXPECT_EQ(end_ns(4, 8, deeper, f, b), end_ns(4, 8, megatron, f, b));
  EXPECT_EQ(end_ns(4, 8, all, f, b), (8 + 3) * (f + b));
  for (int64_t p2p : {30, 100}) {
    SCOPED_TRACE(p2p);
    EXPECT_LT(end_ns(4, 8, deeper, f, b, p2p), end_ns(4, 8, megatron, f, b, p2p));
    EXPECT_LT(end_ns(4, 8, all, f, b, p2p), end_ns(4, 8, deeper, f, b, p2p));
    EXPECT_GT(end_ns(4, 8, flat, f, b, p2p), end_ns(4, 8, megatron, f, b, p2p));
  }
}

}  // namespace
}  // namespace lacuna::schedule
