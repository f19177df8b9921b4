// `lacuna compare` as a library (docs/compare.md): a multimodal scenario
// under every placement it applies to (placement::applicable_placements; the
// heterogeneous one colocated and non-colocated), plus the LLM alone as the
// reference for "encoder compute hidden in bubbles". A placement that does
// not compile or simulate becomes a row with the reason; a deadlock is kept
// for the caller to report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/cost/cost_model.h"
#include "sim/engine/simulator.h"
#include "sim/report/analyses/compare_report.h"
#include "sim/report/formats/pipeline_svg.h"
#include "sim/run/network_setup.h"
#include "sim/scenario/scenario.h"

namespace lacuna::run {

struct ComparisonOptions {
  NetworkMode network = NetworkMode::kFlow;
  bool fold = true;
  // Plans and times every placement when set (a calibrated model); null:
  // each program's own lazy analytic model.
  const cost::CostModel* calibrated = nullptr;
  // The rank whose timeline each placement contributes (an SVG row); none:
  // no timelines.
  std::optional<int32_t> drawn_rank;
};

struct ComparisonRun {
  report::Comparison comparison;  // scenario name and file filled by the caller
  report::CompareRunStats stats;  // optimus_planner_seconds; the caller times the whole
  std::vector<report::TimelineRow> rows;  // with drawn_rank: one per placement, then the LLM alone
  std::vector<std::pair<std::string, engine::DeadlockError>> deadlocks;  // what deadlocked, and how
};

ComparisonRun compare_placements(const scenario::LoadedScenario& loaded,
                                 const std::vector<scenario::PlacementKind>& kinds, const ComparisonOptions& options);

}  // namespace lacuna::run
