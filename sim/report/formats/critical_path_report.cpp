#include "sim/report/formats/critical_path_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "sim/report/formats/format.h"
#include "sim/report/formats/json_util.h"
#include "sim/report/analyses/summary.h"

namespace lacuna::report {

namespace {

using json_util::Json;
using json_util::secs;

double frac(TimeNs part, TimeNs whole) {
  return whole.count() > 0 ? static_cast<double>(part.count()) / static_cast<double>(whole.count()) : 0.0;
}

std::string kind_key(NodeKind k) {
  switch (k) {
    case NodeKind::kCompute: return "compute";
    case NodeKind::kCollective: return "collective";
    case NodeKind::kTransfer: return "transfer";
    case NodeKind::kHost: return "host";
    case NodeKind::kEvent: return "event";
    case NodeKind::kBarrier: return "barrier";
  }
  return "?";
}

// "    <key padded>  <time>  <% path>" rows of a share table, the first `top`
// and one line for the rest.
void share_rows(std::string& out, const std::vector<PathShare>& rows, TimeNs length, size_t top, bool all) {
  TimeNs rest;
  size_t hidden = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!all && i >= top) {
      rest += rows[i].time;
      ++hidden;
      continue;
    }
    out += fmt::format("      {} {} {:>9}\n", pad_right(rows[i].key, 36), pad_left(format_duration(rows[i].time), 12),
                       format_percent(frac(rows[i].time, length)));
  }
  if (hidden > 0) {
    out += fmt::format("      {} {} {:>9}\n", pad_right(fmt::format("({} more)", hidden), 36),
                       pad_left(format_duration(rest), 12), format_percent(frac(rest, length)));
  }
}

void slack_block(std::string& out, const CriticalPathReport& r) {
  if (!r.has_slack()) {
    out += fmt::format("    {:<22} not computed: {}\n", "slack", r.no_slack_reason);
    return;
  }
  // Over every rank of the job: a representative counts for the ranks it
  // stands for (fold), as in the bubble statistics.
  std::vector<Sample> samples;
  int64_t at_zero = 0, ranks = 0;
  for (const RankSlack& s : r.rank_slack) {
    if (s.compute_ops == 0) continue;
    const auto w = static_cast<int64_t>(std::max<size_t>(s.represents.size(), 1));
    samples.push_back({s.min_compute.count(), s.rank, w});
    ranks += w;
    if (s.min_compute == TimeNs::zero()) at_zero += w;
  }
  if (samples.empty()) {
    out += fmt::format("    {:<22} no compute ops\n", "slack");
    return;
  }
  const Stats st = weighted_stats(samples);
  out += fmt::format("    {:<22} least slack of a rank's compute ops: 0 on {} of {} ranks (on a critical path); median {}; "
                     "max {} (rank {})\n",
                     "slack per rank", at_zero, ranks, format_duration(TimeNs(st.median)),
                     format_duration(TimeNs(st.max)), st.worst_rank);
}

void sensitivity_block(std::string& out, const CriticalPathReport& r, size_t top) {
  if (r.sensitivity.empty()) return;
  out += fmt::format("    {} {:>12} {:>12} {:>14}\n",
                     pad_right(fmt::format("{:.0f} % faster", r.speedup * 100), 38), "on path", "estimate",
                     "re-simulated");
  for (size_t i = 0; i < r.sensitivity.size() && i < top; ++i) {
    const Sensitivity& s = r.sensitivity[i];
    const std::string resim = s.resimulated ? format_duration(s.resimulated_saved) : "–";
    out += fmt::format("      {} {} {} {}\n", pad_right(s.key, 36), pad_left(format_duration(s.on_path), 12),
                       pad_left(format_duration(s.estimate), 12), pad_left(resim, 14));
  }
}

std::string plural_op(const StragglerRow& r) { return fmt::format("{} {}s", r.group, r.op); }

}  // namespace

