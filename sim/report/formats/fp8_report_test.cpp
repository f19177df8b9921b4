// FP8 programs state MFU on both peaks and their FP8 breakdown (docs/fp8.md
// #mfu, #breakdown); other programs print and write exactly as before.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sim/report/analyses/fp8_breakdown.h"
#include "sim/report/formats/json_report.h"
#include "sim/report/analyses/summary.h"
#include "sim/report/formats/terminal_report.h"
#include "sim/report/observers/test_fixture.h"

namespace lacuna::report {
namespace {

// The two-rank fixture as an FP8 program: BF16 peak 5e9, FP8 peak 1e10
// (ProgramInfo.peak_flops_per_gpu, the program precision's, stays 1e10).
ir::Program fp8_program() {
  ir::Program p = testing::two_rank_program();
  p.mutable_info()->set_precision(scenario::FP8);
  p.mutable_info()->mutable_fp8()->set_recipe(scenario::FP8_CURRENT);
  p.mutable_info()->set_peak_bf16_flops_per_gpu(5e9);
  p.mutable_info()->set_peak_fp8_flops_per_gpu(1e10);
  return p;
}

Summary run(const ir::Program& p) {
  BubbleAccounting acc;
  testing::replay(p, {&acc}, false);
  return summarize(p, acc, "test cost model", false);
}

TEST(Fp8Report, MfuOnBothPeaks) {
  const ir::Program p = fp8_program();
  const Summary s = run(p);
  const auto j = nlohmann::json::parse(summary_json(s));
  ASSERT_TRUE(j.contains("fp8"));
  const double achieved = s.tflops_per_gpu * 1e12;
  EXPECT_DOUBLE_EQ(j["fp8"]["mfu_bf16_peak"].get<double>(), achieved / 5e9);
  EXPECT_DOUBLE_EQ(j["fp8"]["mfu_fp8_peak"].get<double>(), achieved / 1e10);
  EXPECT_DOUBLE_EQ(j["fp8"]["mfu_fp8_peak"].get<double>(), s.mfu);  // the headline MFU is on the program's peak
  EXPECT_DOUBLE_EQ(j["fp8"]["mfu_bf16_peak"].get<double>(), 2 * s.mfu);
  EXPECT_EQ(j["fp8"]["recipe"], "FP8_CURRENT");
  EXPECT_FALSE(j["fp8"]["mfu_convention"].get<std::string>().empty());
  const std::string t = format_summary(s, RunStats{});
  EXPECT_NE(t.find("MFU on BF16 peak"), std::string::npos) << t;
  EXPECT_NE(t.find("MFU on FP8 peak"), std::string::npos) << t;
}

TEST(Fp8Report, NonFp8ProgramsHaveNeither) {
  const Summary s = run(testing::two_rank_program());
  EXPECT_FALSE(nlohmann::json::parse(summary_json(s)).contains("fp8"));
  EXPECT_EQ(format_summary(s, RunStats{}).find("MFU on"), std::string::npos);
}

// A cost model that times a kernel by its bytes (1 ns per byte) and every
// collective 7 ns.
class BytesCost : public cost::CostModel {
 public:
  std::string_view name() const override { return "bytes"; }
  TimeNs compute(const ir::Compute& op) const override { return TimeNs(static_cast<int64_t>(op.bytes())); }
  TimeNs collective(ir::CollectiveKind, int64_t, const cost::GroupShape&) const override { return TimeNs(7); }
  TimeNs p2p(int64_t, bool) const override { return TimeNs(0); }
};

TEST(Fp8Report, BreakdownSumsTheKernelsByKindAndRole) {
  ir::Program p = fp8_program();
  auto* compute = p.mutable_classes(0)->mutable_streams(testing::kCompute);
  auto add = [&](ir::OpClass cls, ir::KernelRole role, scenario::Precision prec, double bytes) {
    ir::Op* op = compute->add_ops();
    op->set_phase(ir::FORWARD);
    op->mutable_compute()->set_op_class(cls);
    op->mutable_compute()->set_role(role);
    op->mutable_compute()->set_bytes(bytes);
    if (prec != scenario::PRECISION_UNSPECIFIED) op->mutable_compute()->set_precision(prec);
  };
  add(ir::GEMM, ir::ROLE_QKV, scenario::FP8, 100);
  add(ir::GEMM, ir::ROLE_QKV, scenario::FP8, 50);
  add(ir::GEMM, ir::ROLE_LOGITS, scenario::PRECISION_UNSPECIFIED, 30);
  add(ir::ELEMENTWISE, ir::ROLE_FP8_CAST, scenario::PRECISION_UNSPECIFIED, 20);
  add(ir::ELEMENTWISE, ir::ROLE_FP8_AMAX, scenario::PRECISION_UNSPECIFIED, 10);
  const Fp8Breakdown b = fp8_breakdown(p, BytesCost{});
  EXPECT_EQ(b.recipe, "FP8_CURRENT");
  ASSERT_EQ(b.ranks.size(), 1u);
  const auto& r = b.ranks[0];
  EXPECT_EQ(r.total("gemm_fp8"), TimeNs(150));
  // The fixture's own GEMMs carry no bytes: 0 ns each, plus the logits' 30.
  EXPECT_EQ(r.total("gemm_bf16"), TimeNs(30));
  EXPECT_EQ(r.total("fp8_cast"), TimeNs(20));
  EXPECT_EQ(r.total("fp8_amax"), TimeNs(10));
  EXPECT_EQ(r.rows.front().what, "gemm_fp8");
  EXPECT_EQ(r.rows.front().role, "qkv");
  EXPECT_EQ(r.rows.front().ops, 2);
  EXPECT_NE(format_fp8_breakdown(b).find("FP8 GEMM 150 ns"), std::string::npos) << format_fp8_breakdown(b);
}

}  // namespace
}  // namespace lacuna::report
