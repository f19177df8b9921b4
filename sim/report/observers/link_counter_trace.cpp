#include "sim/report/observers/link_counter_trace.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/report/formats/format.h"

namespace lacuna::report {

namespace {


}  // namespace

LinkCounterTrace::LinkCounterTrace(Emit emit) : emit_(std::move(emit)) {}

void LinkCounterTrace::begin(int32_t pid, int32_t sort_index, std::vector<Place> places) {
  begun_ = true;
  finished_ = false;
  pid_ = pid;
  sort_index_ = sort_index;
  std::sort(places.begin(), places.end());
  places.erase(std::unique(places.begin(), places.end()), places.end());
  places_ = std::move(places);
  select();
}

void LinkCounterTrace::on_links(const std::vector<network::LinkInfo>& links) {
  flush();  // a new topology (a new run): what was held belongs to the old one
  links_ = links;
  last_.assign(links_.size(), std::string());
  pending_load_.assign(links_.size(), 0.0);
  is_pending_.assign(links_.size(), 0);
  pending_.clear();
  select();
}

void LinkCounterTrace::select() {
  drawn_.assign(links_.size(), 0);
  for (size_t i = 0; i < links_.size(); ++i) {
    const network::LinkInfo& l = links_[i];
    if (!(l.capacity_bytes_per_s > 0)) continue;
    bool crossed = false;
    for (const Place& p : places_) {
      switch (l.kind) {
        case network::LinkKind::kNvlinkUp:
        case network::LinkKind::kNvlinkDown: crossed = l.node == p.node && l.gpu == p.gpu; break;
        case network::LinkKind::kNicUp:
        case network::LinkKind::kNicDown: crossed = l.node == p.node && l.rail == p.rail; break;
        case network::LinkKind::kTrunkUp:
        case network::LinkKind::kTrunkDown:
          crossed = p.node >= l.first_node && p.node <= l.last_node && (l.rail < 0 || l.rail == p.rail);
          break;
      }
      if (crossed) break;
    }
    drawn_[i] = crossed ? 1 : 0;
  }
}

void LinkCounterTrace::on_link_load(TimeNs t, network::LinkId link, double bytes_per_s) {
  if (!begun_) throw InternalError("internal: a link load was reported before the trace began");
  if (finished_ || !drawn(link)) return;
  if (!pending_.empty() && t != pending_t_) flush();
  pending_t_ = t;
  if (!is_pending_[link]) {
    is_pending_[link] = 1;
    pending_.push_back(link);
  }
  pending_load_[link] = bytes_per_s;
}

void LinkCounterTrace::flush() {
  if (pending_.empty()) return;
  // Several recomputations at one time may each report a link: LinkId order,
  // last value, whatever order they came in.
  std::sort(pending_.begin(), pending_.end());
  const std::string ts = micros_exact(pending_t_.count());
  for (network::LinkId link : pending_) {
    is_pending_[link] = 0;
    const network::LinkInfo& info = links_[link];
    const double pct = std::max(0.0, pending_load_[link] / info.capacity_bytes_per_s * 100.0);
    std::string value = fmt::format("{:.2f}", pct);
    if (value == last_[link]) continue;
    if (!header_written_) {
      header_written_ = true;
      emit_(fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"args":{{"name":"network"}}}})", pid_));
      emit_(fmt::format(R"({{"ph":"M","name":"process_sort_index","pid":{},"args":{{"sort_index":{}}}}})", pid_,
                        sort_index_));
    }
    emit_(fmt::format(R"({{"ph":"C","name":{},"pid":{},"ts":{},"args":{{"util_pct":{}}}}})",
                      nlohmann::json(info.name).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), pid_, ts, value));
    ++counters_written_;
    last_[link] = std::move(value);
  }
  pending_.clear();
}

void LinkCounterTrace::finish() {
  flush();
  finished_ = true;
}

}  // namespace lacuna::report
