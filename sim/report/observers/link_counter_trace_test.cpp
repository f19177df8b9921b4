// Link utilisation counters in the Perfetto trace, from a scripted
// LinkObserver feed (no flow model needed).
#include "sim/report/observers/link_counter_trace.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/report/observers/test_fixture.h"
#include "sim/report/formats/trace_writer.h"

namespace lacuna::report {
namespace {

namespace fs = std::filesystem;
using network::LinkInfo;
using network::LinkKind;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Link 0: node 0 NIC (traced node), 1: node 1 NIC (not traced), 2: a trunk,
// 3: node 0 NVLink.
std::vector<LinkInfo> links() {
  // kind, name, capacity, node, tier, gpu, rail, first node, last node
  return {{LinkKind::kNicUp, "node 0 nic 0 up", 50e9, 0, -1, -1, 0, 0, 0},
          {LinkKind::kNicUp, "node 1 nic 0 up", 50e9, 1, -1, -1, 0, 1, 1},
          {LinkKind::kTrunkUp, "tor rail 0 group 0 up", 400e9, -1, 0, -1, 0, 0, 1},
          {LinkKind::kNvlinkUp, "node 0 gpu 0 nvlink up", 450e9, 0, -1, 0, -1, 0, 0},
          {LinkKind::kNvlinkUp, "node 1 gpu 1 nvlink up", 450e9, 1, -1, 1, -1, 1, 1},
          {LinkKind::kNicUp, "node 1 nic 1 up", 50e9, 1, -1, -1, 1, 1, 1},
          {LinkKind::kTrunkUp, "tor rail 1 group 0 up", 400e9, -1, 0, -1, 1, 0, 1},
          {LinkKind::kTrunkUp, "tor rail 0 group 1 up", 400e9, -1, 0, -1, 0, 2, 3}};
}

// Feeds the flow model's load changes once the run began (it is registered
// after the trace writer, so the writer has seen on_run_begin).
class FakeNetwork : public engine::Observer {
 public:
  explicit FakeNetwork(network::LinkObserver* to) : to_(to) {}
  void on_run_begin(const engine::RunInfo&) override {
    to_->on_link_load(TimeNs(100), 2, 100e9);
    to_->on_link_load(TimeNs(100), 0, 25e9);
    to_->on_link_load(TimeNs(100), 0, 30e9);  // same time: the last value holds
    to_->on_link_load(TimeNs(150), 0, 30e9);  // unchanged: not repeated
    to_->on_link_load(TimeNs(150), 1, 50e9);  // node 1 is not traced
    to_->on_link_load(TimeNs(150), 3, 45e9);
    to_->on_link_load(TimeNs(200), 2, 0);
    to_->on_link_load(TimeNs(200), 0, 0);
  }
  void on_op_end(const engine::OpSpan&) override {}

