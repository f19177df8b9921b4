#include "sim/network/fluid.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "sim/core/error.h"

namespace lacuna::network {
namespace {

// Two rates closer than this (relatively) are the same answer: the activity
// keeps its rate and its finish, and nobody is told.
constexpr double kSameRate = 1e-12;
// Links whose fair level is within this of the minimum saturate together.
constexpr double kSameLevel = 1e-9;
// Predicted finishes are capped here rather than overflowing.
constexpr double kMaxNs = 4e18;

}  // namespace

FluidNetwork::FluidNetwork(std::vector<double> capacity, std::vector<uint8_t> binding) {
  links_.resize(capacity.size());
  for (size_t i = 0; i < capacity.size(); ++i) {
    links_[i].capacity = capacity[i];
    links_[i].binding = i < binding.size() ? binding[i] != 0 : true;
  }
}

void FluidNetwork::clear() {
  for (Link& l : links_) {
    l.members.clear();
    l.count = 0;
    l.load = 0;
  }
  for (Flow& f : flows_) f.attached = false;
  free_ids_.clear();
  for (size_t i = flows_.size(); i > 0; --i) free_ids_.push_back(static_cast<FlowId>(i - 1));
  active_ = 0;
  dirty_links_.clear();
  ++settle_epoch_;
  clear_reports();
  counters_ = {};
}

void FluidNetwork::clear_reports() {
  ++report_epoch_;
  rescheduled_.clear();
  changed_links_.clear();
  overhangs_.clear();
}

void FluidNetwork::note_changed(LinkId link) {
  Link& l = links_[link];
  if (l.changed_mark == report_epoch_) return;
  l.changed_mark = report_epoch_;
  changed_links_.push_back(link);
}

void FluidNetwork::check_time(TimeNs now, const char* call) {
  if (!unsettled()) {
    unsettled_since_ = now;
    return;
  }
  if (now != unsettled_since_) {
    throw Error(std::string("fluid network: ") + call + " at t = " + std::to_string(now.count()) +
                " ns with changes from t = " + std::to_string(unsettled_since_.count()) +
                " ns not settled (settle() before time moves on)");
  }
}

void FluidNetwork::mark_dirty(LinkId link) {
  Link& l = links_[link];
  if (!l.binding || l.dirty_mark == settle_epoch_) return;
  l.dirty_mark = settle_epoch_;
  dirty_links_.push_back(link);
}

void FluidNetwork::add_load(const Flow& f, double delta_rate) {
  if (delta_rate == 0) return;
  for (const Usage& u : f.usage) {
    Link& l = links_[u.link];
    l.load = l.count == 0 ? 0.0 : std::max(0.0, l.load + u.coefficient * delta_rate);
    note_changed(u.link);
  }
}

void FluidNetwork::attach(FlowId id) {
  Flow& f = flows_[id];
  f.slot.resize(f.usage.size());
  for (uint32_t i = 0; i < f.usage.size(); ++i) {
    Link& l = links_[f.usage[i].link];
    ++l.count;
    if (l.binding) {
      f.slot[i] = static_cast<uint32_t>(l.members.size());
      l.members.push_back(Member{id, i});
    }
  }
  f.attached = true;
}

void FluidNetwork::detach(FlowId id, TimeNs now) {
  Flow& f = flows_[id];
  if (f.finish < now && f.rate > 0) overhangs_.push_back(Overhang{f.usage, f.rate, now - f.finish});
  for (uint32_t i = 0; i < f.usage.size(); ++i) {
    const Usage& u = f.usage[i];
    Link& l = links_[u.link];
    --l.count;
    l.load = l.count == 0 ? 0.0 : std::max(0.0, l.load - u.coefficient * f.rate);
    if (f.rate != 0) note_changed(u.link);
    if (l.binding) {
      const uint32_t s = f.slot[i];
      const Member last = l.members.back();
      l.members[s] = last;
      flows_[last.flow].slot[last.entry] = s;
      l.members.pop_back();
    }
  }
  f.attached = false;
  f.rate = 0;
}

void FluidNetwork::set_rate(TimeNs now, Flow& f, double rate) {
  const double elapsed = static_cast<double>((now - f.since).count()) * 1e-9;
  f.remaining = std::max(0.0, f.remaining - f.rate * elapsed);
  f.since = now;
  if (!std::isfinite(rate)) {  // no binding link: nothing limits it
    add_load(f, -f.rate);
    f.rate = 0;
    f.remaining = 0;
    f.finish = now;
    return;
  }
  add_load(f, rate - f.rate);
  f.rate = rate;
  if (!(rate > 0)) {  // a link at capacity 0 (down): stalled until it returns
    f.finish = f.remaining > 0 ? now + TimeNs(static_cast<int64_t>(kMaxNs)) : now;
    return;
  }
  const double ns = std::ceil(f.remaining / rate * 1e9);
  f.finish = now + TimeNs(static_cast<int64_t>(std::min(ns, kMaxNs)));
}

void FluidNetwork::set_capacity(TimeNs now, LinkId link, double capacity) {
  Link& l = links_[link];
  l.capacity = capacity;
  // A non-binding link's members were never tracked (it could not
  // constrain): rebuilding them would need every flow; callers only change
  // binding links. A link nobody uses has nothing to re-solve.
  if (!l.binding || l.members.empty()) return;
  check_time(now, "set_capacity");
  mark_dirty(link);
}

FlowId FluidNetwork::add(TimeNs now, double work, std::span<const Usage> usage) {
  check_time(now, "add");
  ++counters_.adds;
  FlowId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
  }
  Flow& f = flows_[id];
  f.usage = usage;
  f.remaining = std::max(0.0, work);
  f.since = now;
  f.rate = 0;
  f.finish = now;
  f.mark = 0;
  f.fresh = true;
  attach(id);
  ++active_;
  // Alone on every binding link (or on none), or fitting into the slack its
  // links have left: its rate is set now without a solve, and nobody else's
  // changes (fits_alongside). Otherwise, or when one of its links already
  // waits for a solve, the settle solves its component.
  double rate = 0;
  bool alone = false;
  if (!any_dirty(usage) && fits_alongside(now, id, rate, alone)) {
    ++(alone ? counters_.trivial : counters_.fitted);
    set_rate(now, f, rate);
    f.fresh = false;
    rescheduled_.push_back(id);
    return id;
  }
  for (const Usage& u : usage) mark_dirty(u.link);
  return id;
}