std::string format_critical_path(const CriticalPathReport& r, size_t top) {
  const TimeNs t = r.path.length;
  std::string out = "\n";
  out += fmt::format("  {:<24} {} = the iteration time: {} steps on {} ranks, {} changes of rank\n", "critical path",
                     format_duration(t), r.path.steps.size(), r.ranks_on_path, r.rank_changes);
  if (r.has_slack()) {
    out += fmt::format("  {:<24} whole graph of {} ops: {} nodes, {} edges\n", "", r.ops, r.nodes, r.edges);
  } else {
    out += fmt::format("  {:<24} binding chains only ({} ops; at most {} nodes kept at once)\n", "", r.ops, r.nodes);
  }
  out += fmt::format("    {} {:>12} {:>9}\n", pad_right("op class", 38), "time", "% path");
  share_rows(out, r.by_class, t, top, false);
  out += fmt::format("    {} {:>12} {:>9}\n", pad_right("category", 38), "time", "% path");
  share_rows(out, r.by_category, t, top, true);
  out += fmt::format("    {} {:>12} {:>9}\n", pad_right("pipeline stage", 38), "time", "% path");
  share_rows(out, r.by_stage, t, top, false);
  out += fmt::format("    {} {:>12} {:>9} {:>8}\n", pad_right("rank", 38), "time", "% path", "steps");
  for (size_t i = 0; i < r.by_rank.size() && i < top; ++i) {
    const RankOnPath& k = r.by_rank[i];
    out += fmt::format("      {} {} {:>9} {:>8}\n", pad_right(k.label, 36), pad_left(format_duration(k.time), 12),
                       format_percent(frac(k.time, t)), k.steps);
  }
  if (r.by_rank.size() > top) out += fmt::format("      ({} more ranks)\n", r.by_rank.size() - top);
  slack_block(out, r);
  sensitivity_block(out, r, top);
  return out;
}

std::string straggler_headline(const StragglerSummary& s) {
  const std::vector<StragglerRow>& rows = !s.hosts.empty() ? s.hosts : s.ranks;
  if (rows.empty()) return {};
  const StragglerRow& r = rows.front();
  return fmt::format("{} was the last to arrive in {:.1f} % of its {} and cost {} per iteration", r.label,
                     100.0 * r.last_fraction(), plural_op(r), format_duration(r.cell.hold));
}

std::string format_stragglers(const StragglerSummary& s, size_t top) {
  std::string out = "\n";
  out += fmt::format("  {:<24} {} of {} collective instances waited for one last member; Σ hold {} "
                     "(hold = last − second-last arrival)\n",
                     "stragglers", s.straggled, s.instances, format_duration(s.hold));
  if (s.straggled == 0) return out;
  out += fmt::format("    {}\n", straggler_headline(s));
  auto table = [&](const std::string& title, const std::vector<StragglerRow>& rows) {
    if (rows.empty()) return;
    out += fmt::format("    {} {} {:>8} {:>8} {:>9} {:>14}\n", pad_right(title, 40), pad_right("collective", 20), "last",
                       "of", "% last", "hold");
    for (size_t i = 0; i < rows.size() && i < top; ++i) {
      const StragglerRow& r = rows[i];
      out += fmt::format("      {} {} {:>8} {:>8} {:>9} {}\n", pad_right(r.label, 38),
                         pad_right(fmt::format("{} {}", r.group, r.op), 20), r.cell.last, r.cell.instances,
                         format_percent(r.last_fraction()), pad_left(format_duration(r.cell.hold), 14));
    }
    if (rows.size() > top) out += fmt::format("      ({} more)\n", rows.size() - top);
  };
  table("hosts (groups across hosts)", s.hosts);
  table("ranks", s.ranks);
  return out;
}

