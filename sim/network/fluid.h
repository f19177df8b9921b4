// A fluid (flow-level) network: activities with remaining work in bytes, each
// consuming coefficient × rate on every link of its usage vector, share link
// capacity by weighted max-min fairness, solved by progressive filling (the
// idea of SimGrid's LMM solver). Rates change only when an activity starts or
// ends or a link's capacity changes, and only inside the connected components
// (links ↔ activities) that the changes touch: max-min fairness decomposes
// over components, so activities elsewhere keep their rates and their
// predicted finish times.
//
// Changes are batched per timestamp, as SimGrid's selective update batches
// them through its modified-constraint set: add, remove and set_capacity
// update the links at once but only mark the links they touch; settle(now)
// then solves each touched component once, however many changes hit it at
// that time. Changes that provably leave every other rate as it was (an
// activity that fits into its links' slack, an end that frees no one's
// bottleneck: fluid.cpp, docs/network.md) are answered at once and mark
// nothing (GPT-3 175B on 3,072 GPUs: 12,567 component solves left of
// 266,793, docs/performance.md#full-rank-with-variability-issue-35). A solve's answer depends only on the set of activities, not on
// the order they arrived in, so settling once gives the rates k eager solves
// would end with, for one solve instead of k. The caller settles before
// simulated time moves on (the engine's settle event, sim/engine/simulator.cpp);
// a change at a later time with changes still unsettled is a misuse and throws.
//
// Remaining work is kept lazily: the amount at the last rate change and that
// time. Predicted finish = ceil to an integer nanosecond. An activity whose
// fluid part has finished (finish ≤ now) but that has not been removed yet
// (its owner adds a latency after it) is detached from its links the first
// time a re-solve reaches it, so it stops taking bandwidth.
//
// Deterministic: component discovery follows member lists whose order depends
// only on the sequence of calls; ties between links are broken by the order
// they were reached. No allocation per call once buffers reached their peak.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/core/units.h"
#include "sim/network/link_observer.h"

namespace lacuna::network {

using FlowId = uint32_t;

// The activity consumes `coefficient` × its rate on `link`.
struct Usage {
  LinkId link = 0;
  double coefficient = 0;
};

class FluidNetwork {
 public:
  // Per link: capacity in bytes/s (> 0) and whether it can constrain (see
  // Topology::binding; non-binding links only carry load).
  FluidNetwork(std::vector<double> capacity, std::vector<uint8_t> binding);

  // Drops every activity (a new run).
  void clear();

  // Starts an activity of `work` bytes. `usage` (one entry per link, each
  // coefficient > 0) must stay valid until remove(). If it fits into its
  // links' slack, it gets its rate and finish at once; otherwise from the
  // next settle().
  FlowId add(TimeNs now, double work, std::span<const Usage> usage);
  // Ends an activity (detaching it first if it is still attached); what it
  // leaves behind is re-solved by the next settle(). Its id may be reused
  // afterwards.
  void remove(TimeNs now, FlowId id);

  // A link's capacity changes (a slow or flapping link,
  // docs/variability.md#links): its component is re-solved by the next
  // settle() like after an add or remove. 0 stalls the activities that need
  // the link (their finish is far in the future until the capacity comes
  // back). Only binding links (NVLink, NICs, oversubscribed trunks) may change.
  void set_capacity(TimeNs now, LinkId link, double capacity);

  // Re-solves, once each, the components that the changes since the last
  // settle touched. `now` must be the time of those changes.
  void settle(TimeNs now);
  // Changes are waiting for settle(): a component needs a solve.
  bool unsettled() const { return !dirty_links_.empty(); }

  // The reports below accumulate from the calls since clear_reports().
  void clear_reports();
  // Activities whose predicted finish changed (an added one included), each
  // once per settle that changed it, in the order the solves reached them.
  std::span<const FlowId> rescheduled() const { return rescheduled_; }
  // Links whose load changed (each once per clear_reports()).
  std::span<const LinkId> changed_links() const { return changed_links_; }
  // Activities detached after their fluid part had finished: their load
  // stayed on the links from `finish` to the detach without moving bytes
  // (statistics subtract it). `usage` is the activity's, which outlives the
  // activity's id (the id may already be reused).
  struct Overhang {
    std::span<const Usage> usage;
    double rate = 0;
    TimeNs held;  // detach time − finish
  };
  std::span<const Overhang> overhangs() const { return overhangs_; }
  std::span<const Usage> usage(FlowId id) const { return flows_[id].usage; }

