// Straggler attribution (docs/critical-path.md#stragglers): for every
// collective instance, the member that arrived last and how long it held the
// others, aggregated per rank and per host (node).
//
// Per instance with n ≥ 2 members arriving at t_1 ≤ … ≤ t_n (when each was
// issued; the engine's arrival order):
//   hold = t_n − t_(n−1): how much later the instance started because of its
//          last member alone (had it arrived with the second-last, the
//          instance would have started then);
//   the last member is the instance's straggler when hold > 0 (members that
//   arrive together hold nobody).
// Per rank and (group kind, collective kind): the instances it was a member
// of, how many it was the straggler of, and the sum of those holds. Per host:
// the same over groups that span more than one host (a group inside one host
// only delays that host), an instance counting once per host among its
// members, the host being the straggler when the straggling rank is on it;
// a host's hold is the length of the union of its hold intervals
// [t_(n−1), t_n], not their sum: its GPUs' groups (one DP group per TP rank,
// say) wait for it side by side, and the time the host cost is the wall-clock
// time during which some group waited for it.
// Also per rank: peer wait, Σ (start − issued) over its collectives and
// transfers (time they waited for the other side), the heat map's second
// panel.
//
// Fold mode: only simulated members take part (the others are assumed to
// arrive no later, docs/engine.md#fold), and each is reported as itself.
//
// Cost: O(members) per instance; per rank a few counters per kind of
// collective that occurs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/units.h"
#include "sim/engine/observer.h"
#include "sim/proto/program.pb.h"

namespace lacuna::report {

struct StragglerCell {
  int64_t instances = 0;  // instances it took part in
  int64_t last = 0;       // instances it was the straggler of (hold > 0)
  TimeNs hold;            // Σ hold over those
};

// One (rank or host) × (group kind, collective kind) line of the attribution.
struct StragglerRow {
  int32_t id = 0;     // rank, or host (RankBinding.node)
  std::string label;  // "rank 17 (pp 2 tp 1 dp 0)", "host 154 (ranks 1232–1239)"
  std::string group;  // "dp", "tp", "dp_cp", ... (Group.kind, lower case)
  std::string op;     // "all_reduce", "reduce_scatter", ...
  StragglerCell cell;
  double last_fraction() const { return cell.instances > 0 ? static_cast<double>(cell.last) / cell.instances : 0.0; }
};

struct StragglerSummary {
  int64_t instances = 0;            // collective instances with ≥ 2 members
  int64_t straggled = 0;            // of those, with a straggler (hold > 0)
  TimeNs hold;                      // Σ hold over all instances
  std::vector<StragglerRow> ranks;  // rows with last > 0, by hold (largest first), then id
  std::vector<StragglerRow> hosts;  // the same per host
};

class StragglerAttribution : public engine::Observer {
 public:
  void on_run_begin(const engine::RunInfo& info) override;
  void on_op_end(const engine::OpSpan& span) override;
  void on_collective(const engine::CollectiveSpan& collective) override;

  StragglerSummary summary() const;
  // Per simulated rank (RunInfo order): Σ (start − issued) of its
  // collectives and transfers.
  const std::vector<TimeNs>& peer_wait() const { return peer_wait_; }

 private:
  struct Kind {
    ir::GroupKind group;
    ir::CollectiveKind op;
    std::vector<StragglerCell> ranks;  // per simulated rank
    std::vector<StragglerCell> hosts;  // per host
    // Per host: its hold intervals (second-last, last arrival), for the union.
    std::vector<std::vector<std::pair<TimeNs, TimeNs>>> host_holds;
  };
  size_t kind_of(ir::GroupKind group, ir::CollectiveKind op);

  const ir::Program* program_ = nullptr;
  std::vector<int32_t> sim_index_;      // global rank → simulated index, -1
  std::vector<uint8_t> group_spans_;    // per group: members on more than one host
  std::vector<int64_t> host_stamp_;     // per host: the last instance counted for it
  int32_t num_hosts_ = 0;
  std::vector<Kind> kinds_;
  std::vector<TimeNs> peer_wait_;
  int64_t instances_ = 0;
  int64_t straggled_ = 0;
  TimeNs hold_;
};

// The ranks of host `node`, as ranges: "1232–1239", "0–3, 8".
std::string host_ranks(const ir::Program& program, int32_t node);

}  // namespace lacuna::report