bool FluidNetwork::any_dirty(std::span<const Usage> usage) const {
  for (const Usage& u : usage) {
    if (links_[u.link].dirty_mark == settle_epoch_) return true;
  }
  return false;
}

// Max-min fairness holds when every activity has a bottleneck: a saturated
// link on which no other activity runs faster. The running activities have
// theirs. The new one, at r = min over its links of slack / coefficient,
// saturates the link that sets r, and that link is its bottleneck if no other
// activity there runs faster than r. Its links had slack, so none of them was
// anyone's bottleneck before, and every bottleneck survives: the rates are
// the solve's (up to rounding), without walking the component. An activity
// there whose fluid part has finished sends the change to a solve, which
// detaches it (as before).
bool FluidNetwork::fits_alongside(TimeNs now, FlowId id, double& rate, bool& alone) const {
  const Flow& f = flows_[id];
  rate = std::numeric_limits<double>::infinity();
  alone = true;
  for (const Usage& u : f.usage) {
    const Link& l = links_[u.link];
    if (!l.binding) continue;
    if (l.members.size() != 1) alone = false;
    const double slack = l.capacity - l.load;  // f's own rate is still 0
    if (!(slack > l.capacity * kSameLevel)) return false;  // saturated: a solve shares it
    rate = std::min(rate, slack / u.coefficient);
  }
  if (alone || !std::isfinite(rate)) return true;
  const double threshold = rate * (1.0 + kSameLevel);
  bool bottleneck = false;
  for (const Usage& u : f.usage) {
    const Link& l = links_[u.link];
    if (!l.binding) continue;
    bool fastest = true;
    for (const Member& m : l.members) {
      if (m.flow == id) continue;
      const Flow& g = flows_[m.flow];
      if (g.fresh || g.finish <= now) return false;  // unsettled, or to detach
      if (g.rate > rate * (1.0 + kSameRate)) fastest = false;
    }
    if (fastest && (l.capacity - l.load) / u.coefficient <= threshold) bottleneck = true;
  }
  return bottleneck;
}

