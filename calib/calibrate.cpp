#include "calib/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "calib/bench_driver.h"
#include "calib/concurrent_case.h"
#include "calib/cpu_probe.h"
#include "calib/device_query.h"
#include "calib/grid.h"
#include "calib/nccl_collectives.h"
#include "kernels/nccl_loader.h"
#include "calib/profile_builder.h"
#include "calib/progress.h"
#include "calib/shapes.h"
#include "kernels/cpu_case.h"
#include "kernels/gpu_case.h"
#include "kernels/gpu_kernels.h"
#include "sim/calibration/fit.h"
#include "sim/calibration/profile_io.h"
#include "sim/core/error.h"


namespace lacuna::calibrate {

namespace nccl = kernels::nccl;

namespace {

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::string describe_op_class_variant(ir::OpClass c, ir::KernelVariant v) {
  return ir::OpClass_Name(c) + " " + ir::KernelVariant_Name(v);
}

// Time estimates: what the plan prints and the CPU skip rule uses.
struct Estimate {
  double seconds = 0;  // one run
  bool skip = false;
};

double work_of(const GridPoint& p) { return p.flops > 0 ? p.flops : p.bytes; }

kernels::CpuCaseOptions cpu_case_options() {
  kernels::CpuCaseOptions o;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) o.max_resident_bytes = std::min<int64_t>(o.max_resident_bytes, int64_t{pages} * page / 4);
  return o;
}

ir::Compute compute_of(const KernelKey& k) {
  ir::Compute c;
  c.set_op_class(k.op_class);
  c.set_variant(k.variant);
  for (int64_t d : k.shape) c.add_shape(d);
  return c;
}

// CPU: a global estimate from the probes, refined per family by timing its
// smallest point once (the reference kernels differ widely in speed).
std::vector<Estimate> estimate_cpu(const std::vector<GridPoint>& points, double max_point_seconds, std::FILE* err) {
  const CpuSpeed speed = probe_cpu_speed();
  fmt::print(err, "calibrate: CPU probes: {:.1f} GFLOP/s (float32 GEMM, one thread), {:.1f} GB/s (memcpy)\n",
             speed.flops_per_s / 1e9, speed.bytes_per_s / 1e9);
  const auto global = [&](const GridPoint& p) {
    // The IR counts 2-byte elements; the CPU kernels move 4-byte floats.
    return std::max(p.flops / speed.flops_per_s, 2.0 * p.bytes / speed.bytes_per_s) + 1e-6;
  };
  std::vector<Estimate> est(points.size());
  std::map<KernelKey, std::vector<size_t>> families;
  for (size_t i = 0; i < points.size(); ++i) families[family_of(points[i].key)].push_back(i);
  const kernels::CpuCaseOptions probe_options = [] {
    kernels::CpuCaseOptions o = cpu_case_options();
    o.max_sets = 1;
    return o;
  }();
  for (const auto& [fam, idx] : families) {
    const size_t smallest = *std::min_element(idx.begin(), idx.end(), [&](size_t a, size_t b) {
      return points[a].key.shape[0] < points[b].key.shape[0];
    });
    double t_probe = -1;
    if (global(points[smallest]) <= max_point_seconds) {
      try {
        auto c = kernels::make_cpu_case(compute_of(points[smallest].key), probe_options);
        c->run_once_ns();
        t_probe = c->run_once_ns() * 1e-9;
      } catch (const Error&) {
        t_probe = -1;  // the benchmark itself reports the problem
      }
    }
    const double w0 = work_of(points[smallest]);
    for (size_t i : idx) {
      est[i].seconds = t_probe >= 0 && w0 > 0 ? t_probe * work_of(points[i]) / w0 : global(points[i]);
      if (i == smallest && t_probe >= 0) est[i].seconds = t_probe;
      est[i].skip = est[i].seconds > max_point_seconds;
    }
  }
  // Every (class, variant) keeps at least its cheapest point: a profile
  // without its table could not time that kernel at all.
  std::map<std::pair<int, int>, std::vector<size_t>> tables;
  for (size_t i = 0; i < points.size(); ++i)
    tables[{points[i].key.op_class, points[i].key.variant}].push_back(i);
  for (const auto& [cv, idx] : tables) {
    if (std::any_of(idx.begin(), idx.end(), [&](size_t i) { return !est[i].skip; })) continue;
    const size_t cheapest =
        *std::min_element(idx.begin(), idx.end(), [&](size_t a, size_t b) { return est[a].seconds < est[b].seconds; });
    est[cheapest].skip = false;
    fmt::print(err, "calibrate: warning: every {} point is estimated above --max-point-seconds; measuring the "
                    "cheapest one ({}, ~{:.1f} s) so the profile has a table for it\n",
               describe_op_class_variant(static_cast<ir::OpClass>(cv.first), static_cast<ir::KernelVariant>(cv.second)),
               describe(points[cheapest].key), est[cheapest].seconds);
  }
  return est;
}

std::vector<Estimate> estimate_gpu(const std::vector<GridPoint>& points) {
  // Rough (an H100-class GPU): only for the plan's time estimate; nothing is skipped.
  std::vector<Estimate> est(points.size());
  for (size_t i = 0; i < points.size(); ++i)
    est[i].seconds = std::max(points[i].flops / 400e12, points[i].bytes / 2e12) + 10e-6;
  return est;
}

std::string rate_text(double per_s, bool flops) {
  const char* unit = flops ? "FLOP/s" : "B/s";
  if (per_s >= 1e12) return fmt::format("{:.2f} T{}", per_s / 1e12, unit);
  if (per_s >= 1e9) return fmt::format("{:.2f} G{}", per_s / 1e9, unit);
  return fmt::format("{:.2f} M{}", per_s / 1e6, unit);
}

void print_summary(const calib::CalibrationProfile& profile, std::FILE* out) {
  fmt::print(out, "\n{:<14} {:<24} {:>7} {:>6} {:>16} {:>9}\n", "class", "variant", "points", "exact",
             "median achieved", "fit rms");
  for (const calib::OpTable& t : profile.ops()) {
    bool flops = false;
    for (const auto& p : t.points()) flops = flops || p.flops() > 0;
    std::vector<double> rates;
    int exact = 0;
    for (const auto& p : t.points()) {
      rates.push_back((flops ? p.flops() : p.bytes()) / (static_cast<double>(p.time_ns()) * 1e-9));
      exact += p.from_scenario() ? 1 : 0;
    }
    fmt::print(out, "{:<14} {:<24} {:>7} {:>6} {:>16} {:>8.1f}%\n", ir::OpClass_Name(t.op_class()),
               ir::KernelVariant_Name(t.variant()), t.points_size(), exact, rate_text(median(rates), flops),
               100.0 * t.fit().rms_relative_error());
  }
  for (const calib::CollectiveFit& f : profile.collectives()) {
    fmt::print(out, "{:<14} {:<24} {:>7} {:>6} {:>16} {:>9}\n",
               f.p2p() ? "SEND_RECV" : ir::CollectiveKind_Name(f.kind()), fmt::format("{} ranks", f.group_size()),
               f.points_size(), "", rate_text(f.bus_bandwidth_bytes_per_s(), false) + " bus",
               fmt::format("{:.1f} us", f.latency_ns() / 1e3));
  }
}

using CaseFactory = std::function<std::unique_ptr<kernels::KernelCase>(const ir::Compute&)>;

}  // namespace

