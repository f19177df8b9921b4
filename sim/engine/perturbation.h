// The engine's seam for variability (docs/variability.md): what a slow GPU, a
// noisy kernel or a pausing host does to one op, asked as pure functions of
// the op's coordinates. The engine never samples anything itself; a
// Perturbation answers the same for the same (rank, stream, op, iteration)
// in every run, whatever the event order, so results stay deterministic and
// do not depend on folding or threads.
//
// Without one (SimulationOptions::perturbation = nullptr) the engine runs
// exactly as before: the hooks are flags on the flattened ops, set only when a
// perturbation says an op may vary, so the hot loop tests a byte it already
// loads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/proto/program.pb.h"

namespace lacuna::engine {

// One op of one rank in one iteration: the coordinates every draw is keyed on.
struct OpRef {
  int32_t rank = 0;    // global rank
  int32_t stream = 0;  // index among its class's streams
  int32_t op = 0;      // index in that stream
  uint32_t iteration = 0;
  const ir::Op* ir = nullptr;  // never null
};

// Which per-op hooks an op takes (Perturbation::perturbs).
inline constexpr uint8_t kPerturbCompute = 1;  // compute_factor
inline constexpr uint8_t kPerturbHost = 2;     // host_delay
// With kPerturbCompute: the op's factor is a pure function of (rank, layer,
// microbatch, iteration) that a folded representative may take as the
// largest over the ranks it stands for (MoE expert load: the EP group waits
// for its busiest rank anyway, docs/moe.md#load-imbalance). Without this bit
// a per-op factor is refused under fold.
inline constexpr uint8_t kPerturbFoldable = 4;

// Delays before an op is issued (docs/engine.md#host): `pause_ns` stalls the
// stream's host thread (a garbage collection: hidden while the host runs
// ahead of the GPU); `skew_ns` issues the op at least that long after its
// stream reached it (a late launch: always seen by the op's peers).
struct HostDelay {
  int64_t pause_ns = 0;
  int64_t skew_ns = 0;
};

class Perturbation {
 public:
  virtual ~Perturbation() = default;

  // Fixed for the whole run: multiplies every compute duration of global rank
  // `rank` (a slow GPU, a straggler host). > 0 and finite.
  virtual double rank_compute_factor(int32_t rank) const = 0;

  // Asked once per class op before a run: which hooks (kPerturb* bits) may
  // apply to it; 0 keeps the op on the unperturbed path.
  virtual uint8_t perturbs(const ir::Op& op, ir::StreamKind stream_kind) const = 0;

  // Multiplies the compute duration of an op with kPerturbCompute (after
  // rank_compute_factor). > 0 and finite.
  virtual double compute_factor(const OpRef& op) const = 0;

  // For an op with kPerturbFoldable under fold: the factor of a
  // representative standing for `members` (op.rank among them), the largest
  // of theirs. Override when that is cheaper than asking each member.
  virtual double compute_factor_folded(const OpRef& op, const std::vector<int32_t>& members) const {
    double f = compute_factor(op);
    for (int32_t member : members) {
      OpRef other = op;
      other.rank = member;
      f = std::max(f, compute_factor(other));
    }
    return f;
  }

  // Delays of an op with kPerturbHost; both ≥ 0.
  virtual HostDelay host_delay(const OpRef& op) const = 0;
};

}  // namespace lacuna::engine
