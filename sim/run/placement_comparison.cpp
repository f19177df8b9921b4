#include "sim/run/placement_comparison.h"

#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/placement/compile.h"
#include "sim/placement/hetero_layouts.h"
#include "sim/placement/modules.h"
#include "sim/report/formats/names.h"
#include "sim/report/analyses/rank_spec.h"
#include "sim/report/analyses/summary.h"
#include "sim/run/simulation_input.h"
#include "sim/run/single_run.h"

namespace lacuna::run {
namespace {

using SteadyClock = std::chrono::steady_clock;
double seconds_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

// One simulation: the summary and (when asked) the timeline of `rank`.
struct PlacementRun {
  report::Summary summary;
  std::optional<report::TimelineRow> row;
  std::string cost_model;
};

// `calibrated`: the --calibration model; null: the program's own lazy analytic model, as always.
PlacementRun simulate_placement(const ir::Program& program, const cost::CostModel* calibrated, bool fold, NetworkMode mode,
             std::optional<int32_t> rank) {
  const std::unique_ptr<cost::CostModel> analytic =
      calibrated != nullptr ? nullptr : make_cost_model({}, program.cluster(), program.info().precision());
  const cost::CostModel& cost = calibrated != nullptr ? *calibrated : *analytic;
  std::optional<report::PipelineSvg> svg;
  std::vector<engine::Observer*> observers;
  if (rank) {
    svg.emplace(program, report::parse_rank_spec(std::to_string(*rank)));
    observers.push_back(&*svg);
  }
  SummarizedRun simulated = simulate_and_summarize(program, cost, mode, fold, observers);
  PlacementRun run{std::move(simulated.summary), std::nullopt, simulated.run.models};
  if (svg) {
    std::vector<report::TimelineRow> rows = svg->rows();
    if (!rows.empty()) run.row = std::move(rows.front());
  }
  return run;
}

// The SVG row of one placement: its name, the rank drawn (its representative
// in fold mode) and the timeline; a note instead when there is none.
report::TimelineRow timeline_row(const std::string& name, const std::string& id, const PlacementRun* run,
                                 const std::string& note, int32_t rank) {
  report::TimelineRow row;
  if (run != nullptr && run->row) {
    row = *run->row;  // labelled with the drawn rank, ends at the iteration end
    row.sublabel = row.rank == rank ? row.label : fmt::format("{} (for rank {})", row.label, rank);
  } else {
    row.rank = rank;
    row.sublabel = fmt::format("rank {}", rank);
    row.note = note;
  }
  row.label = name;
  row.id = id;
  return row;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// At most `max` bytes, cut at a UTF-8 character boundary, "…" when cut (an
// SVG note has one line).
std::string clip(std::string s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "…";
}

// For the table: the field and the message without the file location (the
// scenario is the one being compared).
std::string reason_of(const Error& e) {
  std::string r = e.where().field.empty() ? std::string() : e.where().field + ": ";
  r += e.problem();
  if (!e.fix().empty()) r += " (" + e.fix() + ")";
  return r;
}

}  // namespace

ComparisonRun compare_placements(const scenario::LoadedScenario& loaded,
                                 const std::vector<scenario::PlacementKind>& kinds, const ComparisonOptions& o) {
  ComparisonRun out;
  report::Comparison& cmp = out.comparison;
  cmp.folded = o.fold;
  const std::optional<int32_t>& drawn = o.drawn_rank;
  auto note_for = [&](const ir::Program* p, const std::string& error) {
    if (!error.empty() || p == nullptr) return clip("not simulated: " + first_line(error), 200);
    return fmt::format("rank {} does not exist here ({} GPUs)", *drawn, p->ranks_size());
  };
  // Simulates `program` into `run`, or says in `error` why it could not.
  auto simulate_into = [&](const std::string& what, const ir::Program& program, std::optional<PlacementRun>& run,
                           std::string& error, std::string& reason) {
    const bool has_rank = drawn && *drawn < program.ranks_size();
    try {
      run = simulate_placement(program, o.calibrated, o.fold, o.network, has_rank ? drawn : std::nullopt);
      if (cmp.cost_model.empty()) cmp.cost_model = run->cost_model;
    } catch (const engine::DeadlockError& e) {
      out.deadlocks.emplace_back(what, e);
      error = std::string("deadlock: ") + e.what();
      reason = error;
    } catch (const Error& e) {
      error = std::string("simulation failed: ") + e.what();
      reason = "simulation failed: " + reason_of(e);
    }
  };
  // The heterogeneous placement runs in both modes, each with the layouts the
  // scenario gives for it or derived (placement::choose_heterogeneous).
  struct Entry {
    scenario::PlacementKind kind;
    std::optional<placement::HeteroMode> mode;
  };
  std::vector<Entry> entries;
  for (scenario::PlacementKind kind : kinds) {
    if (kind != scenario::HETEROGENEOUS) {
      entries.push_back({kind, std::nullopt});
      continue;
    }
    entries.push_back({kind, placement::HeteroMode::kColocated});
    entries.push_back({kind, placement::HeteroMode::kNonColocated});
  }
  for (const Entry& entry : entries) {
    const scenario::PlacementKind kind = entry.kind;
    report::PlacementOutcome outcome;
    outcome.kind = kind;
    if (entry.mode) outcome.variant = std::string(placement::hetero_mode_name(*entry.mode));
    const std::string name = report::outcome_name(outcome);
    std::optional<ir::Program> program;
    const auto t0 = SteadyClock::now();
    try {
      if (entry.mode) {
        placement::HeteroChoice choice = o.calibrated != nullptr
                                             ? placement::choose_heterogeneous(loaded, *entry.mode, *o.calibrated)
                                             : placement::choose_heterogeneous(loaded, *entry.mode);
        outcome.layout = choice.description;
        program = std::move(choice.program);
      } else {
        program = o.calibrated != nullptr ? placement::compile_as(loaded, kind, *o.calibrated)
                                         : placement::compile_as(loaded, kind);
      }
    } catch (const Error& e) {
      outcome.error = e.what();
      outcome.reason = reason_of(e);
    }
    if (kind == scenario::OPTIMUS && program) out.stats.optimus_planner_seconds = seconds_since(t0);
    // Over HBM even at the recompute its planner chose: simulated, not ranked.
    if (program) outcome.over_memory = placement::infeasibility_reason(*program);
    std::optional<PlacementRun> run;
    if (program) simulate_into(name, *program, run, outcome.error, outcome.reason);
    if (run) outcome.summary = run->summary;
    if (drawn) {
      out.rows.push_back(timeline_row(name, "placement-" + report::outcome_key(outcome), run ? &*run : nullptr,
                                  note_for(program ? &*program : nullptr,
                                           outcome.reason.empty() ? outcome.error : outcome.reason),
                                  *drawn));
    }
    cmp.placements.push_back(std::move(outcome));
  }
  {
    std::optional<ir::Program> program;
    try {
      const scenario::LoadedScenario llm = placement::llm_only(loaded);
      program = o.calibrated != nullptr ? placement::compile(llm, *o.calibrated) : placement::compile(llm);
    } catch (const Error& e) {
      cmp.llm_only_error = e.what();
    }
    std::optional<PlacementRun> run;
    std::string reason;
    if (program) simulate_into("LLM alone", *program, run, cmp.llm_only_error, reason);
    if (run) cmp.llm_only = run->summary;
    if (drawn && (run || !cmp.llm_only_error.empty())) {
      out.rows.push_back(timeline_row("LLM alone", "llm-only", run ? &*run : nullptr,
                                  note_for(program ? &*program : nullptr, cmp.llm_only_error), *drawn));
    }
  }

  return out;
}

}  // namespace lacuna::run