Json critical_path_json(const CriticalPathReport& r) {
  const TimeNs t = r.path.length;
  auto share_list = [&](const std::vector<PathShare>& v) {
    Json list = Json::array();
    for (const PathShare& s : v) {
      Json j;
      j["key"] = s.key;
      j["time_s"] = secs(s.time);
      j["share"] = frac(s.time, t);
      list.push_back(std::move(j));
    }
    return list;
  };
  Json j;
  j["graph"] = r.graph;
  j["ops"] = r.ops;
  j["nodes"] = r.nodes;
  if (r.has_slack()) j["edges"] = r.edges;
  j["length_s"] = secs(t);
  j["length_ns"] = t.count();
  j["steps"] = r.path.steps.size();
  j["ranks_on_path"] = r.ranks_on_path;
  j["rank_changes"] = r.rank_changes;
  j["by_class"] = share_list(r.by_class);
  j["by_category"] = share_list(r.by_category);
  j["by_stage"] = share_list(r.by_stage);
  Json ranks = Json::array();
  for (const RankOnPath& k : r.by_rank) {
    Json e;
    e["rank"] = k.rank;
    e["label"] = k.label;
    e["time_s"] = secs(k.time);
    e["share"] = frac(k.time, t);
    e["steps"] = k.steps;
    ranks.push_back(std::move(e));
  }
  j["by_rank"] = std::move(ranks);
  Json sens;
  sens["speedup"] = r.speedup;
  Json classes = Json::array();
  for (const Sensitivity& s : r.sensitivity) {
    Json e;
    e["class"] = s.key;
    e["on_path_s"] = secs(s.on_path);
    e["estimate_s"] = secs(s.estimate);
    e["resimulated"] = s.resimulated;
    if (s.resimulated) {
      e["resimulated_iteration_s"] = secs(s.resimulated_time);
      e["resimulated_saved_s"] = secs(s.resimulated_saved);
    }
    classes.push_back(std::move(e));
  }
  sens["classes"] = std::move(classes);
  j["sensitivity"] = std::move(sens);
  Json slack;
  if (r.has_slack()) {
    Json per_rank = Json::array();
    for (const RankSlack& s : r.rank_slack) {
      Json e;
      e["rank"] = s.rank;
      e["min_compute_slack_s"] = secs(s.min_compute);
      e["critical_compute_ops"] = s.critical_compute_ops;
      e["compute_ops"] = s.compute_ops;
      per_rank.push_back(std::move(e));
    }
    slack["per_rank"] = std::move(per_rank);
    // [rank, stream, op, slack_ns] for the traced ranks' ops.
    Json ops = Json::array();
    for (const OpSlack& o : r.op_slack) ops.push_back(Json::array({o.rank, o.stream, o.op, o.slack.count()}));
    slack["ops"] = std::move(ops);
  } else {
    slack["per_rank"] = nullptr;
    slack["reason"] = r.no_slack_reason;
  }
  j["slack"] = std::move(slack);
  // [kind, rank, stream, op, start_ns, end_ns] per step, in time order.
  Json steps = Json::array();
  for (const PathStep& s : r.path.steps) {
    steps.push_back(Json::array({kind_key(s.kind), s.rank, s.stream, s.op, s.start.count(), s.end.count()}));
  }
  j["path"] = std::move(steps);
  return j;
}

Json stragglers_json(const StragglerSummary& s) {
  auto rows = [](const std::vector<StragglerRow>& v, const char* id) {
    Json list = Json::array();
    for (const StragglerRow& r : v) {
      Json e;
      e[id] = r.id;
      e["label"] = r.label;
      e["group"] = r.group;
      e["op"] = r.op;
      e["instances"] = r.cell.instances;
      e["last"] = r.cell.last;
      e["last_fraction"] = r.last_fraction();
      e["hold_s"] = secs(r.cell.hold);
      list.push_back(std::move(e));
    }
    return list;
  };
  Json j;
  j["definition"] = "hold = last arrival - second-last arrival; a member is the straggler when its hold > 0";
  j["instances"] = s.instances;
  j["straggled"] = s.straggled;
  j["hold_s"] = secs(s.hold);
  j["headline"] = straggler_headline(s);
  j["hosts"] = rows(s.hosts, "host");
  j["ranks"] = rows(s.ranks, "rank");
  return j;
}

}  // namespace lacuna::report
