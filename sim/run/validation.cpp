#include "sim/run/validation.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/calibration/calibrated_cost_model.h"
#include "sim/calibration/coverage.h"
#include "sim/calibration/profile_io.h"
#include "sim/core/error.h"
#include "sim/core/parallel_map.h"
#include "sim/engine/simulator.h"
#include "sim/placement/compile.h"
#include "sim/run/lazy_cost_model.h"
#include "sim/run/single_run.h"
#include "sim/scenario/scenario.h"

namespace lacuna::run {

double ValidationRow::error_of(double v) const {
  if (v < lo) return (v - lo) / lo;
  if (v > hi) return (v - hi) / hi;
  return 0;
}

double ValidationTable::mae() const {
  double s = 0;
  for (const ValidationRow& r : rows) s += std::abs(r.error());
  return rows.empty() ? 0 : s / static_cast<double>(rows.size());
}
double ValidationTable::mae_before() const {
  double s = 0;
  for (const ValidationRow& r : rows) s += std::abs(r.before_error());
  return rows.empty() ? 0 : s / static_cast<double>(rows.size());
}
double ValidationTable::bias() const {
  double s = 0;
  for (const ValidationRow& r : rows) s += r.error();
  return rows.empty() ? 0 : s / static_cast<double>(rows.size());
}
double ValidationTable::bias_before() const {
  double s = 0;
  for (const ValidationRow& r : rows) s += r.before_error();
  return rows.empty() ? 0 : s / static_cast<double>(rows.size());
}
int ValidationTable::calibrated_rows() const {
  return static_cast<int>(
      std::count_if(rows.begin(), rows.end(), [](const ValidationRow& r) { return r.calibrated.has_value(); }));
}
double ValidationTable::mae_calibrated() const {
  double s = 0;
  for (const ValidationRow& r : rows) s += std::abs(r.calibrated_error());
  return calibrated_rows() == 0 ? 0 : s / calibrated_rows();
}
const ValidationRow* ValidationTable::worst() const {
  const ValidationRow* w = nullptr;
  for (const ValidationRow& r : rows)
    if (w == nullptr || std::abs(r.error()) > std::abs(w->error())) w = &r;
  return w;
}

namespace {

namespace fs = std::filesystem;

// The profile of --calibration, read once, and which rows it applies to.
struct ValidationProfile {
  CalibrationChoice choice;
  calib::CalibrationProfile profile;
  // A row is calibrated when the profile was measured on its GPU at its
  // precision, or with --allow-device-mismatch.
  bool applies_to(const scenario::Scenario& spec) const {
    const bool device = calibration::check_device(profile, choice.profile, spec.cluster(), /*allow_mismatch=*/true);
    return choice.allow_device_mismatch || (device && profile.precision() == spec.training().precision());
  }
  std::string describe() const {
    return fmt::format("\"{}\", {}", profile.device().name(), scenario::Precision_Name(profile.precision()));
  }
};

struct Simulated {
  double seconds = 0;
  std::string model;  // "<cost model>; <network>"
};

Simulated simulate_row(const ir::Program& program, const cost::CostModel& cost, NetworkMode mode, bool fold) {
  const SimulatedRun r = simulate(program, cost, mode, engine::SimulationOptions{.fold = fold});
  return {r.result.end_time.seconds(), r.models};
}

Simulated simulate_row(const ir::Program& program, NetworkMode mode, bool fold) {
  const LazyAnalyticCostModel cost(program.cluster(), program.info().precision());
  return simulate_row(program, cost, mode, fold);
}

// ---------------------------------------------------------------- collectives

struct NcclCase {
  std::string name;
  std::string collective;
  const char* preset;
  int nodes;
  std::optional<bool> nvls;  // override the preset
  bool p2p = false;          // one send from node 0 to node 1
  int64_t bytes;
  double lo, hi;
  std::string published;
};

// Published nccl-tests figures (shared/reference/models-and-hardware.md §3).
// nccl-tests' plateau: 1 GiB messages (512 MB for the 1,984-GPU row, as
// published); p2p 1 GiB.
std::vector<NcclCase> nccl_cases() {
  constexpr int64_t kGiB = int64_t{1} << 30;
  return {
      {"8×A100 SXM", "all-reduce", "a100-80gb-sxm", 1, std::nullopt, false, kGiB, 230, 230, "≈230"},
      {"8×H100 SXM, NVLS off", "all-reduce", "h100-sxm", 1, false, false, kGiB, 365, 370, "365–370"},
      {"8×H100 SXM, NVLS", "all-reduce", "h100-sxm", 1, true, false, kGiB, 480, 480, "≈480"},
      {"2 × DGX A100 (8 × HDR each)", "all-reduce", "a100-80gb-sxm", 2, std::nullopt, false, kGiB, 192, 192, "≈192"},
      {"H100 NDR, node to node", "p2p (one NIC)", "h100-sxm", 2, std::nullopt, true, kGiB, 46, 49, "46–49"},
      {"248 × 8 H200", "all-reduce 512 MB", "h200-sxm", 248, std::nullopt, false, 512'000'000, 300, 350,
       "≈350, sometimes < 300"},
  };
}

ir::Program nccl_program(const NcclCase& c) {
  ir::Program p;
  scenario::Cluster cluster = scenario::hardware_preset(c.preset);
  cluster.set_num_nodes(c.nodes);
  if (c.nvls) cluster.set_nvls(*c.nvls);
  const int gpn = static_cast<int>(cluster.gpus_per_node());
  *p.mutable_cluster() = cluster;
  const int n = c.p2p ? 2 : c.nodes * gpn;
  auto* info = p.mutable_info();
  info->set_scenario_name("nccl: " + c.name);
  info->set_num_ranks(n);
  info->set_precision(scenario::BF16);
  info->set_peak_flops_per_gpu(scenario::peak_flops_per_s(cluster.gpu(), scenario::BF16));
  auto node_of = [&](int r) { return c.p2p ? r : r / gpn; };
  auto local_of = [&](int r) { return c.p2p ? 0 : r % gpn; };
  if (c.p2p) {
    auto* slot = p.add_peer_slots();
    slot->set_name("peer");
    for (int side = 0; side < 2; ++side) {
      ir::RankClass* k = p.add_classes();
      k->set_name(side == 0 ? "sender" : "receiver");
      ir::Stream* s = k->add_streams();
      s->set_name(side == 0 ? "send" : "recv");
      s->set_kind(side == 0 ? ir::PP_SEND : ir::PP_RECV);
      ir::Op* op = s->add_ops();
      if (side == 0) {
        auto* snd = op->mutable_send();
        snd->set_peer_slot(0);
        snd->set_bytes(c.bytes);
      } else {
        auto* rcv = op->mutable_recv();
        rcv->set_peer_slot(0);
        rcv->set_bytes(c.bytes);
      }
    }
  } else {
    auto* slot = p.add_group_slots();
    slot->set_name("world");
    slot->set_kind(ir::WORLD);
    ir::Group* g = p.add_groups();
    g->set_kind(ir::WORLD);
    for (int r = 0; r < n; ++r) g->add_ranks(r);
    ir::RankClass* k = p.add_classes();
    k->set_name("member");
    ir::Stream* s = k->add_streams();
    s->set_name("comm");
    s->set_kind(ir::DP_COMM);
    auto* coll = s->add_ops()->mutable_collective();
    coll->set_kind(ir::ALL_REDUCE);
    coll->set_group_slot(0);
    coll->set_bytes(c.bytes);
  }
  for (int r = 0; r < n; ++r) {
    ir::RankBinding* b = p.add_ranks();
    b->set_class_id(c.p2p ? r : 0);
    if (c.p2p)
      b->add_peer(1 - r);
    else
      b->add_group(0);
    b->set_node(node_of(r));
    b->set_local_gpu(local_of(r));
  }
  return p;
}

ValidationRow run_nccl(const NcclCase& c, NetworkMode mode, std::string& model) {
  const ir::Program program = nccl_program(c);
  const Simulated s = simulate_row(program, mode, /*fold=*/true);
  const double n = static_cast<double>(program.ranks_size());
  const double factor = c.p2p ? 1.0 : 2.0 * (n - 1) / n;  // nccl-tests busbw factor
  ValidationRow r;
  r.name = c.name;
  r.detail = c.collective;
  r.gpus = program.ranks_size();
  r.iteration_s = s.seconds;
  r.predicted = s.seconds > 0 ? static_cast<double>(c.bytes) * factor / s.seconds / 1e9 : 0;
  r.lo = c.lo;
  r.hi = c.hi;
  r.published = c.published;
  model = s.model;
  return r;
}

// ---------------------------------------------------------------- scenarios

// scenarios/validation: --scenarios, else looked for upwards from the working
// directory and from the executable's directory.
fs::path find_scenario_dir(const std::string& given) {
  if (!given.empty()) {
    if (!fs::is_directory(given))
      throw Error(SourceLocation{given, 0, 0, "‹scenarios›"}, "not a directory",
                  "give the folder holding ptdp-*.pbtxt and sar-*.pbtxt (scenarios/validation)");
    return given;
  }
  std::vector<fs::path> starts{fs::current_path()};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) starts.push_back(exe.parent_path());
  for (fs::path dir : starts) {
    for (int up = 0; up < 6 && !dir.empty(); ++up) {
      const fs::path cand = dir / "scenarios" / "validation";
      if (fs::is_directory(cand)) return cand;
      if (dir == dir.parent_path()) break;
      dir = dir.parent_path();
    }
  }
  throw Error(SourceLocation{{}, 0, 0, "‹scenarios›"}, "cannot find scenarios/validation",
              "run from the lacuna source tree or pass ‹scenarios DIR›");
}

std::vector<fs::path> scenario_files(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name.rfind(prefix, 0) == 0 && e.path().extension() == ".pbtxt") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty())
    throw Error(SourceLocation{dir.string(), 0, 0, {}}, "no " + prefix + "*.pbtxt scenarios in the folder");
  return files;
}

