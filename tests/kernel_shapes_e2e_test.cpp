// End-to-end: `lacuna kernel-shapes` (the device campaign's shape list) and
// `lacuna fit-kernels` (the efficiency fit to measured kernel tables).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <tuple>

#include "calib/shapes.h"
#include "sim/kernelfit/efficiency_fit.h"
#include "sim/kernelfit/measured_table.h"
#include "sim/kernelfit/program_shapes.h"
#include "sim/model/kernels.h"
#include "sim/placement/compile.h"
#include "sim/scenario/scenario.h"
#include "tests/cli_test_util.h"

#include <nlohmann/json.hpp>

namespace lacuna::testing {
namespace {

namespace fs = std::filesystem;

// Every shipped GPU scenario: the campaign's shape rows are exactly the
// distinct kernels the compiler emits (calibrate::extract_shapes, written
// independently for `lacuna calibrate`), and each row reads back through
// the table parser.
// Compiling every shipped scenario takes about 50 s in a Release build (the
// 1T and 530B validation rows, 6–12 s each); the sanitizer build checks the
// llm/ and moe/ folders (the property is the same code path; memory safety
// is what it adds).
TEST(KernelShapesE2E, RowsAreTheCompiledKernelsOfEveryShippedScenario) {
  int checked = 0;
#if defined(LACUNA_SANITIZED)
  constexpr bool kEvery = false;
#else
  constexpr bool kEvery = true;
#endif
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(source_path("scenarios")))
    if (e.path().extension() == ".pbtxt") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& path : files) {
    if (!kEvery && path.string().find("/llm/") == std::string::npos && path.string().find("/moe/") == std::string::npos)
      continue;
    const fs::directory_entry e(path);
    const scenario::LoadedScenario s = scenario::load_scenario(e.path().string());
    const std::string preset = s.spec.cluster().preset();
    if (preset.empty() || s.spec.training().precision() == scenario::FP32) continue;  // CPU references
    const ir::Program program = placement::compile(s);
    const kernelfit::ProgramShapes shapes = kernelfit::program_shapes(program, preset, e.path().stem().string());
    std::set<std::tuple<int, int, std::vector<int64_t>>> from_rows, from_compiler;
    for (const auto& r : shapes.rows)
      from_rows.insert({r.op_class, model::variant_of(kernelfit::phase_of(r.pass)), r.shape});
    for (const auto& [key, use] : calibrate::extract_shapes(program))
      from_compiler.insert({key.op_class, key.variant, key.shape});
    EXPECT_EQ(from_rows, from_compiler) << e.path();
    const auto back = kernelfit::parse_measured_table(kernelfit::format_measured_table(shapes.rows, {}), "t");
    EXPECT_EQ(back.size(), shapes.rows.size()) << e.path();
    ++checked;
  }
  EXPECT_GE(checked, kEvery ? 40 : 6);
}

TEST(KernelShapesE2E, WritesOnePresetsShapesAndNamesWhatItSkips) {
  TempDir dir("kernel-shapes");
  const std::string out = dir / "shapes.csv";
  const auto r = run_lacuna("kernel-shapes --preset h100-sxm " + source_path("scenarios/validation/ptdp-01-1.7b.pbtxt") + " " +
                            source_path("scenarios/llm/gpt3-175b-3072.pbtxt") + " -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = kernelfit::read_measured_table(out);
  ASSERT_FALSE(rows.empty());
  for (const auto& k : rows) {
    EXPECT_EQ(k.gpu, "h100-sxm");
    EXPECT_FALSE(k.time_us.has_value());
  }
  // The A100 scenario is named and left out, not mixed in.
  EXPECT_NE(r.output.find("ptdp-01-1.7b.pbtxt runs on a100-80gb-sxm, not h100-sxm: skipped"), std::string::npos)
      << r.output;
}

TEST(KernelShapesE2E, RefusesToWriteOverItsInput) {
  TempDir dir("kernel-shapes-input");
  const fs::path copy = dir / "s.pbtxt";
  fs::copy_file(source_path("scenarios/llm/gpt3-175b-3072.pbtxt"), copy);
  const std::string before = read_file(copy);
  const auto r = run_lacuna("kernel-shapes " + copy.string() + " -o " + copy.string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(read_file(copy), before);
}

TEST(FitKernelsE2E, FitsATableAndRefusesAnotherGpusRow) {
  TempDir dir("fit-kernels");
  const std::string table = dir / "t.csv";
  std::string text = std::string(kernelfit::kMeasuredTableHeader) + "\n";
  for (int t : {1024, 2048, 4096, 8192})
    for (int h : {4096, 8192}) {
      text += "h100-sxm,GEMM,fwd,bf16," + std::to_string(t) + " " + std::to_string(3 * h) + " " + std::to_string(h) +
              "," + std::to_string(2.0 * t * 3 * h * h / 700e12 * 1e6) + ",g" + std::to_string(h % 3 + t % 5) + ",\n";
      text += "h100-sxm,RMSNORM,fwd,bf16," + std::to_string(t) + " " + std::to_string(h) + "," +
              std::to_string(4.0 * t * h / 1.5e12 * 1e6 + 3) + ",g" + std::to_string(t % 3) + ",\n";
    }
  {
    std::ofstream(table) << text;
  }
  const std::string csv = dir / "fit.csv";
  const auto r = run_lacuna("fit-kernels " + table + " --csv " + csv);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* s : {"GEMM flops efficiency", "RMSNORM memory efficiency", "| GEMM fwd bf16 | 8 |", "held out"})
    EXPECT_NE(r.output.find(s), std::string::npos) << s << "\n" << r.output;
  EXPECT_EQ(kernelfit::parse_measured_table(text, "t").size(), 16u);
  EXPECT_NE(read_file(csv).find("measured_us,before_us,fitted_us,held_out_us"), std::string::npos);

  {
    std::ofstream(table, std::ios::app) << "a100-80gb-sxm,GEMM,fwd,bf16,1024 1024 1024,10,g,\n";
  }
  const auto bad = run_lacuna("fit-kernels " + table);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find(table + ":18:1: gpu: a kernel measured on a100-80gb-sxm in a fit of h100-sxm"),
            std::string::npos)
      << bad.output;
}

}  // namespace
}  // namespace lacuna::testing

