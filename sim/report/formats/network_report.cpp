#include "sim/report/formats/network_report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/report/formats/format.h"
#include "sim/report/formats/json_util.h"

namespace lacuna::report {

namespace {

using json_util::secs;

using Json = nlohmann::ordered_json;

constexpr double kGB = 1e9;


std::string gb_per_s(double bytes_per_s) { return bytes_per_s > 0 ? fmt::format("{:.2f} GB/s", bytes_per_s / kGB) : "–"; }

// 192 → "192", 2.5 → "2.5": symmetric ranks give whole counts.
std::string count_text(double v) {
  return v == std::floor(v) ? fmt::format("{:.0f}", v) : fmt::format("{:.1f}", v);
}

std::string group_size_text(const CommRow& r) {
  return r.min_group_size == r.max_group_size ? fmt::format("{}", r.min_group_size)
                                              : fmt::format("{}–{}", r.min_group_size, r.max_group_size);
}


}  // namespace

std::string format_comm(const CommSummary& comm) {
  std::string out = "\n";
  out += fmt::format("  {} {:>7} {:>10} {:>12} {:>14} {:>14} {:>14}\n", pad_right("communication per rank", 28), "group",
                     "ops/rank", "data/rank", "time/rank", "busbw mean", "busbw min");
  if (comm.rows.empty()) out += "    (none)\n";
  for (const CommRow& r : comm.rows) {
    out += fmt::format("    {} {} {:>10} {:>12} {} {} {}\n", pad_right(fmt::format("{} {}", r.group, r.op), 26),
                       pad_left(group_size_text(r), 7), count_text(r.ops_per_rank()),
                       format_gb(Bytes(std::llround(r.bytes_per_rank()))),
                       pad_left(format_duration(TimeNs(std::llround(r.seconds_per_rank() * 1e9))), 14),
                       pad_left(gb_per_s(r.mean_busbw()), 14), pad_left(gb_per_s(r.min_busbw), 14));
  }
  if (comm.folded) {
    out += fmt::format("    (folded: over the {} simulated of {} ranks only)\n", comm.simulated_ranks, comm.num_gpus);
  }
  return out;
}

std::string format_links(const LinkSummary& links) {
  std::string out = "\n";
  if (!links.modelled) {
    out += fmt::format("  {:<24} {}\n", "busiest links", "analytic network: no per-link model");
    return out;
  }
  size_t name_width = 30;
  for (const LinkRow& l : links.busiest) name_width = std::max(name_width, display_columns(l.name));
  out += fmt::format("  {} {:>12} {:>12} {:>10} {:>10} {:>14}\n",
                     pad_right(fmt::format("busiest links ({} of {} used)", links.busiest.size(),
                                           links.links_with_traffic),
                               name_width + 2),
                     "capacity", "data", "mean util", "peak util", "saturated");
  for (const LinkRow& l : links.busiest) {
    out += fmt::format("    {} {} {:>12} {:>10} {:>10} {}\n", pad_right(l.name, name_width),
                       pad_left(gb_per_s(l.capacity_bytes_per_s), 12), format_gb(Bytes(std::llround(l.bytes))),
                       format_percent(l.mean_utilisation), format_percent(l.peak_utilisation),
                       pad_left(format_duration(l.saturated), 14));
  }
  return out;
}

Json comm_json(const CommSummary& comm) {
  Json j;
  j["simulated_ranks_only"] = comm.folded;
  j["simulated_ranks"] = comm.simulated_ranks;
  Json rows = Json::array();
  for (const CommRow& r : comm.rows) {
    Json e;
    e["group"] = std::string(r.group);
    e["op"] = std::string(r.op);
    e["group_size_min"] = r.min_group_size;
    e["group_size_max"] = r.max_group_size;
    e["ranks"] = r.ranks;
    e["ops"] = r.ops;
    e["ops_per_rank"] = r.ops_per_rank();
    e["bytes"] = r.bytes;
    e["bytes_per_rank"] = r.bytes_per_rank();
    e["time_ns"] = r.time.count();
    e["time_s"] = secs(r.time);
    e["time_per_rank_s"] = r.seconds_per_rank();
    e["mean_algbw_gb_per_s"] = r.mean_algbw() / kGB;
    e["mean_busbw_gb_per_s"] = r.mean_busbw() / kGB;
    e["min_busbw_gb_per_s"] = r.min_busbw / kGB;
    rows.push_back(std::move(e));
  }
  j["collectives"] = std::move(rows);
  return j;
}

Json links_json(const LinkSummary& links) {
  Json j;
  if (!links.modelled) {
    j["model"] = "analytic";
    j["note"] = "analytic network: no per-link model";
    j["busiest"] = Json::array();
    return j;
  }
  j["model"] = "flow";
  j["links"] = links.links;
  j["links_with_traffic"] = links.links_with_traffic;
  Json rows = Json::array();
  for (const LinkRow& l : links.busiest) {
    Json e;
    e["link"] = l.link;
    e["name"] = l.name;
    e["kind"] = std::string(link_kind_key(l.kind));
    e["capacity_gb_per_s"] = l.capacity_bytes_per_s / kGB;
    e["bytes"] = std::llround(l.bytes);
    e["mean_utilisation"] = l.mean_utilisation;
    e["peak_utilisation"] = l.peak_utilisation;
    e["saturated_s"] = secs(l.saturated);
    rows.push_back(std::move(e));
  }
  j["busiest"] = std::move(rows);
  return j;
}

}  // namespace lacuna::report
