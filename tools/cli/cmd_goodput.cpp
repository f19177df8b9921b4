// lacuna goodput: effective training time over a whole run (docs/goodput.md).
#include <cmath>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/core/atomic_file.h"
#include "sim/goodput/goodput.h"
#include "sim/report/formats/format.h"
#include "sim/run/goodput_run.h"
#include "sim/scenario/scenario.h"
#include "tools/cli/commands.h"
#include "tools/cli/network_option.h"
#include "tools/cli/output_checks.h"
#include "tools/cli/variability_option.h"

namespace lacuna::cli {
namespace {

struct GoodputCliOptions {
  std::string scenario;
  double tokens = 0;
  int32_t runs = 1000;
  uint64_t seed = 1;
  std::string interval = "auto";
  bool no_failures = false;
  double storage_gb_per_s = run::kDefaultStorageGbPerS;
  double host_link_gb_per_s = run::kDefaultHostLinkGbPerS;
  double save_s = 0;
  // Which of the reliability options were given (else the scenario's, else
  // the defaults).
  bool storage_given = false, host_link_given = false, save_given = false, interval_given = false;
  scenario::ScenarioEdits edits;
  std::string json;
};

std::string days(double seconds) { return fmt::format("{:.2f} days", seconds / 86400.0); }
std::string hours(double seconds) { return fmt::format("{:.2f} h", seconds / 3600.0); }

nlohmann::json to_json(const run::GoodputReport& r, const GoodputCliOptions& o) {
  const goodput::GoodputResult& g = r.result;
  nlohmann::json j;
  j["scenario"] = o.scenario;
  j["tokens"] = o.tokens;
  j["runs"] = g.runs;
  j["seed"] = o.seed;
  j["iteration_time_ns"] = r.iteration_time.count();
  j["tokens_per_iteration"] = r.tokens_per_iteration;
  j["iterations"] = r.iterations;
  j["gpus"] = r.gpus;
  j["hosts"] = r.hosts;
  j["work_s"] = r.inputs.work_s;
  j["checkpoint"] = {{"bytes", r.checkpoint_bytes.count()},
                     {"storage_gb_per_s", r.storage_gb_per_s},
                     {"host_link_gb_per_s", r.host_link_gb_per_s},
                     {"largest_share_bytes", r.largest_share_bytes.count()},
                     {"interval_s", r.inputs.checkpoint.interval_s},
                     {"save_blocking_s", r.save_s},
                     {"upload_s", r.upload_s},
                     {"load_s", r.load_s},
                     {"young_interval_s", r.young_s},
                     {"daly_interval_s", r.daly_s}};
  j["mtbf_s"] = std::isfinite(r.mtbf_s) ? nlohmann::json(r.mtbf_s) : nlohmann::json(nullptr);
  j["ettr"] = {{"mean", g.ettr_mean}, {"sd", g.ettr_sd}, {"ci95", g.ettr_ci95}};
  j["wall_s"] = {{"mean", g.wall_mean_s}, {"ci95", g.wall_ci95_s}};
  j["failures_per_run"] = g.failures_mean;
  nlohmann::json phases;
  phases["recomputed_s"] = g.mean.recomputed_s;
  phases["checkpoint_s"] = g.mean.checkpoint_s;
  for (int p = 0; p < goodput::kNumRecoveryPhases; ++p)
    phases[std::string(goodput::recovery_phase_name(p)) + "_s"] = g.mean.recovery_s[p];
  j["lost_by_phase"] = phases;
  nlohmann::json kinds = nlohmann::json::array();
  for (size_t k = 0; k < r.inputs.components.size(); ++k) {
    const goodput::ComponentKind& c = r.inputs.components[k];
    kinds.push_back({{"kind", c.name},
                     {"count", c.count},
                     {"rate_per_hour", c.rate_per_hour},
                     {"recovery_s", c.recovery.total_s()},
                     {"failures_per_run", g.failures_by_component[k]},
                     {"lost_s", g.lost_by_component_s[k]}});
  }
  j["components"] = kinds;
  return j;
}

int run_goodput_command(const GoodputCliOptions& o, run::NetworkMode network) {
  check_outputs({{"--json", o.json}}, {{"SCENARIO", o.scenario}});
  const scenario::LoadedScenario loaded = scenario::load_scenario(o.scenario, 1, o.edits);
  run::GoodputOptions g;
  g.tokens = o.tokens;
  g.runs = o.runs;
  g.seed = o.seed;
  g.failures = !o.no_failures;
  if (o.storage_given) g.storage_gb_per_s = o.storage_gb_per_s;
  if (o.host_link_given) g.host_link_gb_per_s = o.host_link_gb_per_s;
  if (o.save_given) g.save_blocking_s = o.save_s;
  g.network = network;
  if (o.interval_given && o.interval != "auto") {
    size_t used = 0;
    double s = -1;
    try {
      s = std::stod(o.interval, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != o.interval.size() || !std::isfinite(s) || s < 0)
      throw Error(SourceLocation{{}, 0, 0, "--checkpoint-interval"},
                  "\"" + o.interval + "\" is neither auto nor a number of seconds >= 0",
                  "give auto (Daly's interval) or seconds, 0 for no checkpoints");
    g.checkpoint_interval_s = s;
  } else if (o.interval_given && loaded.spec.reliability().has_checkpoint_interval_s()) {
    throw Error(SourceLocation{{}, 0, 0, "--checkpoint-interval"},
                "auto asks for Daly's interval, but the scenario sets reliability.checkpoint_interval_s",
                "leave out --checkpoint-interval auto, or give seconds");
  }
  const run::GoodputReport r = run::run_goodput(loaded, g);
  const goodput::GoodputResult& res = r.result;
  const double tokens_per_s =
      static_cast<double>(r.tokens_per_iteration) / (static_cast<double>(r.iteration_time.count()) * 1e-9);
  fmt::print("lacuna goodput: {} ({} GPUs in {} hosts)\n", loaded.spec.name(), r.gpus, r.hosts);
  fmt::print("  iteration                {} (folded simulation, no variability), {} tokens: {}\n",
             report::format_duration(r.iteration_time), r.tokens_per_iteration,
             report::format_si(tokens_per_s, "tokens/s"));
  fmt::print("  work                     {} iterations for {:.4g} tokens: {} of computing\n", r.iterations, o.tokens,
             days(r.inputs.work_s));
  fmt::print("  checkpoint               {} in all, {} per GPU at most; a save blocks {:.3f} s ({}), upload and "
             "load {:.1f} s (storage {} GB/s)\n",
             report::format_gb(r.checkpoint_bytes), report::format_gb(r.largest_share_bytes), r.save_s,
             r.save_given ? std::string("as given")
                          : fmt::format("the copy over a {} GB/s host link alone; measured saves block 0.8 to "
                                        "7 s, docs/goodput.md#checkpoints",
                                        r.host_link_gb_per_s),
             r.upload_s, r.storage_gb_per_s);
  if (std::isfinite(r.mtbf_s)) {
    fmt::print("  failures                 job MTBF {:.2f} h (Llama 3's rates, docs/goodput.md#defaults); {:.1f} per "
               "run\n",
               r.mtbf_s / 3600, res.failures_mean);
    const bool daly = !g.checkpoint_interval_s && !loaded.spec.reliability().has_checkpoint_interval_s();
    fmt::print("  interval                 {:.1f} min{} (Young {:.1f} min, Daly {:.1f} min)\n",
               r.inputs.checkpoint.interval_s / 60, daly ? ", Daly's" : "", r.young_s / 60, r.daly_s / 60);
  } else {
    fmt::print("  failures                 none ({})\n",
               o.no_failures ? "--no-failures" : "every component's rate is 0 in reliability.components");
  }
  fmt::print("  ETTR                     {:.4f} ± {:.4f} (95 % CI over {} runs; sd {:.4f})\n", res.ettr_mean,
             res.ettr_ci95, res.runs, res.ettr_sd);
  fmt::print("  wall time                {} ± {:.2f}\n", days(res.wall_mean_s), res.wall_ci95_s / 86400);
  fmt::print("  lost per run, by phase   recomputed {}, checkpoint saves {}", hours(res.mean.recomputed_s),
             hours(res.mean.checkpoint_s));
  for (int p = 0; p < goodput::kNumRecoveryPhases; ++p)
    fmt::print(", {} {}", goodput::recovery_phase_name(p), hours(res.mean.recovery_s[p]));
  fmt::print("\n");
  if (!r.inputs.components.empty()) {
    fmt::print("  lost per run, by kind   ");
    for (size_t k = 0; k < r.inputs.components.size(); ++k)
      fmt::print(" {} {} ({:.1f} failures){}", r.inputs.components[k].name, hours(res.lost_by_component_s[k]),
                 res.failures_by_component[k], k + 1 < r.inputs.components.size() ? "," : "\n");
  }
  if (!o.json.empty()) {
    write_file_atomically(o.json, to_json(r, o).dump(2) + "\n");
    fmt::print("  json                     {}\n", o.json);
  }
  return 0;
}

}  // namespace

void add_goodput_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<GoodputCliOptions>();
  auto network = std::make_shared<NetworkMode>(NetworkMode::kFlow);
  CLI::App* sub = app.add_subcommand(
      "goodput", "effective training time over a whole run: failures, recoveries, checkpoints (docs/goodput.md)");
  sub->add_option("SCENARIO", o->scenario, "scenario file (.pbtxt or .json)")->required()->check(CLI::ExistingFile);
  sub->add_option("--tokens", o->tokens, "tokens the run trains")->required();
  sub->add_option("--runs", o->runs, "Monte Carlo runs (default 1000)");
  sub->add_option("--seed", o->seed, "seed of the failure draws (default 1)");
  CLI::Option* interval = sub->add_option("--checkpoint-interval", o->interval,
                  "seconds of computing between checkpoints, 0 for none, or auto: Daly's interval (default)");
  sub->add_flag("--no-failures", o->no_failures, "no component fails: the run is its iterations and saves");
  CLI::Option* storage = sub->add_option("--storage-gb-per-s", o->storage_gb_per_s,
                  "storage bandwidth for the checkpoint's upload and load (default 2000: Llama 3's sustained 2 TB/s)");
  CLI::Option* host_link = sub->add_option("--host-link-gb-per-s", o->host_link_gb_per_s,
                  "each GPU's copy to host memory (default 63: PCIe 5.0 x16 per direction)");
  CLI::Option* save = sub->add_option(
      "--save-s", o->save_s, "seconds a save blocks the job (default: the copy of each GPU's share over the host link)");
  sub->add_option("--json", o->json, "write the result as JSON to FILE")->check(output_file());
  add_network_option(sub, *network);
  add_set_option(sub, o->edits);
  sub->callback([o, network, save, interval, storage, host_link, &action] {
    o->save_given = save->count() > 0;
    o->interval_given = interval->count() > 0;
    o->storage_given = storage->count() > 0;
    o->host_link_given = host_link->count() > 0;
    action = [o, network] { return run_goodput_command(*o, *network); };
  });
}

}  // namespace lacuna::cli
