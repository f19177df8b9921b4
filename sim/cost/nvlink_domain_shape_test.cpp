// Group shapes over NVLink domains (docs/network.md#nvlink-domains): on a
// GB200 NVL72-shaped cluster a group's "nodes" are its racks, and a rack's
// crossings may use every NIC of its trays.
#include <gtest/gtest.h>

#include <vector>

#include "sim/cost/collective_model.h"
#include "sim/cost/group_shape.h"
#include "sim/cost/test_clusters.h"

namespace lacuna::cost {
namespace {

// 18 trays of 4 GPUs per 72-GPU domain, 4 × 50 GB/s NICs per tray.
scenario::Cluster nvl72(int64_t racks) {
  scenario::Cluster c = testing::hgx_hopper(racks * 18);
  c.set_gpus_per_node(4);
  c.set_nics_per_node(4);
  c.set_nvlink_domain_gpus(72);
  testing::set_link(c.mutable_nvlink(), 900, 0.6, 0.82);
  testing::set_link(c.mutable_nic(), 50, 2.7, 0.95);
  return c;
}

ir::Program program_on(const scenario::Cluster& c) {
  ir::Program p;
  *p.mutable_cluster() = c;
  for (int64_t r = 0; r < c.num_nodes() * c.gpus_per_node(); ++r) {
    auto* b = p.add_ranks();
    b->set_node(static_cast<int32_t>(r / c.gpus_per_node()));
    b->set_local_gpu(static_cast<int32_t>(r % c.gpus_per_node()));
  }
  return p;
}

TEST(NvlinkDomainShape, RanksMapToRacksNotTrays) {
  const ir::Program p = program_on(nvl72(2));
  const std::vector<int32_t> rack = [] {
    std::vector<int32_t> v;
    for (int32_t r = 0; r < 72; ++r) v.push_back(r);
    return v;
  }();
  EXPECT_EQ(shape_of_ranks(p, rack), (GroupShape{72, 1, 72})) << "18 trays, one NVLink domain";
  const std::vector<int32_t> two_racks = {0, 1, 72, 73, 100};
  EXPECT_EQ(shape_of_ranks(p, two_racks), (GroupShape{5, 2, 3}));
  // Without the domain, the same ranks sit on 18 nodes of 4.
  ir::Program trays = p;
  trays.mutable_cluster()->clear_nvlink_domain_gpus();
  EXPECT_EQ(shape_of_ranks(trays, rack), (GroupShape{72, 18, 4}));
}

TEST(NvlinkDomainShape, CrossingsUseTheDomainsNics) {
  const Interconnect ic = interconnect_from(nvl72(2));
  EXPECT_EQ(ic.nics_per_node, 4);
  EXPECT_EQ(ic.nics_per_domain, 72);
  const CollectiveModel m(ic);
  const double nic = 50e9 * 0.95;
  // 8 ranks per rack: 8 NICs carry the crossing (380 GB/s, below NVLink),
  // where a 4-GPU node alone would have only its 4.
  EXPECT_DOUBLE_EQ(m.bus_bytes_per_s(GroupShape{16, 2, 8}), 8 * nic);
  // A whole rack per side: NVLink (738 GB/s) is below 72 NICs (3420 GB/s).
  EXPECT_DOUBLE_EQ(m.bus_bytes_per_s(GroupShape{144, 2, 72}), 900e9 * 0.82);
  // Inside one domain: NVLink, and NVLS is a candidate (NVLink SHARP).
  EXPECT_DOUBLE_EQ(m.bus_bytes_per_s(GroupShape{72, 1, 72}), 900e9 * 0.82);
  bool nvls = false;
  for (const Candidate& c : m.candidates(ir::ALL_REDUCE, GroupShape{72, 1, 72}))
    nvls |= c.algorithm == nccl::Algorithm::kNvls;
  EXPECT_TRUE(nvls);
}

}  // namespace
}  // namespace lacuna::cost