 private:
  network::LinkObserver* to_;
};

std::string traced_with_links(const std::string& name, bool feed) {
  ir::Program p = testing::two_rank_program();
  p.mutable_ranks(1)->set_node(1);
  const fs::path path = fs::path(::testing::TempDir()) / name;
  fs::remove(path);
  TraceWriter w(p, path.string(), parse_rank_spec("0"));
  FakeNetwork net(w.link_observer());
  if (feed) w.link_observer()->on_links(links());
  std::vector<engine::Observer*> observers = {&w};
  if (feed) observers.push_back(&net);
  testing::replay(p, observers);
  w.commit();
  return slurp(path);
}

TEST(LinkCounterTrace, CountersPerLinkInPercentUnderANetworkProcess) {
  const std::string text = traced_with_links("lacuna_trace_links.json", true);
  const auto j = nlohmann::json::parse(text);  // still valid JSON
  const int network_pid = 2;                   // the number of ranks: no rank has it
  std::vector<std::tuple<std::string, double, double>> counters;
  std::string process;
  int sort_index = -1;
  for (const auto& e : j["traceEvents"]) {
    if (e["pid"] != network_pid) continue;
    if (e["ph"] == "M" && e["name"] == "process_name") process = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "process_sort_index") sort_index = e["args"]["sort_index"];
    if (e["ph"] == "C") {
      counters.emplace_back(e["name"].get<std::string>(), e["ts"].get<double>(), e["args"]["util_pct"].get<double>());
    }
  }
  EXPECT_EQ(process, "network");
  EXPECT_EQ(sort_index, 1);  // after the one traced rank
  using C = std::tuple<std::string, double, double>;
  EXPECT_EQ(counters, (std::vector<C>{{"node 0 nic 0 up", 0.1, 60.0},
                                      {"tor rail 0 group 0 up", 0.1, 25.0},
                                      {"node 0 gpu 0 nvlink up", 0.15, 10.0},
                                      {"node 0 nic 0 up", 0.2, 0.0},
                                      {"tor rail 0 group 0 up", 0.2, 0.0}}));
  // Exact µs time stamps and fixed two decimals.
  EXPECT_NE(text.find(R"({"ph":"C","name":"node 0 nic 0 up","pid":2,"ts":0.100,"args":{"util_pct":60.00}})"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("node 1 nic"), std::string::npos) << "links of untraced nodes are not drawn";
  // The rank's own memory counter is untouched.
  EXPECT_NE(text.find(R"({"ph":"C","name":"memory","pid":0,"ts":0.000,"args":{"bytes":1800}})"), std::string::npos);
  EXPECT_EQ(text, traced_with_links("lacuna_trace_links_again.json", true)) << "deterministic";
}

TEST(LinkCounterTrace, NoFeedLeavesTheTraceAsBefore) {
  const std::string text = traced_with_links("lacuna_trace_no_links.json", false);
  EXPECT_EQ(text.find("\"network\""), std::string::npos);
  EXPECT_TRUE(nlohmann::json::accept(text));
}

TEST(LinkCounterTrace, VolumeRuleKeepsTheLinksOfTracedRanks) {
  std::vector<std::string> events;
  LinkCounterTrace t([&](std::string_view e) { events.emplace_back(e); });
  t.on_links(links());
  // One traced rank, twice: node 1, GPU 0, rail 0.
  t.begin(7, 3, {{1, 0, 0}, {1, 0, 0}});
  EXPECT_FALSE(t.drawn(0)) << "another node's NIC";
  EXPECT_TRUE(t.drawn(1)) << "its own NIC";
  EXPECT_TRUE(t.drawn(2)) << "the trunk above its node on its rail";
  EXPECT_FALSE(t.drawn(3)) << "another node's NVLink";
  EXPECT_FALSE(t.drawn(4)) << "another GPU's NVLink on its node";
  EXPECT_FALSE(t.drawn(5)) << "another rail's NIC on its node";
  EXPECT_FALSE(t.drawn(6)) << "another rail's trunk";
  EXPECT_FALSE(t.drawn(7)) << "a trunk over other nodes";
  EXPECT_FALSE(t.drawn(99));
  t.on_link_load(TimeNs(5), 1, 25e9);
  EXPECT_TRUE(events.empty()) << "held until the time moves on";
  t.finish();
  ASSERT_EQ(events.size(), 3u);  // process name, sort index, one counter
  EXPECT_EQ(events[2], R"({"ph":"C","name":"node 1 nic 0 up","pid":7,"ts":0.005,"args":{"util_pct":50.00}})");
  EXPECT_EQ(t.counters_written(), 1u);
  t.on_link_load(TimeNs(9), 1, 50e9);  // after the trace was closed: ignored
  t.finish();
  EXPECT_EQ(events.size(), 3u);
}

TEST(LinkCounterTrace, LoadBeforeTheTraceBeganIsAnInternalError) {
  LinkCounterTrace t([](std::string_view) {});
  t.on_links(links());
  EXPECT_THROW(t.on_link_load(TimeNs(1), 0, 1.0), InternalError);
}

}  // namespace
}  // namespace lacuna::report
