// End-to-end: `lacuna simulate --calibration PROFILE` (and compare) with a
// profile made here from the program's own kernel shapes.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "sim/calibration/fit.h"
#include "sim/calibration/profile_io.h"
#include "sim/cost/cost_model.h"
#include "sim/placement/compile.h"
#include "sim/scenario/scenario.h"
#include "tests/cli_test_util.h"

namespace lacuna::testing {
namespace {

const std::string kScenario = source_path("tests/data/tiny-vit-gpt-8gpu.pbtxt");
const std::string kLlm = source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt");  // LLM-only: no planning
const std::string kH100 = "NVIDIA H100 80GB HBM3";

struct Kernel {
  std::vector<int64_t> shape;
  double flops = 0;
  double bytes = 0;
  int64_t ns = 0;  // what the profile will say
};
using TableKey = std::pair<ir::OpClass, ir::KernelVariant>;

// Every distinct kernel the scenario's program runs, timed at 1.7 × the
// analytic roofline (so that calibrated runs differ from analytic ones).
std::map<TableKey, std::map<std::vector<int64_t>, Kernel>> program_kernels(const std::string& scenario_path) {
  const ir::Program program = placement::compile(scenario::load_scenario(scenario_path));
  const auto analytic = cost::make_analytic_cost_model(program.cluster(), program.info().precision());
  std::map<TableKey, std::map<std::vector<int64_t>, Kernel>> out;
  for (const auto& c : program.classes())
    for (const auto& s : c.streams())
      for (const auto& op : s.ops()) {
        if (!op.has_compute() || op.compute().fixed_duration_ns() > 0) continue;
        const ir::Compute& k = op.compute();
        const std::vector<int64_t> shape(k.shape().begin(), k.shape().end());
        const int64_t ns = std::max<int64_t>(1, analytic->compute(k).count() * 17 / 10);
        out[{k.op_class(), k.variant()}].emplace(shape, Kernel{shape, k.flops(), k.bytes(), ns});
      }
  return out;
}

calib::Measurement measurement(const Kernel& k) {
  calib::Measurement m;
  for (int64_t d : k.shape) m.add_shape(d);
  m.set_time_ns(k.ns);
  m.set_min_ns(k.ns);
  m.set_max_ns(k.ns);
  m.set_repetitions(3);
  m.set_flops(k.flops);
  m.set_bytes(k.bytes);
  m.set_from_scenario(true);
  return m;
}

struct ProfileOptions {
  std::string scenario = kScenario;  // whose kernels are measured
  std::string device = kH100;
  std::set<ir::OpClass> drop;  // classes left out of the profile
  double collective_busbw = 0;  // > 0: all-gather / reduce-scatter / all-reduce fits for NVLink groups of 2–8
};

// Measured at the program's shapes, except: LAYERNORM shapes are replaced by
// grid points at half and twice their first dimension (→ interpolated), and
// GELU keeps only its first shape (the others → extrapolated with the fit).
calib::CalibrationProfile make_profile(const ProfileOptions& o) {
  calib::CalibrationProfile p;
  p.set_format_version(1);
  p.set_lacuna_version("test");
  p.mutable_device()->set_kind(calib::DeviceInfo::GPU);
  p.mutable_device()->set_name(o.device);
  p.set_precision(scenario::BF16);
  p.set_scenario("tests/data/tiny-vit-gpt-8gpu.pbtxt");
  p.set_method("synthetic: 1.7 x analytic roofline");
  for (const auto& [key, kernels] : program_kernels(o.scenario)) {
    if (o.drop.contains(key.first)) continue;
    calib::OpTable* t = p.add_ops();
    t->set_op_class(key.first);
    t->set_variant(key.second);
    std::set<std::vector<int64_t>> written;
    auto add = [&](const Kernel& k) {
      if (written.insert(k.shape).second) *t->add_points() = measurement(k);
    };
    bool first = true;
    for (const auto& [shape, k] : kernels) {
      if (key.first == ir::LAYERNORM) {
        Kernel lo = k, hi = k;
        lo.shape[0] = std::max<int64_t>(1, k.shape[0] / 2);
        lo.ns = std::max<int64_t>(1, k.ns / 2);
        hi.shape[0] = k.shape[0] * 2;
        hi.ns = k.ns * 2;
        lo.flops /= 2;
        lo.bytes /= 2;
        hi.flops *= 2;
        hi.bytes *= 2;
        if (!kernels.contains(lo.shape)) add(lo);
        if (!kernels.contains(hi.shape)) add(hi);
      } else if (key.first != ir::GELU || first) {
        add(k);
      }
      first = false;
    }
    *t->mutable_fit() = calibration::fit_roofline(*t);
  }
  if (o.collective_busbw > 0) {
    for (ir::CollectiveKind kind : {ir::ALL_GATHER, ir::REDUCE_SCATTER, ir::ALL_REDUCE}) {
      for (int n : {2, 4, 8}) {
        std::vector<calib::CollectivePoint> pts;
        for (int64_t bytes : {int64_t{1} << 20, int64_t{1} << 26}) {
          calib::CollectivePoint cp;
          cp.set_bytes(bytes);
          cp.set_time_ns(50000 + std::llround(static_cast<double>(bytes) * calibration::bus_factor(kind, false, n) /
                                              o.collective_busbw * 1e9));
          pts.push_back(cp);
        }
        *p.add_collectives() = calibration::fit_collective(kind, false, n, calib::NVLINK, pts);
      }
    }
  }
  return p;
}

std::string write(const TempDir& dir, const std::string& name, const ProfileOptions& o) {
  const std::string path = dir / name;
  calibration::write_profile(make_profile(o), path);
  return path;
}

nlohmann::json simulate_json(const std::string& args, const TempDir& dir, std::string* output = nullptr) {
  const auto r = run_lacuna("simulate " + args + " --no-trace --no-svg --json " + (dir / "o.json"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  if (output) *output = r.output;
  return nlohmann::json::parse(read_file(dir / "o.json"));
}

TEST(CalibrationE2E, SimulatePrintsCoverageAndUsesMeasuredTimes) {
  TempDir dir("calib-sim");
  const std::string profile = write(dir, "h100.pbtxt", {});
  std::string out;
  const auto calibrated = simulate_json(kScenario + " --calibration " + profile, dir, &out);
  EXPECT_NE(out.find("  calibration              " + profile + " on " + kH100 + "; exact "), std::string::npos) << out;
  EXPECT_NE(out.find("% of kernel time ("), std::string::npos) << out;
  for (const char* cls : {"    GEMM ", "    LAYERNORM ", "    GELU "}) EXPECT_NE(out.find(cls), std::string::npos) << cls;
  EXPECT_NE(out.find("calibrated kernels: " + kH100 + " profile " + profile), std::string::npos) << out;

  ASSERT_TRUE(calibrated.contains("calibration")) << calibrated.dump();
  const auto& c = calibrated["calibration"];
  EXPECT_EQ(c["profile"], profile);
  EXPECT_EQ(c["device"], kH100);
  // Every kind occurs: measured shapes, LAYERNORM between grid points, GELU outside its one point.
  for (const char* kind : {"exact", "interpolated", "extrapolated"}) {
    EXPECT_GT(c["kernels"][kind].get<int>(), 0) << kind;
    EXPECT_GT(c["time_fraction"][kind].get<double>(), 0.0) << kind;
  }
  EXPECT_EQ(c["by_class"]["LAYERNORM"]["kernels"]["exact"].get<int>(), 0);
  EXPECT_GT(c["by_class"]["LAYERNORM"]["kernels"]["interpolated"].get<int>(), 0);
  EXPECT_EQ(c["by_class"]["GEMM"]["kernels"]["interpolated"].get<int>(), 0);
  EXPECT_NEAR(c["time_fraction"]["exact"].get<double>() + c["time_fraction"]["interpolated"].get<double>() +
                  c["time_fraction"]["extrapolated"].get<double>(),
              1.0, 1e-12);

  const auto plain = simulate_json(kScenario, dir);
  EXPECT_FALSE(plain.contains("calibration"));
  EXPECT_EQ(plain["cost_model"].get<std::string>().rfind("roofline compute; ", 0), 0u) << plain["cost_model"];
  // Kernels take 1.7 × the roofline: the iteration is slower.
  EXPECT_GT(calibrated["iteration_time_ns"].get<int64_t>(), plain["iteration_time_ns"].get<int64_t>());
}

TEST(CalibrationE2E, CalibratedOutputsAreDeterministic) {
  TempDir a("calib-det-a"), b("calib-det-b");
  const std::string profile = write(a, "h100.pbtxt", {});
  simulate_json(kScenario + " --calibration " + profile, a);
  simulate_json(kScenario + " --calibration " + profile, b);
  EXPECT_EQ(read_file(a / "o.json"), read_file(b / "o.json"));
}

TEST(CalibrationE2E, MissingKernelClassFailsAndWritesNothing) {
  TempDir dir("calib-missing");
  const std::string profile = write(dir, "no-attn.pbtxt", ProfileOptions{kScenario, kH100, {ir::ATTENTION}, 0});
  const auto r = run_lacuna("simulate " + kScenario + " --calibration " + profile + " --out-dir " +
                            (dir / "out") + " --json " + (dir / "o.json"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("lacuna: error: " + profile + ": the calibration profile has no kernel table for ATTENTION"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("re-run `lacuna calibrate` with --scenario " + kScenario + ","), std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "o.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "out"));
}

TEST(CalibrationE2E, WrongDeviceFailsUnlessAllowed) {
  TempDir dir("calib-device");
  const std::string profile = write(dir, "a100.pbtxt", ProfileOptions{kScenario, "NVIDIA A100-SXM4-80GB", {}, 0});
  const auto r = run_lacuna("simulate " + kScenario + " --calibration " + profile + " --out-dir " + (dir / "out") +
                            " --json " + (dir / "o.json"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("the profile was measured on \"NVIDIA A100-SXM4-80GB\", but the scenario's GPU "
                          "(cluster.gpu.name) is \"NVIDIA H100 80GB HBM3\""),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("--allow-device-mismatch"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "o.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "out"));

  const auto allowed = simulate_json(kScenario + " --calibration " + profile + " --allow-device-mismatch", dir);
  EXPECT_NE(allowed["cost_model"].get<std::string>().find("device mismatch allowed"), std::string::npos);
}

TEST(CalibrationE2E, InvalidProfileNamesFileAndLine) {
  TempDir dir("calib-invalid");
  const std::string profile = dir / "bad.pbtxt";
  {
    std::ofstream f(profile);
    f << "format_version: 1\ndevice { kind: GPU name: \"x\" }\nops { op_class: GEMM points { shape: [1] time_ns: -5 "
         "min_ns: 1 max_ns: 1 repetitions: 1 } fit { flops_per_s: 1 } }\n";
  }
  const auto r = run_lacuna("simulate " + kScenario + " --calibration " + profile + " --no-trace --no-svg");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(profile + ":3:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ops[0].points[0].time_ns: must be > 0, got -5"), std::string::npos) << r.output;
}

// Collective fits time communication only with --network analytic; the flow
// network (the default) ignores them. (An LLM-only scenario: placements that
// plan, like Optimus, ask the cost model about collectives while planning, in
// either mode.)
TEST(CalibrationE2E, CollectiveFitsApplyToTheAnalyticNetworkOnly) {
  TempDir dir("calib-coll");
  const std::string kernels_only = write(dir, "k.pbtxt", ProfileOptions{kLlm, kH100, {}, 0});
  const std::string with_comm = write(dir, "kc.pbtxt", ProfileOptions{kLlm, kH100, {}, 5e9});  // slow links
  const auto t = [&](const std::string& args) {
    return simulate_json(kLlm + " " + args, dir)["iteration_time_ns"].get<int64_t>();
  };
  EXPECT_GT(t("--network analytic --calibration " + with_comm), t("--network analytic --calibration " + kernels_only));
  EXPECT_EQ(t("--network flow --calibration " + with_comm), t("--network flow --calibration " + kernels_only));
}

TEST(CalibrationE2E, CompiledProgramAndCompareAcceptTheProfile) {
  TempDir dir("calib-pb");
  const std::string profile = write(dir, "h100.pbtxt", {});
  const auto c = run_lacuna("compile " + kScenario + " -o " + (dir / "p.pb"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  std::string out;
  const auto j = simulate_json((dir / "p.pb") + " --calibration " + profile, dir, &out);
  EXPECT_TRUE(j.contains("calibration"));

  const auto r = run_lacuna("compare " + kScenario + " --calibration " + profile + " --no-svg");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("calibrated kernels: " + kH100), std::string::npos) << r.output;
}

}  // namespace
}  // namespace lacuna::testing
