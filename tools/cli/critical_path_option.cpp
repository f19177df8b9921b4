#include "tools/cli/critical_path_option.h"
#include "tools/cli/output_checks.h"

#include <algorithm>

#include <fmt/format.h>

#include "sim/cost/scaled_cost_model.h"
#include "sim/report/analyses/critical_path.h"
#include "sim/report/formats/critical_path_trace.h"
#include "sim/report/formats/heatmap_svg.h"
#include "sim/report/analyses/slack.h"

namespace lacuna::cli {

void add_critical_path_options(CLI::App* sub, CriticalPathOptions& o) {
  sub->add_flag("--critical-path", o.critical_path,
                "report the critical path (op classes, bubble categories, ranks, stages), slack and straggler "
                "attribution, and mark the path in the trace (docs/critical-path.md)");
  sub->add_flag("--sensitivity", o.sensitivity,
                "with the critical path: re-simulate with each of the top op classes on the path 10 % faster and "
                "compare with the path's estimate");
  sub->add_option("--sensitivity-classes", o.sensitivity_classes, "op classes re-simulated by --sensitivity")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  sub->add_flag("--stragglers", o.stragglers,
                "report which rank and host arrived last at collectives and how long it held the others");
  sub->add_option("--heatmap", o.heatmap, "write the per-GPU compute and peer-wait heat map (SVG) to FILE")
      ->check(output_file());
  sub->add_option("--critical-path-max-ops", o.whole_graph_max_ops,
                  "keep the whole op graph (slack) up to this many ops of the simulated ranks, else only the "
                  "binding chains (docs/critical-path.md#size)")
      ->capture_default_str();
}

CriticalPathOutputs::CriticalPathOutputs(const ir::Program& program, const CriticalPathOptions& options)
    : program_(program), options_(options) {
  if (options_.sensitivity) options_.critical_path = true;
  if (options_.critical_path) recorder_.emplace(options_.whole_graph_max_ops);
  if (options_.critical_path || options_.stragglers || !options_.heatmap.empty()) stragglers_.emplace();
  if (!options_.heatmap.empty()) heatmap_file_.emplace(options_.heatmap);
}

std::vector<engine::Observer*> CriticalPathOutputs::observers() {
  std::vector<engine::Observer*> out;
  if (recorder_) out.push_back(&*recorder_);
  if (stragglers_) out.push_back(&*stragglers_);
  return out;
}

void CriticalPathOutputs::attach_trace(report::TraceWriter* trace) {
  if (trace == nullptr || !recorder_) return;
  trace->set_epilogue([this](const std::vector<int32_t>& traced, const report::TraceWriter::Emit& emit) {
    report::write_critical_path_events(program_, recorder_->path(), traced, emit);
  });
}

void resimulate_sensitivity(report::CriticalPathReport& r, int32_t classes, const cost::CostModel& cost,
                            const CriticalPathOutputs::Resimulate& resimulate) {
  const TimeNs base = r.path.length;
  for (size_t i = 0; i < r.sensitivity.size() && i < static_cast<size_t>(classes); ++i) {
    report::Sensitivity& s = r.sensitivity[i];
    const cost::ScaledCostModel scaled(cost, s.op_class, 1.0 - r.speedup);
    s.resimulated = true;
    s.resimulated_time = resimulate(scaled);
    s.resimulated_saved = base - s.resimulated_time;
  }
}

void CriticalPathOutputs::finish(report::Summary& summary, const std::vector<int32_t>& traced_ranks,
                                 const cost::CostModel& cost, const Resimulate& resimulate) {
  std::vector<int32_t> simulated;
  std::vector<std::vector<int32_t>> represents;
  for (const report::RankAccount& a : summary.ranks) {
    simulated.push_back(a.rank);
    represents.push_back(a.represents);
  }
  std::vector<uint8_t> on_path;
  if (recorder_) {
    report::PathInputs in;
    in.path = &recorder_->path();
    in.ops = recorder_->ops();
    in.simulated_ranks = simulated;
    in.represents = represents;
    // The traced ranks' representatives (fold), once each, in order.
    std::vector<int32_t> rep(static_cast<size_t>(program_.ranks_size()), -1);
    for (size_t i = 0; i < simulated.size(); ++i) {
      for (int32_t r : represents[i]) rep[static_cast<size_t>(r)] = simulated[i];
    }
    for (int32_t t : traced_ranks) {
      const int32_t r = rep[static_cast<size_t>(t)];
      if (r >= 0 && std::find(in.traced_ranks.begin(), in.traced_ranks.end(), r) == in.traced_ranks.end()) {
        in.traced_ranks.push_back(r);
      }
    }
    in.speedup = options_.speedup;
    std::optional<report::GraphTiming> timing;
    if (const report::OpGraph* g = recorder_->graph()) {
      timing = report::time_graph(*g);
      in.graph = g;
      in.timing = &*timing;
    } else {
      in.pruned_peak_nodes = recorder_->peak_live_nodes();
      in.no_slack_reason = fmt::format(
          "the simulated ranks have {} ops, over --critical-path-max-ops {}: only the binding chains were kept",
          recorder_->ops(), options_.whole_graph_max_ops);
    }
    summary.critical_path = report::summarize_critical_path(program_, in);
    if (options_.sensitivity) {
      resimulate_sensitivity(*summary.critical_path, options_.sensitivity_classes, cost, resimulate);
    }
    on_path.assign(static_cast<size_t>(program_.ranks_size()), 0);
    for (const report::PathStep& s : recorder_->path().steps) on_path[static_cast<size_t>(s.rank)] = 1;
  }
  if (stragglers_ && (options_.critical_path || options_.stragglers)) summary.stragglers = stragglers_->summary();
  if (heatmap_file_) {
    report::HeatmapData d;
    d.iteration = summary.iteration_time;
    d.folded = summary.folded;
    d.compute_ns.assign(static_cast<size_t>(program_.ranks_size()), 0);
    d.wait_ns.assign(static_cast<size_t>(program_.ranks_size()), 0);
    const std::vector<TimeNs>& wait = stragglers_->peer_wait();
    for (size_t i = 0; i < summary.ranks.size(); ++i) {
      for (int32_t r : summary.ranks[i].represents) {
        d.compute_ns[static_cast<size_t>(r)] = summary.ranks[i].busy.count();
        d.wait_ns[static_cast<size_t>(r)] = i < wait.size() ? wait[i].count() : 0;
      }
    }
    d.on_path = std::move(on_path);
    heatmap_file_->write(report::render_heatmap(program_, d));
  }
}

void CriticalPathOutputs::commit() {
  if (heatmap_file_) heatmap_file_->commit();
}

std::string CriticalPathOutputs::describe(bool first) const {
  if (!heatmap_file_) return {};
  return fmt::format("{}  heatmap {}  ({} GPUs)\n", first ? "\n" : "", options_.heatmap, program_.ranks_size());
}

}  // namespace lacuna::cli