// The reverse: an ending activity frees its links, none of which stays
// saturated. Someone else can speed up only if one of those links was a
// bottleneck of theirs (saturated, nobody there faster) and they have no other
// bottleneck. So the rates stay if everyone on a saturated link of the ending
// activity either ran slower than it (that link was not their bottleneck) or
// has a bottleneck among links it does not use (which keeps them where they
// are). Symmetric jobs make the second case common: ranks in step tie.
bool FluidNetwork::leaves_no_gap(TimeNs now, FlowId id) const {
  const Flow& f = flows_[id];
  for (const Usage& u : f.usage) {
    const Link& l = links_[u.link];
    if (!l.binding || l.members.size() < 2) continue;
    for (const Member& m : l.members) {
      if (m.flow == id) continue;
      const Flow& g = flows_[m.flow];
      if (g.fresh || g.finish <= now) return false;  // unsettled, or to detach
    }
    if (!saturated(l)) continue;
    for (const Member& m : l.members) {
      if (m.flow == id || flows_[m.flow].rate < f.rate * (1.0 - kSameLevel)) continue;
      if (!bottlenecked_away_from(m.flow, id)) return false;
    }
  }
  return true;
}

bool FluidNetwork::saturated(const Link& l) { return l.capacity - l.load <= l.capacity * kSameLevel; }

// `g` has a saturated link that `f` does not use, on which nobody runs faster
// than `g`.
bool FluidNetwork::bottlenecked_away_from(FlowId g, FlowId f) const {
  const Flow& flow = flows_[g];
  const double faster = flow.rate * (1.0 + kSameLevel);
  for (const Usage& u : flow.usage) {
    const Link& l = links_[u.link];
    if (!l.binding || !saturated(l)) continue;
    bool candidate = true;
    for (const Member& m : l.members) {
      if (m.flow == f || flows_[m.flow].rate > faster) {
        candidate = false;
        break;
      }
    }
    if (candidate) return true;
  }
  return false;
}

void FluidNetwork::remove(TimeNs now, FlowId id) {
  check_time(now, "remove");
  ++counters_.removes;
  Flow& f = flows_[id];
  const bool was_attached = f.attached;
  // Decided before the detach, on the rates it leaves.
  const bool quiet = was_attached && !f.fresh && !any_dirty(f.usage) && leaves_no_gap(now, id);
  if (was_attached) detach(id, now);
  f.fresh = false;
  --active_;
  free_ids_.push_back(id);
  if (!was_attached) return;
  if (quiet) {
    ++counters_.quiet_removes;
    return;
  }
  for (const Usage& u : f.usage) {
    if (!links_[u.link].members.empty()) mark_dirty(u.link);
  }
}

void FluidNetwork::settle(TimeNs now) {
  if (!unsettled()) return;
  if (now != unsettled_since_) {
    throw Error("fluid network: settle at t = " + std::to_string(now.count()) + " ns for changes from t = " +
                std::to_string(unsettled_since_.count()) + " ns");
  }
  ++counters_.settles;
  // Solve epochs above `before` belong to this settle: a link reached by one
  // of its solves is not solved again.
  const uint64_t before = solve_epoch_;
  for (LinkId seed : dirty_links_) {
    const Link& l = links_[seed];
    if (l.mark > before) continue;  // its component is solved already
    if (l.members.empty()) {
      ++counters_.trivial;
      continue;
    }
    solve_component(now, seed);
  }
  dirty_links_.clear();
  ++settle_epoch_;
}

