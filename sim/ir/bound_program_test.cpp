// The bound view (ir::BoundProgram) against the bindings it reads, and the
// p2p matching rule (ir::P2pMatching) against a direct simulation of
// in-order channels on random interleavings.
#include "sim/ir/bound_program.h"

#include <gtest/gtest.h>

#include <random>
#include <tuple>

#include "sim/core/error.h"
#include "sim/engine/engine_test_support.h"
#include "sim/engine/pipeline_program.h"
#include "sim/ir/validate.h"

namespace lacuna::ir {
namespace {

using engine::testing::make_pipeline_program;
using engine::testing::pipeline_rank;
using engine::testing::PipelineSpec;

TEST(BoundProgram, ResolvesSlotsToTheBindingsGroupsAndPeers) {
  PipelineSpec spec;
  spec.tp = 2;
  spec.pp = 3;
  spec.dp = 2;
  const Program p = make_pipeline_program(spec);
  validate_program(p);
  const BoundProgram bound(p);
  ASSERT_EQ(bound.num_ranks(), 12);
  for (int32_t r = 0; r < bound.num_ranks(); ++r) {
    const RankBinding& b = p.ranks(r);
    EXPECT_EQ(bound.class_id(r), b.class_id());
    EXPECT_EQ(&bound.rank_class(r), &p.classes(b.class_id()));
    for (int32_t s = 0; s < p.group_slots_size(); ++s) {
      const int32_t g = bound.group(r, s);
      EXPECT_EQ(g, s < b.group_size() ? b.group(s) : -1);
      if (g < 0) continue;
      // Every rank is a member of the groups it binds, at its position.
      const auto m = bound.members(g);
      const int32_t i = bound.member_index(g, r);
      ASSERT_GE(i, 0);
      EXPECT_EQ(m[static_cast<size_t>(i)], r);
      EXPECT_EQ(bound.root(g), m.front());
    }
    for (int32_t s = 0; s < p.peer_slots_size(); ++s) EXPECT_EQ(bound.peer(r, s), s < b.peer_size() ? b.peer(s) : -1);
    EXPECT_EQ(bound.group(r, -1), -1);
    EXPECT_EQ(bound.group(r, p.group_slots_size()), -1);
    EXPECT_EQ(bound.peer(r, p.peer_slots_size()), -1);
  }
  // Ranks outside a group have no index in it.
  const int32_t tp0 = bound.group(pipeline_rank(spec, 0, 0, 0), 0);
  EXPECT_EQ(bound.member_index(tp0, pipeline_rank(spec, 0, 1, 0)), -1);
}

TEST(FlatBindings, AnswersExactlyAsTheBoundView) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    PipelineSpec spec;
    spec.tp = 1 + static_cast<int>(rng() % 3);
    spec.pp = 1 + static_cast<int>(rng() % 4);
    spec.dp = 1 + static_cast<int>(rng() % 3);
    Program p = make_pipeline_program(spec);
    // Ragged bindings: some ranks bind fewer slots than others.
    for (int32_t r = 0; r < p.ranks_size(); ++r) {
      if (rng() % 3 == 0 && p.ranks(r).group_size() > 0) p.mutable_ranks(r)->mutable_group()->RemoveLast();
      if (rng() % 3 == 0 && p.ranks(r).peer_size() > 0) p.mutable_ranks(r)->mutable_peer()->RemoveLast();
    }
    const BoundProgram bound(p);
    const FlatBindings flat(p);
    for (int32_t r = 0; r < p.ranks_size(); ++r) {
      EXPECT_EQ(flat.class_id(r), bound.class_id(r));
      for (int32_t s = -1; s <= p.group_slots_size() + 1; ++s) EXPECT_EQ(flat.group(r, s), bound.group(r, s)) << r << " " << s;
      for (int32_t s = -1; s <= p.peer_slots_size() + 1; ++s) EXPECT_EQ(flat.peer(r, s), bound.peer(r, s)) << r << " " << s;
    }
  }
}

