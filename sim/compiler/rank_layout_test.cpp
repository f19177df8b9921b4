#include "sim/compiler/rank_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "sim/compiler/compiler_test_support.h"
#include "sim/core/error.h"

namespace lacuna::compiler {
namespace {

ir::Program layout(ParallelDims d, const std::string& order, int32_t gpus_per_node = 8) {
  ir::Program p;
  add_rank_layout(RankLayout(d, order), gpus_per_node, p);
  return p;
}

TEST(RankLayout, DefaultOrderPutsTpInnermost) {
  const ParallelDims d{2, 3, 4, 5};
  const RankLayout l(d, "");
  for (int32_t r = 0; r < d.world(); ++r) {
    const auto c = l.coordinates(r);
    EXPECT_EQ(r, c.tp() + 2 * (c.cp() + 3 * (c.dp() + 4 * c.pp())));
    EXPECT_EQ(l.rank(c), r);
  }
}

TEST(RankLayout, NonDefaultOrderIsFollowed) {
  const ParallelDims d{2, 3, 4, 5};
  const RankLayout l(d, "dp-tp-pp-cp");
  for (int32_t r = 0; r < d.world(); ++r) {
    const auto c = l.coordinates(r);
    EXPECT_EQ(r, c.dp() + 4 * (c.tp() + 2 * (c.pp() + 5 * c.cp())));
    EXPECT_EQ(l.rank(c), r);
  }
}

TEST(RankLayout, RejectsBadOrders) {
  for (const char* bad : {"tp-cp-dp", "tp-tp-dp-pp", "tp-cp-dp-ep", "tp,cp,dp,pp"}) {
    try {
      RankLayout({2, 1, 2, 2}, bad);
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.where().field, "parallel.rank_order");
    }
  }
}

TEST(RankLayout, GroupsPartitionTheRanksAndAreListedOnce) {
  for (const char* order : {"tp-cp-dp-pp", "pp-dp-cp-tp", "dp-tp-pp-cp"}) {
    const ParallelDims d{2, 2, 3, 2};
    const ir::Program p = layout(d, order);
    ASSERT_EQ(p.group_slots_size(), 6);
    ASSERT_EQ(p.ranks_size(), d.world());
    // pp = 2: every rank is on the first or the last stage, so the embedding
    // pairs cover the ranks too; the gradient-norm groups are tp × pp.
    const std::map<ir::GroupKind, int> sizes = {{ir::TP, 2},          {ir::CP, 2},
                                                {ir::DP, 3},          {ir::DP_CP, 6},
                                                {ir::EMBEDDING_GROUP, 2}, {ir::MODEL_PARALLEL, 4}};
    std::set<std::pair<int, std::vector<int>>> seen;
    std::map<ir::GroupKind, int> groups_of_kind;
    for (int g = 0; g < p.groups_size(); ++g) {
      const auto& grp = p.groups(g);
      std::vector<int> members(grp.ranks().begin(), grp.ranks().end());
      EXPECT_TRUE(std::is_sorted(members.begin(), members.end()));
      EXPECT_TRUE(seen.insert({grp.kind(), members}).second) << "group listed twice";
      EXPECT_EQ(static_cast<int>(members.size()), sizes.at(grp.kind()));
      ++groups_of_kind[grp.kind()];
      // Every member binds to this very group in the slot of its kind.
      for (int r : members) {
        const int slot = grp.kind() == ir::TP                ? kSlotTp
                         : grp.kind() == ir::CP              ? kSlotCp
                         : grp.kind() == ir::DP              ? kSlotDp
                         : grp.kind() == ir::EMBEDDING_GROUP ? kSlotEmbedding
                         : grp.kind() == ir::MODEL_PARALLEL  ? kSlotGradNorm
                                                             : kSlotDpCp;
        EXPECT_EQ(p.ranks(r).group(slot), g);
      }
    }
    for (const auto& [kind, size] : sizes) EXPECT_EQ(groups_of_kind[kind] * size, d.world()) << order;
    // Members of a group differ only in the group's coordinates.
    for (int r = 0; r < d.world(); ++r) {
      const auto& c = p.ranks(r).coord();
      for (int m : p.groups(p.ranks(r).group(kSlotTp)).ranks()) {
        const auto& o = p.ranks(m).coord();
        EXPECT_TRUE(o.cp() == c.cp() && o.dp() == c.dp() && o.pp() == c.pp());
      }
      for (int m : p.groups(p.ranks(r).group(kSlotDpCp)).ranks()) {
        const auto& o = p.ranks(m).coord();
        EXPECT_TRUE(o.tp() == c.tp() && o.pp() == c.pp());
      }
    }
  }
}

// Each rank's group per slot is every rank sharing its fixed coordinates
// (brute force over all ranks), groups listed in order of first appearance,
// for every rank order and a spread of sizes, with and without the world
// gradient-norm group: the layout enumerates each group once (issue 17), and
// must bind exactly what this quadratic reference binds.
TEST(RankLayout, BindsWhatABruteForceReferenceBinds) {
  std::vector<std::string> orders;
  std::array<std::string, 4> axes = {"cp", "dp", "pp", "tp"};
  do orders.push_back(axes[0] + "-" + axes[1] + "-" + axes[2] + "-" + axes[3]);
  while (std::next_permutation(axes.begin(), axes.end()));
  ASSERT_EQ(orders.size(), 24u);
  const std::vector<ParallelDims> dims = {{2, 1, 3, 2}, {1, 2, 2, 3}, {2, 2, 2, 1}, {3, 1, 1, 4}, {1, 1, 5, 1}};
  for (const std::string& order : orders) {
    for (const ParallelDims& d : dims) {
      for (bool world_grad_norm : {false, true}) {
        ir::Program p;
        add_rank_layout(RankLayout(d, order), 4, p, world_grad_norm);
        const int32_t w = d.world();
        auto same = [&](int32_t a, int32_t b, std::array<bool, 4> fixed) {  // tp, cp, dp, pp
          const auto& x = p.ranks(a).coord();
          const auto& y = p.ranks(b).coord();
          return (!fixed[0] || x.tp() == y.tp()) && (!fixed[1] || x.cp() == y.cp()) &&
                 (!fixed[2] || x.dp() == y.dp()) && (!fixed[3] || x.pp() == y.pp());
        };
        std::vector<std::vector<int32_t>> groups;  // reference, in order of first appearance
        auto index_of = [&](const std::vector<int32_t>& members) {
          for (size_t i = 0; i < groups.size(); ++i)
            if (groups[i] == members) return static_cast<int32_t>(i);
          groups.push_back(members);
          return static_cast<int32_t>(groups.size() - 1);
        };
        for (int32_t r = 0; r < w; ++r) {
          const auto& c = p.ranks(r).coord();
          for (int32_t slot = 0; slot < kNumGroupSlots; ++slot) {
            std::vector<int32_t> members;
            if (slot == kSlotEmbedding) {
              if (d.pp > 1 && (c.pp() == 0 || c.pp() == d.pp - 1)) {
                for (int32_t m = 0; m < w; ++m) {
                  const int32_t pp = p.ranks(m).coord().pp();
                  if (same(r, m, {true, true, true, false}) && (pp == 0 || pp == d.pp - 1)) members.push_back(m);
                }
              }
            } else if (slot == kSlotGradNorm) {
              if (w > 1 && (world_grad_norm || d.tp * d.pp > 1)) {
                for (int32_t m = 0; m < w; ++m)
                  if (world_grad_norm || same(r, m, {false, true, true, false})) members.push_back(m);
              }
            } else {
              const std::array<bool, 4> fixed = {slot != kSlotTp, slot != kSlotCp && slot != kSlotDpCp,
                                                 slot != kSlotDp && slot != kSlotDpCp, true};
              for (int32_t m = 0; m < w; ++m)
                if (same(r, m, fixed)) members.push_back(m);
              if (members.size() <= 1) members.clear();
            }
            const int32_t want = members.empty() ? -1 : index_of(members);
            ASSERT_EQ(p.ranks(r).group(slot), want) << order << " rank " << r << " slot " << slot;
          }
        }
        ASSERT_EQ(p.groups_size(), static_cast<int>(groups.size())) << order;
        for (int g = 0; g < p.groups_size(); ++g)
          EXPECT_EQ(std::vector<int32_t>(p.groups(g).ranks().begin(), p.groups(g).ranks().end()), groups[g]) << order;
      }
    }
  }
}

TEST(RankLayout, SingletonGroupsAreNotListed) {
  const ir::Program p = layout({1, 1, 4, 2}, "");
  for (const auto& b : p.ranks()) {
    EXPECT_EQ(b.group(kSlotTp), -1);
    EXPECT_EQ(b.group(kSlotCp), -1);
    EXPECT_GE(b.group(kSlotDp), 0);
  }
  // One DP group per pipeline stage (shared with dp_cp), and the four
  // first/last-stage pairs, which are also the tp × pp gradient-norm groups.
  EXPECT_EQ(p.groups_size(), 2 + 4);
}

// Per slot, the groups the ranks bind to partition the ranks (or the slot is
// unbound everywhere when its groups have one rank); every distinct rank set
// is listed exactly once, whichever slots share it.
void expect_partition_per_slot_listed_once(const ParallelDims& d, const ir::Program& p, const std::string& label) {
  std::set<std::vector<int>> distinct;
  for (const auto& g : p.groups()) {
    std::vector<int> members(g.ranks().begin(), g.ranks().end());
    EXPECT_GT(members.size(), 1u) << label;
    EXPECT_TRUE(distinct.insert(members).second) << label << ": rank set listed twice";
  }
  const std::array<int, kNumGroupSlots> size = {d.tp, d.cp, d.dp, d.cp * d.dp, d.pp > 1 ? 2 : 1, d.tp * d.pp};
  std::set<int> used;
  for (int slot = 0; slot < kNumGroupSlots; ++slot) {
    for (int r = 0; r < d.world(); ++r) {
      const int g = p.ranks(r).group(slot);
      // The embedding group binds the first and the last stage only.
      const int stage = p.ranks(r).coord().pp();
      if (size[slot] == 1 || (slot == kSlotEmbedding && stage != 0 && stage != d.pp - 1)) {
        EXPECT_EQ(g, -1) << label << " slot " << slot;
        continue;
      }
      ASSERT_GE(g, 0) << label;
      used.insert(g);
      const auto& members = p.groups(g).ranks();
      EXPECT_EQ(members.size(), size[slot]) << label << " slot " << slot;
      EXPECT_NE(std::find(members.begin(), members.end(), r), members.end()) << label;
      // Partition: every member binds to the same group in this slot.
      for (int m : members) EXPECT_EQ(p.ranks(m).group(slot), g) << label << " slot " << slot;
    }
  }
  EXPECT_EQ(static_cast<int>(used.size()), p.groups_size()) << label << ": unused group";
}

TEST(RankLayout, SlotsWithTheSameRankSetShareOneGroup) {
  struct Case {
    ParallelDims d;
    const char* order;
  };
  for (const Case& c : {Case{{2, 1, 3, 2}, "tp-cp-dp-pp"}, Case{{2, 1, 3, 2}, "dp-tp-pp-cp"},
                        Case{{2, 3, 1, 2}, "tp-cp-dp-pp"}, Case{{1, 1, 4, 2}, "pp-dp-cp-tp"},
                        Case{{2, 2, 3, 2}, "pp-dp-cp-tp"}, Case{{4, 1, 1, 2}, ""}}) {
    const ir::Program p = layout(c.d, c.order);
    const std::string label = std::string(c.order) + " tp" + std::to_string(c.d.tp) + " cp" +
                              std::to_string(c.d.cp) + " dp" + std::to_string(c.d.dp);
    expect_partition_per_slot_listed_once(c.d, p, label);
    for (const auto& b : p.ranks()) {
      if (c.d.cp == 1 && c.d.dp > 1) {
        // dp_cp is the DP group itself, which keeps the kind DP.
        EXPECT_EQ(b.group(kSlotDpCp), b.group(kSlotDp)) << label;
        EXPECT_EQ(p.groups(b.group(kSlotDp)).kind(), ir::DP) << label;
      }
      if (c.d.dp == 1 && c.d.cp > 1) {
        EXPECT_EQ(b.group(kSlotDpCp), b.group(kSlotCp)) << label;
        EXPECT_EQ(p.groups(b.group(kSlotCp)).kind(), ir::CP) << label;
      }
      if (c.d.cp > 1 && c.d.dp > 1) EXPECT_EQ(p.groups(b.group(kSlotDpCp)).kind(), ir::DP_CP) << label;
      if (c.d.tp > 1) EXPECT_EQ(p.groups(b.group(kSlotTp)).kind(), ir::TP) << label;
    }
  }
  // GPT-3 on 3,072 GPUs (TP 8 × CP 1 × DP 48 × PP 8): 384 TP groups + 64 DP
  // groups, dp_cp bound to the DP ones rather than 64 more, 384 first/last
  // stage embedding pairs and 48 tp × pp gradient-norm groups.
  const ParallelDims gpt3{8, 1, 48, 8};
  const ir::Program p = layout(gpt3, "tp-cp-dp-pp");
  EXPECT_EQ(p.groups_size(), 3072 / 8 + 3072 / 48 + 8 * 48 + 48);
}

TEST(RankLayout, PeersAreCyclicAndConsistent) {
  const ParallelDims d{2, 1, 2, 4};
  const ir::Program p = layout(d, "tp-dp-pp-cp", 4);
  for (int r = 0; r < d.world(); ++r) {
    const auto& b = p.ranks(r);
    const int next = b.peer(kSlotPpNext), prev = b.peer(kSlotPpPrev);
    EXPECT_EQ(p.ranks(next).peer(kSlotPpPrev), r);
    EXPECT_EQ(p.ranks(prev).peer(kSlotPpNext), r);
    const auto& c = b.coord();
    const auto& n = p.ranks(next).coord();
    EXPECT_EQ(n.pp(), (c.pp() + 1) % 4);
    EXPECT_TRUE(n.tp() == c.tp() && n.dp() == c.dp() && n.cp() == c.cp());
    EXPECT_EQ(b.class_id(), c.pp());
    EXPECT_EQ(b.node(), r / 4);
    EXPECT_EQ(b.local_gpu(), r % 4);
  }
  const ir::Program flat = layout({2, 1, 2, 1}, "");
  for (const auto& b : flat.ranks()) EXPECT_EQ(b.peer(kSlotPpNext), -1);
}

}  // namespace
}  // namespace lacuna::compiler