void FluidNetwork::solve_component(TimeNs now, LinkId seed) {
  ++solve_epoch_;
  stack_.clear();
  comp_links_.clear();
  comp_flows_.clear();
  finished_.clear();
  links_[seed].mark = solve_epoch_;
  stack_.push_back(seed);
  collect(now);
  for (FlowId id : finished_) detach(id, now);
  if (!finished_.empty()) ++counters_.detaching_solves;
  ++counters_.solves;
  counters_.solved_flows += comp_flows_.size();
  counters_.solved_links += comp_links_.size();
  progressive_filling();
  apply_rates(now);
}

void FluidNetwork::collect(TimeNs now) {
  while (!stack_.empty()) {
    const LinkId id = stack_.back();
    stack_.pop_back();
    comp_links_.push_back(id);
    for (const Member& m : links_[id].members) {
      Flow& f = flows_[m.flow];
      if (f.mark == solve_epoch_) continue;
      f.mark = solve_epoch_;
      // Its fluid part is over (only its latency remains): it stops taking
      // bandwidth now, and what it leaves is re-solved with the rest.
      if (!f.fresh && f.finish <= now) {
        finished_.push_back(m.flow);
      } else {
        comp_flows_.push_back(m.flow);
      }
      for (const Usage& u : f.usage) {
        Link& l = links_[u.link];
        if (l.binding && l.mark != solve_epoch_) {
          l.mark = solve_epoch_;
          stack_.push_back(u.link);
        }
      }
    }
  }
}

void FluidNetwork::progressive_filling() {
  for (LinkId id : comp_links_) {
    Link& l = links_[id];
    l.remaining = l.capacity;
    l.weight = 0;
    l.unfrozen = 0;
  }
  for (FlowId id : comp_flows_) {
    Flow& f = flows_[id];
    f.frozen = false;
    for (const Usage& u : f.usage) {
      Link& l = links_[u.link];
      if (!l.binding) continue;
      l.weight += u.coefficient;
      ++l.unfrozen;
    }
  }
  active_links_.clear();
  for (LinkId id : comp_links_) {
    if (links_[id].unfrozen > 0) active_links_.push_back(id);
  }
  size_t unfrozen = comp_flows_.size();
  while (unfrozen > 0 && !active_links_.empty()) {
    ++counters_.rounds;
    // Every unfrozen activity runs at the same rate; the next link to fill
    // sets it.
    double level = std::numeric_limits<double>::infinity();
    for (LinkId id : active_links_) {
      const Link& l = links_[id];
      level = std::min(level, std::max(0.0, l.remaining) / l.weight);
    }
    const double threshold = level * (1.0 + kSameLevel);
    for (LinkId id : active_links_) {
      Link& l = links_[id];
      if (l.unfrozen == 0 || std::max(0.0, l.remaining) / l.weight > threshold) continue;
      for (const Member& m : l.members) {
        Flow& f = flows_[m.flow];
        if (f.frozen) continue;
        f.frozen = true;
        f.new_rate = level;
        --unfrozen;
        for (const Usage& u : f.usage) {
          Link& k = links_[u.link];
          if (!k.binding) continue;
          k.remaining -= u.coefficient * level;
          k.weight -= u.coefficient;
          --k.unfrozen;
        }
      }
    }
    size_t kept = 0;
    for (LinkId id : active_links_) {
      if (links_[id].unfrozen > 0) active_links_[kept++] = id;
    }
    active_links_.resize(kept);
  }
}

void FluidNetwork::apply_rates(TimeNs now) {
  bool moved = false;  // an activity already running changed its rate
  for (FlowId id : comp_flows_) {
    Flow& f = flows_[id];
    const bool same = !f.fresh && std::abs(f.new_rate - f.rate) <= kSameRate * std::max(f.new_rate, f.rate);
    if (same) continue;
    moved = moved || !f.fresh;
    const TimeNs before = f.finish;
    set_rate(now, f, f.new_rate);
    if (f.fresh || f.finish != before) rescheduled_.push_back(id);
    f.fresh = false;
  }
  if (!moved) ++counters_.still_solves;
}

}  // namespace lacuna::network
