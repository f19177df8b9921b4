// Achieved bandwidth of every collective and point-to-point transfer of one
// iteration, aggregated per (kind of group × collective kind) — the numbers
// nccl-tests prints (algbw, busbw), but measured on the simulated run so that
// contention and skew show (docs/outputs.md).
//
// Per op instance on a simulated rank:
//   time   = end − start, where start is when all members arrived (collective)
//            or both sides posted (p2p): waiting for late peers is not
//            communication time;
//   algbw  = bytes / time, bytes = the IR op's size S (nccl-tests' convention);
//   busbw  = algbw × cost::bus_bandwidth_factor(kind, group size); 1 for p2p.
// A collective counts once per simulated member rank; a transfer once, for
// its sending rank. Fold mode: only simulated ranks are counted (a
// representative is not weighted by the ranks it stands for).
//
// Several iterations (RunInfo::iterations = N): totals cover the whole run,
// the per-rank figures are per iteration (divided by N as well).
//
// Cost: O(1) per op, no allocation after on_run_begin.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "sim/core/units.h"
#include "sim/engine/observer.h"
#include "sim/ir/bound_program.h"
#include "sim/proto/program.pb.h"

namespace lacuna::report {

// What a row aggregates. `group` is the kind of the collective's bound group
// ("tp", "cp", "dp", "dp_cp", "world", "pp", "encoder_tp", "encoder_cp",
// "encoder_dp", "boundary", and for MoE "ep", "expert_tp", "expert_dp",
// "ep_intra_domain", "ep_inter_domain"; for FP8 delayed scaling "amax"; the slot's kind when the group has none); for
// point-to-point transfers the dimension of the sending stream ("pp", "cp",
// "tp", "dp", "encoder", "boundary", as comm_kind() decides). `op` is
// "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
// "reduce" or "send_recv".
struct CommRow {
  std::string_view group;
  std::string_view op;
  int32_t min_group_size = 0;  // 2 for send_recv
  int32_t max_group_size = 0;
  int32_t ranks = 0;   // simulated ranks with at least one such op
  int64_t ops = 0;     // op instances over those ranks
  int64_t bytes = 0;   // Σ S over the instances
  TimeNs time;         // Σ (end − start)
  // Over the instances that moved data in positive time on a group of ≥ 2
  // (the others are counted above but have no bandwidth):
  TimeNs timed;          // their Σ (end − start)
  double timed_bytes = 0;  // their Σ S
  double bus_bytes = 0;    // their Σ S × factor
  double min_busbw = 0;    // bytes/s, lowest per-instance busbw; 0: none
  int32_t iterations = 1;  // of the run: the totals above cover them all

  // Per participating rank and iteration.
  double ops_per_rank() const { return ranks > 0 ? static_cast<double>(ops) / per() : 0.0; }
  double bytes_per_rank() const { return ranks > 0 ? static_cast<double>(bytes) / per() : 0.0; }
  double seconds_per_rank() const { return ranks > 0 ? time.seconds() / per() : 0.0; }
  double per() const { return static_cast<double>(ranks) * iterations; }
  // Time-weighted means: Σ S / Σ time and Σ S·factor / Σ time (bytes/s).
  double mean_algbw() const { return timed.count() > 0 ? timed_bytes / timed.seconds() : 0.0; }
  double mean_busbw() const { return timed.count() > 0 ? bus_bytes / timed.seconds() : 0.0; }
};

struct CommSummary {
  bool folded = false;          // counts cover the simulated ranks only
  int32_t simulated_ranks = 0;
  int32_t num_gpus = 0;
  std::vector<CommRow> rows;    // group order above (tp … boundary), then op order; only non-empty rows
};

class CommAccounting : public engine::Observer {
 public:
  CommAccounting();

  // The bytes on_run_begin allocates for `program` with `simulated` ranks
  // simulated (docs/performance.md#estimate).
  static Bytes estimate_bytes(const ir::Program& program, int64_t simulated);

  void on_run_begin(const engine::RunInfo& info) override;
  void on_op_end(const engine::OpSpan& span) override;
  void on_transfer(const engine::OpSpan& send, const engine::OpSpan& recv) override;

  // Valid after the run.
  CommSummary summary() const;

  // Row slots: group ordinal × op ordinal (exposed for the names).
  static constexpr int kGroups = 21;  // the group names above plus "other"
  static constexpr int kOps = 8;      // unspecified, six collective kinds, send_recv
  static std::string_view group_name(int group);
  static std::string_view op_name(int op);

 private:
  void add(int32_t rank, int group, int op, int32_t group_size, int64_t bytes, TimeNs start, TimeNs end,
           double factor);

  // A communication op's fields, read once per class: at one read of the op
  // message per op end, the scattered messages missed the cache each time.
  struct CommFacts {
    bool collective = false;
    int32_t slot = -1;            // collective: its group slot
    int8_t op = 0;                // collective: op_ordinal(kind)
    int8_t stream_dimension = 0;  // dimension_ordinal(comm_kind(...)): when neither group nor slot has a kind
    ir::CollectiveKind kind = ir::COLLECTIVE_UNSPECIFIED;
    int64_t bytes = 0;            // collective or send
  };
  struct ClassFacts {
    std::vector<uint32_t> stream_begin;
    std::vector<CommFacts> ops;
  };
  void build_facts(int32_t class_id);
  const CommFacts& facts(int32_t rank, int32_t stream, int32_t op) const {
    const ClassFacts& c = class_facts_[static_cast<size_t>(bindings_->class_id(rank))];
    return c.ops[c.stream_begin[static_cast<size_t>(stream)] + static_cast<uint32_t>(op)];
  }

  const ir::Program* program_ = nullptr;
  std::optional<ir::FlatBindings> bindings_;
  std::vector<ClassFacts> class_facts_;
  std::vector<int32_t> group_size_;     // per group: its members
  std::vector<int8_t> group_ordinal_;  // per group: group_ordinal(kind), -1 without one
  std::vector<int8_t> slot_ordinal_;   // per group slot: group_ordinal(kind), -1 without one
  bool folded_ = false;
  int32_t iterations_ = 1;
  std::vector<int32_t> index_of_rank_;  // global rank → simulated index, -1 if not simulated
  std::vector<std::bitset<kGroups * kOps>> seen_;  // per simulated rank: rows it contributed to
  std::array<CommRow, kGroups * kOps> rows_{};
};

// Shorthand for the CLI: the accounting's summary.
inline CommSummary summarize_comm(const CommAccounting& accounting) { return accounting.summary(); }

}  // namespace lacuna::report