TEST(BoundProgram, SendAndRecvOfOneTransferShareTheirKey) {
  PipelineSpec spec;
  spec.tp = 1;
  spec.pp = 2;
  spec.dp = 1;
  spec.microbatches = 3;
  const Program p = make_pipeline_program(spec);
  validate_program(p);
  const BoundProgram bound(p);
  // Every send of the program finds recvs under its key, and the counts of
  // each key agree (the pipeline program is complete).
  P2pMatching<int> matching;
  int sends = 0;
  for (int32_t r = 0; r < bound.num_ranks(); ++r) {
    const RankClass& c = bound.rank_class(r);
    for (const Stream& s : c.streams()) {
      for (const Op& op : s.ops()) {
        if (op.has_send()) {
          const P2pKey k = bound.p2p_key(r, op);
          EXPECT_EQ(k.src, r);
          EXPECT_EQ(k.dst, bound.peer(r, op.send().peer_slot()));
          EXPECT_EQ(k.channel, op.send().channel());
          matching.add_send(k, r);
          ++sends;
        } else if (op.has_recv()) {
          const P2pKey k = bound.p2p_key(r, op);
          EXPECT_EQ(k.dst, r);
          EXPECT_EQ(k.src, bound.peer(r, op.recv().peer_slot()));
          matching.add_recv(k, r);
        }
      }
    }
  }
  ASSERT_GT(sends, 0);
  EXPECT_EQ(matching.unmatched(), 0u);
  int pairs = 0;
  matching.for_each_pair([&](const P2pKey& k, int send_rank, int recv_rank) {
    EXPECT_EQ(send_rank, k.src);
    EXPECT_EQ(recv_rank, k.dst);
    ++pairs;
  });
  EXPECT_EQ(pairs, sends);
  EXPECT_EQ(describe(P2pKey{3, 4, 1}), "rank 3 -> rank 4, channel 1");
}

TEST(BoundProgram, P2pKeyOfAnOpThatMovesNoDataIsAnInternalError) {
  const Program p = make_pipeline_program(PipelineSpec{});
  Op compute;
  compute.mutable_compute();
  EXPECT_THROW((void)BoundProgram(p).p2p_key(0, compute), lacuna::InternalError);
}

// The matching rule, by property: over random keys and a random interleaving
// of sends and recvs, the pairs are exactly those an in-order channel per key
// forms (the k-th send with the k-th recv), keys ascending, and what is left
// over is counted.
TEST(P2pMatching, PairsTheKthSendWithTheKthRecvOfEachKey) {
  std::mt19937_64 rng(20261126);
  for (int trial = 0; trial < 200; ++trial) {
    std::uniform_int_distribution<int> small(0, 2), count(0, 6);
    P2pMatching<int> matching;
    std::map<P2pKey, std::pair<std::vector<int>, std::vector<int>>> expected;
    const int ops = count(rng) * 5;
    for (int i = 0; i < ops; ++i) {
      const P2pKey key{small(rng), small(rng), small(rng)};
      if (rng() % 2 == 0) {
        matching.add_send(key, i);
        expected[key].first.push_back(i);
      } else {
        matching.add_recv(key, i);
        expected[key].second.push_back(i);
      }
    }
    std::vector<std::tuple<P2pKey, int, int>> got, want;
    size_t left = 0;
    for (const auto& [key, sides] : expected) {
      const auto& [s, r] = sides;
      for (size_t k = 0; k < std::min(s.size(), r.size()); ++k) want.emplace_back(key, s[k], r[k]);
      left += std::max(s.size(), r.size()) - std::min(s.size(), r.size());
    }
    matching.for_each_pair([&](const P2pKey& k, int s, int r) { got.emplace_back(k, s, r); });
    EXPECT_EQ(got, want) << "trial " << trial;
    EXPECT_EQ(matching.unmatched(), left) << "trial " << trial;
  }
}

}  // namespace
}  // namespace lacuna::ir
