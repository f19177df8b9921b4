#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/core/error.h"
#include "sim/cost/collective_model.h"
#include "sim/cost/cost_model.h"
#include "sim/cost/roofline.h"
#include "sim/cost/test_clusters.h"

namespace lacuna::cost {
namespace {

using testing::hgx_hopper;

TEST(AnalyticCostModel, DelegatesAndRoundsToNanoseconds) {
  const auto cluster = hgx_hopper(2);
  const auto model = make_analytic_cost_model(cluster, scenario::BF16);
  EXPECT_THAT(std::string(model->name()), ::testing::HasSubstr("analytic"));

  ir::Compute gemm;
  gemm.set_op_class(ir::GEMM);
  gemm.set_flops(1e12);
  gemm.set_bytes(1e8);
  EXPECT_EQ(model->compute(gemm), RooflineModel(cluster.gpu(), scenario::BF16).time(gemm));

  const CollectiveModel collectives(interconnect_from(cluster));
  const GroupShape tp{8, 1, 8};
  const int64_t bytes = 48 << 20;
  EXPECT_EQ(model->collective(ir::ALL_REDUCE, bytes, tp),
            TimeNs::from_seconds(collectives.collective_seconds(ir::ALL_REDUCE, bytes, tp)));
  EXPECT_EQ(model->collective(ir::ALL_REDUCE, bytes, GroupShape{}), TimeNs::zero());
  EXPECT_EQ(model->p2p(bytes, false), TimeNs::from_seconds(collectives.p2p_seconds(bytes, false)));
  EXPECT_LT(model->p2p(bytes, true), model->p2p(bytes, false));
}

// Same question, same answer (the engine caches on that).
TEST(AnalyticCostModel, IsPure) {
  const auto model = make_analytic_cost_model(hgx_hopper(4), scenario::BF16);
  const GroupShape dp{4, 4, 1};
  const TimeNs first = model->collective(ir::REDUCE_SCATTER, 1 << 28, dp);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(model->collective(ir::REDUCE_SCATTER, 1 << 28, dp), first);
}

TEST(AnalyticCostModel, ConstructionValidatesTheCluster) {
  auto cluster = hgx_hopper(2);
  cluster.mutable_gpu()->clear_hbm_bandwidth_gb_per_s();
  EXPECT_THAT([&] { make_analytic_cost_model(cluster, scenario::BF16); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("hbm_bandwidth_gb_per_s")));
}

}  // namespace
}  // namespace lacuna::cost