double published_value(const scenario::LoadedScenario& s, const std::string& unit_regex, const std::string& what) {
  const std::regex re("published: ([0-9]+(\\.[0-9]+)?) " + unit_regex);
  std::smatch m;
  const std::string& d = s.spec.description();
  if (!std::regex_search(d, m, re))
    throw Error(SourceLocation{s.path, 0, 0, "description"}, "no published figure in the description",
                "write it as \"published: " + what + "\"");
  return std::stod(m[1].str());
}

ValidationRow run_scenario(const fs::path& file, const std::string& key, NetworkMode mode, const ValidationProfile* profile,
                 std::string& model) {
  const scenario::LoadedScenario loaded = scenario::load_scenario(file.string());
  const bool ptdp = key == "ptdp";
  const double published = ptdp ? published_value(loaded, "TFLOP/s per GPU", "137 TFLOP/s per GPU")
                                 : published_value(loaded, "s iteration", "1.42 s iteration");
  const ir::Program program = placement::compile(loaded);
  const Simulated s = simulate_row(program, mode, /*fold=*/true);
  // Before: the same scenario under the preset's kernel model before the fit.
  scenario::LoadedScenario best_case = loaded;
  scenario::apply_kernel_model(*best_case.spec.mutable_cluster()->mutable_gpu(),
                               scenario::best_case_kernel_model(loaded.spec.cluster().preset()));
  const ir::Program before_program = placement::compile(best_case);
  const double before_s = simulate_row(before_program, mode, /*fold=*/true).seconds;
  ValidationRow r;
  r.name = file.filename().string();
  r.gpus = program.ranks_size();
  r.batch = program.info().global_batch();
  r.iteration_s = s.seconds;
  const auto& info = program.info();
  r.detail = fmt::format("TP {} · PP {} · DP {}{}", info.tp(), info.pp(), info.dp(),
                         info.virtual_stages() > 1 ? fmt::format(" · v {}", info.virtual_stages()) : "");
  r.predicted = ptdp ? (s.seconds > 0 ? info.hardware_flops_per_iteration() / s.seconds /
                                            static_cast<double>(program.ranks_size()) / 1e12
                                      : 0)
                     : s.seconds;
  r.before = ptdp ? (before_s > 0 ? info.hardware_flops_per_iteration() / before_s /
                                        static_cast<double>(program.ranks_size()) / 1e12
                                  : 0)
                   : before_s;
  r.lo = r.hi = published;
  r.published = ptdp ? fmt::format("{:.0f}", published) : fmt::format("{:.2f}", published);
  model = s.model;
  if (profile != nullptr) {
    if (profile->applies_to(loaded.spec)) {
      // Planned and timed with the profile, as `simulate --calibration` does.
      CalibrationChoice choice = profile->choice;
      choice.allow_device_mismatch = true;  // applies_to decided
      const auto cost = make_cost_model(choice, loaded.spec.cluster(), loaded.spec.training().precision(),
                                             file.string());
      const ir::Program calibrated_program = placement::compile(loaded, *cost);
      const auto& calibrated_model = dynamic_cast<const calibration::CalibratedCostModel&>(*cost);
      const calibration::Coverage cov = calibration::kernel_coverage(calibrated_program, calibrated_model.kernels());
      const int64_t total_ns = cov.total.time_ns();
      r.calibrated_exact_share =
          total_ns > 0 ? static_cast<double>(cov.total[calibration::LookupKind::kExact].time_ns) / total_ns : 0;
      const double c_s = simulate_row(calibrated_program, *cost, mode, /*fold=*/true).seconds;
      r.calibrated = ptdp ? (c_s > 0 ? calibrated_program.info().hardware_flops_per_iteration() / c_s /
                                           static_cast<double>(calibrated_program.ranks_size()) / 1e12
                                     : 0)
                          : c_s;
    } else {
      r.not_calibrated = fmt::format("{}, {}", loaded.spec.cluster().gpu().name(),
                                     scenario::Precision_Name(loaded.spec.training().precision()));
    }
  }
  return r;
}