namespace lacuna::testing {
namespace {

// A profile made as the device campaign makes one, with stand-in times: the
// roofline's own time of each kernel of `scenario`, times `factor`.
std::string stand_in_profile(const TempDir& dir, const std::string& scenario, double factor, const std::string& name) {
  const std::string shapes = dir / (name + ".shapes.csv"), measured = dir / (name + ".csv"),
                    profile = dir / (name + ".pbtxt");
  EXPECT_EQ(run_lacuna("kernel-shapes " + scenario + " -o " + shapes).exit_code, 0);
  auto rows = kernelfit::read_measured_table(shapes);
  const scenario::GpuSpec gpu = scenario::hardware_preset(rows.front().gpu).gpu();
  for (auto& k : rows) k.time_us = factor * kernelfit::predict_s(gpu, k) * 1e6;
  {
    std::ofstream(measured) << kernelfit::format_measured_table(rows, {"source: a test's stand-in measurement"});
  }
  const auto c = run_lacuna("calibrate --from-table " + measured + " -o " + profile);
  EXPECT_EQ(c.exit_code, 0) << c.output;
  return profile;
}

// search --calibration simulates its best plans with the profile's kernels
// (the screen stays the roofline's) and names it among its constraints; a
// profile of another GPU is refused by name before anything runs.
TEST(CalibrateFromTableE2E, SearchSimulatesWithTheProfileAndRefusesAnotherGpus) {
  TempDir dir("search-calib");
  const std::string scenario = source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt");
  const std::string profile = stand_in_profile(dir, scenario, 2.0, "h100");
  const std::string space = scenario + " --fix parallel.recompute=RECOMPUTE_NONE --fix parallel.cp=1 --simulate 3 --top 3";
  const auto r = run_lacuna("search " + space + " --calibration " + profile + " --summary-only 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto plain = run_lacuna("search " + space + " --summary-only 2>/dev/null");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const auto cj = nlohmann::json::parse(r.output), pj = nlohmann::json::parse(plain.output);
  EXPECT_EQ(cj["constraints"].back(), "--calibration " + profile);
  // Kernels measured at twice the roofline: the best simulated plan is slower.
  EXPECT_GT(cj["top"][0]["simulated"]["iteration_s"].get<double>(),
            1.3 * pj["top"][0]["simulated"]["iteration_s"].get<double>());
  // The screen is the roofline's closed form either way: the same plans are simulated.
  auto ids = [](const nlohmann::json& j) {
    std::set<int64_t> s;
    for (const auto& t : j["top"]) s.insert(t["id"].get<int64_t>());
    return s;
  };
  EXPECT_EQ(ids(cj), ids(pj));

  const std::string a100 = stand_in_profile(dir, source_path("scenarios/validation/ptdp-01-1.7b.pbtxt"), 1.0, "a100");
  const auto bad = run_lacuna("search " + space + " --calibration " + a100 + " --summary-only");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("the profile was measured on \"NVIDIA A100-SXM4-80GB\""), std::string::npos) << bad.output;
}

// validate --calibration: the SAR rows the profile was measured for (A100,
// BF16) gain a calibrated column, slower with kernels at twice the roofline
// and exact at the scenario the profile was measured from; a table whose rows
// all run at another precision (PTD-P: FP16) is refused by name.
TEST(CalibrateFromTableE2E, ValidateAddsACalibratedColumnForTheProfilesRows) {
  TempDir dir("validate-calib");
  const std::string rows = dir / "rows";
  std::filesystem::create_directories(rows);
  for (const char* f : {"sar-22b-full.pbtxt", "sar-22b-selective-sp.pbtxt", "ptdp-01-1.7b.pbtxt"})
    std::filesystem::copy_file(source_path(std::string("scenarios/validation/") + f), rows + "/" + f);
  const std::string profile = stand_in_profile(dir, rows + "/sar-22b-full.pbtxt", 2.0, "a100");
  const auto r = run_lacuna("validate --only sar --scenarios " + rows + " --calibration " + profile + " --json " +
                            (dir / "v.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("error calibrated"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 of 2 rows"), std::string::npos) << r.output;
  const auto j = nlohmann::json::parse(read_file(dir / "v.json"));
  EXPECT_EQ(j["calibration"]["profile"], profile);
  const auto& table = j["tables"]["sar"];
  EXPECT_EQ(table["calibrated_rows"].get<int>(), 2);
  for (const auto& row : table["rows"]) {
    SCOPED_TRACE(row["name"].get<std::string>());
    // Kernels at twice the roofline's time: the iteration is longer.
    EXPECT_GT(row["predicted_calibrated"].get<double>(), 1.3 * row["predicted"].get<double>());
    if (row["name"] == "sar-22b-full.pbtxt")
      EXPECT_DOUBLE_EQ(row["calibrated_kernel_time_exact_share"].get<double>(), 1.0);
  }

  const auto fp16 = run_lacuna("validate --only ptdp --scenarios " + rows + " --calibration " + profile);
  EXPECT_EQ(fp16.exit_code, 2) << fp16.output;
  EXPECT_NE(fp16.output.find(profile + ": device.name: the profile was measured on \"NVIDIA A100-SXM4-80GB\", BF16, "
                             "but the ptdp rows run on \"NVIDIA A100-SXM4-80GB\" in FP16"),
            std::string::npos)
      << fp16.output;
  const auto nccl = run_lacuna("validate --only nccl --calibration " + profile);
  EXPECT_EQ(nccl.exit_code, 2) << nccl.output;
}

// The device campaign's flow without a GPU: kernel-shapes lists a scenario's
// kernels, a stand-in measurement fills every time (the roofline's own time
// doubled, what kernel_bench.py would write on a GPU), calibrate
// --from-table makes a profile, and simulate --calibration times every
// kernel exactly from it: the iteration is slower than the roofline's.
TEST(CalibrateFromTableE2E, CampaignTableTimesEveryKernelOfItsScenario) {
  TempDir dir("from-table");
  const std::string scenario = source_path("scenarios/llm/gpt-1.3b-8gpu.pbtxt");
  const std::string shapes = dir / "shapes.csv", measured = dir / "measured.csv", profile = dir / "p.pbtxt";
  ASSERT_EQ(run_lacuna("kernel-shapes " + scenario + " -o " + shapes).exit_code, 0);
  auto rows = kernelfit::read_measured_table(shapes);
  const scenario::GpuSpec gpu = scenario::hardware_preset(rows.front().gpu).gpu();
  for (auto& k : rows) k.time_us = 2 * kernelfit::predict_s(gpu, k) * 1e6;
  {
    std::ofstream(measured) << kernelfit::format_measured_table(rows, {"source: a test's stand-in measurement"});
  }
  const auto c = run_lacuna("calibrate --from-table " + measured + " -o " + profile);
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("BF16 points in"), std::string::npos) << c.output;

