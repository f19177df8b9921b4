#include "sim/report/formats/compare_csv.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "sim/report/formats/csv.h"
#include "sim/report/analyses/run_metrics.h"

namespace lacuna::report {
namespace {

std::string optional_number(const std::optional<double>& v) { return v ? csv::number(*v) : std::string(); }

}  // namespace

std::string comparison_csv(const Comparison& c) {
  // Every placement of a multimodal scenario has the multimodal bubble
  // categories; the columns do not depend on which placements ran.
  // An MoE workload adds its two bubble categories (docs/moe.md).
  const bool moe = std::any_of(c.placements.begin(), c.placements.end(),
                               [](const PlacementOutcome& p) { return p.summary && p.summary->moe(); });
  const bool fp8 = std::any_of(c.placements.begin(), c.placements.end(),
                               [](const PlacementOutcome& p) { return p.summary && p.summary->info.has_fp8(); });
  const MetricSet set{.multimodal = true, .samples = false, .moe = moe, .fp8 = fp8};
  std::vector<std::string> header = {
      "placement", "name", "status", "fits", "rank", "speedup", "encoder_hidden_fraction"};
  const std::vector<std::string> names = metric_names(set);
  header.insert(header.end(), names.begin(), names.end());
  header.push_back("error");
  std::string out = csv::row(header);
  for (size_t i = 0; i < c.placements.size(); ++i) {
    const PlacementOutcome& p = c.placements[i];
    std::vector<std::string> row = {outcome_key(p), outcome_name(p), p.summary ? "ok" : "failed"};
    if (p.summary) {
      const PlacementMetrics pm = placement_metrics(c, i);
      row.push_back(p.fits() ? "true" : "false");
      row.push_back(pm.rank ? std::to_string(*pm.rank) : std::string());
      row.push_back(optional_number(pm.speedup));
      row.push_back(optional_number(pm.encoder_hidden));
      for (const Metric& m : named_metrics(run_metrics(*p.summary), set)) row.push_back(csv::number(m.value));
      row.push_back(std::string());
    } else {
      row.resize(row.size() + 4 + names.size());
      row.push_back(p.reason.empty() ? p.error : p.reason);
    }
    out += csv::row(row);
  }
  return out;
}

}  // namespace lacuna::report
