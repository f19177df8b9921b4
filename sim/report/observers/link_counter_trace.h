// Link utilisation counters for the Perfetto trace: a network::LinkObserver
// that turns the flow model's load changes into Chrome-trace counter events
// ("ph":"C"), one counter track per link, value = load / capacity in percent
// (args key "util_pct"), under one process named "network".
//
// Volume rule: only the links a traced rank's own traffic can cross are drawn:
// its GPU's NVLink (both directions), its NIC (the rail its GPU uses, both
// directions) and the trunks of the switch groups above its node on that rail;
// changes at one timestamp are coalesced (the last value holds) and a value
// equal, at two decimals, to the one last written for that link is not
// repeated. Links that never carry traffic get no track.
//
// TraceWriter owns one and writes its events into the same file.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/units.h"
#include "sim/network/link_observer.h"

namespace lacuna::report {

class LinkCounterTrace : public network::LinkObserver {
 public:
  // Writes one complete trace event (a JSON object, no separator).
  using Emit = std::function<void(std::string_view event)>;
  explicit LinkCounterTrace(Emit emit);

  // Where a traced rank sits: its node, local GPU and the NIC (rail) it uses.
  struct Place {
    int32_t node = 0;
    int32_t gpu = 0;
    int32_t rail = 0;
    auto operator<=>(const Place&) const = default;
  };
  // Where the counters go: process `pid` (named "network", placed at
  // `sort_index`), drawing the links of the traced `places`. Call once the
  // traced ranks are known, before the first load change.
  void begin(int32_t pid, int32_t sort_index, std::vector<Place> places);
  void on_links(const std::vector<network::LinkInfo>& links) override;
  void on_link_load(TimeNs t, network::LinkId link, double bytes_per_s) override;
  // Writes the changes held back for the last timestamp. Call at the run's end,
  // before the trace is closed; loads reported after it are ignored (the file
  // is complete).
  void finish();

  // Links the volume rule keeps (valid once begin() and on_links() happened).
  bool drawn(network::LinkId link) const { return link < drawn_.size() && drawn_[link] != 0; }
  size_t counters_written() const { return counters_written_; }

 private:
  void select();
  void flush();

  Emit emit_;
  bool begun_ = false;
  bool finished_ = false;
  int32_t pid_ = 0;
  int32_t sort_index_ = 0;
  std::vector<Place> places_;  // sorted, unique
  std::vector<network::LinkInfo> links_;
  std::vector<uint8_t> drawn_;        // per link
  std::vector<std::string> last_;     // per link, last value written ("" = none)
  std::vector<double> pending_load_;  // per link, bytes/s at pending_t_
  std::vector<uint8_t> is_pending_;   // per link
  std::vector<network::LinkId> pending_;
  TimeNs pending_t_;
  bool header_written_ = false;
  size_t counters_written_ = 0;
};

}  // namespace lacuna::report
