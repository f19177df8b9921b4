// The busiest-link summary from synthetic LinkStats, and the network sections
// of the terminal table and the JSON.
#include "sim/report/formats/network_report.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/report/formats/json_report.h"
#include "sim/report/analyses/summary.h"
#include "sim/report/formats/terminal_report.h"
#include "sim/report/observers/test_fixture.h"

namespace lacuna::report {
namespace {

using network::LinkInfo;
using network::LinkKind;
using network::LinkStats;

// 14 links: node n nic up (n = 0..11, 50 GB/s), a trunk up (400 GB/s), and an
// idle NVLink.
std::vector<LinkInfo> synthetic_links() {
  std::vector<LinkInfo> links;
  for (int n = 0; n < 12; ++n) {
    links.push_back({LinkKind::kNicUp, "node " + std::to_string(n) + " nic 0 up", 50e9, n, -1});
  }
  links.push_back({LinkKind::kTrunkUp, "tor rail 0 group 0 up", 400e9, -1, 0});
  links.push_back({LinkKind::kNvlinkUp, "node 0 gpu 0 nvlink up", 450e9, 0, -1});
  return links;
}

// Link n carried (n + 1) GB, except links 3 and 4 which tie at 20 GB and the
// trunk with 100 GB; given in no particular order, with one idle link and one
// stat naming a link that does not exist.
std::vector<LinkStats> synthetic_stats() {
  std::vector<LinkStats> stats;
  for (uint32_t n = 0; n < 12; ++n) {
    const double gb = n == 3 || n == 4 ? 20.0 : n + 1.0;
    stats.push_back({n, gb * 1e9, gb * 1e9 / (50e9 * 1e-3 * 1000), 0.5, TimeNs(n * 1000)});
  }
  stats.push_back({12, 100e9, 0.25, 1.0, TimeNs(2'500'000)});
  stats.push_back({13, 0.0, 0.0, 0.0, TimeNs(0)});
  stats.push_back({99, 1e12, 1.0, 1.0, TimeNs(0)});
  std::swap(stats[0], stats[12]);
  std::swap(stats[5], stats[3]);
  return stats;
}

TEST(LinkSummary, TopTenByUtilisationWithTiesByBytesThenLinkId) {
  const LinkSummary s = summarize_links(synthetic_links(), synthetic_stats());
  EXPECT_TRUE(s.modelled);
  EXPECT_EQ(s.links, 14u);
  EXPECT_EQ(s.links_with_traffic, 13u);  // not the idle NVLink, not the unknown link 99
  ASSERT_EQ(s.busiest.size(), 10u);
  std::vector<uint32_t> order;
  for (const LinkRow& r : s.busiest) order.push_back(r.link);
  // Links 3, 4 at 40 % (same bytes: lower id first); the trunk at 25 %
  // despite the most bytes; then the NICs at 24 %, 22 %, ...
  EXPECT_EQ(order, (std::vector<uint32_t>{3, 4, 12, 11, 10, 9, 8, 7, 6, 5}));
  const LinkRow& trunk = s.busiest[2];
  EXPECT_EQ(trunk.name, "tor rail 0 group 0 up");
  EXPECT_EQ(trunk.kind, LinkKind::kTrunkUp);
  EXPECT_DOUBLE_EQ(trunk.capacity_bytes_per_s, 400e9);
  EXPECT_DOUBLE_EQ(trunk.bytes, 100e9);
  EXPECT_DOUBLE_EQ(trunk.mean_utilisation, 0.25);
  EXPECT_DOUBLE_EQ(trunk.peak_utilisation, 1.0);
  EXPECT_EQ(trunk.saturated, TimeNs(2'500'000));
  EXPECT_EQ(summarize_links(synthetic_links(), synthetic_stats(), 3).busiest.size(), 3u);
}

TEST(LinkSummary, TerminalRowsInSiUnits) {
  const std::string t = format_links(summarize_links(synthetic_links(), synthetic_stats()));
  EXPECT_NE(t.find("busiest links (10 of 13 used)"), std::string::npos) << t;
  // name, capacity, data, mean util, peak util, saturated
  EXPECT_NE(t.find("    tor rail 0 group 0 up           400.00 GB/s    100.00 GB    25.00 %   100.00 %       2.500 ms\n"),
            std::string::npos)
      << t;
  EXPECT_LT(t.find("node 3 nic"), t.find("node 4 nic"));
  EXPECT_LT(t.find("node 4 nic"), t.find("tor rail"));
  EXPECT_EQ(t.find("node 0 gpu 0 nvlink"), std::string::npos) << "idle links are not listed\n" << t;
  EXPECT_EQ(format_links(analytic_links()), "\n  busiest links            analytic network: no per-link model\n");
}

TEST(LinkSummary, JsonFieldsNamedWithUnits) {
  const auto j = links_json(summarize_links(synthetic_links(), synthetic_stats()));
  EXPECT_EQ(j["model"], "flow");
  EXPECT_EQ(j["links"], 14);
  EXPECT_EQ(j["links_with_traffic"], 13);
  ASSERT_EQ(j["busiest"].size(), 10u);
  const auto& t = j["busiest"][2];
  EXPECT_EQ(t["link"], 12);
  EXPECT_EQ(t["name"], "tor rail 0 group 0 up");
  EXPECT_EQ(t["kind"], "trunk_up");
  EXPECT_DOUBLE_EQ(t["capacity_gb_per_s"].get<double>(), 400.0);
  EXPECT_EQ(t["bytes"], 100'000'000'000);
  EXPECT_DOUBLE_EQ(t["mean_utilisation"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(t["peak_utilisation"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(t["saturated_s"].get<double>(), 2.5e-3);
  const auto a = links_json(analytic_links());
  EXPECT_EQ(a["model"], "analytic");
  EXPECT_EQ(a["note"], "analytic network: no per-link model");
  EXPECT_TRUE(a["busiest"].empty());
}

CommSummary synthetic_comm() {
  CommSummary c;
  c.simulated_ranks = 8;
  c.num_gpus = 64;
  c.folded = true;
  CommRow ar;
  ar.group = "tp";
  ar.op = "all_reduce";
  ar.min_group_size = ar.max_group_size = 8;
  ar.ranks = 8;
  ar.ops = 8 * 192;
  ar.bytes = int64_t{8} * 192 * 50'000'000;
  ar.time = TimeNs(int64_t{8} * 192 * 100'000);  // 100 µs each
  ar.timed = ar.time;
  ar.timed_bytes = static_cast<double>(ar.bytes);
  ar.bus_bytes = ar.timed_bytes * 1.75;
  ar.min_busbw = 700e9;
  CommRow pp;
  pp.group = "pp";
  pp.op = "send_recv";
  pp.min_group_size = pp.max_group_size = 2;
  pp.ranks = 7;
  pp.ops = 7 * 32;
  pp.bytes = int64_t{7} * 32 * 10'000'000;
  pp.time = TimeNs(int64_t{7} * 32 * 500'000);
  pp.timed = pp.time;
  pp.timed_bytes = static_cast<double>(pp.bytes);
  pp.bus_bytes = pp.timed_bytes;
  pp.min_busbw = 20e9;
  c.rows = {ar, pp};
  return c;
}

TEST(CommReport, TerminalRowsPerRank) {
  const std::string t = format_comm(synthetic_comm());
  // 192 ops of 50 MB per rank = 9.6 GB in 19.2 ms; busbw 50 MB · 1.75 / 100 µs = 875 GB/s.
  EXPECT_NE(t.find("    tp all_reduce                    8        192      9.60 GB      19.200 ms    875.00 GB/s    "
                   "700.00 GB/s\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("    pp send_recv                     2         32      0.32 GB      16.000 ms     20.00 GB/s"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("(folded: over the 8 simulated of 64 ranks only)"), std::string::npos) << t;
}

TEST(CommReport, JsonRowsNamedWithUnits) {
  const auto j = comm_json(synthetic_comm());
  EXPECT_EQ(j["simulated_ranks_only"], true);
  EXPECT_EQ(j["simulated_ranks"], 8);
  ASSERT_EQ(j["collectives"].size(), 2u);
  const auto& ar = j["collectives"][0];
  EXPECT_EQ(ar["group"], "tp");
  EXPECT_EQ(ar["op"], "all_reduce");
  EXPECT_EQ(ar["group_size_min"], 8);
  EXPECT_EQ(ar["ops"], 8 * 192);
  EXPECT_DOUBLE_EQ(ar["ops_per_rank"].get<double>(), 192.0);
  EXPECT_EQ(ar["bytes"], int64_t{8} * 192 * 50'000'000);
  EXPECT_DOUBLE_EQ(ar["time_s"].get<double>(), 8 * 192 * 100e-6);
  EXPECT_DOUBLE_EQ(ar["mean_busbw_gb_per_s"].get<double>(), 875.0);
  EXPECT_DOUBLE_EQ(ar["mean_algbw_gb_per_s"].get<double>(), 500.0);
  EXPECT_DOUBLE_EQ(ar["min_busbw_gb_per_s"].get<double>(), 700.0);
}

Summary fixture_summary() {
  static const ir::Program p = testing::two_rank_program();
  BubbleAccounting acc;
  testing::replay(p, {&acc});
  return summarize(p, acc, "test cost model", false);
}

TEST(SummaryNetwork, SectionsAreAdditiveAndComeBeforeTheCostModelLine) {
  Summary s = fixture_summary();
  const std::string plain_text = format_summary(s, RunStats{});
  const std::string plain_json = summary_json(s);
  EXPECT_EQ(plain_text.find("busiest links"), std::string::npos);
  EXPECT_EQ(plain_text.find("communication per rank"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(plain_json).count("comm"), 0u);

  s.comm = synthetic_comm();
  s.links = analytic_links();
  const std::string text = format_summary(s, RunStats{});
  const size_t comm = text.find("communication per rank");
  const size_t links = text.find("analytic network: no per-link model");
  ASSERT_NE(comm, std::string::npos) << text;
  ASSERT_NE(links, std::string::npos) << text;
  EXPECT_LT(text.find("bubble total"), comm);
  EXPECT_LT(text.find("peak memory per rank"), comm);
  EXPECT_LT(comm, links);
  EXPECT_LT(links, text.find("cost model"));
  // Everything else unchanged: removing the new block gives the old text.
  std::string without = text;
  const size_t begin = text.rfind("\n\n", comm) + 1;
  const size_t end = text.find("\n\n", links) + 1;
  without.erase(begin, end - begin);
  EXPECT_EQ(without, plain_text);

  const std::string json = summary_json(s);
  const auto j = nlohmann::json::parse(json);
  EXPECT_EQ(j["comm"]["collectives"][0]["op"], "all_reduce");
  EXPECT_EQ(j["links"]["model"], "analytic");
  // One line per top-level key, before "ranks"; the old keys keep their values.
  EXPECT_NE(json.find("\n \"comm\": {"), std::string::npos);
  EXPECT_LT(json.find("\n \"links\": {"), json.find("\n \"ranks\": ["));
  auto old = j;
  old.erase("comm");
  old.erase("links");
  EXPECT_EQ(old, nlohmann::json::parse(plain_json));
}

}  // namespace
}  // namespace lacuna::report