  TimeNs finish(FlowId id) const { return flows_[id].finish; }
  double rate(FlowId id) const { return flows_[id].rate; }
  bool attached(FlowId id) const { return flows_[id].attached; }
  // Bytes/s currently carried: sum of coefficient × rate of attached activities.
  double load(LinkId link) const { return links_[link].load; }
  double capacity(LinkId link) const { return links_[link].capacity; }
  size_t num_links() const { return links_.size(); }
  size_t active_flows() const { return active_; }

  struct Counters {
    uint64_t adds = 0;
    uint64_t removes = 0;
    uint64_t settles = 0;         // settle() calls with changes to settle
    uint64_t trivial = 0;         // activities or links settled without a component solve
    uint64_t fitted = 0;          // adds that fit into their links' slack (no solve)
    uint64_t quiet_removes = 0;   // removes that left every other rate as it was (no solve)
    uint64_t solves = 0;          // component solves
    // Solves in which no activity already running changed its rate (only
    // the ones just added got theirs), and solves that detached an activity
    // whose fluid part had finished.
    uint64_t still_solves = 0;
    uint64_t detaching_solves = 0;
    uint64_t solved_flows = 0;    // activities over all component solves
    uint64_t solved_links = 0;    // binding links over all component solves
    uint64_t rounds = 0;          // progressive-filling rounds
  };
  const Counters& counters() const { return counters_; }

 private:
  struct Flow {
    std::span<const Usage> usage;
    std::vector<uint32_t> slot;  // per usage entry: index in the link's members (binding links)
    double remaining = 0;        // bytes at `since`
    TimeNs since;
    double rate = 0;
    double new_rate = 0;
    TimeNs finish;
    uint64_t mark = 0;  // solve epoch it was reached in
    bool attached = false;
    bool frozen = false;
    bool fresh = false;  // added since the last settle: always rescheduled
  };
  struct Member {
    FlowId flow = 0;
    uint32_t entry = 0;  // index in the flow's usage
  };
  struct Link {
    double capacity = 0;
    bool binding = true;
    std::vector<Member> members;  // attached activities (binding links only)
    uint32_t count = 0;           // attached activities (every link)
    double load = 0;
    uint64_t mark = 0;          // solve epoch it was reached in (64 bits: never wraps)
    uint64_t changed_mark = 0;  // report epoch it was reported in
    uint64_t dirty_mark = 0;    // settle epoch it was marked for
    // Progressive-filling scratch.
    double remaining = 0;
    double weight = 0;
    uint32_t unfrozen = 0;
  };

  void check_time(TimeNs now, const char* call);
  void mark_dirty(LinkId link);
  bool any_dirty(std::span<const Usage> usage) const;
  // Exact shortcuts past a solve (fluid.cpp says why they are exact): an
  // added activity that fits into its links' slack without slowing anyone
  // (its `rate`; `alone`: nobody else on its binding links), and an ending
  // one whose links' other activities are all bottlenecked elsewhere.
  bool fits_alongside(TimeNs now, FlowId id, double& rate, bool& alone) const;
  bool leaves_no_gap(TimeNs now, FlowId id) const;
  bool bottlenecked_away_from(FlowId g, FlowId f) const;
  static bool saturated(const Link& l);
  void attach(FlowId id);
  void detach(FlowId id, TimeNs now);
  void add_load(const Flow& f, double delta_rate);
  void note_changed(LinkId link);
  // Collects the component of binding link `seed`, detaching activities
  // whose fluid part has finished, then solves it.
  void solve_component(TimeNs now, LinkId seed);
  void collect(TimeNs now);
  void progressive_filling();
  void apply_rates(TimeNs now);
  void set_rate(TimeNs now, Flow& f, double rate);

  std::vector<Flow> flows_;
  std::vector<FlowId> free_ids_;
  std::vector<Link> links_;
  size_t active_ = 0;
  uint64_t solve_epoch_ = 0;
  uint64_t report_epoch_ = 1;
  uint64_t settle_epoch_ = 1;
  // Changes waiting for settle(): the binding links they touched (each once),
  // at `unsettled_since_`.
  std::vector<LinkId> dirty_links_;
  TimeNs unsettled_since_;
  // Scratch, reused.
  std::vector<LinkId> stack_;
  std::vector<LinkId> comp_links_;
  std::vector<LinkId> active_links_;
  std::vector<FlowId> comp_flows_;
  std::vector<FlowId> finished_;
  std::vector<FlowId> rescheduled_;
  std::vector<LinkId> changed_links_;
  std::vector<Overhang> overhangs_;
  Counters counters_;
};

}  // namespace lacuna::network
