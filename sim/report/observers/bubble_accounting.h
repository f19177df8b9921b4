// Where each rank's compute stream spends the iteration: busy (by phase) or
// idle, with every idle nanosecond attributed to one bubble category
// (docs/metrics.md). Also tracks each rank's memory peak.
//
// Rules, per simulated rank, on its main compute stream (the first stream of
// kind COMPUTE in its class):
// - Busy: the [start, end] of every Compute op.
// - Host overhead: [ready, issued] of every op (the host had not issued it
//   yet: launch or framework cost, docs/engine.md#host). The rules below
//   attribute the rest of the op's idle time from `issued` on.
// - An EventWait [issued, end] released by op X (WaitCause) running [xs, xe]:
//   [max(issued, xs), end] is exposed communication of X's kind (TP, CP, PP,
//   DP, boundary, encoder, EP);
//   [issued, min(xs, end)] is a dependency stall — except for an EP
//   collective, where [reached, xs] (the rank had issued it and waited for
//   its EP peers to arrive) is moe_imbalance: the EP ranks run the same
//   dense work, so a peer arrives late because its experts got more tokens
//   (docs/moe.md#load-imbalance) — when routing is drawn; under balanced
//   or padded routing it is a stall like the others. If X is not communication,
//   or there is no cause, the whole wait is a stall.
// - A communication op placed directly on the compute stream: [issued, start]
//   is a stall (moe_imbalance for an EP collective) and [start, end] exposed
//   communication of its kind.
// - Stalls before the rank's first FORWARD compute op are PP warm-up; stalls
//   after its last backward (input or weight) compute op are PP cool-down;
//   others are PP other. Idle after the stream's last op until the iteration
//   end is PP cool-down.
// So idle = sum of categories and idle + busy = iteration time, exactly (ns).
//
// Several iterations (RunInfo::iterations = N > 1, docs/metrics.md#iterations):
// the rank's timeline over the whole run [0, end of the run] is attributed by
// the same rules, the warm-up / cool-down split restarting with each iteration
// of the main stream (stalls before the iteration's first forward are warm-up;
// stalls after its last backward, up to the next iteration's first op, are
// cool-down), so idle + busy = the run's end. Summaries divide by N.
// Separately, encoder compute: the [start, end] of every Compute op with
// module > 0 on any COMPUTE stream of the rank (multimodal programs).
//
// Cost: O(1) per op and no allocation after on_run_begin.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/core/units.h"
#include "sim/engine/observer.h"
#include "sim/proto/program.pb.h"
#include "sim/report/analyses/comm_kind.h"