  const auto calibrated = run_lacuna("simulate " + scenario + " --fold --ideal --no-trace --no-svg --calibration " +
                                     profile + " --json " + (dir / "c.json"));
  ASSERT_EQ(calibrated.exit_code, 0) << calibrated.output;
  const auto plain = run_lacuna("simulate " + scenario + " --fold --ideal --no-trace --no-svg --json " + (dir / "p.json"));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const auto cj = nlohmann::json::parse(read_file(dir / "c.json"));
  const auto pj = nlohmann::json::parse(read_file(dir / "p.json"));
  EXPECT_EQ(cj["calibration"]["kernels"]["interpolated"].get<int>(), 0) << cj["calibration"].dump();
  EXPECT_EQ(cj["calibration"]["kernels"]["extrapolated"].get<int>(), 0) << cj["calibration"].dump();
  EXPECT_GT(cj["calibration"]["kernels"]["exact"].get<int>(), 0);
  EXPECT_GT(cj["iteration_time_ns"].get<int64_t>(), pj["iteration_time_ns"].get<int64_t>());

  // The table names its own input: -o over it is refused, the table unchanged.
  const std::string before = read_file(measured);
  EXPECT_NE(run_lacuna("calibrate --from-table " + measured + " -o " + measured).exit_code, 0);
  EXPECT_EQ(read_file(measured), before);
}

}  // namespace
}  // namespace lacuna::testing
