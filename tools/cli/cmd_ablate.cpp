// `lacuna ablate SCENARIO`: the scenario as written, then once with each
// execution switch (and hardware-model mechanism) flipped, side by side:
// iteration time, MFU, the change against the scenario, and the bubble
// categories that moved most (docs/results.md#ablation). The runs are the
// library's (sim/run/ablation.h); this prints them.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/core/atomic_file.h"
#include "sim/report/observers/bubble_accounting.h"
#include "sim/run/ablation.h"
#include "sim/scenario/scenario.h"
#include "tools/cli/commands.h"
#include "tools/cli/network_option.h"
#include "tools/cli/output_checks.h"

namespace lacuna::cli {
namespace {

struct AblateOptions {
  std::string scenario;
  NetworkMode network = NetworkMode::kFlow;
  bool full = false;
  int jobs = 0;
  std::string json;
};

int run_ablate(const AblateOptions& o) {
  check_outputs({{"--json", o.json}}, {{"SCENARIO", o.scenario}});
  const scenario::LoadedScenario base = scenario::load_scenario(o.scenario);
  const bool fold = !o.full;
  const std::vector<run::AblationOutcome> outcomes = run::run_ablation(base, o.network, fold, o.jobs);

  const run::AblationOutcome& ref = outcomes[0];
  fmt::print("Ablation of {} ({}, {}), one switch flipped per row\n\n", base.spec.name(),
             o.network == NetworkMode::kFlow ? "flow network" : "analytic network", fold ? "folded" : "every rank");
  fmt::print("| variant | flag | iteration (s) | Δ time | MFU | bubbles that moved (median per rank) |\n");
  fmt::print("|---|---|---|---|---|---|\n");
  nlohmann::json rows = nlohmann::json::array();
  for (const run::AblationOutcome& r : outcomes) {
    nlohmann::json j{{"variant", r.name}, {"flag", r.flag}};
    if (!r.applies) {
      fmt::print("| {} | {} | — | — | — | not applicable to this scenario |\n", r.name, r.flag);
      j["applicable"] = false;
    } else if (!r.problem.empty()) {
      fmt::print("| {} | {} | — | — | — | rejected: {} |\n", r.name, r.flag, r.problem);
      j["rejected"] = r.problem;
    } else {
      const double delta = ref.seconds > 0 ? (r.seconds - ref.seconds) / ref.seconds : 0;
      fmt::print("| {} | {} | {:.3f} | {} | {:.1f} % | {} |\n", r.name, r.flag.empty() ? "—" : r.flag, r.seconds,
                 &r == &ref ? std::string("—") : fmt::format("{:+.1f} %", std::round(delta * 1000) / 10),
                 r.mfu * 100, &r == &ref ? std::string("—") : run::moved_bubbles(ref, r));
      j["iteration_s"] = r.seconds;
      j["mfu"] = r.mfu;
      j["delta"] = delta;
      nlohmann::json b;
      for (int k = 0; k < report::kNumBubbles; ++k)
        if (report::bubble_shown(static_cast<report::Bubble>(k), r.multimodal, r.moe))
          b[std::string(report::bubble_key(static_cast<report::Bubble>(k)))] = r.bubbles_ns[static_cast<size_t>(k)];
      j["bubble_median_ns"] = b;
    }
    rows.push_back(std::move(j));
  }
  if (!o.json.empty()) {
    nlohmann::json top{{"scenario", base.spec.name()}, {"folded", fold}, {"rows", std::move(rows)}};
    write_file_atomically(o.json, top.dump(2) + "\n");
    fmt::print("\nwrote {}\n", o.json);
  }
  return 0;
}

}  // namespace

void add_ablate_command(CLI::App& app, Action& action) {
  auto o = std::make_shared<AblateOptions>();
  CLI::App* sub = app.add_subcommand(
      "ablate", "The scenario with each execution switch flipped: iteration time, MFU and the bubbles that moved");
  sub->add_option("SCENARIO", o->scenario, "scenario (.pbtxt, .json)")->required();
  add_network_option(sub, o->network);
  sub->add_flag("--full", o->full, "simulate every rank (default: one representative per class, as validate)");
  sub->add_option("-j,--jobs", o->jobs, "variants simulated at once (default: one per hardware thread)")
      ->check(CLI::Range(0, 1024));
  sub->add_option("--json", o->json, "also write every row as JSON")->check(output_file());
  sub->callback([o, &action] { action = [o] { return run_ablate(*o); }; });
}

}  // namespace lacuna::cli