namespace lacuna::report {

// The first eight are the LLM taxonomy, shown for every program; the next two
// only occur in multimodal programs (BOUNDARY / ENCODER_COMM streams and their
// groups), the last two only in MoE programs (EP groups, docs/moe.md), and
// the reports show each group only where it occurs (so LLM-only output keeps
// its form). The order is the order of every report's rows and keys.
enum class Bubble : uint8_t {
  kPpWarmup,
  kPpCooldown,
  kPpOther,
  kTpExposed,
  kCpExposed,
  kDpExposed,
  kPpExposed,
  kHostOverhead,
  kBoundaryExposed,
  kEncoderCommExposed,
  kMoeImbalance,
  kEpExposed,
};
inline constexpr int kNumBubbles = 12;
inline constexpr int kNumLlmBubbles = 8;
inline constexpr int kNumDenseBubbles = 10;  // LLM and multimodal: every category but the MoE two
inline constexpr std::array<Bubble, kNumBubbles> kAllBubbles = {
    Bubble::kPpWarmup,       Bubble::kPpCooldown,         Bubble::kPpOther,       Bubble::kTpExposed,
    Bubble::kCpExposed,      Bubble::kDpExposed,          Bubble::kPpExposed,     Bubble::kHostOverhead,
    Bubble::kBoundaryExposed, Bubble::kEncoderCommExposed, Bubble::kMoeImbalance, Bubble::kEpExposed,
};
static_assert(static_cast<int>(Bubble::kHostOverhead) < kNumLlmBubbles &&
                  static_cast<int>(Bubble::kBoundaryExposed) == kNumLlmBubbles &&
                  static_cast<int>(Bubble::kMoeImbalance) == kNumDenseBubbles,
              "the LLM categories come first, then the multimodal, then the MoE: bubble_shown() relies on it");
// "pp_warmup", "pp_cooldown", "pp_other", "tp_exposed", "cp_exposed", "dp_exposed", "pp_exposed",
// "host_overhead", "boundary_exposed", "encoder_comm_exposed", "moe_imbalance", "ep_exposed"
std::string_view bubble_key(Bubble b);
// What host overhead means, where a report names it in words.
inline constexpr std::string_view kHostOverheadLabel = "host (launch/framework)";
// The categories a report shows: the eight LLM ones always, the two
// multimodal ones for a multimodal program (ProgramInfo.modules non-empty),
// the two MoE ones for an MoE program (ProgramInfo.moe set).
inline bool bubble_shown(Bubble b, bool multimodal, bool moe = false) {
  const int i = static_cast<int>(b);
  if (i < kNumLlmBubbles) return true;
  if (i < kNumDenseBubbles) return multimodal;
  return moe;
}

// The exposed-communication category of communication of `kind` (kNone and
// PP: pp_exposed).
Bubble exposed_category(CommKind kind);

inline constexpr int kNumPhases = ir::Phase_ARRAYSIZE;

struct RankAccount {
  int32_t rank = 0;                 // the simulated rank
  std::vector<int32_t> represents;  // ranks it stands for (itself included)
  TimeNs busy;
  std::array<TimeNs, kNumPhases> busy_by_phase{};  // indexed by ir::Phase
  std::array<TimeNs, kNumBubbles> bubbles{};       // indexed by Bubble
  TimeNs encoder_compute;  // Compute ops with module > 0, on every COMPUTE stream
  Bytes baseline_memory;    // MemoryBaseline sum (other_bytes included)
  Bytes activation_peak;    // highest running sum of memory deltas (all streams)
  // baseline + activation_peak + the allocator's reserve on it
  // (cost::memory_peak_bytes, docs/memory-model.md#feasibility)
  Bytes peak_memory;
  bool over_capacity = false;

  TimeNs bubble(Bubble b) const { return bubbles[static_cast<int>(b)]; }
  TimeNs idle() const;  // sum of the categories
};

class BubbleAccounting : public engine::Observer {
 public:
  void on_run_begin(const engine::RunInfo& info) override;
  void on_op_end(const engine::OpSpan& span) override;
  void on_wait_end(const engine::OpSpan& span, const engine::WaitCause& cause) override;
  void on_run_end(TimeNs end) override;

  // The bytes on_run_begin allocates for a run of `all_ranks` ranks with
  // `simulated` of them simulated, standing for `represented` in all
  // (docs/performance.md#estimate).
  static Bytes estimate_bytes(int64_t all_ranks, int64_t simulated, int64_t represented);

  // Valid after on_run_end. The run's end (one iteration: its time).
  TimeNs iteration_time() const { return end_; }
  // Iterations of the run, and per iteration the last end of its ops over
  // every simulated rank (what the engine reports as iteration_ends).
  int32_t iterations() const { return iterations_; }
  const std::vector<TimeNs>& iteration_ends() const { return iteration_ends_; }
  // One entry per simulated rank, in RunInfo::simulated_ranks order.
  const std::vector<RankAccount>& ranks() const { return accounts_; }
  // The GPU's HBM (cluster.gpu.hbm_capacity_gib); 0 when unknown (never over).
  Bytes capacity() const { return capacity_; }

 private:
  struct Live {
    int32_t main_stream = -1;  // main compute stream index, -1: rank has none
    int32_t class_id = 0;
    TimeNs cursor;             // end of the last op seen on the main stream
    TimeNs pending_stall;      // stalls since the last backward op (cool-down if none follows)
    bool seen_forward = false;
    uint32_t iteration = 0;   // of the main stream's last op seen
    int64_t activations = 0;  // live activation bytes
  };
  void stall(Live& live, RankAccount& acc, TimeNs duration);
  void idle_span(Live& live, RankAccount& acc, TimeNs from, TimeNs to);

  const ir::Program* program_ = nullptr;
  std::vector<int32_t> index_of_rank_;  // global rank → index into accounts_, -1 if not simulated
  std::vector<RankAccount> accounts_;
  std::vector<Live> live_;
  Bytes capacity_;
  double fragmentation_ = 0;  // cluster.memory_overheads.allocator_fragmentation
  TimeNs end_;
  int32_t iterations_ = 1;
  std::vector<TimeNs> iteration_ends_;
};

}  // namespace lacuna::report
