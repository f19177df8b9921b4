// NVLink domains larger than a node: the shared helper and its validation
// (docs/network.md#nvlink-domains).
#include "sim/scenario/nvlink_domain.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/scenario/test_support.h"

namespace lacuna::scenario {
namespace {

using ::testing::HasSubstr;
using testing::error_of;
using testing::line_of;
using testing::read_source;
using testing::replace_once;

const std::string kSmall = "scenarios/llm/gpt-1.3b-8gpu.pbtxt";  // tp2 × pp2 × dp2 on one H100 node

std::string with_cluster(const std::string& cluster_body) {
  return replace_once(read_source(kSmall), "  preset: \"h100-sxm\"\n  num_nodes: 1\n", cluster_body);
}

TEST(NvlinkDomain, UnsetIsTheNode) {
  Cluster c;
  c.set_gpus_per_node(8);
  c.set_num_nodes(4);
  EXPECT_EQ(nvlink_domain_gpus(c), 8);
  EXPECT_EQ(nodes_per_nvlink_domain(c), 1);
  EXPECT_EQ(nvlink_domain_of_node(c, 3), 3);
  c.set_nvlink_domain_gpus(0);  // zero reads as unset, like the other optional counts
  EXPECT_EQ(nvlink_domain_gpus(c), 8);
}

TEST(NvlinkDomain, RackOfTrays) {
  Cluster c = hardware_preset("gb200-nvl72");
  c.set_num_nodes(36);
  EXPECT_EQ(nvlink_domain_gpus(c), 72);
  EXPECT_EQ(nodes_per_nvlink_domain(c), 18);
  EXPECT_EQ(nvlink_domain_of_node(c, 17), 0);
  EXPECT_EQ(nvlink_domain_of_node(c, 18), 1);
  EXPECT_EQ(nvlink_domain_of_node(c, 35), 1);
}

// A GB200 rack cut down to 2 trays (8 GPUs) fits the 8-GPU plan.
TEST(NvlinkDomain, SmallerDomainOnAPresetIsAccepted) {
  const auto s = parse_scenario(
      with_cluster("  preset: \"gb200-nvl72\"\n  num_nodes: 2\n  nvlink_domain_gpus: 8\n"), Format::kText, "t.pbtxt");
  EXPECT_EQ(nvlink_domain_gpus(s.spec.cluster()), 8);
  EXPECT_EQ(s.spec.cluster().gpus_per_node(), 4);
  EXPECT_EQ(s.spec.cluster().max_nvlink_domain_gpus(), 576);
}

TEST(NvlinkDomain, LargerThanTheSwitchAllows) {
  const std::string text = with_cluster("  preset: \"h100-sxm\"\n  num_nodes: 2\n  nvlink_domain_gpus: 16\n");
  const Error e = error_of(text, Format::kText);
  EXPECT_EQ(e.where().field, "cluster.nvlink_domain_gpus");
  EXPECT_EQ(e.where().line, line_of(text, "nvlink_domain_gpus: 16"));
  EXPECT_THAT(e.problem(), HasSubstr("16 GPUs is larger than the NVLink switch allows (max_nvlink_domain_gpus 8"));
  EXPECT_THAT(e.problem(), HasSubstr("\"h100-sxm\""));
  const Error big = error_of(with_cluster("  preset: \"gb200-nvl72\"\n  num_nodes: 288\n  nvlink_domain_gpus: 1152\n"),
                             Format::kText);
  EXPECT_THAT(big.problem(), HasSubstr("max_nvlink_domain_gpus 576"));
}

TEST(NvlinkDomain, NotAMultipleOfTheNode) {
  const std::string text = with_cluster("  preset: \"gb200-nvl72\"\n  num_nodes: 18\n  nvlink_domain_gpus: 70\n");
  const Error e = error_of(text, Format::kText);
  EXPECT_EQ(e.where().field, "cluster.nvlink_domain_gpus");
  EXPECT_EQ(e.where().line, line_of(text, "nvlink_domain_gpus: 70"));
  EXPECT_THAT(e.problem(), HasSubstr("70 is not a multiple of gpus_per_node (4)"));
}

TEST(NvlinkDomain, LargerThanTheCluster) {
  // The preset's 72-GPU rack on 2 trays.
  const Error e = error_of(with_cluster("  preset: \"gb200-nvl72\"\n  num_nodes: 2\n"), Format::kText);
  EXPECT_EQ(e.where().field, "cluster.nvlink_domain_gpus");
  EXPECT_THAT(e.problem(), HasSubstr("72 GPUs is larger than the cluster (2 nodes × 4 = 8 GPUs)"));
  EXPECT_THAT(e.fix(), HasSubstr("multiple of 18"));
}

TEST(NvlinkDomain, WholeDomainsOnly) {
  const std::string text = with_cluster("  preset: \"gb200-nvl72\"\n  num_nodes: 27\n");
  const Error e = error_of(text, Format::kText);
  EXPECT_EQ(e.where().field, "cluster.num_nodes");
  EXPECT_EQ(e.where().line, line_of(text, "num_nodes: 27"));
  EXPECT_THAT(e.problem(), HasSubstr("27 nodes is not a whole number of NVLink domains of 18 nodes (72 GPUs)"));
}

TEST(NvlinkDomain, SeventyTwoGpusPerNodePointsAtDomains) {
  const std::string text = with_cluster("  preset: \"gb200-nvl72\"\n  num_nodes: 1\n  gpus_per_node: 72\n");
  const Error e = error_of(text, Format::kText);
  EXPECT_EQ(e.where().field, "cluster.gpus_per_node");
  EXPECT_THAT(e.problem(), HasSubstr("72 is above the supported maximum 64"));
  EXPECT_THAT(e.fix(), HasSubstr("nvlink_domain_gpus: 72"));
}

TEST(NvlinkDomain, MaxBelowTheNode) {
  const std::string text = with_cluster("  preset: \"h100-sxm\"\n  num_nodes: 1\n  max_nvlink_domain_gpus: 4\n");
  const Error e = error_of(text, Format::kText);
  EXPECT_EQ(e.where().field, "cluster.max_nvlink_domain_gpus");
  EXPECT_THAT(e.problem(), HasSubstr("below gpus_per_node (8)"));
}

// FP8 needs a GPU with an FP8 peak: A100 has none (the rule of
// validate_consistency.cpp); every Blackwell preset has one.
TEST(NvlinkDomain, Fp8OnBlackwellIsAccepted) {
  std::string text = with_cluster("  preset: \"b200\"\n  num_nodes: 1\n");
  text = replace_once(text, "precision: BF16", "precision: FP8");
  EXPECT_NO_THROW(parse_scenario(text, Format::kText, "t.pbtxt"));
}

}  // namespace
}  // namespace lacuna::scenario
