// Test-only: a hand-built 8-rank program with one slow rank, whose straggler
// attribution and critical path are known in closed form.
//
// Ranks 0–7 on hosts 0–3 (two per host); TP groups {0,1} {2,3} {4,5} {6,7}
// inside the hosts, DP groups {0,2,4,6} {1,3,5,7} across them. Each rank runs
// `rounds` times: compute d, TP all-reduce (fixed t), compute d, DP
// all-reduce (fixed a). Compute ops are GEMMs timed by the cost model
// (ClosedFormCost: flops ns). Rank 2 runs `scale` times slower.
#pragma once

#include "sim/engine/engine_test_support.h"

namespace lacuna::report::testing {

struct SlowRankSpec {
  int64_t d = 1000;
  int64_t tp_ns = 50;
  int64_t dp_ns = 100;
  double scale = 1.5;
  int rounds = 1;
};

inline ir::Program slow_rank_program(const SlowRankSpec& s) {
  using namespace engine::testing;
  ir::Program p;
  p.mutable_info()->set_num_ranks(8);
  p.mutable_info()->set_pp(1);
  auto* tp = p.add_group_slots();
  tp->set_name("tp");
  tp->set_kind(ir::TP);
  auto* dp = p.add_group_slots();
  dp->set_name("dp");
  dp->set_kind(ir::DP);
  auto* c = add_class(p, "all", 0, {"compute"});
  c->mutable_streams(0)->set_kind(ir::COMPUTE);
  for (int i = 0; i < s.rounds; ++i) {
    ir::Stream* st = c->mutable_streams(0);
    add_compute(st, 0, static_cast<double>(s.d)).set_phase(ir::FORWARD);
    add_collective(st, ir::ALL_REDUCE, 0, 4096, s.tp_ns);
    add_compute(st, 0, static_cast<double>(s.d)).set_phase(ir::FORWARD);
    add_collective(st, ir::REDUCE_SCATTER, 1, 8192, s.dp_ns);
  }
  std::vector<int32_t> tp_groups, dp_groups;
  for (int h = 0; h < 4; ++h) tp_groups.push_back(add_group(p, ir::TP, {2 * h, 2 * h + 1}));
  dp_groups.push_back(add_group(p, ir::DP, {0, 2, 4, 6}));
  dp_groups.push_back(add_group(p, ir::DP, {1, 3, 5, 7}));
  for (int r = 0; r < 8; ++r) {
    ir::RankBinding* b = add_rank(p, 0, {tp_groups[static_cast<size_t>(r / 2)], dp_groups[static_cast<size_t>(r % 2)]},
                                  {}, /*node=*/r / 2);
    b->set_local_gpu(r % 2);
    b->mutable_coord()->set_tp(r % 2);
    b->mutable_coord()->set_dp(r / 2);
    if (r == 2) b->set_compute_time_scale(s.scale);
  }
  return p;
}

}  // namespace lacuna::report::testing