std::vector<ir::OpClass> parse_op_classes(const std::string& list) {
  std::vector<ir::OpClass> out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = list.find(',', start);
    const std::string item = trim(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!item.empty()) {
      ir::OpClass c{};
      if (!ir::OpClass_Parse(upper(item), &c) || c == ir::OP_CLASS_UNSPECIFIED) {
        std::string names;
        for (int i = ir::OpClass_MIN + 1; i <= ir::OpClass_MAX; ++i)
          if (ir::OpClass_IsValid(i)) names += (names.empty() ? "" : ", ") + ir::OpClass_Name(static_cast<ir::OpClass>(i));
        throw Error(SourceLocation{{}, 0, 0, "--only"}, "unknown op class \"" + item + "\"", "one of " + names);
      }
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string find_shipped_file(const std::string& relative) {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates = {fs::path(relative)};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
      candidates.push_back(dir / relative);
      if (candidates.size() > 6) break;
    }
  }
  for (const fs::path& p : candidates)
    if (fs::is_regular_file(p, ec)) return p.string();
  throw Error(SourceLocation{}, "cannot find the shipped scenario " + relative + " (the default family set)",
              "run lacuna from the repository root, or name the shapes to measure with --scenario FILE");
}

int run_calibrate(const CalibrateOptions& o, std::FILE* out, std::FILE* err) {
  if (o.output.empty()) throw Error(SourceLocation{{}, 0, 0, "-o"}, "no output file", "pass -o PROFILE.pbtxt");
  if (!(o.max_point_seconds > 0)) throw Error(SourceLocation{{}, 0, 0, "--max-point-seconds"}, "must be > 0");
  const auto t_start = std::chrono::steady_clock::now();

  // ---- device
  // gpu_available(): a build with CUDA, a GPU that answers and cuBLAS loadable.
  const bool have_gpu = kernels::gpu_available();
  bool gpu = false;
  switch (o.device) {
    case DeviceChoice::kGpu:
      if (!have_gpu) {
        throw Error(SourceLocation{}, "--gpu: no usable GPU: " + kernels::gpu_unavailable_reason(),
                    "run on a machine with an NVIDIA GPU, its driver and cuBLAS, or calibrate with --cpu");
      }
      gpu = true;
      break;
    case DeviceChoice::kCpu:
      gpu = false;
      break;
    case DeviceChoice::kAuto:
      gpu = have_gpu;
      fmt::print(err, "calibrate: {}\n",
                 gpu ? std::string("GPU found: calibrating GPU 0 (--cpu for the CPU reference kernels)")
                     : fmt::format("no usable GPU ({}): calibrating the CPU reference kernels (as --cpu)",
                                   kernels::gpu_unavailable_reason()));
      break;
  }

  if (gpu && o.concurrency != 1) {
    throw Error(SourceLocation{{}, 0, 0, "--concurrency"}, "applies to the CPU kernels only",
                "calibrate with --cpu, or drop --concurrency");
  }

  // ---- shapes
  std::vector<std::string> sources = o.scenarios;
  const bool default_set = sources.empty();
  if (default_set) sources.push_back(find_shipped_file(gpu ? kDefaultGpuScenario : kDefaultCpuScenario));
  ShapeSet shapes;
  if (!o.scenario_shapes) throw InternalError("internal: run_calibrate without a scenario_shapes function");
  for (const std::string& s : sources) merge_shapes(shapes, o.scenario_shapes(s, o.scale_down));
  if (!o.only.empty()) {
    std::erase_if(shapes, [&](const auto& kv) {
      return std::find(o.only.begin(), o.only.end(), kv.first.op_class) == o.only.end();
    });
  }
  if (shapes.empty()) {
    throw Error(SourceLocation{}, "nothing to measure: the scenario(s) run no compute kernels" +
                    std::string(o.only.empty() ? "" : " of the --only classes"),
                "check --scenario and --only");
  }
  if (!gpu) {
    for (const auto& [key, use] : shapes) {
      if (!kernels::cpu_case_supported(key.op_class, key.variant))
        throw Error(SourceLocation{}, "no CPU kernel for " + describe(key), "leave the class out with --only");
    }
  }
  std::vector<GridPoint> points = make_grid(shapes, o.grid);

  // ---- plan
  const int reps = o.repetitions > 0 ? o.repetitions : (gpu ? 20 : 5);
  const int warmup = o.warmup >= 0 ? o.warmup : (gpu ? 5 : 1);
  if (reps < 1) throw Error(SourceLocation{{}, 0, 0, "--repetitions"}, "must be >= 1");
  calib::DeviceInfo device_info;
  std::string method;
  scenario::Precision precision;
  std::vector<Estimate> est;
  CaseFactory factory;
  if (gpu) {
    device_info = gpu_device_info(0);
    precision = scenario::BF16;
    auto ctx = std::make_shared<kernels::gpu::Context>(0);
    factory = [ctx](const ir::Compute& op) { return kernels::make_gpu_case(op, *ctx); };
    method = fmt::format("CUDA events around each launch, {} warm-up, median of {} (Google Benchmark manual time); "
                         "bf16 CUDA kernels and cuBLAS on GPU 0; rotating inputs > 2x L2 ({} MiB)",
                         warmup, reps, ctx->l2_cache_bytes() >> 20);
    est = estimate_gpu(points);
  } else {
    device_info = cpu_device_info();
    precision = scenario::FP32;
    const kernels::CpuCaseOptions copt = cpu_case_options();
    const int concurrency = o.concurrency;
    factory = [copt, concurrency](const ir::Compute& op) -> std::unique_ptr<kernels::KernelCase> {
      return make_concurrent_case([&] { return kernels::make_cpu_case(op, copt); }, concurrency);
    };
    method = fmt::format("std::chrono::steady_clock, {} warm-up, median of {} (Google Benchmark manual time); "
                         "float32 CPU reference kernels, one thread{}; rotating inputs > 2x LLC ({} MiB), at most 4 "
                         "sets; points estimated above {} s skipped",
                         warmup, reps,
                         concurrency > 1 ? fmt::format(" timed while {} more threads run copies of the kernel "
                                                       "(--concurrency {})",
                                                       concurrency - 1, concurrency)
                                         : std::string(),
                         kernels::last_level_cache_bytes() >> 20, o.max_point_seconds);
    fmt::print(err, "calibrate: probing ...\n");
    est = estimate_cpu(points, o.max_point_seconds, err);
  }

  // Fail early on a missing NCCL, before minutes of kernel benchmarks.
  const bool run_collectives = gpu && o.collectives;
  if (run_collectives) {
    if (!collectives_built()) throw Error(SourceLocation{}, "collective benchmarks: not built with CUDA", "pass --no-collectives");
    const nccl::Library lib = nccl::Library::load();
    device_info.set_nccl_version(lib.version());
  }

  std::vector<size_t> run_idx;
  int exact = 0, grid_points = 0, skipped = 0, skipped_exact = 0;
  double est_total = 0;
  // Building a case (random inputs for up to 4 rotating sets) costs time too.
  const auto setup_seconds = [&](const GridPoint& p) { return gpu ? 1e-3 : 4.0 * 2.0 * p.bytes / 2e9 + 2e-3; };
  for (size_t i = 0; i < points.size(); ++i) {
    (points[i].from_scenario ? exact : grid_points) += 1;
    if (est[i].skip) {
      ++skipped;
      skipped_exact += points[i].from_scenario ? 1 : 0;
      continue;
    }
    run_idx.push_back(i);
    est_total += est[i].seconds * (reps + warmup) + setup_seconds(points[i]);
  }
  std::string source_text;
  for (const std::string& s : sources) source_text += (source_text.empty() ? "" : ", ") + s;
  // As a command-line suffix: the profile's scenario then reads as the
  // arguments that re-measure it (the simulator's hint quotes it).
  if (o.scale_down > 1) source_text += " --scale-down " + std::to_string(o.scale_down);
  fmt::print(out, "calibrate: {} \"{}\" ({}), {}\n", gpu ? "GPU" : "CPU", device_info.name(),
             gpu ? fmt::format("{} SMs", device_info.sm_count()) : fmt::format("{} hardware threads", device_info.sm_count()),
             gpu ? "bf16 CUDA kernels" : "float32 reference kernels, one thread");
  fmt::print(out, "shapes from {}{}\n", source_text, default_set ? " (the default family set)" : "");
  fmt::print(out, "plan: {} exact shapes, {} grid points{}, {} skipped (estimated > {} s; the simulator extrapolates "
                  "them{}), {} to measure\n",
             exact, grid_points, o.grid ? "" : " (--no-grid)", skipped, o.max_point_seconds,
             skipped_exact ? fmt::format(", {} of them exact shapes", skipped_exact) : std::string(), run_idx.size());
  fmt::print(out, "      {} repetitions after {} warm-up each; estimated time {}{}\n", reps, warmup,
             format_duration(est_total),
             run_collectives ? " + collectives" : (gpu ? "" : "; collectives: not measured on the CPU (analytic model)"));
  std::fflush(out);

  // ---- kernels
  std::vector<BenchPoint> bench;
  bench.reserve(run_idx.size());
  for (size_t i : run_idx) {
    BenchPoint b;
    b.label = describe(points[i].key);
    const ir::Compute op = compute_of(points[i].key);
    b.make = [factory, op] { return factory(op); };
    b.weight = est[i].seconds * (reps + warmup) + setup_seconds(points[i]);
    bench.push_back(std::move(b));
  }
  Progress progress(static_cast<int64_t>(bench.size()), est_total, err, Progress::is_tty(err));
  DriverOptions dopt;
  dopt.repetitions = reps;
  dopt.warmup = warmup;
  dopt.progress = &progress;
  const std::vector<BenchResult> results = run_benchmarks(bench, dopt);
  progress.finish();

  std::vector<MeasuredPoint> measured;
  int failed_grid = 0;
  for (size_t j = 0; j < run_idx.size(); ++j) {
    const GridPoint& p = points[run_idx[j]];
    if (!results[j].ok()) {
      if (p.from_scenario) throw Error("measuring " + describe(p.key) + " failed: " + results[j].error);
      fmt::print(err, "calibrate: warning: grid point {} failed and is left out: {}\n", describe(p.key),
                 results[j].error);
      ++failed_grid;
      continue;
    }
    measured.push_back({p, results[j]});
  }

  // ---- collectives
  std::vector<calib::CollectiveFit> fits;
  if (run_collectives) {
    fmt::print(err, "calibrate: NCCL collectives ...\n");
    CollectiveBenchOptions copt;
    copt.repetitions = reps;
    copt.warmup = warmup;
    copt.log = err;
    CollectiveBenchResult r = run_collective_benchmarks(copt);
    fits = std::move(r.fits);
    device_info.set_nccl_version(r.nccl_version);
    device_info.set_device_count(r.device_count);
    if (fits.empty()) fmt::print(err, "calibrate: one GPU: no collective to measure\n");
  }

  // ---- profile
  ProfileHeader header;
  header.device = device_info;
  header.precision = precision;
  header.scenario = default_set && o.scale_down <= 1 ? std::string() : source_text;
  header.method = method;
  const calib::CalibrationProfile profile = build_profile(header, measured, fits);
  calibration::write_profile(profile, o.output);

  print_summary(profile, out);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  fmt::print(out, "\n{} points measured{}{} in {}; profile written to {}\n", measured.size(),
             skipped ? fmt::format(", {} skipped", skipped) : std::string(),
             failed_grid ? fmt::format(", {} failed", failed_grid) : std::string(), format_duration(wall), o.output);
  return 0;
}

}  // namespace lacuna::calibrate