// Runs `n` independent rows on up to `jobs` threads (parallel_map: results
// in index order, the first failing row's error rethrown); `models` gets each
// row's model description.
template <typename F>
std::vector<ValidationRow> run_all(size_t n, int jobs, F&& f, std::vector<std::string>& models) {
  auto done = parallel_map(n, jobs, [&](size_t i) {
    std::string model;
    ValidationRow row = f(i, model);
    return std::make_pair(std::move(row), std::move(model));
  });
  std::vector<ValidationRow> rows;
  models.clear();
  for (auto& [row, model] : done) {
    rows.push_back(std::move(row));
    models.push_back(std::move(model));
  }
  return rows;
}

}  // namespace

ValidationResult run_validation(const ValidationOptions& o) {
  const bool all = o.only.empty();
  const int jobs = resolve_jobs(o.jobs);
  std::optional<ValidationProfile> profile;
  if (o.calibration.enabled()) {
    if (o.only == "nccl")
      throw Error(SourceLocation{{}, 0, 0, "‹calibration›"}, "the nccl table times no kernels",
                  "drop ‹calibration›, or run the ptdp or sar table with it");
    profile = ValidationProfile{o.calibration, calibration::read_profile(o.calibration.profile)};
  }
  ValidationResult result;
  if (profile) result.calibration_measured_on = profile->describe();
  std::vector<ValidationTable>& tables = result.tables;
  std::vector<std::string> models;

  if (all || o.only == "nccl") {
    const auto cases = nccl_cases();
    ValidationTable t;
    t.key = "nccl";
    t.title = "Collectives vs nccl-tests (large messages; busbw = size × nccl-tests factor / simulated time)";
    t.unit = "GB/s bus bandwidth";
    t.rows = run_all(cases.size(), jobs, [&](size_t i, std::string& m) { return run_nccl(cases[i], o.network, m); },
                     models);
    t.simulated_with = models.front();
    tables.push_back(std::move(t));
  }
  std::optional<fs::path> dir;
  auto scenario_table = [&](const std::string& key, std::string title, std::string unit) {
    if (!dir) dir = find_scenario_dir(o.scenarios);
    const auto files = scenario_files(*dir, key + "-");
    if (profile) {
      // A profile that fits none of the table's rows is refused before any
      // run, naming the rows' GPUs and precisions.
      std::set<std::string> kinds;
      bool any = false;
      for (const fs::path& f : files) {
        const scenario::LoadedScenario s = scenario::load_scenario(f.string());
        any = any || profile->applies_to(s.spec);
        kinds.insert(fmt::format("\"{}\" in {}", s.spec.cluster().gpu().name(),
                                 scenario::Precision_Name(s.spec.training().precision())));
      }
      if (!any)
        throw Error(SourceLocation{o.calibration.profile, 0, 0, "device.name"},
                    fmt::format("the profile was measured on {}, but the {} rows run on {}", profile->describe(), key,
                                fmt::join(kinds, ", ")),
                    "calibrate on one of those GPUs at that precision (calib/device/campaign), or pass "
                    "‹allow-device-mismatch› to use these times anyway");
    }
    ValidationTable t;
    t.key = key;
    t.title = std::move(title);
    t.unit = std::move(unit);
    t.rows = run_all(files.size(), jobs,
                     [&](size_t i, std::string& m) {
                       return run_scenario(files[i], key, o.network, profile ? &*profile : nullptr, m);
                     }, models);
    t.simulated_with = models.front();
    // Smallest job first (the papers' order), file name breaking ties.
    std::stable_sort(t.rows.begin(), t.rows.end(), [](const ValidationRow& a, const ValidationRow& b) { return a.gpus < b.gpus; });
    tables.push_back(std::move(t));
  };
  if (all || o.only == "ptdp")
    scenario_table("ptdp",
                   "PTD-P Table 1 (Narayanan et al., SC'21): TFLOP/s per GPU with the paper's eq. 3, folded simulation",
                   "TFLOP/s per GPU");
  if (all || o.only == "sar")
    scenario_table("sar", "SAR Table 5 (Korthikanti et al.): iteration time, folded simulation", "s per iteration");

  return result;
}

}  // namespace lacuna::run
